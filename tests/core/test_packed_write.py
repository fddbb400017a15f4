"""Packed stream deltas on the write path: a recording keeps its text and reasoning deltas in
open ``ChunkRun``s, and everything a reader, an observer, the invariant checker or a store sees
is what the per-event path gives (the same events, the same stored bytes)."""

from __future__ import annotations

import itertools
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.workload import START_TIME, record_workload
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentlog import Event, InvariantError, Recorder, Session, SessionHeader, UsageError
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER
from agentlog.core.packed import ChunkRun, LogSlice
from agentlog.core.search_text import indexed_texts
from agentlog.store.codec import SQLITE_MAX_BYTES, encode_batch, pack_chunk_runs
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.sqlite.store import SqliteStore

HEADER = SessionHeader(id="packed-write", created_at=1, cwd="/w")


def _per_event(session: Session) -> Callable[[], None]:
    """Make ``session`` log every delta as an ``Event`` (an observer without a packed form)."""
    return session.subscribe(lambda event: None)


def _wire(events: Any) -> list[bytes]:
    return [event.to_json() for event in events]


# -- recording in memory ------------------------------------------------------------------


def test_a_recorded_delta_stays_packed_and_reads_as_the_per_event_path_builds_it() -> None:
    packed = Session.create("s", clock=itertools.count(START_TIME).__next__)
    eager = Session.create("s", clock=itertools.count(START_TIME).__next__)
    _per_event(eager)
    record_workload(packed, 2)
    record_workload(eager, 2)
    assert sum(entry.__class__ is ChunkRun for entry in packed._log) == 2 * 4 * 40
    assert not any(entry.__class__ is ChunkRun for entry in eager._log)
    assert _wire(packed.events) == _wire(eager.events)
    assert packed.events == eager.events
    assert packed.surface.nodes == eager.surface.nodes
    assert packed.derive_messages() == eager.derive_messages()


def test_an_observer_subscribed_mid_stream_gets_events_and_the_run_closes() -> None:
    session = Session.create("s")
    seen: list[Event] = []
    with Recorder(session).turn() as turn, turn.step() as step:
        first = [step.text_delta(text) for text in ("a", "b", "c")]
        unsubscribe = session.subscribe(seen.append)
        middle = [step.text_delta(text) for text in ("d", "e")]
        unsubscribe()
        last = [step.text_delta(text) for text in ("f", "g")]
        step.assistant(provider="p", model="m")
    assert [session._log[seq].__class__ for seq in first + middle + last] == [ChunkRun] * 3 + [Event] * 2 + [
        ChunkRun] * 2
    assert seen == [session.events[seq] for seq in middle]
    assert [session.events[seq].data["chunk"]["text"] for seq in first + middle + last] == list("abcdefg")
    assert session.events[-3].data["message"]["content"] == ({"type": "text", "text": "abcdefg"},)


def test_the_invariant_checker_refuses_a_packed_delta_of_a_step_that_is_not_open() -> None:
    session = Session.create("s")
    with Recorder(session).turn() as turn, turn.step() as step:
        step.text_delta("a")
        before = list(session.events)
        with pytest.raises(InvariantError, match="names turn 1/step 2") as refused:
            session._append_delta(1, 2, "text-delta", 0, "b")  # what a confused caller could send
        assert refused.value.seq == len(before) and refused.value.session_id == "s"
        assert list(session.events) == before and session.seq == len(before)
        step.text_delta("c")
        step.assistant(provider="p", model="m")
    assert [session.events[seq].data["chunk"]["text"] for seq in (2, 3)] == ["a", "c"]


def test_a_clock_failure_refuses_the_delta_and_leaves_the_log_unchanged() -> None:
    times = iter([1, 2, 3, "late", 5, 6, 7, 8, 9])
    session = Session.create("s", clock=lambda: next(times))
    with Recorder(session).turn() as turn, turn.step() as step:
        step.text_delta("a")
        with pytest.raises(UsageError, match="session clock returned 'late'") as refused:
            step.text_delta("b")
        assert session.seq == 3 and refused.value.seq == 3 and refused.value.event_type == "assistant/chunk"
        step.text_delta("c")
        step.assistant(provider="p", model="m")
    assert [event.time for event in session.events][:4] == [1, 2, 3, 5]


