"""What every fuzzed reader must do: load correctly, or raise an ``AgentlogError`` that names the
session and a location, and never change the bytes of a file it only reads."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypeVar

from benchmarks.workload import record_workload
from hypothesis import HealthCheck, settings

from agentlog import AgentlogError, Event, Inspection, SessionNotFoundError, Store
from agentlog.store.jsonl.paths import TRANSCRIPT_RAW, TRANSCRIPT_ZSTD
from agentlog.store.jsonl.store import JsonlStore
from tests.conftest import SHARED_DATA, shared_data_dir

Compression = Literal["zstd", "none"]
T = TypeVar("T")

SHORT = settings(max_examples=int(os.environ.get("AGENTLOG_FUZZ_SHORT", "50")), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
"""The default run: a few seconds per target (CI has two cores)."""

LONG = settings(max_examples=int(os.environ.get("AGENTLOG_FUZZ_EXAMPLES", "3000")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
"""``-m slow``: minutes per target; ``AGENTLOG_FUZZ_EXAMPLES`` sets how many inputs."""

_DSH_FIXTURES: dict[Compression, tuple[str, ...]] = {
    "none": ("basic-T5.raw-packed.jsonl", "crash-midturn.raw-packed.jsonl", "crash-torn.raw-packed.jsonl"),
    "zstd": ("basic-T5.zstd-packed.jsonl.zstd", "crash-midturn.zstd-packed.jsonl.zstd",
             "crash-torn.zstd-packed.jsonl.zstd"),
}


class Damaged(bytes):
    """Fuzzed bytes whose repr stays short (the full input is kept by ``keep_failure``)."""

    def __repr__(self) -> str:
        return f"<{len(self)} bytes sha1={hashlib.sha1(self).hexdigest()[:12]}>"


def keep_failure(data: bytes, name: str) -> Path:
    """Write a failing input to ``$AGENTLOG_FUZZ_FAILURES`` (default: the temp dir) to pin it."""
    directory = Path(os.environ.get("AGENTLOG_FUZZ_FAILURES") or tempfile.gettempdir(), "agentlog-fuzz")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{hashlib.sha1(data).hexdigest()[:12]}.bin"
    path.write_bytes(data)
    return path


@dataclass(frozen=True)
class Seed:
    """A valid transcript and where a JSONL root keeps it."""

    session_id: str
    relpath: str
    data: bytes


def _agentlog_seed(compression: Compression, session_id: str, *, close_turn: bool) -> Seed:
    with tempfile.TemporaryDirectory() as root:
        store = JsonlStore(root, compression=compression)
        live = store.start(session_id)
        record_workload(live.session, 2, seed=3)
        if not close_turn:
            live.session.append("turn/start", {"turn": 3})
        live.flush()
        live.close()
        store.close()
        name = TRANSCRIPT_ZSTD if compression == "zstd" else TRANSCRIPT_RAW  # not the .seek sidecar
        path = next(Path(root).rglob(name))
        return Seed(session_id, str(path.relative_to(root)), path.read_bytes())


@functools.cache
def jsonl_seeds(compression: Compression) -> tuple[Seed, ...]:
    """Sessions written by agentlog (closed and mid-turn) and DSH's own fixtures: those when
    ``../shared`` is present, and always under CI (``shared_data_dir`` fails there without it)."""
    seeds = [_agentlog_seed(compression, "fz", close_turn=True),
             _agentlog_seed(compression, "fz-open", close_turn=False)]
    if SHARED_DATA.is_dir() or os.environ.get("CI"):
        fixtures = shared_data_dir() / "dsh-fixtures"
        manifest = {entry["file"]: entry for entry in json.loads((fixtures / "manifest.json").read_text())}
        suffix = ".zstd" if compression == "zstd" else ""
        for name in _DSH_FIXTURES[compression]:
            entry = manifest[name]
            relpath = entry["originalPath"].removesuffix(".zstd") + suffix
            seeds.append(Seed(entry["sessionId"], relpath, (fixtures / name).read_bytes()))
    return tuple(seeds)


_LOCATION_TEXT: Final = re.compile(r"\bseq \d+|\bline \d+|at byte \d+")


def check_located(exc: AgentlogError, session_id: str | None) -> None:
    """A refusal names the session (id or its transcript path) and a location (file, seq or offset).

    ``session_id`` None: a store-wide read (``list``), where a damaged row may have no id to name.
    """
    text = str(exc)
    assert session_id is None or session_id in text or (exc.file is not None and session_id in exc.file), (
        f"{type(exc).__name__} does not name session {session_id!r}: {text}")
    if isinstance(exc, SessionNotFoundError):  # nothing stored under the id: no location to name
        return
    located = exc.file is not None or exc.seq is not None or exc.offset is not None or exc.path is not None
    # A restore refusal wrapped by the store keeps its seq only in the text (store.base._validate).
    assert located or _LOCATION_TEXT.search(text), f"{type(exc).__name__} names no location: {text}"


def outcome(read: Callable[[], T], session_id: str | None) -> T | None:
    """``read()``, or None when it raised a located ``AgentlogError`` (anything else propagates)."""
    try:
        return read()
    except AgentlogError as exc:
        check_located(exc, session_id)
        return None


def check_loaded(loaded: Inspection) -> list[Event]:
    """A successful load restored a session (``Session.restore`` validated it); its events.

    Not ``check_invariants``: a damaged payload that is still a valid event (``{"turn": 3}``
    for ``{"turn": 1}``, undetectable in raw JSONL and SQLite rows) loads today, because restore
    checks turn order only with a validator attached (issue 11, item 5).
    """
    events = list(loaded.events)
    assert len(events) == len(loaded.events)
    return events


def read_only_readers(store: Store, session_id: str, *,
                      raw: bool = True) -> list[tuple[Callable[[], object], str | None]]:
    """The reads that never write, each with the session its refusals must name (None: ``list``).

    Each must leave every stored byte as it was (``raw``: JSONL's ``read_raw`` too).
    """
    readers: list[tuple[Callable[[], object], str | None]] = [
        (lambda: store.inspect(session_id), session_id),
        (lambda: store.read_from(session_id, 0), session_id),
        (lambda: store.read_from(session_id, 7), session_id),
        (store.list, None),
    ]
    return [*readers, (lambda: store.read_raw(session_id), session_id)] if raw else readers


def check_jsonl_readers(compression: Compression, seed: Seed, data: bytes) -> None:
    """Place ``data`` as ``seed``'s transcript and run every reader on it (load last, on this copy)."""
    with tempfile.TemporaryDirectory() as root:
        path = Path(root, seed.relpath)
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        store = JsonlStore(root, compression=compression)
        try:
            for read, named in read_only_readers(store, seed.session_id):
                outcome(read, named)
                assert path.read_bytes() == data, "a read-only reader changed the transcript"
            loaded = outcome(lambda: store.load(seed.session_id), seed.session_id)
        finally:
            store.close()
        if loaded is None:
            return
        events = check_loaded(loaded)
        again = JsonlStore(root, compression=compression)
        try:
            assert list(again.load(seed.session_id).events) == events, "a repaired load reads back otherwise"
        finally:
            again.close()
