"""One writer per session, for every write a cold path may make (issue 11 item 1), on every backend.

Two store instances over the same storage stand for two processes (the memory store's
``reopen()`` shares its sessions and its locks); ``tests/store/test_writer_lock.py`` runs
the same scenario across real processes.
"""

from __future__ import annotations

import pytest

from agentlog import Recorder, SessionHeader, SessionLockedError
from agentlog.errors import ConcurrentWriterError, ForkError
from agentlog.store.base import Store
from agentlog.store.writer import LiveSession
from tests.contract.conftest import StoreFactory
from tests.store.lock_worker import assert_intact, tool_running
from tests.store.lock_worker import started as start_with_a_turn

HEADER = SessionHeader(id="s1", created_at=1000, cwd="/work/project")


def started(store: Store) -> LiveSession:
    return start_with_a_turn(store, HEADER)


def test_load_of_a_turn_open_in_another_writer_is_refused_and_the_writer_finishes(
    open_store: StoreFactory,
) -> None:
    writer, reader = open_store(), open_store()
    live = started(writer)
    with tool_running(live):
        with pytest.raises(SessionLockedError, match="cannot repair its interrupted turn") as info:
            reader.load("s1")
        assert info.value.session_id == "s1"
        assert "inspect" in str(info.value) and "read_from" in str(info.value)
        peek = reader.inspect("s1").events  # never writes: the closers exist only in the result
        assert peek[-1].type == "turn/end" and peek[-1].data["reason"] == {"kind": "interrupted"}
        assert reader.read_from("s1", 0).events[-1].type == "tool/call"
    live.close()
    assert_intact(reader, "s1")
    assert_intact(open_store(), "s1")


@pytest.mark.parametrize("path", ["append", "open", "delete"])
def test_every_cold_write_is_refused_while_another_writer_holds_the_session(
    open_store: StoreFactory, path: str
) -> None:
    writer, other = open_store(), open_store()
    live = started(writer)
    with tool_running(live):
        durable = live.durable_seq
        event = {"type": "turn/start", "seq": durable, "time": 1, "data": {"turn": 9}}
        with pytest.raises(SessionLockedError) as info:
            if path == "append":
                other.append("s1", [event])
            elif path == "open":
                other.open("s1")
            else:
                other.delete("s1")
        assert info.value.session_id == "s1"
        assert len(other.read_from("s1", 0).events) == durable
    live.close()
    assert_intact(other, "s1")


def test_a_load_that_needs_no_repair_reads_while_another_writer_holds_the_session(
    open_store: StoreFactory,
) -> None:
    writer, reader = open_store(), open_store()
    live = started(writer)
    assert [e.type for e in reader.load("s1").events][-1] == "turn/end"
    with tool_running(live):
        pass
    live.close()
    assert_intact(reader, "s1")


def test_fork_of_a_session_another_writer_holds_reads_its_durable_prefix_only(
    open_store: StoreFactory,
) -> None:
    writer, other = open_store(), open_store()
    live = started(writer)
    boundary = live.durable_seq - 1
    with tool_running(live):
        with pytest.raises(ForkError):
            other.fork("s1")  # the durable log ends inside the open turn
        with other.fork("s1", boundary, "child") as child:
            assert len(child.session.events) == boundary + 2  # + the end-seed marker
    live.close()
    assert_intact(other, "s1")
    assert other.load("child").events[boundary].type == "turn/end"


def test_after_the_writer_is_gone_load_takes_the_lock_and_repairs(open_store: StoreFactory) -> None:
    writer, reader = open_store(), open_store()
    live = started(writer)
    recorder = Recorder(live)
    turn = recorder.turn().start()
    step = turn.step().start()
    step.user_message("list the files")
    step.tool_call_delta("c1", "ls", "{}")
    step.assistant()
    step.tool_call("c1", "ls", "{}")
    live.flush()
    live.abandon()  # what a crash does: the lock is released, the turn stays open
    events = reader.load("s1").events
    assert events[-1].type == "turn/end" and events[-1].data["reason"] == {"kind": "interrupted"}
    assert open_store().load("s1").events == events
    with reader.open("s1") as again:  # the repair released the lock
        assert again.session.events[-1].type == "session/end-seed"


def test_a_direct_append_after_another_writer_wrote_is_refused_not_written_at_a_stale_seq(
    open_store: StoreFactory, backend: str, request: pytest.FixtureRequest
) -> None:
    first, second = open_store(), open_store()
    first.create(HEADER)
    first.append("s1", turn_events(0, 1))
    with second.open("s1") as live:
        live.session.append("turn/start", {"turn": 2})
        live.session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    with pytest.raises(ConcurrentWriterError):
        first.append("s1", turn_events(2, 3))
    events = open_store().load("s1").events
    assert [e.seq for e in events] == list(range(len(events)))


def turn_events(seq: int, turn: int) -> list[dict[str, object]]:
    end = {"turn": turn, "reason": {"kind": "completed"}}
    return [{"type": "turn/start", "seq": seq, "time": 1, "data": {"turn": turn}},
            {"type": "turn/end", "seq": seq + 1, "time": 1, "data": end}]
