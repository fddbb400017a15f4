"""The store contract (spec persistence §9 contract.ts and coordinator-contract.ts, adapted).

Every test runs once per backend in ``conftest.BACKENDS``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agentlog import (
    Event,
    InvalidEventError,
    InvalidHeaderError,
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionHeader,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
    UsageError,
)
from agentlog.core.jsonvalue import thaw
from agentlog.errors import ConcurrentWriterError, ForkError
from agentlog.store.base import Store
from agentlog.store.records import StoredLog
from tests.contract.conftest import StoreFactory
from tests.contract.logs import LogBuilder, plant, wire

HEADER = SessionHeader(id="s1", created_at=1000, cwd="/work/project")


def stored(store: Store, log: LogBuilder, header: SessionHeader = HEADER) -> None:
    store.create(header)
    store.append(header.id, log.events)


# -- contract.ts -----------------------------------------------------------------------------


def test_append_then_load_returns_same_meta_and_events(store: Store) -> None:
    log = LogBuilder()
    log.turn(1)
    stored(store, log)
    loaded = store.load("s1")
    assert loaded.header.version == 0
    assert loaded.header.id == "s1"
    assert loaded.header.cwd == "/work/project"
    assert wire(list(loaded.events)) == log.events


def test_header_with_fractional_created_at_is_refused_and_id_stays_free(store: Store) -> None:
    with pytest.raises(InvalidHeaderError, match="non-negative safe integer"):
        SessionHeader(id="s1", created_at=1.5)  # type: ignore[arg-type]
    store.create(SessionHeader(id="s1", created_at=1))


def test_open_turn_inspect_shows_closers_without_writing_and_load_commits_them(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    log = LogBuilder()
    log.turn(1)
    log.turn(2, close=False)
    log.events.pop()  # drop step/end: the turn and its step are open
    stored(store, log)
    revision = store.list_snapshots()[0].revision

    inspected = store.inspect("s1")
    assert [e.type for e in inspected.events[-2:]] == ["step/end", "turn/end"]
    assert inspected.events[-1].data["reason"] == {"kind": "interrupted"}
    assert store.list_snapshots()[0].revision == revision

    loaded = store.load("s1")
    assert [e.seq for e in loaded.events] == list(range(len(log.events) + 2))
    assert loaded.events[-1].data["reason"]["kind"] == "interrupted"
    assert store.list_snapshots()[0].revision != revision

    fresh = open_store()
    again = fresh.load("s1")
    assert wire(list(again.events)) == wire(list(loaded.events))
    nxt = LogBuilder(start=len(loaded.events), time=5000)
    nxt.turn(3)
    fresh.append("s1", nxt.events)
    assert len(open_store().load("s1").events) == len(loaded.events) + len(nxt.events)


def test_unanswered_tool_call_without_tool_call_event_gets_not_started_result(store: Store) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.assistant(1, 1, "calling", calls=("call-1",))
    stored(store, log)
    events = store.load("s1").events
    assert [e.type for e in events[-3:]] == ["tool/result", "step/end", "turn/end"]
    result = events[-3]
    assert result.data["error"]["code"] == "TOOL_NOT_STARTED"
    assert result.data["message"]["source"] == {"kind": "tool", "callId": "call-1"}
    assert result.source_event_seqs is None


def test_recorded_tool_call_without_result_gets_outcome_unknown_result(store: Store) -> None:
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.assistant(1, 1, "calling", calls=("call-1",))
    call = log.tool_call(1, 1, "call-1")
    stored(store, log)
    events = store.load("s1").events
    result = events[-3]
    assert result.data["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    assert result.source_event_seqs == (call["seq"],)
    from agentlog import Session

    messages = Session.restore("s1", events, HEADER).derive_messages()
    assert messages[-1]["content"][0]["toolCallId"] == "call-1"
    assert messages[-1]["content"][0]["isError"] is True


def test_created_but_never_appended_session_is_not_listed(store: Store) -> None:
    store.create(HEADER)
    store.append("s1", [])
    assert store.list() == []
    assert store.list_snapshots() == []


def test_read_from_returns_suffixes_without_closers(store: Store) -> None:
    log = LogBuilder()
    log.turn(1)
    log.add("turn/start", {"turn": 2})
    stored(store, log)
    assert wire(list(store.read_from("s1", 0).events)) == log.events
    assert wire(list(store.read_from("s1", 3).events)) == log.events[3:]
    assert store.read_from("s1", len(log.events)).events == ()
    assert store.read_from("s1", 10_000).events == ()
    with pytest.raises(SessionNotFoundError, match="not found"):
        store.read_from("missing", 0)
    for bad in (-1, 1.5, True):
        with pytest.raises(InvalidEventError, match="non-negative safe integer"):
            store.read_from("s1", bad)  # type: ignore[arg-type]


def test_revision_is_stable_until_an_append(store: Store) -> None:
    log = LogBuilder()
    log.turn(1)
    stored(store, log)
    first = store.list_snapshots()[0].revision
    assert store.list_snapshots()[0].revision == first
    store.inspect("s1")
    store.read_from("s1", 2)
    assert store.list_snapshots()[0].revision == first
    nxt = LogBuilder(start=len(log.events))
    nxt.turn(2)
    store.append("s1", nxt.events)
    assert store.list_snapshots()[0].revision != first


def test_reappending_stored_seqs_is_refused(store: Store) -> None:
    log = LogBuilder()
    log.turn(1)
    stored(store, log)
    with pytest.raises(ConcurrentWriterError, match="seq mismatch"):
        store.append("s1", log.events[-2:])
    assert wire(list(store.load("s1").events)) == log.events


def test_batch_with_internal_gap_is_refused(store: Store) -> None:
    log = LogBuilder()
    log.turn(1)
    store.create(HEADER)
    with pytest.raises(InvalidEventError, match="seq mismatch"):
        store.append("s1", [log.events[0], log.events[2]])
    assert store.list() == []


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), {1, 2}, object(), 2**60, "\ud800"])
def test_non_lossless_data_is_refused(store: Store, bad: object) -> None:
    store.create(HEADER)
    event = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1, "x": bad}}
    with pytest.raises(InvalidEventError, match="losslessly JSON-serializable"):
        store.append("s1", [event])
    assert store.list() == []


# -- coordinator-contract.ts, adapted to LiveSession ------------------------------------------


def test_live_session_flushed_survives_load(open_store: StoreFactory) -> None:
    store = open_store()
    with store.start(HEADER) as live:
        log = LogBuilder()
        log.turn(1)
        for event in log.events:
            live.session.append(event["type"], event["data"], surface_op=event.get("surfaceOp"),
                                source_event_seqs=event.get("sourceEventSeqs"))
        live.flush()
        loaded = open_store().load("s1")
        assert loaded.header.cwd == "/work/project"
        assert [e.type for e in loaded.events] == [e["type"] for e in log.events]


def test_load_refuses_a_live_open_turn_and_returns_it_once_completed(store: Store) -> None:
    live = store.start(HEADER)
    live.session.append("turn/start", {"turn": 1})
    with pytest.raises(UsageError, match="live turn is open"):
        store.load("s1")
    live.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert [e.type for e in store.load("s1").events] == ["turn/start", "turn/end"]
    live.close()
    assert [e.type for e in store.load("s1").events] == ["turn/start", "turn/end"]


def test_empty_never_flushed_live_session_is_not_found(store: Store) -> None:
    live = store.start(HEADER)
    with pytest.raises(SessionNotFoundError):
        store.load("s1")
    live.close()
    with pytest.raises(SessionNotFoundError):
        store.load("s1")


@pytest.mark.parametrize(
    "header",
    [
        SessionHeader(id="s1", created_at=5, seed_length=3),
        SessionHeader(id="s1", created_at=5, delegation_depth=2, origin="subagent"),
        SessionHeader(id="s1", created_at=5, parent_session="p0", agent_preset="coder"),
    ],
)
def test_header_fields_round_trip(open_store: StoreFactory, header: SessionHeader) -> None:
    store = open_store()
    log = LogBuilder()
    log.turn(1)
    stored(store, log, header)
    loaded = open_store().load("s1").header
    for field in ("seed_length", "origin", "parent_session", "agent_preset", "created_at"):
        assert getattr(loaded, field) == getattr(header, field)
    assert (loaded.delegation_depth or 0) == (header.delegation_depth or 0)


def test_load_and_inspect_return_frozen_data(store: Store) -> None:
    log = LogBuilder()
    log.turn(1)
    stored(store, log)
    for view in (store.load("s1"), store.inspect("s1")):
        message = view.events[2].data
        with pytest.raises(TypeError):
            message["role"] = "assistant"
        with pytest.raises((TypeError, AttributeError)):
            message["content"].append({})  # type: ignore[union-attr]


def test_fork_child_persists_seed_and_end_seed_once(open_store: StoreFactory) -> None:
    store = open_store()
    log = LogBuilder()
    log.turn(1)
    log.turn(2)
    stored(store, log)
    boundary = 8  # turn/end of turn 1
    assert log.events[boundary]["type"] == "turn/end"
    child = store.fork("s1", boundary, "child")
    assert child.session.header.parent_session == "s1"
    assert child.session.header.seed_length == boundary + 1
    assert child.session.header.cwd == "/work/project"
    child.flush()
    child.flush()
    child.close()
    events = open_store().load("child").events
    assert [e.type for e in events] == [e["type"] for e in log.events[: boundary + 1]] + ["session/end-seed"]


def _fork_outcome(store: Store, boundary: int | None, child_id: str, parent: str = "s1") -> object:
    """What a fork yields: the child's events (type, seq, data) or the ForkError's code and text."""
    try:
        child = store.fork(parent, boundary, child_id)
    except ForkError as exc:
        return exc.code, str(exc).replace(child_id, "<child>")
    events = [(e.type, e.seq, thaw(e.data)) for e in child.session.events]
    child.close()
    return events


def test_a_cold_fork_reads_only_its_prefix_and_matches_a_warm_fork(open_store: StoreFactory) -> None:
    store = open_store()
    log = LogBuilder()
    log.turn(1, chunks=5)
    log.turn(2, chunks=4)
    log.turn(3, close=False)
    stored(store, log)
    warm = open_store()
    warm.load("s1")
    for boundary in [*range(len(log.events) + 1), None, -1]:
        cold = _fork_outcome(open_store(), boundary, f"cold{boundary}")
        assert cold == _fork_outcome(warm, boundary, f"warm{boundary}"), boundary
    assert _fork_outcome(open_store(), 8, "kid")[0] == "OPEN_TURN"  # type: ignore[index]
    assert [e.type for e in open_store().load("cold10").events][-2:] == ["turn/end", "session/end-seed"]


def test_forks_from_one_store_validate_a_prefix_once_per_revision(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = open_store()
    log = LogBuilder()
    for number in (1, 2, 3):
        log.turn(number)
    stored(store, log)
    validated: list[int] = []
    validate = Store._validate

    def counting(self: Store, session_id: str, stored_log: StoredLog) -> object:
        validated.append(len(stored_log.events))
        return validate(self, session_id, stored_log)

    monkeypatch.setattr(Store, "_validate", counting)
    forker = open_store()
    forker.fork("s1", 17, "a").close()  # turn/end of turn 2
    forker.fork("s1", 8, "b").close()  # inside the prefix already validated
    assert validated == [18]
    forker.fork("s1", 26, "c").close()  # beyond it: the longer prefix is read
    assert validated == [18, 27]
    more = LogBuilder(start=27)
    more.turn(4)
    store.append("s1", more.events)
    forker.fork("s1", 26, "d").close()  # a new revision is validated again
    assert validated == [18, 27, 27]


def test_a_cold_fork_of_a_fork_matches_a_warm_one(open_store: StoreFactory) -> None:
    store = open_store()
    log = LogBuilder()
    log.turn(1, chunks=5)
    log.turn(2, chunks=4)
    stored(store, log)
    with store.fork("s1", 10, "kid") as kid:  # turn 1 shared (by reference where the backend can)
        kid.session.append("turn/start", {"turn": 2})
        kid.session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    warm = open_store()
    warm.load("kid")
    for boundary in range(15):
        cold = _fork_outcome(open_store(), boundary, f"cold{boundary}", "kid")
        assert cold == _fork_outcome(warm, boundary, f"warm{boundary}", "kid"), boundary


def test_resume_does_not_reappend_and_new_events_continue(open_store: StoreFactory) -> None:
    store = open_store()
    log = LogBuilder()
    log.turn(1)
    stored(store, log)
    with store.open("s1") as live:
        assert live.session.first_live_seq == len(log.events)
        live.session.append("turn/start", {"turn": 2})
        live.session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    events = open_store().load("s1").events
    assert [e.type for e in events[len(log.events) :]] == ["session/end-seed", "turn/start", "turn/end"]
    with open_store().open("s1") as live:
        assert live.session.events[-1].type == "session/end-seed"
    assert len(open_store().load("s1").events) == len(events) + 1


def test_close_drains_buffered_events(open_store: StoreFactory) -> None:
    store = open_store()
    live = store.start(HEADER)
    live.session.append("turn/start", {"turn": 1})
    live.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    live.close()
    assert len(open_store().load("s1").events) == 2


def test_starting_a_session_with_a_persisted_id_collides(open_store: StoreFactory) -> None:
    store = open_store()
    log = LogBuilder()
    log.turn(1)
    stored(store, log)
    with pytest.raises(SessionExistsError, match="already"):
        open_store().start(HEADER)
    with pytest.raises(SessionExistsError, match="already"):
        store.create(HEADER)


def test_closed_never_materialized_session_frees_its_id(store: Store) -> None:
    store.start(HEADER).close()
    store.start(HEADER).close()


def test_append_on_a_fresh_instance_adopts_and_continues(open_store: StoreFactory) -> None:
    log = LogBuilder()
    log.turn(1)
    stored(open_store(), log)
    nxt = LogBuilder(start=len(log.events))
    nxt.turn(2)
    open_store().append("s1", nxt.events)
    assert wire(list(open_store().load("s1").events)) == log.events + nxt.events


def test_missing_session_is_not_found(store: Store) -> None:
    with pytest.raises(SessionNotFoundError):
        store.load("nope")
    with pytest.raises(SessionNotFoundError):
        store.inspect("nope")


def test_unknown_type_is_refused_unless_ignorable(open_store: StoreFactory) -> None:
    store = open_store()
    log = LogBuilder()
    log.add("future/thing", {"x": 1}, ignorable=True)
    log.add("future/other", None)
    store.create(HEADER)
    store.append("s1", log.events[:1])
    assert [e.type for e in open_store().load("s1").events] == ["future/thing"]
    with pytest.raises(SessionFormatUnsupportedError, match="future/other"):  # a load would refuse it
        open_store().append("s1", log.events[1:])
    assert [e.type for e in open_store().load("s1").events] == ["future/thing"]  # unchanged
    other = SessionHeader(id="s2", created_at=1000, cwd="/work/project")
    plant(open_store(), other, [{**event, "seq": seq} for seq, event in enumerate(log.events)])
    with pytest.raises(SessionFormatUnsupportedError, match="future/other"):  # as a newer writer left it
        open_store().load("s2")


def test_flush_right_after_appends_persists_all(open_store: StoreFactory) -> None:
    store = open_store()
    live = store.start(HEADER)
    for turn in (1, 2, 3):
        live.session.append("turn/start", {"turn": turn})
        live.session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    live.flush()
    assert len(open_store().load("s1").events) == 6
    live.close()


# -- beyond DSH: one writer per session, delete, forks by reference ------------------------------


def test_second_writer_on_the_same_session_is_locked_out(store: Store) -> None:
    log = LogBuilder()
    log.turn(1)
    stored(store, log)
    first = store.open("s1")
    with pytest.raises(SessionLockedError) as info:
        store.open("s1")
    assert info.value.session_id == "s1"
    store.inspect("s1")
    store.read_from("s1", 0)
    store.list()
    first.close()
    store.open("s1").close()


def test_write_behind_batches_without_flush(store: Store) -> None:
    live = store.start(HEADER)
    done = threading.Event()
    live.session.append("turn/start", {"turn": 1})
    live.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    for _ in range(200):
        if live.durable_seq == 2:
            done.set()
            break
        threading.Event().wait(0.01)
    assert done.is_set(), "write-behind did not persist within 2 s"
    live.close()


def test_delete_removes_a_session_and_refuses_live_ones(store: Store) -> None:
    log = LogBuilder()
    log.turn(1)
    stored(store, log)
    live = store.open("s1")
    with pytest.raises(UsageError, match="live"):
        store.delete("s1")
    live.close()
    store.delete("s1")
    assert store.list() == []
    with pytest.raises(SessionNotFoundError):
        store.load("s1")
    with pytest.raises(SessionNotFoundError):
        store.delete("s1")
    stored(store, log)


def test_a_session_recreated_after_delete_is_read_afresh(store: Store) -> None:
    first = LogBuilder()
    first.turn(1)
    stored(store, first)
    store.load("s1")
    store.fork("s1", 8, "kid").close()
    store.delete("kid")
    store.delete("s1")
    second = LogBuilder()
    second.turn(7)
    stored(store, second)
    assert wire(list(store.load("s1").events)) == second.events
    with store.fork("s1", 8, "kid") as kid:
        assert kid.session.events[0].data == {"turn": 7}


def test_fork_of_a_live_parent_uses_its_flushed_log(store: Store) -> None:
    live = store.start(HEADER)
    live.session.append("turn/start", {"turn": 1})
    live.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    child = store.fork("s1", child_id="kid")
    assert [e.type for e in child.session.events] == ["turn/start", "turn/end", "session/end-seed"]
    child.close()
    live.close()
    assert [e.type for e in store.load("kid").events] == ["turn/start", "turn/end", "session/end-seed"]


def test_errors_are_store_errors_with_session_ids(store: Store) -> None:
    with pytest.raises(StoreError):
        store.create(HEADER)
        store.append("s1", [{"type": "turn/start", "seq": 5, "time": 1, "data": {"turn": 1}}])


def test_events_given_as_event_objects_are_accepted(store: Store) -> None:
    log = LogBuilder()
    log.turn(1)
    store.create(HEADER)
    store.append("s1", [Event.from_wire(thaw(e)) for e in log.events])
    assert wire(list(store.load("s1").events)) == log.events


def test_materialized_fork_outlives_its_parent(open_store: StoreFactory) -> None:
    store = open_store()
    log = LogBuilder()
    log.turn(1)
    log.turn(2)
    stored(store, log)
    with store.fork("s1", 8, "kid") as child:
        child.session.append("turn/start", {"turn": 2})
        child.session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    expected = wire(list(store.load("kid").events))
    store.materialize("kid")
    store.delete("s1")
    assert wire(list(open_store().load("kid").events)) == expected


def test_a_parent_with_a_fork_is_not_deleted_until_the_fork_is_materialized(store: Store) -> None:
    log = LogBuilder()
    log.turn(1)
    stored(store, log)
    store.fork("s1", 8, "kid").close()
    with pytest.raises(UsageError, match=r"fork children reference this session \(kid\)"):
        store.delete("s1")
    assert {header.id for header in store.list()} == {"s1", "kid"}
    store.materialize("kid")
    store.delete("s1")
    assert [header.id for header in store.list()] == ["kid"]


def test_delete_leaves_no_file_of_the_session_behind(store: Store, tmp_path: Path) -> None:
    """Writer lock and fork-reference files go with the session (only the store's own files stay)."""
    before = _files(tmp_path)
    log = LogBuilder()
    log.turn(1)
    stored(store, log)
    store.fork("s1", 8, "kid").close()
    store.open("s1").close()
    store.delete("kid")
    store.delete("s1")
    assert store.list() == []
    left = _files(tmp_path) - before
    assert {name for name in left if not name.endswith(("sessions.db", "-wal", "-shm"))} == set()


def _files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if not path.is_dir()}


def test_an_ignorable_event_appended_live_is_stored_and_loads(open_store: StoreFactory) -> None:
    store = open_store()
    live = store.start(HEADER)
    live.session.append("plugin/record", {"x": 1}, ignorable=True)
    live.close()
    loaded = open_store().load("s1")
    assert [(e.type, e.ignorable, thaw(e.data)) for e in loaded.events] == [("plugin/record", True, {"x": 1})]
    with open_store().open("s1") as again, pytest.raises(InvalidEventError, match="not marked ignorable"):
        again.session.append("plugin/record", {"x": 2})
