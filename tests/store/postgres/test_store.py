"""PostgresStore against a real PostgreSQL server: schema versioning, rows, seeks, locks, tail, load.

Each test uses its own schema (``agentlog_test_<random>``) and drops it afterwards. Without a
server the tests skip; under CI they fail. The store contract suite also runs on this backend.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from benchmarks.workload import record_workload, workload_events

from agentlog import Session, SessionHeader
from agentlog.core.events import Event
from agentlog.core.invariants import check_invariants
from agentlog.core.repair import interrupted_turn_closers
from agentlog.errors import (
    ConcurrentWriterError,
    PersistenceIOError,
    SessionCorruptionError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
    UsageError,
)
from agentlog.store.postgres.rows import decode_physical_row, encode_rows, scan_rows
from agentlog.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from agentlog.store.postgres.store import PostgresStore
from agentlog.store.urls import open_store
from tests.contract.logs import LogBuilder, wire
from tests.store.pg_worker import Schema, crash_app, event_digest, finish, spawn

HEADER = SessionHeader(id="s1", created_at=1000, cwd="/work/project")


Spawn = Callable[..., "subprocess.Popen[bytes]"]


@pytest.fixture
def workers() -> Iterator[Spawn]:
    """Start worker processes; each is killed (if still running) and reaped at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        started.append(spawn(*args))
        return started[-1]

    yield start
    for process in started:
        finish(process)


def chunk(log: LogBuilder, text: str, *, turn: int = 1, step: int = 1) -> None:
    log.add("assistant/chunk", {"turn": turn, "step": step, "chunk": {"type": "text-delta", "index": 0,
                                                                      "text": text}})


def rows(schema: Schema, session_id: str = "s1") -> list[tuple[Any, ...]]:
    """(seq, type, ignorable, compressed, xmin) of every physical row, in seq order."""
    return schema.sql("SELECT seq, type, ignorable, data_zstd IS NOT NULL, xmin::text FROM {s}.events "
                      "WHERE session_id = %s ORDER BY seq", (session_id,))


def read_line(process: Any) -> list[str]:
    line = process.stdout.readline()
    assert line, f"worker exited early (code {process.poll()})"
    return line.decode().split()


# -- schema: first use, versioning, refusal --------------------------------------------------------


def test_migrations_are_numbered_one_to_n_without_gaps() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert MIGRATIONS[-1].version == SCHEMA_VERSION


