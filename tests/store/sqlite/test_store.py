"""SqliteStore on real database files: rows, codecs, identity, repair, forks, locks, faults, concurrency.

Spec persistence §5 and the checklists sqlite.spec, compression.spec, compression-unprofitable.spec
and differential.spec (adapted to agentlog's own schema); the contract suite runs on it as well.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard

from agentlog import (
    Event,
    PersistenceIOError,
    Session,
    SessionCorruptionError,
    SessionFormatUnsupportedError,
    SessionHeader,
    SessionLockedError,
    StoreError,
    UsageError,
)
from agentlog.core.invariants import check_invariants
from agentlog.core.repair import interrupted_turn_closers
from agentlog.errors import AgentlogError, ConcurrentWriterError, InvalidEventError, InvalidHeaderError
from agentlog.store.base import Store
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.sqlite.rows import COMPRESS_AT, decode_physical_row, decode_seqs, encode_seqs
from agentlog.store.sqlite.schema import APPLICATION_ID, DSH_APPLICATION_ID, USER_VERSION
from agentlog.store.sqlite.store import SqliteStore
from agentlog.store.urls import open_store
from tests.contract.logs import LogBuilder, Wire, wire

REPO = Path(__file__).resolve().parents[3]
HEADER = SessionHeader(id="s1", created_at=1000, cwd="/home/user/project")
Stores = Callable[..., SqliteStore]
MiB = 1_048_576


# -- helpers ------------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "db" / "sessions.db"


@pytest.fixture
def stores(db: Path) -> Iterator[Stores]:
    """Open stores on ``db`` (each call a fresh instance, as after a restart); all closed at the end."""
    opened: list[SqliteStore] = []

    def make(**options: Any) -> SqliteStore:
        opened.append(SqliteStore(db, write_delay_ms=20, **options))
        return opened[-1]

    yield make
    for store in opened:
        store.close()


def chunks(log: LogBuilder, count: int, *, turn: int = 1, step: int = 1, kind: str = "text-delta",
           text: str | None = None) -> None:
    for index in range(count):
        log.add("assistant/chunk", {"turn": turn, "step": step,
                                    "chunk": {"type": kind, "index": 0, "text": text or f"w{index} "}})


def raw(db: Path) -> sqlite3.Connection:
    """A plain connection to tamper with or inspect the file (autocommit, usable from any thread)."""
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA foreign_keys = OFF")
    return conn


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = raw(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def execute(db: Path, sql: str, *params: Any) -> None:
    query(db, sql, *params)


def physical(db: Path) -> list[tuple[Any, ...]]:
    """(rowid, seq, type, ignorable, typeof(data)) of every event row, in seq order."""
    return query(db, "SELECT rowid, seq, type, ignorable, typeof(data) FROM events ORDER BY session, seq")


def packed_sizes(db: Path) -> list[int]:
    """Members of each packed row, in order (decoded: the data may be compressed)."""
    rows = query(db, "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable, op_first "
                     "FROM events WHERE ignorable = 0 ORDER BY session, seq")
    return [len(decode_physical_row(row)) for row in rows]


_ASCII = [byte for byte in range(0x20, 0x7F) if byte not in b'"\\']
_CONTINUATION = range(0x80, 0xC0)
_SECOND = {0xE0: range(0xA0, 0xC0), 0xED: range(0x80, 0xA0), 0xF0: range(0x90, 0xC0), 0xF4: range(0x80, 0x90)}


def incompressible_json(size: int) -> dict[str, Any]:
    """A JSON object of exactly ``size`` bytes whose string bytes are spread evenly over every byte value
    a JSON string can hold (zstd finds nothing to gain and keeps the literals raw)."""
    rng = random.Random(size)
    counts = dict.fromkeys([*_ASCII, *range(0xC2, 0xF5), *_CONTINUATION], 0)

    def rarest(values: Any) -> int:
        return min(values, key=lambda value: (counts[value], rng.random()))

    chars: list[str] = []
    length = len(orjson.dumps({"turn": 1, "n": ""}))
    while length < size - 4:
        byte = rarest(counts)
        if byte < 0x80:
            encoded = bytes([byte])
        elif byte < 0xC0:
            encoded = bytes([rarest(range(0xC2, 0xE0)), byte])
        else:
            width = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            encoded = bytes([byte, rarest(_SECOND.get(byte, _CONTINUATION))]
                            + [rarest(_CONTINUATION) for _ in range(width - 2)])
        for value in encoded:
            counts[value] += 1
        chars.append(encoded.decode())
        length += len(encoded)
    rng.shuffle(chars)
    data = {"turn": 1, "n": "".join(chars) + "~" * (size - length)}
    assert len(orjson.dumps(data)) == size
    return data


def stored(store: Store, log: LogBuilder, header: SessionHeader = HEADER) -> None:
    store.create(header)
    store.append(header.id, log.events)


def turns(count: int, *, open_last: bool = False, chunk_count: int = 3) -> LogBuilder:
    log = LogBuilder()
    for number in range(1, count + 1):
        log.turn(number, close=not (open_last and number == count), chunks=chunk_count)
    return log


def chunk_events(count: int, text: str = "x", *, seq0: int = 0) -> list[Event]:
    session = Session.create("c", clock=iter(range(1, 10**9)).__next__)
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    for _ in range(count):
        session.append("assistant/chunk", {"turn": 1, "step": 1,
                                           "chunk": {"type": "text-delta", "index": 0, "text": text}})
    return list(session.events)


# -- rows and packing (sqlite.spec 1-3, compression.spec 1-2) ---------------------------------------


def test_four_chunks_pack_into_one_row(db: Path, stores: Stores) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    chunks(log, 4)
    stored(stores(), log)
    rows = physical(db)
    assert [(row[1], row[2], row[3]) for row in rows] == [
        (0, "turn/start", None), (1, "step/start", None), (2, "text-chunks", 0)]
    assert wire(list(stores().read_from("s1", 0).events)) == log.events


def test_appends_of_3_1_100_make_7_rows_one_packed_and_read_from_is_exact(
    db: Path, stores: Stores,
) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.user("hello", 1)
    chunks(log, 99)
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert len(log.events) == 104
    store = stores()
    store.create(HEADER)
    store.append("s1", log.events[:3])
    store.append("s1", log.events[3:4])
    before = physical(db)
    store.append("s1", log.events[4:])
    after = physical(db)
    assert len(after) == 7
    assert [row[3] for row in after].count(0) == 1
    assert after[:4] == before, "earlier rows were rewritten"
    assert query(db, "PRAGMA user_version") == [(USER_VERSION,)]
    assert query(db, "PRAGMA application_id") == [(APPLICATION_ID,)] == [(0x41474C47,)]
    fresh = stores()
    for start in (0, 2, 25, 101, 104, 105):
        assert wire(list(fresh.read_from("s1", start).events)) == log.events[start:], start
    for start in range(len(log.events) + 2):
        assert wire(list(fresh.read_from("s1", start).events)) == log.events[start:], start


def test_paced_stream_of_1000_deltas_makes_31_rows_never_rewritten(
    db: Path, stores: Stores,
) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    chunks(log, 1000)
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store = stores()
    store.create(HEADER)
    seen: dict[int, tuple[Any, ...]] = {}
    inserts = 0
    for start in range(0, len(log.events), 40):
        store.append("s1", log.events[start : start + 40])
        rows = {row[0]: row for row in physical(db)}
        assert all(rows.get(rowid) == row for rowid, row in seen.items()), "a row changed or vanished"
        inserts += len(rows) - len(seen)
        seen = rows
    assert len(seen) == inserts == 31
    assert query(db, "SELECT max(length(CAST(data AS BLOB))) FROM events")[0][0] <= MiB
    wal = Path(f"{db}-wal")
    size = wal.stat().st_size
    time.sleep(0.25)
    assert wal.stat().st_size == size, "the store wrote while idle"
    assert wire(list(stores().load("s1").events)) == log.events


def test_100_member_run_is_one_row_and_1027_members_are_two(db: Path, stores: Stores) -> None:
    store = stores()
    store.create(SessionHeader(id="a", created_at=1))
    store.append("a", chunk_events(100))
    store.create(SessionHeader(id="b", created_at=1))
    store.append("b", chunk_events(1027))
    counts = query(db, "SELECT s.id, count(*) FROM events e JOIN sessions s ON e.session = s.key "
                       "WHERE e.ignorable = 0 GROUP BY s.id ORDER BY s.id")
    assert counts == [("a", 1), ("b", 2)]
    assert packed_sizes(db) == [100, 1024, 3]
    fresh = stores()
    assert list(fresh.read_from("a", 0).events) == chunk_events(100)
    assert list(fresh.read_from("b", 0).events) == chunk_events(1027)


@pytest.mark.parametrize(("count", "size", "members"), [
    (4, 300_000, [3]),    # three members fit in 1 MiB, the fourth stays scalar
    (3, 400_000, []),     # members too big to share a row stay scalar
    (10, 150_000, [6, 4]),
])
def test_big_texts_are_split_by_the_1_mib_cap(db: Path, stores: Stores, count: int,
                                              size: int, members: list[int]) -> None:
    events = chunk_events(count, "y" * size)
    store = stores()
    store.create(HEADER)
    store.append("s1", events)
    assert len(physical(db)) == 2 + len(members) + count - sum(members)
    assert packed_sizes(db) == members
    for (text,) in query(db, "SELECT data FROM events WHERE ignorable = 0"):
        assert len(orjson.loads(zstandard.ZstdDecompressor().decompress(text))["texts"]) * size <= MiB
    assert list(stores().read_from("s1", 0).events) == events


def test_rows_of_every_chunk_kind_pack_and_restore_exactly(stores: Stores) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    chunks(log, 3, kind="reasoning-delta")
    for named in (True, False):
        for _ in range(3):
            chunk = {"type": "tool-call-delta", "index": 1, "id": "c1", "name": "read", "argumentsDelta": "{"}
            if not named:
                del chunk["name"]
            log.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
    log.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "usage", "inputTokens": 3}})
    log.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a",
                                                                "extra": 1}})
    stored(stores(), log)
    assert wire(list(stores().read_from("s1", 0).events)) == log.events


# -- data compression and provenance (compression.spec 9-12, compression-unprofitable.spec) ------------


def test_large_data_is_a_blob_and_small_data_stays_text(db: Path, stores: Stores) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1, "note": "z" * (2 * COMPRESS_AT)})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    stored(stores(), log)
    assert [row[4] for row in physical(db)] == ["blob", "text"]
    assert wire(list(stores().load("s1").events)) == log.events


def test_incompressible_data_at_the_threshold_stays_text(db: Path, stores: Stores) -> None:
    data = incompressible_json(COMPRESS_AT)
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=False)
    assert len(compressor.compress(orjson.dumps(data))) >= COMPRESS_AT
    log = LogBuilder()
    log.add("turn/start", data)
    log.add("turn/start", {"turn": 1, "n": "ab" * COMPRESS_AT})
    log.add("turn/start", {"turn": 1, "n": "ab" * ((COMPRESS_AT - 20) // 2)})
    stored(stores(), log)
    assert [row[4] for row in physical(db)] == ["text", "blob", "text"]
    assert wire(list(stores().read_from("s1", 0).events)) == log.events


def test_provenance_round_trips_and_2000_entries_are_smaller_than_json() -> None:
    for values in ([], [0], [5, 3, 3, 1, 0], [2**53 - 1, 0, 2**53 - 1], list(range(7, 2007)),
                   [random.Random(1).randrange(2**53) for _ in range(50)]):
        assert decode_seqs(encode_seqs(values)) == tuple(values)
    many = list(range(100_000, 102_000))
    assert len(encode_seqs(many)) < len(orjson.dumps(many)) / 3
    assert encode_seqs([]) == b""


@pytest.mark.parametrize("bad", [-1, 0.5, 2**53, True])
def test_provenance_encode_refuses_values_outside_safe_non_negative_integers(bad: Any) -> None:
    with pytest.raises(InvalidEventError, match="non-negative safe integers"):
        encode_seqs([1, bad])


@pytest.mark.parametrize(("blob", "why"), [
    (b"\x80", "truncated"),
    (b"\x05\x85", "truncated"),
    (b"\x80\x00", "non-canonical"),
    (b"\x05\x81\x00", "non-canonical"),
    (b"\xff" * 9, "over-long"),
    (b"\x80\x80\x80\x80\x80\x80\x80\x10", "outside"),
    (b"\x01\x03\x03", "outside"),
])
def test_provenance_decode_refuses_malformed_varints(blob: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        decode_seqs(blob)


def _row(seq: int = 0, kind: str = "turn/start", data: Any = '{"turn":1}', seqs: Any = None, op: Any = None,
         ignorable: Any = None, op_first: Any = None) -> tuple[Any, ...]:
    return (seq, kind, 1, data, seqs, op, ignorable, op_first)


def _packed(count: int, seq: int = 0) -> str:
    return orjson.dumps({"turn": 1, "step": 1, "index": 0, "dt": [1] * (count - 1),
                         "texts": ["t"] * count}).decode()


@pytest.mark.parametrize(("row", "why"), [
    (_row(data=b"not zstd"), "not a zstd frame"),
    (_row(data=12), "text or a blob"),
    (_row(seq=-1), "seq"),
    (_row(kind=""), "type"),
    (_row(ignorable=2), "ignorable"),
    (_row(kind="tool/result", seqs=b"\x80"), "truncated"),
    (_row(kind="text-chunks", data=_packed(2), ignorable=0), "outside 3..1024"),
    (_row(kind="text-chunks", data=_packed(1025), ignorable=0), "outside 3..1024"),
    (_row(kind="text-chunks", data=_packed(3), ignorable=0, op='"append"'), "surface columns"),
    (_row(kind="turn/start", ignorable=0), "packed discriminator"),
    (_row(kind="text-chunks", data="[" * (MiB + 1), ignorable=0), "exceeds"),
    (_row(op_first=1), "op_first"),
])
def test_malformed_physical_rows_are_refused(row: tuple[Any, ...], why: str) -> None:
    with pytest.raises((ValueError, AgentlogError), match=why):
        decode_physical_row(row)


def test_decompression_is_bounded_by_the_declared_content_size() -> None:
    huge = zstandard.ZstdCompressor(level=3).compress(b" " * (MiB + 10))
    with pytest.raises(ValueError, match="more than"):
        decode_physical_row(_row(kind="text-chunks", data=huge, ignorable=0))
    unsized = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(b'{"turn":1}')
    with pytest.raises(ValueError, match="no content size"):
        decode_physical_row(_row(data=unsized))
    good = zstandard.ZstdCompressor(level=3).compress(b'{"turn":1}')
    with pytest.raises(ValueError, match="exactly one"):
        decode_physical_row(_row(data=good + b"junk"))
    assert decode_physical_row(_row(data=good))[0].data == {"turn": 1}


def test_ignorable_events_named_like_row_tags_stay_scalar_and_round_trip(
    db: Path, stores: Stores,
) -> None:
    log = LogBuilder()
    for tag in ("text-chunks", "reasoning-chunks", "tool-call-chunks"):
        log.add(tag, {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"]}, ignorable=True)
    stored(stores(), log)
    assert [row[3] for row in physical(db)] == [1, 1, 1]
    assert wire(list(stores().load("s1").events)) == log.events


def test_repair_closers_keep_their_wire_key_order(stores: Stores) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.assistant(1, 1, "calling", calls=("call-1",))
    log.tool_call(1, 1, "call-1")
    stored(stores(), log)
    loaded = stores().load("s1").events
    again = stores().load("s1").events
    assert [event.to_json() for event in again] == [event.to_json() for event in loaded]
    assert loaded[-3].op_first and again[-3].op_first


# -- torn tails and committed corruption (compression.spec 13, sqlite.spec 4, 20) ---------------------


def _seq_of_row(db: Path, kind: str, nth: int = 0) -> int:
    rows = query(db, "SELECT seq FROM events WHERE type = ? ORDER BY seq LIMIT 1 OFFSET ?", kind, nth)
    return int(rows[0][0])


def test_gap_before_a_later_turn_end_is_committed_corruption(db: Path, stores: Stores) -> None:
    stored(stores(), turns(2))
    execute(db, "DELETE FROM events WHERE seq = 2")
    with pytest.raises(SessionCorruptionError, match="invalid committed physical row at seq 3") as info:
        stores().load("s1")
    assert info.value.session_id == "s1"
    with pytest.raises(SessionCorruptionError):
        stores().inspect("s1")


def test_gap_after_the_last_turn_end_is_a_torn_tail_that_load_truncates(
    db: Path, stores: Stores,
) -> None:
    log = turns(2, open_last=True)
    stored(stores(), log)
    user_seq = _seq_of_row(db, "user/message", 1)
    execute(db, "DELETE FROM events WHERE seq = ?", user_seq)
    inspected = stores().inspect("s1").events
    assert [e.type for e in inspected[user_seq:]] == ["step/end", "turn/end"]
    assert len(physical(db)) > user_seq, "inspect must not write"
    loaded = stores().load("s1").events
    assert wire(list(loaded[:user_seq])) == log.events[:user_seq]
    assert [e.type for e in loaded[user_seq:]] == ["step/end", "turn/end"]
    assert [row[1] for row in physical(db)][-2:] == [user_seq, user_seq + 1]
    check_invariants(list(stores().load("s1").events))


def test_malformed_packed_row_before_a_later_turn_end_is_corruption(
    db: Path, stores: Stores,
) -> None:
    stored(stores(), turns(2))
    execute(db, "UPDATE events SET data = '{\"bad\":1}' WHERE seq = (SELECT min(seq) FROM events "
            "WHERE ignorable = 0)")
    with pytest.raises(SessionCorruptionError, match="invalid committed physical row"):
        stores().load("s1")


def test_malformed_packed_tail_is_one_removable_row(db: Path, stores: Stores) -> None:
    log = LogBuilder()
    log.turn(1)
    log.add("turn/start", {"turn": 2})
    log.add("step/start", {"turn": 2, "step": 1})
    chunks(log, 5, turn=2)
    stored(stores(), log)
    packed_seq = _seq_of_row(db, "text-chunks", 1)
    execute(db, "UPDATE events SET data = '{\"bad\":1}' WHERE seq = ?", packed_seq)
    rows = len(physical(db))
    loaded = stores().load("s1").events
    assert [e.type for e in loaded[packed_seq:]] == ["step/end", "turn/end"]
    assert len(physical(db)) == rows - 1 + 2


def test_malformed_tail_row_blocks_appends(db: Path, stores: Stores) -> None:
    log = turns(1)
    store = stores()
    stored(store, log)
    execute(db, "UPDATE events SET data = 'nope' WHERE seq = ?", len(log.events) - 1)
    nxt = LogBuilder(start=len(log.events))
    nxt.turn(2)
    with pytest.raises(SessionCorruptionError, match="invalid physical tail"):
        store.append("s1", nxt.events)


def test_overlapping_corrupt_scalar_row_does_not_hide_a_packed_predecessor(
    db: Path, stores: Stores,
) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    chunks(log, 10)
    stored(stores(), log)
    execute(db, "INSERT INTO events (session, seq, type, time, data) VALUES (1, 5, 'turn/start', 1, 'bad')")
    events = stores().read_from("s1", 6).events
    assert wire(list(events)) == log.events[6:]


def test_malformed_packed_predecessor_gives_an_empty_suffix(db: Path, stores: Stores) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    chunks(log, 10)
    log.add("step/end", {"turn": 1, "step": 1})
    stored(stores(), log)
    execute(db, "UPDATE events SET data = '{\"bad\":1}' WHERE ignorable = 0")
    assert stores().read_from("s1", 6).events == ()
    assert stores().read_from("s1", 12).events == ()
    assert wire(list(stores().read_from("s1", 1).events)) == log.events[1:2]


# -- writers: stale writer, stale repair, busy waits (sqlite.spec 5, 7, 8, 18, 19) ---------------------


def test_stale_writer_gets_stored_next_seq_and_the_winner_is_intact(stores: Stores) -> None:
    first = stores()
    first.create(HEADER)
    log = turns(3)
    first.append("s1", log.events[:9])
    second = stores()
    second.append("s1", log.events[9:18])
    with pytest.raises(ConcurrentWriterError, match="stored next seq is 18") as info:
        first.append("s1", log.events[9:18])
    assert info.value.session_id == "s1"
    assert wire(list(stores().read_from("s1", 0).events)) == log.events[:18]


def test_stale_repair_is_refused_and_newer_rows_are_intact(db: Path, stores: Stores) -> None:
    log = turns(2, open_last=True)
    stored(stores(), log)
    execute(db, "DELETE FROM events WHERE seq = ?", len(log.events) - 2)
    slow = stores()
    seen = slow._load_stored("s1")
    assert seen is not None and seen.torn is not None
    winner = stores().load("s1").events
    closers = interrupted_turn_closers(seen.events)
    with pytest.raises(ConcurrentWriterError, match="repair is stale"):
        slow._commit_repair(seen.header, seen.torn, closers)
    with pytest.raises(ConcurrentWriterError, match="closer starts at seq"):
        slow._commit_repair(seen.header, None, closers)
    assert stores().load("s1").events == winner


def test_repair_without_a_session_row_is_refused(stores: Stores) -> None:
    store = stores()
    store.list()
    event = Event.from_wire({"type": "turn/end", "seq": 0, "time": 1, "data": {"turn": 1}})
    with pytest.raises(SessionCorruptionError, match="metadata row is missing"):
        store._commit_repair(SessionHeader(id="ghost", created_at=1), None, [event])


def test_append_waits_for_a_competing_writer_and_succeeds(db: Path, stores: Stores) -> None:
    store = stores()
    store.create(HEADER)
    log = turns(2)
    store.append("s1", log.events[:9])
    blocker = raw(db)
    blocker.execute("BEGIN IMMEDIATE")
    timer = threading.Timer(0.1, lambda: blocker.execute("COMMIT"))
    started = time.monotonic()
    timer.start()
    try:
        store.append("s1", log.events[9:])
    finally:
        timer.join()
        blocker.close()
    assert time.monotonic() - started >= 0.09
    assert wire(list(stores().load("s1").events)) == log.events


def test_empty_append_is_inert(db: Path, stores: Stores) -> None:
    store = stores()
    store.create(HEADER)
    store.append("s1", [])
    assert store.list() == []
    assert physical(db) == []


# -- open: journal modes, pragmas, identity (sqlite.spec 6, 9-12, 15-17, 21-24) -------------------------


@pytest.mark.parametrize("mode", ["wal", "delete", "truncate", "persist", ":memory:"])
def test_every_journal_mode_opens_hardened_and_round_trips(db: Path, mode: str) -> None:
    store = SqliteStore(":memory:") if mode == ":memory:" else SqliteStore(db, journal_mode=mode)
    log = turns(1)
    stored(store, log)
    conn = store._conn
    assert conn is not None
    values = [conn.execute(f"PRAGMA {name}").fetchone()[0]
              for name in ("journal_mode", "trusted_schema", "synchronous", "foreign_keys")]
    assert values == ["memory" if mode == ":memory:" else mode, 0, 2, 1]
    assert conn.execute("PRAGMA mmap_size").fetchall() in ([(0,)], [])  # :memory: has no mmap
    assert wire(list(store.load("s1").events)) == log.events
    store.close()


def test_journal_mode_switch_retries_while_busy_within_the_budget(db: Path) -> None:
    SqliteStore(db, journal_mode="delete").close()
    SqliteStore(db, journal_mode="delete").list()
    reader = raw(db)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM sessions").fetchone()
    timer = threading.Timer(0.15, lambda: reader.execute("COMMIT"))
    timer.start()
    store = SqliteStore(db, journal_mode="wal", busy_timeout_ms=3000)
    try:
        started = time.monotonic()
        store.list()
        assert time.monotonic() - started >= 0.1
        assert query(db, "PRAGMA journal_mode") == [("wal",)]
    finally:
        timer.join()
        reader.close()
        store.close()


def test_journal_mode_switch_gives_up_after_the_budget(db: Path) -> None:
    SqliteStore(db, journal_mode="delete").list()
    reader = raw(db)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM sessions").fetchone()
    store = SqliteStore(db, journal_mode="wal", busy_timeout_ms=100)
    try:
        started = time.monotonic()
        with pytest.raises(PersistenceIOError, match="locked") as info:
            store.list()
        assert 0.09 <= time.monotonic() - started < 2
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    finally:
        reader.close()
        store.close()


def _foreign(db: Path, *statements: str) -> None:
    db.parent.mkdir(mode=0o700, exist_ok=True)
    conn = sqlite3.connect(db)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    os.chmod(db, 0o600)


@pytest.mark.parametrize(("statements", "error", "match"), [
    (["CREATE TABLE t (x)"], StoreError, "unversioned schema or application identity"),
    ([f"PRAGMA application_id = {APPLICATION_ID}"], StoreError, "unversioned schema"),
    (["CREATE TABLE t (x)", "PRAGMA application_id = 7", "PRAGMA user_version = 1"], StoreError,
     "has application id 7"),
    ([f"PRAGMA application_id = {DSH_APPLICATION_ID}", "PRAGMA user_version = 17"],
     SessionFormatUnsupportedError, "DeepSeek Harness"),
    ([f"PRAGMA application_id = {APPLICATION_ID}", f"PRAGMA user_version = {USER_VERSION + 1}"],
     SessionFormatUnsupportedError,
     "incompatible with this build"),
    ([f"PRAGMA application_id = {APPLICATION_ID}", f"PRAGMA user_version = {USER_VERSION}"], StoreError,
     "required schema objects"),
])
def test_foreign_databases_are_refused(db: Path, statements: list[str], error: type[Exception],
                                       match: str) -> None:
    _foreign(db, *statements)
    store = SqliteStore(db)
    with pytest.raises(error, match=match):
        store.list()
    store.close()


@pytest.mark.parametrize("change", [
    "ALTER TABLE sessions ADD COLUMN extra2 TEXT",
    "CREATE INDEX sessions_created ON sessions (created_at)",
    "CREATE TABLE loose (x)",
    "CREATE VIEW v AS SELECT 1",
    "CREATE TRIGGER t AFTER INSERT ON sessions BEGIN SELECT 1; END",
])
def test_any_extra_schema_object_is_refused(db: Path, change: str) -> None:
    SqliteStore(db).close()
    SqliteStore(db).list()
    execute(db, change)
    store = SqliteStore(db)
    with pytest.raises(StoreError, match="required schema objects"):
        store.list()
    store.close()


def test_a_non_strict_events_table_is_refused(db: Path) -> None:
    SqliteStore(db).list()
    conn = raw(db)
    conn.execute("DROP TABLE events")
    conn.execute("CREATE TABLE events (session INTEGER, seq INTEGER, type TEXT, time INTEGER, data, "
                 "source_event_seqs BLOB, surface_op TEXT, ignorable INTEGER, op_first INTEGER, "
                 "PRIMARY KEY (session, seq))")
    conn.close()
    with pytest.raises(StoreError, match="required schema objects"):
        SqliteStore(db).list()


@pytest.mark.parametrize(("pragma", "error"), [
    ("PRAGMA user_version = 9", SessionFormatUnsupportedError),
    ("PRAGMA application_id = 5", StoreError),
    ("CREATE INDEX late ON events (time)", StoreError),
])
def test_identity_changed_after_open_is_refused_at_mutation(db: Path, stores: Stores,
                                                           pragma: str, error: type[Exception]) -> None:
    store = stores()
    log = turns(2)
    store.create(HEADER)
    store.append("s1", log.events[:9])
    execute(db, pragma)
    with pytest.raises(error, match="changed before mutation"):
        store.append("s1", log.events[9:])


@pytest.mark.parametrize("statement", ["DELETE FROM store_identity",
                                       "UPDATE store_identity SET store_id = ''"])
def test_missing_or_empty_store_id_is_refused(db: Path, statement: str) -> None:
    SqliteStore(db).list()
    execute(db, statement)
    with pytest.raises(StoreError, match="no valid store identity"):
        SqliteStore(db).list()


def test_not_a_database_is_refused_with_the_sqlite_error_chained(db: Path) -> None:
    db.parent.mkdir(mode=0o700)
    db.write_bytes(b"this is not a database at all, not even close" * 100)
    os.chmod(db, 0o600)
    with pytest.raises(StoreError, match="not an agentlog SQLite database") as info:
        SqliteStore(db).list()
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


def test_the_file_is_created_on_first_use_with_private_modes(db: Path) -> None:
    store = SqliteStore(db)
    assert store.locate(HEADER) is None
    assert store.busy_timeout_ms == 5000 and store.journal_mode == "wal" and store.write_delay_ms == 200
    store.close()
    assert db.parent.is_dir() and not db.exists()  # the directory when opened (§5.2), the file at first use
    store = SqliteStore(db)
    store.list()
    assert db.stat().st_mode & 0o777 == 0o600
    assert db.parent.stat().st_mode & 0o777 == 0o700
    store.close()


@pytest.mark.parametrize("options", [{"busy_timeout_ms": -1}, {"busy_timeout_ms": 2**31},
                                     {"journal_mode": "wal2"}, {"write_delay_ms": 0}])
def test_bad_options_are_refused(db: Path, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        SqliteStore(db, **options)


def test_nul_in_the_path_is_refused() -> None:
    with pytest.raises(ValueError, match="NUL"):
        SqliteStore("/tmp/a\0b.db")


def test_unsafe_paths_are_refused(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    SqliteStore(real / "target.db").list()
    (real / "link.db").symlink_to(real / "target.db")
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o777)
    (real / "permissive.db").write_bytes(b"")
    os.chmod(real / "permissive.db", 0o644)
    (tmp_path / "file").write_bytes(b"")
    for path, match in ((tmp_path / "dir.db", "not a regular file"),
                        (real / "link.db", "not a regular file"),
                        (tmp_path / "link" / "x.db", "not a real directory"),
                        (loose / "x.db", "group- or world-writable"),
                        (real / "permissive.db", "chmod 600"),
                        (tmp_path / "file" / "x.db", "cannot create the database directory")):
        with pytest.raises(StoreError, match=match):  # when the store is opened (§5.2), not at first use
            SqliteStore(path)
        with pytest.raises(StoreError, match=match.replace("cannot create the database directory",
                                                           "not a real directory")):
            SqliteStore(path, create=False)  # a reader creates no directory either


def test_open_store_routes_sqlite_urls(tmp_path: Path) -> None:
    store = open_store(f"sqlite://{tmp_path / 'x' / 'a.db'}?write_delay_ms=7")
    assert isinstance(store, SqliteStore) and store.write_delay_ms == 7 and not store.memory
    stored(store, turns(1))
    store.close()
    memory = open_store("sqlite://:memory:")
    assert isinstance(memory, SqliteStore) and memory.memory
    memory.close()
    assert not Path(":memory:").exists()


def test_a_memory_database_locks_forks_and_deletes_in_process() -> None:
    store = SqliteStore(":memory:")
    stored(store, turns(2))
    live = store.open("s1")
    with pytest.raises(SessionLockedError, match=f"process {os.getpid()}"):
        store.open("s1")
    live.close()
    store.fork("s1", 8, "kid").close()
    assert [e.type for e in store.load("kid").events][-2:] == ["turn/end", "session/end-seed"]
    with pytest.raises(UsageError, match="fork children"):
        store.delete("s1")
    store.delete("kid")
    store.delete("s1")
    assert store.list() == []
    assert store.list_snapshots() == []
    store.close()


def test_unencodable_ids_are_refused_with_an_agentlog_error(stores: Stores) -> None:
    store = stores()
    with pytest.raises(InvalidHeaderError, match="valid Unicode"):
        store.create(SessionHeader(id="bad\ud800", created_at=1))
    with pytest.raises(InvalidHeaderError, match="valid Unicode"):
        store.read_from("bad\ud800", 0)
    store.close()
    with pytest.raises(UsageError, match="closed"):
        store.list()


# -- metadata rows (sqlite.spec 13-14) ---------------------------------------------------------------


def test_header_fields_and_unknown_keys_round_trip(stores: Stores) -> None:
    header = SessionHeader(id="h", created_at=7, cwd="/w", parent_session="p", seed_length=3,
                           origin="subagent", delegation_depth=2, agent_preset="coder",
                           extra={"futureKey": [1, {"a": None}]})
    stored(stores(), turns(1), header)
    assert stores().load("h").header == header
    assert stores().list() == [header]


@pytest.mark.parametrize(("column", "value", "error", "match"), [
    ("created_at", -1, SessionCorruptionError, "createdAt"),
    ("origin", "human", SessionCorruptionError, "origin"),
    ("delegation_depth", -2, SessionCorruptionError, "delegationDepth"),
    ("cwd", "relative/dir", SessionCorruptionError, "absolute"),
    ("incarnation", "not-a-uuid", SessionCorruptionError, "incarnation"),
    ("revision", -1, SessionCorruptionError, "revision"),
    ("extra", "[1]", SessionCorruptionError, "extra"),
    ("version", 1, SessionFormatUnsupportedError, "upgrade agentlog"),
    ("version", -1, SessionFormatUnsupportedError, "no upgrade path"),
])
def test_invalid_stored_metadata_rejects_list_and_load(db: Path, stores: Stores, column: str, value: Any,
                                                       error: type[Exception], match: str) -> None:
    stored(stores(), turns(1))
    execute(db, f"UPDATE sessions SET {column} = ?", value)
    with pytest.raises(error, match=match):
        stores().list()
    with pytest.raises(error, match=match):
        stores().load("s1")


def test_revisions_change_on_append_only_and_are_qualified_by_the_store(
    tmp_path: Path, stores: Stores,
) -> None:
    store = stores()
    log = turns(2)
    store.create(HEADER)
    store.append("s1", log.events[:9])
    first = store.list_snapshots()[0].revision
    store.inspect("s1")
    store.read_from("s1", 3)
    assert stores().list_snapshots()[0].revision == first
    store.append("s1", log.events[9:])
    assert store.list_snapshots()[0].revision != first
    other = SqliteStore(tmp_path / "other" / "o.db")
    stored(other, turns(2))
    assert other.list_snapshots()[0].revision != store.list_snapshots()[0].revision
    other.close()


# -- forks by reference, materialize, delete -----------------------------------------------------------


def test_fork_references_the_parent_prefix_and_copies_nothing(db: Path, stores: Stores) -> None:
    store = stores()
    log = turns(3)
    stored(store, log)
    rows = len(physical(db))
    child = store.fork("s1", 8, "kid")
    child.close()
    assert len(physical(db)) == rows + 1, "only the end-seed row is new"
    assert query(db, "SELECT base_length FROM sessions WHERE id = 'kid'") == [(9,)]
    events = stores().load("kid").events
    assert wire(list(events[:9])) == log.events[:9]
    assert [e.type for e in events[9:]] == ["session/end-seed"]
    for start in range(len(events) + 1):
        assert stores().read_from("kid", start).events == events[start:]


def test_fork_chains_read_through_every_ancestor(stores: Stores) -> None:
    store = stores()
    stored(store, turns(3))
    with store.fork("s1", 17, "kid", check_invariants=False) as kid:  # turn 9: any turn marks the kid
        kid.session.append("turn/start", {"turn": 9})
        kid.session.append("turn/end", {"turn": 9, "reason": {"kind": "completed"}})
    grandchild = store.fork("kid", 8, "grandkid")
    grandchild.close()
    expected = [*store.load("kid").events[:9], store.load("grandkid").events[-1]]
    fresh = stores()
    assert list(fresh.load("grandkid").events) == expected
    for start in range(len(expected) + 2):
        assert list(fresh.read_from("grandkid", start).events) == expected[start:]
    with pytest.raises(UsageError, match="fork children reference"):
        fresh.delete("kid")


def test_delete_is_refused_while_a_child_references_the_parent_until_materialize(
    db: Path, stores: Stores,
) -> None:
    store = stores()
    stored(store, turns(2))
    store.fork("s1", 8, "kid").close()
    before = list(store.load("kid").events)
    with pytest.raises(UsageError, match=r"fork children reference this session \(kid\)"):
        store.delete("s1")
    stores().materialize("kid")
    assert query(db, "SELECT base_key, base_length FROM sessions WHERE id = 'kid'") == [(None, None)]
    stores().delete("s1")
    assert [h.id for h in stores().list()] == ["kid"]
    assert list(stores().load("kid").events) == before
    assert query(db, "SELECT count(DISTINCT session) FROM events") == [(1,)]
    stores().materialize("kid")  # already a full copy: a no-op


def test_the_database_itself_refuses_to_delete_a_referenced_parent(stores: Stores) -> None:
    store = stores()
    stored(store, turns(2))
    store.fork("s1", 8, "kid").close()
    with pytest.raises(UsageError, match="fork children reference"):
        store._delete_stored("s1")
    assert [h.id for h in stores().list()] == ["s1", "kid"]


def test_delete_removes_rows_and_the_lock_file_then_the_id_is_free(
    db: Path, stores: Stores,
) -> None:
    store = stores()
    with store.start(HEADER) as live:
        live.session.append("turn/start", {"turn": 1})
    locks = Path(f"{db}.locks")
    assert len(list(locks.iterdir())) == 1
    store.delete("s1")
    assert physical(db) == []
    assert list(locks.iterdir()) == []
    stored(store, turns(1))


# -- locks across processes --------------------------------------------------------------------------


_HOLDER = """
import sys, time
from agentlog.store.sqlite.store import SqliteStore
live = SqliteStore(sys.argv[1]).start('held')
live.session.append('turn/start', {'turn': 1})
live.flush()
print('HELD', flush=True)
time.sleep(60)
"""


def _python(code: str, *args: str, **options: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=REPO, env=env, text=True, **options)


def test_a_second_process_is_locked_out_by_pid_and_a_killed_holder_releases(db: Path) -> None:
    with _python(_HOLDER, str(db), stdout=subprocess.PIPE) as holder:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "HELD"
        store = SqliteStore(db)
        with pytest.raises(SessionLockedError, match=f"open for writing by process {holder.pid}") as info:
            store.open("held")
        assert info.value.pid == holder.pid
        assert [e.type for e in store.read_from("held", 0).events] == ["turn/start"]
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with store.open("held") as live:
        assert [e.type for e in live.session.events] == ["turn/start", "turn/end", "session/end-seed"]
    store.close()


# -- fault injection: every sqlite3 error becomes an agentlog error ----------------------------------------


_READ_ONLY = """
import json, os, sys
from agentlog.store.sqlite.store import SqliteStore
import agentlog.store.writer
if len(sys.argv) > 2:
    os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[2]))