def test_a_fork_of_a_session_with_an_open_run_never_extends_the_parent_run() -> None:
    parent = Session.create("p")
    recorder = Recorder(parent)
    with recorder.turn() as turn, turn.step() as step:
        step.text_delta("a")
        step.text_delta("b")
        step.assistant(provider="p", model="m")
    child = Session._fork_of(parent, parent.seq, SessionHeader(id="c"))
    with Recorder(child).turn() as turn, turn.step() as step:
        step.text_delta("x")
        step.assistant(provider="p", model="m")
    assert parent._log[2].count == 2  # type: ignore[union-attr]
    assert [event.data["chunk"]["text"] for event in child.events if event.type == "assistant/chunk"] == [
        "a", "b", "x"]


# -- stored bytes --------------------------------------------------------------------------


def _record_live(store: Any, *, per_event: bool, turns: int = 3) -> None:
    with store.start(HEADER) as live:
        live.session._clock = itertools.count(START_TIME).__next__
        if per_event:
            _per_event(live.session)
        record_workload(live.session, turns, flush=live.flush)


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_jsonl_bytes_of_the_packed_path_are_the_per_event_bytes(tmp_path: Path, compression: str) -> None:
    files = []
    for per_event in (False, True):
        root = tmp_path / f"per-event-{per_event}"
        store = JsonlStore(root, compression=compression, write_delay_ms=600_000)
        _record_live(store, per_event=per_event)
        store.close()
        (transcript,) = [path for path in root.rglob("session.jsonl*") if path.suffix != ".seek"]
        files.append(transcript.read_bytes())
    assert files[0] == files[1] and len(files[0]) > 10_000


def test_sqlite_rows_of_the_packed_path_are_the_per_event_rows(tmp_path: Path) -> None:
    rows = []
    for per_event in (False, True):
        path = tmp_path / f"per-event-{per_event}.db"
        store = SqliteStore(path, write_delay_ms=600_000)
        _record_live(store, per_event=per_event)
        store.close()
        with sqlite3.connect(path) as conn:
            rows.append(conn.execute("SELECT seq, type, time, data, source_event_seqs, surface_op, "
                                     "ignorable, op_first FROM events ORDER BY seq").fetchall())
    assert rows[0] == rows[1] and len(rows[0]) == 3 * (181 - 4 * 40 + 4) + 1  # 4 packed rows a turn


def test_a_background_write_in_the_middle_of_a_run_stores_the_same_events(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store", write_delay_ms=1)
    with store.start(HEADER) as live:
        recorder = Recorder(live.session, checkpoint=False)
        with recorder.turn() as turn, turn.step() as step:
            for index in range(30):
                step.text_delta(f"t{index} ")
                if index % 7 == 0:  # let the writer take the open run's members so far
                    deadline = time.monotonic() + 5
                    while live.durable_seq <= live.session.seq - 1 and time.monotonic() < deadline:
                        time.sleep(0.002)
            step.assistant(provider="p", model="m")
        recorded = list(live.session.events)
    store.close()
    cold = JsonlStore(tmp_path / "store")
    assert _wire(cold.load(HEADER.id).events)[: len(recorded)] == _wire(recorded)
    cold.close()


# -- the property: random recordings, both paths ---------------------------------------------


_TEXT = st.text(alphabet=st.sampled_from("ab é\n\"\\"), max_size=3)
_ACTION = st.one_of(
    st.tuples(st.just("text"), _TEXT),
    st.tuples(st.just("reasoning"), _TEXT),
    st.tuples(st.just("call"), st.sampled_from(["c1", "c2"]), st.sampled_from([None, "run"]), _TEXT),
    st.tuples(st.just("chunk"), _TEXT),
    st.tuples(st.just("flush")),
    st.tuples(st.just("observe")),
    st.tuples(st.just("resolve")),
)
_STEP = st.tuples(st.lists(_ACTION, max_size=14), st.booleans())
_TIMES = st.lists(st.one_of(st.integers(0, 5), st.sampled_from([-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER])),
                  min_size=1, max_size=8)


class _Script:
    """Plays one generated recording into a session, noting batch boundaries and what an
    observer (subscribed by ``observe`` actions, unsubscribed by the next) saw."""

    def __init__(self, session: Session, times: list[int]) -> None:
        self.session = session
        self.flushes: list[int] = [0]
        self.seen: list[Event] = []
        self._unsubscribe: Callable[[], None] | None = None
        session._clock = itertools.cycle(times).__next__  # extremes make gaps no row can store

    def play(self, turns: list[list[tuple[list[tuple[Any, ...]], bool]]]) -> None:
        recorder = Recorder(self.session)
        for steps in turns:
            with recorder.turn() as turn:
                for actions, call in steps:
                    with turn.step() as step:
                        for action in actions:
                            self._act(step, action)
                        ids = f"m{self.session.seq}"
                        step.assistant(provider="p", model="m", interrupted=True, id=ids)
                        if call:
                            step.tool_call("k", "run", "{}")
                            step.tool_result("k", "done", id=f"r{ids}")
            self.flushes.append(self.session.seq)
        self.flushes.append(self.session.seq)

    def _act(self, step: Any, action: tuple[Any, ...]) -> None:
        kind = action[0]
        if kind == "text":
            step.text_delta(action[1])
        elif kind == "reasoning":
            step.reasoning_delta(action[1])
        elif kind == "call":
            step.tool_call_delta(action[1], action[2], action[3])
        elif kind == "chunk":
            step.chunk({"type": "text-delta", "index": 0, "text": action[1]})
        elif kind == "flush":
            self.flushes.append(self.session.seq)
        elif kind == "observe":
            if self._unsubscribe is None:
                self._unsubscribe = self.session.subscribe(self.seen.append)
            else:
                self._unsubscribe()
                self._unsubscribe = None
        else:
            self.session._resolved_log()

    def batches(self) -> list[tuple[int, int]]:
        bounds = sorted(set(self.flushes))
        return [(start, stop) for start, stop in itertools.pairwise(bounds) if stop > start]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_STEP, min_size=1, max_size=3), min_size=1, max_size=3), _TIMES)