def test_first_use_creates_a_versioned_schema_with_one_store_uuid(schema: Schema) -> None:
    store = schema.store()
    assert schema.sql("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema.name,)) == [(0,)]
    try:
        assert store.list() == []
    finally:
        store.close()
    [(version, store_id)] = schema.sql("SELECT schema_version, store_id FROM {s}.meta")
    assert version == SCHEMA_VERSION
    tables = schema.sql("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (schema.name,))
    assert tables == [("events",), ("meta",), ("search_text",), ("sessions",)]
    with schema.store() as again:
        again.create(HEADER)
        again.append("s1", [{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}])
        assert f"store:{store_id}:" in again.list_snapshots()[0].revision


def test_concurrent_first_use_from_many_stores_creates_the_schema_once(schema: Schema) -> None:
    errors: list[BaseException] = []
    stores = [schema.store(pool_min=0, pool_max=1) for _ in range(6)]
    barrier = threading.Barrier(len(stores))

    def first_use(store: PostgresStore) -> None:
        barrier.wait()
        try:
            store.list()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=first_use, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert errors == []
    assert len(schema.sql("SELECT store_id FROM {s}.meta")) == 1


@pytest.mark.parametrize("version", [SCHEMA_VERSION + 1, 99, 0])
def test_unknown_schema_version_is_refused(schema: Schema, version: int) -> None:
    with schema.store() as store:
        store.list()
    schema.sql("UPDATE {s}.meta SET schema_version = %s", (version,))
    with schema.store() as store, pytest.raises(SessionFormatUnsupportedError, match=f"version {version}"):
        store.list()
    if version > SCHEMA_VERSION:
        with schema.store() as store, pytest.raises(SessionFormatUnsupportedError, match="upgrade agentlog"):
            store.load("s1")


def test_schema_holding_foreign_tables_is_refused(schema: Schema) -> None:
    schema.sql("CREATE SCHEMA {s}")
    schema.sql("CREATE TABLE {s}.other (x int)")
    with schema.store() as store, pytest.raises(StoreError, match="no agentlog meta table"):
        store.list()


def test_meta_without_a_store_identity_is_refused(schema: Schema) -> None:
    with schema.store() as store:
        store.list()
    schema.sql("DELETE FROM {s}.meta")
    with schema.store() as store, pytest.raises(StoreError, match="no valid store identity"):
        store.list()


def test_unreachable_server_is_a_persistence_io_error_with_the_driver_error_chained() -> None:
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/test", schema="x")
    with pytest.raises(PersistenceIOError, match=r"127\.0\.0\.1:1/test") as info:
        store.list()
    assert isinstance(info.value.__cause__, psycopg.OperationalError)
    store.close()


def test_schema_dropped_under_an_open_store_surfaces_as_a_store_error(
    store: PostgresStore, schema: Schema
) -> None:
    _stored_turn(store)
    schema.drop()
    with pytest.raises(StoreError, match="schema is missing") as info:
        store.read_from("s1", 0)
    assert isinstance(info.value.__cause__, psycopg.errors.UndefinedTable)
    with pytest.raises(StoreError):
        store.list()


def test_open_store_url_routes_to_the_schema(schema: Schema) -> None:
    store = open_store(schema.url + "&write_delay_ms=7")
    try:
        assert isinstance(store, PostgresStore)
        assert (store.schema, store.write_delay_ms) == (schema.name, 7)
        store.list()
    finally:
        store.close()
    assert schema.sql("SELECT count(*) FROM {s}.meta") == [(1,)]


def test_stored_metadata_is_validated_on_list_and_load(store: PostgresStore, schema: Schema) -> None:
    log = LogBuilder()
    log.turn(1)
    store.create(SessionHeader(id="s1", created_at=5, cwd="/w", extra={"team": ["é", 1]}))  # type: ignore[arg-type]
    store.append("s1", log.events)
    assert store.load("s1").header.extra == {"team": ("é", 1)}
    schema.sql("UPDATE {s}.sessions SET origin = 'robot'")
    with pytest.raises(SessionCorruptionError, match="origin"):
        store.list()
    schema.sql("UPDATE {s}.sessions SET origin = NULL, version = 1")
    with pytest.raises(SessionFormatUnsupportedError, match="log format v1"):
        store.load("s1")


# -- physical rows ---------------------------------------------------------------------------------


def test_batches_pack_chunk_runs_and_never_rewrite_earlier_rows(store: PostgresStore, schema: Schema) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    for index in range(102):
        chunk(log, f"t{index}")
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store.create(HEADER)
    for start, stop in ((0, 3), (3, 4), (4, 104), (104, 106)):
        store.append("s1", log.events[start:stop])
        if stop == 4:
            before = rows(schema)
    after = rows(schema)
    assert [(seq, kind, ignorable) for seq, kind, ignorable, _, _ in after] == [
        (0, "turn/start", None), (1, "step/start", None), (2, "assistant/chunk", None),
        (3, "assistant/chunk", None), (4, "text-chunks", False), (104, "step/end", None),
        (105, "turn/end", None),
    ]
    assert after[:4] == before
    assert wire(list(store.load("s1").events)) == log.events
    for start in (0, 2, 3, 4, 5, 50, 103, 104, 105, 106, 107):
        assert wire(list(store.read_from("s1", start).events)) == log.events[start:], start


def test_rows_respect_member_and_byte_caps_and_large_data_is_compressed(
    store: PostgresStore, schema: Schema
) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    for index in range(1027):
        chunk(log, str(index))
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("step/start", {"turn": 1, "step": 2})
    for index in range(4):
        chunk(log, f"{index}" * 300_000, step=2)
    log.add("step/end", {"turn": 1, "step": 2})
    log.add("step/start", {"turn": 1, "step": 3})
    for index in range(3):
        chunk(log, chr(0x4E00 + index) * 140_000, step=3)
    log.add("step/end", {"turn": 1, "step": 3})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store.create(HEADER)
    store.append("s1", log.events)
    stored = rows(schema)
    packed = [(seq, compressed) for seq, _, ignorable, compressed, _ in stored if ignorable is False]
    assert packed == [(2, True), (1026, False), (1031, True)]  # 1,024 + 3 members (< 4 KiB: text); 3 x 300 KB
    scalar = [seq for seq, kind, ignorable, _, _ in stored if kind == "assistant/chunk" and ignorable is None]
    assert scalar == [1034, 1037, 1038, 1039]  # the 4th 300 KB member; 3 x 420 KB cannot share a row
    sizes = schema.sql("SELECT max(octet_length(data)) FROM {s}.events WHERE ignorable = false")
    assert sizes[0][0] <= 1_048_576
    assert store.load("s1").events == tuple(Event.from_wire(e) for e in log.events)


def test_marker_order_unicode_and_deep_data_round_trip_byte_for_byte(store: PostgresStore) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.assistant(1, 1, "héllo \u2028 😀", calls=("call-1",))
    result = log.tool_result(1, 1, "call-1", 2)
    result.pop("sourceEventSeqs")
    result["sourceEventSeqs"] = [2]  # surfaceOp first, as DSH's repair writes it
    deep: Any = "bottom"
    for _ in range(3000):
        deep = [deep]
    log.add("x/deep", {"value": deep}, ignorable=True)
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    expected = [Event.from_wire(e).to_json() for e in log.events]
    store.create(HEADER)
    store.append("s1", log.events)
    assert [e.to_json() for e in store.load("s1").events] == expected
    assert [e.to_json() for e in store.read_from("s1", 3).events] == expected[3:]


def test_rows_round_trip_and_malformed_rows_are_refused_without_a_server() -> None:
    events = workload_events(2)
    encoded = encode_rows(events)
    assert len(encoded) < len(events) / 5
    decoded = [event for row in encoded for event in decode_physical_row(row)]
    assert [e.to_json() for e in decoded] == [e.to_json() for e in events]
    packed = next(row for row in encoded if row[8] is False)
    two = json.loads(packed[3])
    two["texts"], two["dt"] = two["texts"][:2], two["dt"][:1]
    for bad in ((*packed[:3], json.dumps(two), *packed[4:]),  # 2 members: below the row minimum
                (*packed[:6], '"append"', *packed[7:]),  # a packed row carries no surface op
                (*packed[:3], None, None, *packed[5:])):  # no data at all
        with pytest.raises((ValueError, StoreError)):
            decode_physical_row(bad)
    scan = scan_rows([*encoded[:-1], (*encoded[-1][:3], "{", *encoded[-1][4:])], 0, len(events),
                     tolerate_torn=True)
    assert scan.torn == len(events) - 1 and len(scan.events) == len(events) - 1


def test_read_from_matches_the_loaded_log_at_every_seq(store: PostgresStore) -> None:
    live = store.start(HEADER)
    record_workload(live.session, 3, flush=live.flush)
    live.close()
    events = store.load("s1").events
    assert len(events) == 3 * 181 + 1
    for start in range(len(events) + 2):
        assert store.read_from("s1", start).events == events[start:], start


# -- crash repair: torn tails, stale repairs and writers -------------------------------------------


def _open_turn(store: PostgresStore) -> LogBuilder:
    log = LogBuilder()
    log.turn(1)
    log.add("turn/start", {"turn": 2})
    log.add("step/start", {"turn": 2, "step": 1})
    for index in range(5):
        chunk(log, f"c{index}", turn=2)
    store.create(HEADER)
    store.append("s1", log.events)
    return log


def test_defective_row_after_the_last_turn_end_is_a_torn_tail_repaired_by_load(
    store: PostgresStore, schema: Schema
) -> None:
    log = _open_turn(store)
    torn_seq = len(log.events) - 5
    schema.sql("UPDATE {s}.events SET data = '{\"turn\":' WHERE seq = %s", (torn_seq,))
    revision = store.list_snapshots()[0].revision
    before = rows(schema)
    inspected = store.inspect("s1")
    assert [e.type for e in inspected.events[torn_seq:]] == ["step/end", "turn/end"]
    assert store.list_snapshots()[0].revision == revision
    assert rows(schema) == before
    loaded = store.load("s1")
    assert loaded.events == inspected.events
    assert store.list_snapshots()[0].revision != revision
    assert [seq for seq, *_ in rows(schema)][-3:] == [torn_seq - 1, torn_seq, torn_seq + 1]
    with schema.store() as fresh:
        assert fresh.load("s1").events == loaded.events


def test_defective_row_before_the_last_turn_end_is_corruption(store: PostgresStore, schema: Schema) -> None:
    _open_turn(store)
    schema.sql("UPDATE {s}.events SET surface_op = 'nonsense' WHERE seq = 2")
    with pytest.raises(SessionCorruptionError, match="invalid committed physical row at seq 2") as info:
        store.load("s1")
    assert info.value.session_id == "s1"


def test_stale_repair_is_refused_and_newer_rows_stay(store: PostgresStore, schema: Schema) -> None:
    log = _open_turn(store)
    schema.sql("UPDATE {s}.events SET data = 'x' WHERE seq = %s", (len(log.events) - 5,))
    stale = store._load_stored("s1")
    assert stale is not None and stale.torn is not None
    with schema.store() as other:
        repaired = other.load("s1").events
    closers = interrupted_turn_closers(stale.events)
    with pytest.raises(ConcurrentWriterError, match="repair is stale"):
        store._commit_repair(stale.header, stale.torn, closers)
    assert store.load("s1").events == repaired


def test_stale_writer_gets_the_stored_next_seq_and_then_recovers(
    store: PostgresStore, schema: Schema
) -> None:
    log = LogBuilder()
    log.turn(1)
    store.create(HEADER)
    store.append("s1", log.events)
    later = LogBuilder(start=len(log.events), time=5000)
    later.turn(2)
    with schema.store() as other:
        other.append("s1", later.events)
    mine = LogBuilder(start=len(log.events), time=9000)
    mine.turn(2)
    stored_next = len(log.events) + len(later.events)
    with pytest.raises(ConcurrentWriterError, match=f"stored next seq is {stored_next}"):
        store.append("s1", mine.events)
    assert wire(list(store.load("s1").events)) == log.events + later.events
    again = LogBuilder(start=len(log.events) + len(later.events), time=9000)
    again.turn(3)
    store.append("s1", again.events)
    assert len(store.load("s1").events) == len(log.events) + len(later.events) + len(again.events)


def test_append_to_a_session_deleted_and_recreated_elsewhere_is_refused(
    store: PostgresStore, schema: Schema
) -> None:
    log = LogBuilder()
    log.turn(1)
    store.create(HEADER)
    store.append("s1", log.events[:3])
    revision = store.list_snapshots()[0].revision
    with schema.store() as other:
        other.delete("s1")
        other.create(HEADER)
        other.append("s1", log.events[:3])
        assert other.list_snapshots()[0].revision != revision
    with pytest.raises(ConcurrentWriterError, match="re-created"):
        store.append("s1", log.events[3:])


# -- forks by reference, delete --------------------------------------------------------------------


def test_fork_references_the_parent_prefix_and_blocks_its_deletion(
    store: PostgresStore, schema: Schema
) -> None:
    live = store.start(HEADER)
    record_workload(live.session, 4, flush=live.flush)
    live.close()
    parent = store.load("s1").events
    boundary = next(e.seq for e in parent if e.type == "turn/end" and e.data["turn"] == 2)
    child = store.fork("s1", boundary, "kid")
    assert all(seq > boundary for seq, *_ in rows(schema, "kid"))  # no prefix row is copied
    child.close()
    assert [seq for seq, *_ in rows(schema, "kid")] == [boundary + 1]
    kid = store.load("kid").events
    assert kid[: boundary + 1] == parent[: boundary + 1]
    assert kid[-1].type == "session/end-seed"
    grandchild = store.fork("kid", None, "grandkid")
    grandchild.session.append("turn/start", {"turn": 3})
    grandchild.session.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    grandchild.close()
    deep = store.load("grandkid").events
    assert deep[: len(kid)] == kid
    for start in (0, boundary, boundary + 1, boundary + 2, len(deep) - 1, len(deep)):
        assert store.read_from("grandkid", start).events == deep[start:]
    with pytest.raises(UsageError, match="kid"):
        store.delete("s1")
    store.materialize("kid")
    assert len(rows(schema, "kid")) > 1
    store.delete("s1")
    assert store.load("kid").events == kid
    assert store.load("grandkid").events == deep


def test_delete_removes_rows_and_notifies_followers(store: PostgresStore, schema: Schema) -> None:
    log = LogBuilder()
    log.turn(1)
    store.create(HEADER)
    store.append("s1", log.events)
    follower = store.tail("s1", 0, idle_timeout=5, poll_interval=5)
    assert [next(follower).seq for _ in log.events] == list(range(len(log.events)))
    store.delete("s1")
    with pytest.raises(SessionNotFoundError):
        next(follower)
    assert rows(schema) == []


# -- writer exclusivity across processes -----------------------------------------------------------


def _stored_turn(store: PostgresStore) -> None:
    log = LogBuilder()
    log.turn(1)
    store.create(HEADER)
    store.append("s1", log.events)


def _backends_gone(schema: Schema, application: str, within: float = 10.0) -> None:
    """Wait until no server backend of ``application`` is left (a killed client's backend may
    still finish the statement it was running, and commit it)."""
    deadline = time.monotonic() + within
    query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
    while schema.sql(query, (application,))[0][0]:
        assert time.monotonic() < deadline, f"backends of {application!r} still running"
        time.sleep(0.01)


def _released(store: PostgresStore, session_id: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            store.open(session_id).close()
            return
        except SessionLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_second_writer_is_locked_out_naming_the_holder_until_it_dies(
    store: PostgresStore, schema: Schema, workers: Spawn
) -> None:
    _stored_turn(store)
    holder = workers("hold", schema.dsn, schema.name, "s1")
    assert read_line(holder) == ["READY", str(holder.pid)]
    with pytest.raises(SessionLockedError, match=f"process {holder.pid}") as info:
        store.open("s1")
    assert info.value.pid == holder.pid
    assert "PostgreSQL backend" in str(info.value)
    with pytest.raises(SessionLockedError):
        store.append("s1", [{"type": "turn/start", "seq": 9, "time": 1, "data": {"turn": 2}}])
    assert len(store.load("s1").events) == 9
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    _released(store, "s1")


def test_cold_repair_of_a_turn_live_in_another_process_is_refused(
    store: PostgresStore, schema: Schema, workers: Spawn
) -> None:
    _stored_turn(store)
    holder = workers("hold", schema.dsn, schema.name, "s1", "open-turn")
    assert read_line(holder)[0] == "READY"
    revision = store.list_snapshots()[0].revision
    with pytest.raises(SessionLockedError, match="cannot repair"):
        store.load("s1")
    assert store.inspect("s1").events[-1].data["reason"] == {"kind": "interrupted"}
    assert store.list_snapshots()[0].revision == revision
    holder.stdin.write(b"\n")  # type: ignore[union-attr]
    holder.stdin.flush()  # type: ignore[union-attr]
    assert read_line(holder) == ["CLOSED"]


def _race(schema: Schema, spawn_worker: Spawn, command: str, *args: str) -> tuple[list[list[str]], list[Any]]:
    workers = [spawn_worker(command, schema.dsn, schema.name, "s1", *(args or (f"w{n}",))) for n in range(2)]
    for worker in workers:
        assert read_line(worker) == ["READY"]
    for worker in workers:
        worker.stdin.write(b"GO\n")
        worker.stdin.flush()
    return [read_line(worker) for worker in workers], workers


def test_two_processes_racing_to_open_one_session_exactly_one_writes(
    store: PostgresStore, schema: Schema, workers: Spawn
) -> None:
    _stored_turn(store)
    outcomes, racers = _race(schema, workers, "race-open", "2")
    assert sorted(o[0] for o in outcomes) == ["LOST", "WON"]
    assert ["LOST", "SessionLockedError"] in outcomes
    winner = next(w for w, o in zip(racers, outcomes, strict=True) if o[0] == "WON")
    durable = int(next(o for o in outcomes if o[0] == "WON")[1])
    winner.stdin.write(b"\n")
    winner.stdin.flush()
    for racer in racers:
        assert racer.wait(timeout=30) == 0
    events = store.load("s1").events
    assert len(events) == durable == 9 + 1 + 1 + 2 * 181  # + end-seed, request header, 2 turns
    assert [e.seq for e in events] == list(range(durable))
    check_invariants(list(events))


def test_two_processes_racing_to_append_the_same_seqs_exactly_one_wins(
    store: PostgresStore, schema: Schema, workers: Spawn
) -> None:
    _stored_turn(store)
    outcomes, racers = _race(schema, workers, "race-append")
    for racer in racers:
        assert racer.wait(timeout=30) == 0
    assert sorted(o[0] for o in outcomes) == ["LOST", "WON"]
    lost = next(o for o in outcomes if o[0] == "LOST")
    assert lost[1] in ("SessionLockedError", "ConcurrentWriterError")
    winner = f"w{[o[0] for o in outcomes].index('WON')}"
    events = store.load("s1").events
    assert [e.type for e in events[9:]] == ["session/end-seed", "turn/start", "turn/end"]
    assert [e.seq for e in events] == list(range(12))
    assert events[10].data["tag"] == winner


def test_writer_killed_mid_batch_leaves_a_session_that_loads_repairs_and_resumes(
    store: PostgresStore, schema: Schema, workers: Spawn
) -> None:
    turns = 40
    expected = workload_events(turns, seed=7)
    rng = random.Random(1)
    for attempt in range(3):
        sid = f"crash-{attempt}"
        worker = workers("crash", schema.dsn, schema.name, sid, str(turns))
        acked = 0
        assert read_line(worker) == ["START"]
        for _ in range(rng.randrange(3, 250)):  # a checkpoint every few events: the kill lands mid-run
            message = read_line(worker)
            assert message[0] == "ACK"
            acked = int(message[1])
        time.sleep(rng.uniform(0.0, 0.004))
        worker.send_signal(signal.SIGKILL)
        assert worker.stdout is not None
        for line in worker.stdout.read().split(b"\n"):
            if line.startswith(b"ACK "):
                acked = max(acked, int(line.split()[1]))
        worker.wait()
        assert acked > 0
        _backends_gone(schema, crash_app(sid))  # an append in flight at the kill may still commit
        loaded = store.load(sid).events
        assert len(loaded) >= acked
        for event, reference in zip(loaded[:acked], expected[:acked], strict=True):
            assert (event.type, event.data) == (reference.type, reference.data)
        check_invariants(list(loaded))
        Session.restore(sid, loaded, store.load(sid).header)
        _released(store, sid)
        with store.open(sid) as live:
            record_workload(live.session, 1, seed=8)
        check_invariants(list(store.load(sid).events))


# -- following a live session ----------------------------------------------------------------------


def test_tail_in_another_process_sees_every_committed_event_once_in_order(
    store: PostgresStore, schema: Schema, workers: Spawn
) -> None:
    turns = 10
    live = store.start(HEADER)
    followers: list[subprocess.Popen[bytes]] = []

    def durable_turn() -> None:
        live.flush()
        if not followers:  # the session exists now: follow it from seq 0 while it grows
            followers.append(workers("follow", schema.dsn, schema.name, "s1", str(181 * turns + 1)))
            assert read_line(followers[0]) == ["READY"]

    record_workload(live.session, turns, flush=durable_turn)
    live.close()
    follower = followers[0]
    message = follower.stdout.readline().decode()  # type: ignore[union-attr]
    assert message.startswith("EVENTS ")
    assert follower.wait(timeout=30) == 0
    seen = json.loads(message.split(" ", 1)[1])
    events = store.load("s1").events
    assert [seq for seq, _ in seen] == list(range(len(events)))
    assert [digest for _, digest in seen] == [event_digest(e) for e in events]


def test_atail_follows_many_tiny_commits_without_missing_or_repeating(store: PostgresStore) -> None:
    log = LogBuilder()
    for turn in range(1, 41):
        log.turn(turn)
    store.create(HEADER)
    store.append("s1", log.events[:1])

    def write() -> None:
        for event in log.events[1:]:
            store.append("s1", [event])

    async def follow() -> list[int]:
        seen: list[int] = []
        writer = asyncio.create_task(asyncio.to_thread(write))
        async for event in store.atail("s1", 0, idle_timeout=10, poll_interval=30):
            seen.append(event.seq)
            if len(seen) == len(log.events):
                break
        await writer
        return seen

    assert asyncio.run(follow()) == list(range(len(log.events)))


def test_tail_from_a_seq_ends_after_idle_timeout_and_refuses_unknown_sessions(store: PostgresStore) -> None:
    _stored_turn(store)
    started = time.monotonic()
    assert [e.seq for e in store.tail("s1", 5, idle_timeout=0.2)] == [5, 6, 7, 8]
    assert time.monotonic() - started < 5
    with pytest.raises(SessionNotFoundError):
        next(store.tail("nope"))


# -- load and concurrency --------------------------------------------------------------------------


@pytest.mark.parametrize(("processes", "sessions"), [
    pytest.param(4, 3, id="4x3"),
    pytest.param(8, 25, id="8x25", marks=pytest.mark.slow),
])
def test_concurrent_recorder_processes_leave_every_session_complete(
    schema: Schema, workers: Spawn, processes: int, sessions: int
) -> None:
    turns = 20
    recorders = [workers("record", schema.dsn, schema.name, f"p{n}", str(sessions), str(turns))
                 for n in range(processes)]
    for worker in recorders:
        out, _ = worker.communicate(timeout=600)
        assert worker.returncode == 0 and out.split() == [b"DONE", str(sessions).encode()]
    references = {seed: workload_events(turns, seed=seed) for seed in range(sessions)}
    with schema.store() as store:
        snapshots = store.list_snapshots()
        assert len(snapshots) == processes * sessions
        for n in range(processes):
            for index in range(sessions):
                events = store.load(f"p{n}-{index}").events
                reference = references[index]
                assert len(events) == len(reference) == 181 * turns + 1
                assert [(e.type, e.data) for e in events] == [(e.type, e.data) for e in reference]
                check_invariants(list(events))
        assert store.list_snapshots() == snapshots


def test_many_threads_of_one_store_write_distinct_sessions(store: PostgresStore) -> None:
    def work(index: int) -> None:
        with store.start(SessionHeader(id=f"t{index}", cwd="/w")) as live:
            record_workload(live.session, 2, seed=index, flush=live.flush)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(h.id for h in store.list()) == [f"t{n}" for n in range(6)]
    assert all(len(store.load(f"t{n}").events) == 363 for n in range(6))

