"""Check that this version of agentlog reads a store, on a copy: the seed's upgrade advice.

"Verify on a copy that old sessions can be listed, read and restored" (seed 003): the store is
copied to a private temporary directory (a JSONL root, or a SQLite database through SQLite's
online backup, read as any reader reads it: ``database_uri``, so no byte of the store changes and
a read-only mount is read), the copy is opened as a writer would open it, and every session is validated in
full (``inspect(trust_checkpoint=False)``: a JSONL checkpoint vouches for nothing) and loaded,
crash repairs committed — to the copy only. A PostgreSQL store is not copied: its PostgreSQL
form of "a copy" is one REPEATABLE READ, READ ONLY transaction (``PostgresStore.read_snapshot``),
a consistent view that cannot write and blocks no writer, in which every session is listed and
``inspect``ed (what a load would repair is reported, as the copy's load commits it).
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager, closing, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlog.errors import AgentlogError
from agentlog.store.base import Store
from agentlog.store.records import Recovery
from agentlog.store.sqlite.connection import database_uri
from agentlog.store.sqlite.errors import translate_error
from agentlog.store.urls import open_store

__all__ = ["SessionCheck", "UpgradeCheck", "check_upgrade"]


@dataclass(frozen=True, slots=True)
class SessionCheck:
    """One session: ``ok``, ``repaired`` (loads after a crash repair) or ``fails`` (with the error)."""

    session_id: str | None
    status: str
    detail: str = ""


@dataclass(slots=True)
class UpgradeCheck:
    """What this version made of every session of a store."""

    store_url: str
    copy: str | None
    """Where the copy was read (removed afterwards), or None when the store was read in place."""
    sessions: list[SessionCheck] = field(default_factory=list)
    stopped: bool = False
    """True when ``stop`` ended the check early: ``sessions`` are those checked so far."""

    @property
    def failed(self) -> list[SessionCheck]:
        return [check for check in self.sessions if check.status == "fails"]

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store_url, "copy": self.copy, "ok": not self.failed,
                "sessions": [{"id": check.session_id, "status": check.status, "detail": check.detail}
                             for check in self.sessions]}


def check_upgrade(store_url: str, *, progress: Callable[[int, int], None] | None = None,
                  stop: Callable[[], bool] | None = None) -> UpgradeCheck:
    """List, read and restore every session of the store at ``store_url`` on a copy; report each.

    ``stop`` is asked before each session (a Ctrl-C in the CLI): once true, the report so far is
    returned, ``stopped`` (the copy is removed all the same; the store is never written).
    """
    original = open_store(store_url, create=False)
    with tempfile.TemporaryDirectory(prefix="agentlog-upgrade-") as scratch, original:
        copy_url = _copy(original, Path(scratch))
        report = UpgradeCheck(store_url, scratch if copy_url else None)
        if copy_url is None:
            with _snapshot(original):
                _check(original, report, progress, stop, write=False)
        else:
            with open_store(copy_url) as copied:
                _check(copied, report, progress, stop, write=True)
    return report


def _copy(store: Store, scratch: Path) -> str | None:
    """Copy a file store into ``scratch`` and return the copy's URL; None for the others."""
    root = getattr(store, "root", None)
    if isinstance(root, Path):
        shutil.copytree(root, scratch / "root", symlinks=True)
        compression = "zstd" if getattr(store, "compressed", True) else "none"
        return f"jsonl://{scratch / 'root'}?compression={compression}"
    database = getattr(store, "path", None)
    if isinstance(database, str) and database != ":memory:":
        target = scratch / "sessions.db"
        try:  # read as every reader reads: no byte of the store changes, a read-only mount is read
            with closing(sqlite3.connect(database_uri(database, write=False), uri=True)) as source, \
                    closing(sqlite3.connect(target)) as copy:
                source.backup(copy)
        except sqlite3.Error as exc:
            raise translate_error(exc, session_id=None, file=database, busy_ms=5_000) from exc
        target.chmod(0o600)
        return f"sqlite://{target}"
    return None


def _snapshot(store: Store) -> AbstractContextManager[None]:
    """A PostgreSQL store's consistent read-only view; the memory stores need none."""
    if store.name != "postgres":
        return nullcontext()
    from agentlog.store.postgres.store import PostgresStore

    assert isinstance(store, PostgresStore)
    return store.read_snapshot()


def _check(store: Store, report: UpgradeCheck, progress: Callable[[int, int], None] | None,
           stop: Callable[[], bool] | None, *, write: bool) -> None:
    listing = store.listing()
    for bad in listing.unreadable:
        report.sessions.append(SessionCheck(bad.session_id, "fails", f"cannot be listed: {bad.error}"))
    ids = sorted(snapshot.header.id for snapshot in listing.snapshots)
    for done, sid in enumerate(ids, 1):
        if stop is not None and stop():
            report.stopped = True
            return
        report.sessions.append(_check_one(store, sid, write=write))
        if progress is not None:
            progress(done, len(ids))


def _check_one(store: Store, sid: str, *, write: bool) -> SessionCheck:
    try:
        recovery = store.inspect(sid, trust_checkpoint=False).recovery  # as a first read would
        if write:
            store.load(sid)  # the copy takes the repair a real load would commit
    except AgentlogError as exc:
        return SessionCheck(sid, "fails", str(exc))
    if recovery is None:
        return SessionCheck(sid, "ok")
    return SessionCheck(sid, "repaired", _repair_summary(recovery))


def _repair_summary(recovery: Recovery) -> str:
    parts = []
    if recovery.torn:
        parts.append("torn tail ignored")
    if recovery.turn is not None:
        parts.append(f"interrupted turn {recovery.turn} closed by {len(recovery.closers)} events")
    return ", ".join(parts)