@example(turns=[[([("text", "a")] * 5, False)]], times=[0, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER])  # a gap
@example(turns=[[([("text", "a"), ("observe",), ("text", "b"), ("observe",), ("text", "c"), ("flush",),
                   ("text", "d"), ("resolve",), ("text", "e"), ("reasoning", "f")] * 2, True)]], times=[1])
def test_random_recordings_are_the_same_through_packed_runs_and_per_event(
    turns: list[list[tuple[list[tuple[Any, ...]], bool]]], times: list[int],
) -> None:
    packed = _Script(Session.create("s"), times)
    eager = _Script(Session.create("s"), times)
    _per_event(eager.session)
    packed.play(turns)
    eager.play(turns)
    events = list(eager.session.events)
    assert _wire(packed.session.events) == _wire(events)
    assert packed.session.surface.nodes == eager.session.surface.nodes
    assert packed.session.derive_messages() == eager.session.derive_messages()
    assert packed.seen == eager.seen
    assert packed.batches() == eager.batches()
    for start, stop in packed.batches():
        batch = LogSlice(packed.session._log, start, stop)
        assert list(batch) == events[start:stop]
        assert encode_batch(batch) == encode_batch(events[start:stop])
        assert list(indexed_texts(batch)) == list(indexed_texts(events[start:stop]))
        for caps in ({}, {"max_members": 3, "max_bytes": SQLITE_MAX_BYTES},
                     {"max_members": 4, "max_bytes": 60}):
            assert pack_chunk_runs(batch, **caps) == pack_chunk_runs(events[start:stop], **caps)


def test_a_batch_slice_reads_like_the_events_it_covers() -> None:
    session = Session.create("s")
    record_workload(session, 1)
    events = list(session.events)
    batch = LogSlice(session._log, 5, 60)
    assert len(batch) == 55 and batch[0] == events[5] and batch[-1] == events[59]
    assert batch[3:6] == events[8:11] and list(batch) == events[5:60]
    with pytest.raises(IndexError):
        batch[55]
    spans = list(batch.spans())
    assert sum(1 if isinstance(span, Event) else span[2] - span[1] for span in spans) == 55


def test_deltas_recorded_while_another_thread_reads_are_all_read_once() -> None:
    session = Session.create("s")
    done = threading.Event()
    reads: list[int] = []

    def reader() -> None:
        while not done.is_set():
            view = session.events
            reads.append(sum(1 for event in view if event.type == "assistant/chunk"))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        record_workload(session, 5)
    finally:
        done.set()
        thread.join()
    assert reads == sorted(reads)
    assert [event.seq for event in session.events] == list(range(session.seq))
