"""Group commit: concurrent flushes of one store's live sessions share a commit, and each batch
still succeeds or fails alone (real SQLite files, real PostgreSQL, real SIGKILLed processes)."""

from __future__ import annotations

import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from benchmarks.workload import workload_events

from agentlog import ConcurrentWriterError, Session, WriteFailedError
from agentlog.core.invariants import check_invariants
from agentlog.core.jsonvalue import frozen_dict
from agentlog.store.group_commit import GroupCommit, GroupCommitStore, Pending
from agentlog.store.urls import open_store
from agentlog.store.writer import LiveSession
from tests.store.killing import kill_after_start
from tests.store.pg_worker import Schema

LONE = "\ud800"


@dataclass
class Backend:
    """A store factory, its URL, and a way to tamper with the session's rows from outside."""

    url: str
    open: Callable[[], GroupCommitStore]
    add_row_at_next_seq: Callable[[str], None]


def _sqlite(tmp: Path) -> Backend:
    path = tmp / "sessions.db"

    def tamper(session_id: str) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute("INSERT INTO events SELECT session, seq + 1, type, time, data, source_event_seqs, "
                         "surface_op, ignorable, op_first, digest FROM events WHERE session = (SELECT key "
                         "FROM sessions WHERE id = ?) ORDER BY seq DESC LIMIT 1", (session_id,))

    def factory() -> GroupCommitStore:
        from agentlog.store.sqlite.store import SqliteStore

        return SqliteStore(path, write_delay_ms=10_000)

    return Backend(f"sqlite://{path}", factory, tamper)


def _postgres(schema: Schema) -> Backend:
    def tamper(session_id: str) -> None:
        schema.sql("INSERT INTO {s}.events SELECT session_id, seq + 1, type, time, data, data_zstd, "
                   "source_event_seqs, surface_op, op_first, ignorable FROM {s}.events WHERE session_id = %s "
                   "ORDER BY seq DESC LIMIT 1", (session_id,))

    return Backend(schema.url, lambda: schema.store(write_delay_ms=10_000, pool_min=0, pool_max=4), tamper)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield _sqlite(tmp_path)
        return
    schema = Schema.new()
    try:
        yield _postgres(schema)
    finally:
        schema.drop()


@contextmanager
def held(group: GroupCommit, waiting: int) -> Iterator[None]:
    """Keep the group writer busy until ``waiting`` batches queue behind it, then let them go."""
    with group._cond:
        group._leaders = group._parallel
    try:
        yield
        deadline = time.monotonic() + 20
        while len(group._queue) < waiting:
            assert time.monotonic() < deadline, f"only {len(group._queue)} of {waiting} batches queued"
            time.sleep(0.005)
    finally:
        with group._cond:
            group._leaders = 0
            group._cond.notify_all()


def flush_all(lives: list[LiveSession]) -> dict[str, BaseException | None]:
    """Flush every live session from its own thread at once; each one's outcome by id."""
    outcomes: dict[str, BaseException | None] = {}

    def flush(live: LiveSession) -> None:
        try:
            live.flush()
            outcomes[live.id] = None
        except BaseException as exc:
            outcomes[live.id] = exc

    threads = [threading.Thread(target=flush, args=(live,)) for live in lives]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return outcomes


def flush_as_one_group(store: GroupCommitStore, lives: list[LiveSession]) -> dict[str, BaseException | None]:
    """Flush every session from its own thread while the group writer is held, so that all their
    batches queue and are then written as one group; each one's outcome by id."""
    outcomes: dict[str, BaseException | None] = {}
    with held(store.group_commit, waiting=len(lives)):
        runner = threading.Thread(target=lambda: outcomes.update(flush_all(lives)))
        runner.start()
    runner.join(30)
    return outcomes


def titled(store: GroupCommitStore, count: int) -> list[LiveSession]:
    """``count`` live sessions with one durable title each."""
    lives = []
    for index in range(count):
        live = store.start(f"s{index}")
        live.session.append("session/title", {"title": f"first {index}"})
        live.flush()
        lives.append(live)
    return lives


def titles(backend: Backend, session_id: str) -> list[str]:
    store = backend.open()
    try:
        return [event.data["title"] for event in store.load(session_id).events]
    finally:
        store.close()


def test_flushes_queued_behind_a_commit_are_written_as_one_group(backend: Backend) -> None:
    store = backend.open()
    lives = titled(store, 4)
    for live in lives:
        live.session.append("session/title", {"title": f"second {live.id}"})
    before = (store.group_commit.groups, store.group_commit.batches)
    outcomes = flush_as_one_group(store, lives)
    assert outcomes == {live.id: None for live in lives}
    assert (store.group_commit.groups - before[0], store.group_commit.batches - before[1]) == (1, 4)
    for live in lives:
        assert live.durable_seq == 2
    store.close()
    for index in range(4):
        assert titles(backend, f"s{index}") == [f"first {index}", f"second s{index}"]


def test_a_batch_that_cannot_be_encoded_fails_alone_in_its_group(backend: Backend) -> None:
    store = backend.open()
    lives = titled(store, 4)
    for live in lives:
        bad = live.id == "s2"
        data: Any = frozen_dict({"title": f"bad{LONE}"}) if bad else {"title": f"second {live.id}"}
        live.session.append("session/title", data)
    outcomes = flush_as_one_group(store, lives)
    poisoned = outcomes.pop("s2")
    assert isinstance(poisoned, WriteFailedError) and poisoned.session_id == "s2" and poisoned.seq == 1
    assert outcomes == {"s0": None, "s1": None, "s3": None}
    with pytest.raises(WriteFailedError):
        lives[2].close()
    store.close()
    assert titles(backend, "s2") == ["first 2"]
    for index in (0, 1, 3):
        assert titles(backend, f"s{index}") == [f"first {index}", f"second s{index}"]