store = SqliteStore(sys.argv[1])

def flushed(live):
    live.session.append("turn/start", {"turn": 1})
    try:
        live.flush()
    finally:
        live.abandon()

result = {}
for name, call in (("list", lambda: store.list()), ("load", lambda: store.load("s1")),
                   ("read_from", lambda: store.read_from("s1", 2)),
                   ("append", lambda: store.append("s1", [{"type": "turn/start", "seq": 9, "time": 1,
                                                           "data": {"turn": 2}}])),
                   ("start", lambda: flushed(store.start("s2")))):
    try:
        call()
        result[name] = "ok"
    except Exception as exc:
        result[name] = [type(exc).__name__, type(exc.__cause__).__name__, getattr(exc, "code", None)]
print(json.dumps(result))
"""


@pytest.mark.parametrize("directory_writable", [True, False])
def test_a_read_only_database_reads_or_fails_with_agentlog_errors(directory_writable: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="agentlog-ro-"))
    try:
        directory = root / "d"
        store = SqliteStore(directory / "s.db")
        stored(store, turns(1))
        store.close()
        args = [str(directory / "s.db")]
        if os.geteuid() == 0:  # root ignores file modes: drop to nobody, owning the files
            args.append("65534")
            os.chmod(root, 0o755)
            for path in (directory, *directory.rglob("*")):
                os.chown(path, 65534, 65534)
        for path in directory.iterdir():
            if path.is_file():  # the database files; the writer-lock directory (which the
                os.chmod(path, 0o400)  # setup's direct append created) stays usable
        os.chmod(directory, 0o700 if directory_writable else 0o500)
        process = _python(_READ_ONLY, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        result = json.loads(out)
        refused = ["PersistenceIOError", "OperationalError", "SQLITE_READONLY"]
        if directory_writable:
            assert result == {"list": "ok", "load": "ok", "read_from": "ok", "append": refused,
                              "start": refused}
        else:  # WAL reads need the -shm file: nothing works, but every failure is an agentlog error
            assert all(value[0] == "PersistenceIOError" for value in result.values()), result
            assert result["load"][1] == "OperationalError"
    finally:
        os.chmod(root, 0o700)
        for path in root.rglob("*"):
            if path.is_dir():
                os.chmod(path, 0o700)
        shutil.rmtree(root)


@pytest.mark.parametrize("mode", ["wal", "delete"])
def test_a_database_locked_beyond_the_busy_timeout_is_a_persistence_io_error(db: Path, mode: str) -> None:
    store = SqliteStore(db, journal_mode=mode, busy_timeout_ms=100)
    log = turns(2)
    store.create(HEADER)
    store.append("s1", log.events[:9])
    blocker = raw(db)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        with pytest.raises(PersistenceIOError, match="busy_timeout_ms=100") as info:
            store.append("s1", log.events[9:])
        assert time.monotonic() - started >= 0.09
        assert info.value.code == "SQLITE_BUSY"
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        if mode == "wal":  # readers are never blocked by a writer
            assert len(store.read_from("s1", 0).events) == 9
            assert store.list() == [HEADER]
        else:
            other = SqliteStore(db, journal_mode=mode, busy_timeout_ms=50)
            with pytest.raises(PersistenceIOError, match="locked"):
                other.read_from("s1", 0)
            other.close()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    store.append("s1", log.events[9:])
    store.close()


def test_a_corrupted_page_is_session_corruption_with_the_sqlite_error_chained(db: Path) -> None:
    store = SqliteStore(db)
    log = LogBuilder()
    for number in range(1, 120):
        log.turn(number, chunks=2)
    stored(store, log)
    store.close()
    size = db.stat().st_size
    assert not Path(f"{db}-wal").exists(), "closing the last connection checkpoints the WAL"
    with open(db, "r+b") as handle:
        handle.seek(size // 2 // 4096 * 4096)
        handle.write(random.Random(3).randbytes(3 * 4096))
    store = SqliteStore(db)
    with pytest.raises(SessionCorruptionError, match="damaged") as info:
        store.load("s1")
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)
    assert info.value.code == "SQLITE_CORRUPT"
    store.close()


# -- threads and processes -----------------------------------------------------------------------------


def test_threads_read_while_a_live_session_writes_in_the_background(stores: Stores) -> None:
    store = stores()
    live = store.start(HEADER)
    failures: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                events = store.read_from("s1", 0).events if store.list() else ()
                assert [e.seq for e in events] == list(range(len(events)))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    for number in range(1, 30):
        live.session.append("turn/start", {"turn": number})
        live.session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})
        time.sleep(0.005)
    live.close()
    done.set()
    for thread in threads:
        thread.join()
    assert not failures, failures
    assert len(store.load("s1").events) == 58


_WRITER = """
import sys, time
from benchmarks.workload import record_workload
from agentlog.core.header import SessionHeader
from agentlog.store.urls import open_store

