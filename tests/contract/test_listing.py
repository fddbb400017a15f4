"""``listing()``: one unreadable session never hides the others (every durable backend).

Each backend is damaged the way it can be: a JSONL header frame or line, a planted or
unreadable session, a SQLite or PostgreSQL ``sessions`` row.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from agentlog import AgentlogError, SessionHeader
from agentlog.store.base import Store
from agentlog.store.jsonl.format import scan_zstd_frames
from agentlog.store.jsonl.store import JsonlStore
from tests.contract.logs import LogBuilder

IDS = ("s1", "s2", "s3")


def _fill(store: Store) -> None:
    log = LogBuilder()
    log.turn(1)
    for created, sid in enumerate(IDS):
        store.create(SessionHeader(id=sid, created_at=1000 + created, cwd="/work"))
        store.append(sid, log.events)


def damage_header(store: Store, tmp_path: Path) -> None:
    """s2's header made unreadable: a damaged zstd header frame, a garbage raw line, a bad row."""
    if isinstance(store, JsonlStore):
        path = Path(store.locate(SessionHeader(id="s2", cwd="/work")))
        data = bytearray(path.read_bytes())
        if store.compressed:
            _start, end = scan_zstd_frames(bytes(data), max_frames=1).frames[0]
            data[end - 1] ^= 0x5A  # the header frame's checksum: its structure stays intact
        else:
            data[: data.index(b"\n")] = b"{this is not a header"
        path.write_bytes(bytes(data))
    elif store.name == "sqlite":
        with sqlite3.connect(tmp_path / "db" / "sessions.db") as conn:
            conn.execute("UPDATE sessions SET incarnation = 'not-a-uuid' WHERE id = 's2'")
    elif store.name == "postgres":
        import psycopg

        with psycopg.connect(store.dsn, autocommit=True) as conn:  # type: ignore[attr-defined]
            conn.execute(f'UPDATE "{store.schema}".sessions SET version = 99 '  # type: ignore[attr-defined]
                         "WHERE id = 's2'")
    else:
        pytest.skip(f"the {store.name} store holds no bytes to damage")


def test_one_damaged_session_is_listed_apart_and_the_others_are_listed(store: Store, tmp_path: Path) -> None:
    _fill(store)
    damage_header(store, tmp_path)
    listing = store.listing()
    assert sorted(snapshot.header.id for snapshot in listing.snapshots) == ["s1", "s3"]
    [bad] = listing.unreadable
    assert bad.session_id == "s2"
    assert isinstance(bad.error, AgentlogError) and bad.where
    if bad.skipped_by_list:  # a raw transcript without a header line: the spec's list() skips it
        assert sorted(header.id for header in store.list()) == ["s1", "s3"]
    else:  # list() never hands out a listing that silently lacks a damaged session
        with pytest.raises(AgentlogError):
            store.list()


def test_an_unreadable_session_file_is_listed_apart(tmp_path: Path) -> None:
    """chmod 000 blocks the read; as root (where it does not), a planted symlinked session dir."""
    store = JsonlStore(tmp_path / "root")
    _fill(store)
    session_dir = Path(store.locate(SessionHeader(id="s2", cwd="/work"))).parent
    if os.geteuid() != 0:
        (session_dir / "session.jsonl.zstd").chmod(0)
    else:
        moved = tmp_path / "elsewhere"
        session_dir.rename(moved)
        session_dir.symlink_to(moved, target_is_directory=True)
    listing = JsonlStore(tmp_path / "root").listing()
    assert sorted(snapshot.header.id for snapshot in listing.snapshots) == ["s1", "s3"]
    assert [(bad.session_id, bad.where) for bad in listing.unreadable] == [("s2", str(session_dir))]


def test_a_listing_says_when_the_store_stored_each_session_not_when_its_events_say(store: Store) -> None:
    """gc counts an import's age from here: its events keep the source's times (1970 when it had none)."""
    from agentlog.core.header import now_ms

    before = now_ms()
    log = LogBuilder(time=0)
    log.turn(1)
    store.create(SessionHeader(id="imported", created_at=0, cwd="/work"))
    store.append("imported", log.events)
    (snapshot,) = store.listing().snapshots
    assert snapshot.header.created_at == 0
    assert max(event.time for event in store.read_from("imported", 0).events) < 100
    assert snapshot.stored_at is not None
    assert before - 1_000 <= snapshot.stored_at <= now_ms() + 1_000