def test_a_batch_the_database_refuses_fails_alone_in_its_group(backend: Backend) -> None:
    """Another writer stored seq 1 of s1 behind the live session's back: only s1's batch is refused
    (SQLite: rolled back to its savepoint; PostgreSQL: the group's transaction aborts and each
    batch is written alone), the other sessions' batches commit."""
    store = backend.open()
    lives = titled(store, 3)
    for live in lives:
        live.session.append("session/title", {"title": f"second {live.id}"})
    backend.add_row_at_next_seq("s1")
    outcomes = flush_as_one_group(store, lives)
    refused = outcomes.pop("s1")
    assert isinstance(refused, ConcurrentWriterError) and refused.session_id == "s1", refused
    assert outcomes == {"s0": None, "s2": None}
    assert [live.durable_seq for live in lives] == [2, 1, 2]
    lives[1].abandon()
    store.close()
    for index in (0, 2):
        assert titles(backend, f"s{index}") == [f"first {index}", f"second s{index}"]


def test_a_lone_flush_is_written_at_once_as_a_group_of_one(backend: Backend) -> None:
    store = backend.open()
    live = store.start("alone")
    live.session.append("session/title", {"title": "t"})
    live.flush()
    assert (store.group_commit.groups, store.group_commit.batches) == (1, 1)
    store.close()
    assert titles(backend, "alone") == ["t"]


def test_a_group_writer_that_raises_fails_every_batch_with_its_own_error() -> None:
    """The backend failing as a whole (say, the commit) gives each waiting flush a copy of the
    error located at its own session, and lets the next group form."""
    calls: list[int] = []

    def write(group: Any) -> None:
        calls.append(len(group))
        if len(calls) == 1:
            raise ConcurrentWriterError("the commit failed")

    group = GroupCommit(write)
    from agentlog.core.header import SessionHeader

    events = workload_events(1)
    items = [Pending(SessionHeader(id=f"g{index}"), events[index:index + 1], materialize=False)
             for index in range(3)]
    errors: list[BaseException | None] = [None] * 3
    with held(group, waiting=3):
        def submit(index: int) -> None:
            try:
                group.submit(items[index])
            except BaseException as exc:
                errors[index] = exc
        threads = [threading.Thread(target=submit, args=(index,)) for index in range(3)]
        for thread in threads:
            thread.start()
    for thread in threads:
        thread.join(10)
    assert calls == [3]
    assert [getattr(error, "session_id", None) for error in errors] == ["g0", "g1", "g2"]
    assert len({id(error) for error in errors}) == 3
    group.submit(Pending(SessionHeader(id="after"), events[:1], materialize=False))
    assert calls == [3, 1]


# -- SIGKILL in the middle of group commits ---------------------------------------------------------

SESSIONS = 24
TURNS = 6


def _kill_mid_groups(url: str, delay: float) -> tuple[dict[str, int], bool]:
    """Run the worker, SIGKILL it ``delay`` s after START; the highest ack per session and whether
    any ack showed a group of more than one batch."""
    acked: dict[str, int] = {}
    grouped = False

    def take(line: bytes) -> None:
        nonlocal grouped
        if line.startswith(b"ACK "):
            _, sid, seq, groups, batches = line.decode().split()
            acked[sid] = max(acked.get(sid, 0), int(seq))
            grouped = grouped or int(batches) > int(groups)

    kill_after_start([sys.executable, "-m", "tests.store.group_worker", url, str(SESSIONS), str(TURNS)],
                     delay, take)
    return acked, grouped


def test_sigkill_mid_group_commit_loses_no_acknowledged_batch_and_tears_none(backend: Backend) -> None:
    acked, grouped = _kill_mid_groups(backend.url, delay=1.5)
    assert acked, "the worker acknowledged nothing before the kill"
    assert grouped, "no flush was grouped with another before the kill"
    store = open_store(backend.url)
    try:
        for index in range(SESSIONS):
            sid = f"group-{index}"
            if sid not in acked:
                continue
            loaded = store.load(sid)
            events = list(loaded.events)
            assert len(events) >= acked[sid], f"{sid}: lost acknowledged events ({len(events)}, {acked[sid]})"
            expected = workload_events(TURNS, seed=index)
            for event, want in zip(events[:acked[sid]], expected, strict=False):
                assert (event.type, event.data) == (want.type, want.data), f"{sid} seq {event.seq} differs"
            check_invariants(events)
            Session.restore(sid, events, loaded.header).derive_messages()
    finally:
        store.close()


def test_up_to_parallel_groups_are_written_at_once_and_later_batches_queue_behind_them() -> None:
    """PostgreSQL commits on several connections at once: two writers, a third flush waits and
    then leads the batches queued meanwhile as one group."""
    from agentlog.core.header import SessionHeader

    release = threading.Event()
    in_flight: list[int] = []
    sizes: list[int] = []
    guard = threading.Lock()

    def write(group: Any) -> None:
        with guard:
            in_flight.append(1)
            sizes.append(len(group))
        release.wait(10)

    commit = GroupCommit(write, parallel=2)
    events = workload_events(1)
    threads = [threading.Thread(target=commit.submit,
                                args=(Pending(SessionHeader(id=f"p{index}"), events[:1], materialize=False),))
               for index in range(5)]
    threads[0].start()
    threads[1].start()
    deadline = time.monotonic() + 10
    while len(in_flight) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    for thread in threads[2:]:
        thread.start()
    while len(commit._queue) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    assert len(in_flight) == 2  # both writers busy: the later three wait in the queue
    release.set()
    for thread in threads:
        thread.join(10)
    assert sorted(sizes) == [1, 1, 3] and (commit.groups, commit.batches) == (3, 5)