class Done(Exception):
    pass

store = open_store(sys.argv[1])
live = store.start(SessionHeader(id="w", created_at=1, cwd="/w"))
deadline = time.monotonic() + float(sys.argv[2])

def per_turn():
    live.flush()
    if time.monotonic() > deadline:
        raise Done

try:
    record_workload(live.session, int(sys.argv[3]), seed=7, flush=per_turn, checkpoint=live.flush)
except Done:
    pass
live.close()
print("DONE", live.durable_seq, flush=True)
"""
_CLOSERS = frozenset({"tool/result", "step/end", "turn/end"})


def _reader_sees_valid_prefixes(db: Path, seconds: float, max_turns: int) -> None:
    from benchmarks.workload import workload_events

    expected = [(event.type, event.data) for event in workload_events(max_turns, seed=7)]

    def check(events: tuple[Event, ...], start: int) -> None:
        assert [event.seq for event in events] == list(range(start, start + len(events)))
        assert [(event.type, event.data) for event in events] == expected[start : start + len(events)]

    url = f"sqlite://{db}?write_delay_ms=50"
    store = open_store(url)
    writer = _python(_WRITER, url, str(seconds), str(max_turns), stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE)
    rng = random.Random(9)
    reads = longest = 0
    try:
        while writer.poll() is None:
            if "w" not in [header.id for header in store.list()]:
                time.sleep(0.005)
                continue
            if reads % 5 == 0:  # a full read and an inspection now and then, seek reads in between
                whole = store.read_from("w", 0).events
                check(whole, 0)
                longest = max(longest, len(whole))
                inspected = store.inspect("w").events
                same = next((index for index, event in enumerate(inspected)
                             if (event.type, event.data) != expected[index]), len(inspected))
                assert same >= len(whole)
                assert {event.type for event in inspected[same:]} <= _CLOSERS
                check_invariants(list(inspected))
            start = rng.randrange(longest + 2)
            check(store.read_from("w", start).events, start)
            tail = max(0, longest - 50)
            check(store.read_from("w", tail).events, tail)
            reads += 1
        out, err = writer.communicate(timeout=60)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.communicate()
        store.close()
    assert writer.returncode == 0, err
    assert "locked" not in err
    assert reads >= 3 and longest > 0  # the reader really ran while the writer wrote
    final = SqliteStore(db)
    events = final.load("w").events
    final.close()
    assert len(events) == int(out.split()[-1]) >= longest
    check(events, 0)


def test_a_reader_process_always_sees_a_valid_prefix_of_a_writer_process(db: Path) -> None:
    _reader_sees_valid_prefixes(db, 2.0, 400)


@pytest.mark.slow
def test_a_reader_process_always_sees_a_valid_prefix_for_10_seconds(db: Path) -> None:
    _reader_sees_valid_prefixes(db, 10.0, 2000)


def test_sigkill_at_random_moments_loses_no_acknowledged_event(db: Path) -> None:
    from tests.store.test_crash import _check_recovered, _kill_at_random

    rng = random.Random(4)
    url = f"sqlite://{db}?write_delay_ms=50"
    for run in range(4):
        session_id = f"crash-{run}"
        acked = _kill_at_random(url, session_id, rng)
        store = open_store(url)
        exists = session_id in [header.id for header in store.list()]
        store.close()
        assert exists or acked == 0
        if exists:
            _check_recovered(url, session_id, acked)


# -- differential: JSONL-zstd and SQLite agree (differential.spec 2-3) -------------------------------------


def _random_log(rng: random.Random) -> list[Wire]:
    """A valid random log: runs of every chunk kind and length, scalar fallbacks, big payloads,
    provenance, tool calls, ignorable unknown events, and sometimes an interrupted last turn."""
    log = LogBuilder(time=rng.randrange(10**12))
    turn_count = rng.randint(1, 4)
    for number in range(1, turn_count + 1):
        last = number == turn_count
        log.add("turn/start", {"turn": number})
        for step in range(1, rng.randint(1, 3) + 1):
            log.add("step/start", {"turn": number, "step": step})
            if step == 1:
                log.user("q" * rng.choice([3, 300, 5000]), number)
            cited: list[int] = []
            for _ in range(rng.randint(0, 3)):
                kind = rng.choice(["text-delta", "reasoning-delta", "tool-call-delta",
                                   "tool-call-delta-unnamed", "usage", "off"])
                length = rng.choice([1, 2, 3, 4, 40, rng.randint(1, 60), 1030 if rng.random() < 0.05 else 5])
                for _ in range(length):
                    if kind == "usage":
                        chunk: dict[str, Any] = {"type": "usage", "outputTokens": rng.randrange(100)}
                    elif kind == "off":
                        chunk = {"type": "text-delta", "index": 0, "text": "x", "extra": True}
                    elif kind.startswith("tool-call"):
                        chunk = {"type": "tool-call-delta", "index": 1, "id": "c", "name": "read",
                                 "argumentsDelta": rng.choice(["{", "}", '"a"'])}
                        if kind.endswith("unnamed"):
                            del chunk["name"]
                    else:
                        chunk = {"type": kind, "index": 0, "text": rng.choice(["a", "é ", "\n", "z" * 20])}
                    log.time += rng.choice([0, 1, 30, -2])
                    added = log.add("assistant/chunk", {"turn": number, "step": step, "chunk": chunk})
                    cited.append(added["seq"])
                if rng.random() < 0.2:
                    log.add("future/thing", {"n": length}, ignorable=True)
            calls = (f"call-{number}-{step}",) if rng.random() < 0.5 else ()
            reply = log.assistant(number, step, "done" * rng.choice([1, 2000]), calls=calls)
            reply["sourceEventSeqs"] = rng.sample(cited, min(len(cited), rng.randint(0, 50)))
            if last and rng.random() < 0.3:
                return log.events  # crashed mid-step: repair closes it
            for call in calls:
                call_seq = log.tool_call(number, step, call)["seq"]
                if last and rng.random() < 0.3:
                    return log.events
                log.tool_result(number, step, call, call_seq)
            log.add("step/end", {"turn": number, "step": step})
        if not (last and rng.random() < 0.3):
            log.add("turn/end", {"turn": number, "reason": {"kind": "completed"}})
    return log.events


def _partition(rng: random.Random, count: int) -> list[tuple[int, int]]:
    cuts = sorted(rng.sample(range(1, count), min(count - 1, rng.randint(0, 6)))) if count > 1 else []
    bounds = [0, *cuts, count]
    return list(itertools.pairwise(bounds))


def _views(store: Store, starts: list[int]) -> tuple[Any, ...]:
    inspected = store.inspect("d")
    header = inspected.header
    return ((header.id, header.created_at, header.cwd), [e.to_json() for e in inspected.events],
            [[e.to_json() for e in store.read_from("d", start).events] for start in starts],
            [h.id for h in store.list()])


@pytest.mark.parametrize("seed", range(25))
def test_random_logs_and_partitions_agree_between_jsonl_zstd_and_sqlite(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    for round_ in range(4):
        events = _random_log(rng)
        Session.restore("d", events, SessionHeader(id="d", created_at=1))  # the generator makes valid logs
        header = SessionHeader(id="d", created_at=5, cwd="/d")
        jsonl = JsonlStore(tmp_path / f"jsonl-{round_}")
        sqlite = SqliteStore(tmp_path / f"sqlite-{round_}" / "s.db")
        batches = _partition(rng, len(events))
        for store in (jsonl, sqlite):
            store.create(header)
            for start, stop in batches:
                store.append("d", events[start:stop])
        count = len(events)
        starts = list(range(count + 2)) if count <= 60 else sorted({0, count - 1, count, count + 1,
                                                                     *rng.sample(range(count), 12)})
        revisions = [store.list_snapshots()[0].revision for store in (jsonl, sqlite)]
        assert _views(sqlite, starts) == _views(jsonl, starts)
        assert [store.list_snapshots()[0].revision for store in (jsonl, sqlite)] == revisions
        loaded = [[e.to_json() for e in store.load("d").events] for store in (jsonl, sqlite)]
        assert loaded[0] == loaded[1]
        for store in (jsonl, sqlite):
            store.close()
        reopened = (JsonlStore(jsonl.root), SqliteStore(sqlite.path))
        assert [[e.to_json() for e in store.load("d").events] for store in reopened] == loaded
        assert _views(reopened[1], starts[:5]) == _views(reopened[0], starts[:5])
        for store in reopened:
            store.close()
