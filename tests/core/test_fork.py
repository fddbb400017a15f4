"""Fork: a child seeded with a stable prefix of its parent (spec session-core §9, fork.spec.ts)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agentlog.core.events import Event, make_event
from agentlog.core.fork import INVALID_BOUNDARY, OPEN_TURN, check_fork_boundary, fork, turn_end_after
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER, freeze, thaw
from agentlog.core.session import Session
from agentlog.errors import ForkError


def new_session(session_id: str = "parent", **header: Any) -> Session:
    return Session.create(session_id, header=SessionHeader(id=session_id, **header))


def user_message(text: str) -> dict[str, Any]:
    return {"id": f"u-{text}", "role": "user", "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"}}


def closed_turn(session: Session, turn: int, text: str = "hello",
                reason: dict[str, Any] | None = None) -> None:
    session.append("turn/start", {"turn": turn})
    session.append("user/message", user_message(text), surface_op="append")
    session.append("turn/end", {"turn": turn, "reason": reason or {"kind": "completed"}})


def open_turn(session: Session, turn: int) -> None:
    session.append("turn/start", {"turn": turn})
    session.append("user/message", user_message(f"open {turn}"), surface_op="append")


def inherited(child: Session) -> list[Event]:
    """The child's seed: its log without the trailing end-seed marker."""
    assert child.events[-1].type == "session/end-seed"
    return list(child.events)[:-1]


def assistant(text: str, *call_ids: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [{"type": "tool-call", "id": cid, "name": "bash", "arguments": "{}"} for cid in call_ids]
    return {"turn": 1, "step": 1, "message": {
        "id": f"a-{text}", "role": "assistant", "content": content,
        "source": {"kind": "model", "provider": "mock", "model": "mock"}}}


def test_empty_source_forks_into_an_empty_child_with_lineage() -> None:
    source = new_session("empty-parent", cwd="/workspace")
    child = fork(source, None, "empty-child")
    assert inherited(child) == []
    assert [e.type for e in child.events] == ["session/end-seed"]
    assert (child.id, child.header.cwd, child.header.parent_session, child.header.seed_length) == (
        "empty-child", "/workspace", "empty-parent", 0)


def test_default_boundary_copies_the_whole_closed_log() -> None:
    source = new_session(cwd="/workspace")
    closed_turn(source, 1, "hello")
    child = fork(source, child_id="child")
    assert inherited(child) == list(source.events)
    assert child.header.seed_length == len(source.events) == 3
    assert (child.header.cwd, child.header.parent_session) == ("/workspace", "parent")
    assert child.first_live_seq == 3
    assert [m["content"][0]["text"] for m in child.derive_messages()] == ["hello"]


def test_child_events_are_frozen_and_independent_of_the_source() -> None:
    source = new_session()
    closed_turn(source, 1, "hello")
    child = fork(source, child_id="child")
    message = next(e for e in child.events if e.type == "user/message")
    with pytest.raises(TypeError):
        message.data["content"][0] = {"type": "text", "text": "child mutation"}
    child.append("turn/start", {"turn": 2})
    assert len(source.events) == 3
    assert thaw(source.events[1].data["content"]) == [{"type": "text", "text": "hello"}]
    assert child.events is not source.events


def test_trailing_log_only_event_is_included() -> None:
    source = new_session()
    closed_turn(source, 1)
    source.append("test/log-only", {"value": "after execution"})
    child = fork(source, child_id="child")
    assert inherited(child) == list(source.events)
    assert (inherited(child)[-1].type, thaw(inherited(child)[-1].data)) == (
        "test/log-only", {"value": "after execution"})


def test_explicit_earlier_boundary_forks_while_the_source_has_an_open_tail() -> None:
    source = new_session(cwd="/workspace")
    closed_turn(source, 1, "first")
    first_boundary = source.events[-1].seq
    closed_turn(source, 2, "second")
    open_turn(source, 3)
    child = fork(source, first_boundary, "child-from-first")
    assert inherited(child) == list(source.events)[: first_boundary + 1]
    assert child.header.seed_length == first_boundary + 1
    assert [thaw(m) for m in child.derive_messages()] == [user_message("first")]


@pytest.mark.parametrize("reason", [
    {"kind": "completed"},
    {"kind": "aborted", "reason": {"kind": "user"}},
    {"kind": "error", "error": {"message": "model failed", "code": "UNKNOWN"}},
    {"kind": "aborted", "reason": {"kind": "disposed"}},
    {"kind": "max-tokens"},
    {"kind": "interrupted"},
])
def test_every_turn_end_reason_is_a_valid_boundary(reason: dict[str, Any]) -> None:
    source = new_session()
    closed_turn(source, 1, "x", reason)
    child = fork(source, source.events[-1].seq, "child")
    assert inherited(child)[-1].type == "turn/end"
    assert child.header.seed_length == len(source.events)


def test_bracket_open_in_the_parent_becomes_seed_history_in_the_child() -> None:
    parent = new_session(cwd="/workspace")
    closed_turn(parent, 1, "work")
    bracket = parent.append("test/bracket-open", {"id": "op-1"})
    child = fork(parent, child_id="bracket-child")
    assert parent.events[-1] is bracket
    assert not any(e.type == "session/end-seed" for e in parent.events)
    assert child.events[-1].type == "session/end-seed"
    assert child.events[-1].seq > bracket.seq
    assert child.first_live_seq == bracket.seq + 1
    assert inherited(child)[-1] == bracket


def test_prefix_ending_in_an_end_seed_is_not_marked_again() -> None:
    original = new_session("original")
    closed_turn(original, 1)
    reopened = Session.restore("reopened", original.events, SessionHeader(id="reopened"))
    assert reopened.events[-1].type == "session/end-seed"
    child = fork(reopened, child_id="child")
    assert list(child.events) == list(reopened.events)
    assert child.first_live_seq == child.header.seed_length == len(reopened.events)


def test_boundary_zero_of_an_empty_source_does_not_exist() -> None:
    empty = new_session("empty")
    with pytest.raises(ForkError) as caught:
        fork(empty, 0, "empty-child")
    assert caught.value.code == INVALID_BOUNDARY
    assert caught.value.detail == 'fork boundary 0 does not exist in session "empty" (last seq: none)'


@pytest.mark.parametrize("boundary", [-1, 0.5, MAX_SAFE_INTEGER + 1, True, False, "1", 1.0])
def test_boundary_must_be_a_non_negative_safe_integer(boundary: Any) -> None:
    source = new_session()
    closed_turn(source, 1)
    with pytest.raises(ForkError) as caught:
        fork(source, boundary, "child")
    assert caught.value.code == INVALID_BOUNDARY
    assert caught.value.detail == (
        f'fork boundary for session "parent" must be a non-negative safe integer, got {boundary!r}')


def test_boundary_past_the_end_does_not_exist() -> None:
    source = new_session()
    closed_turn(source, 1)
    with pytest.raises(ForkError) as caught:
        fork(source, source.seq, "past-end")
    assert caught.value.code == INVALID_BOUNDARY
    assert caught.value.detail == (
        f'fork boundary {source.seq} does not exist in session "parent" (last seq: {source.seq - 1})')
    assert caught.value.session_id == "parent"


def test_boundary_whose_event_has_another_seq_is_refused() -> None:
    source = new_session("corrupt-parent")
    closed_turn(source, 1)
    events = list(source.events)
    events[2] = make_event(events[2].type, 99, events[2].time, events[2].data)
    with pytest.raises(ForkError) as caught:
        check_fork_boundary(events, 2, "corrupt-parent")
    assert caught.value.code == INVALID_BOUNDARY
    assert caught.value.detail == (
        'fork boundary 2 does not match a contiguous event seq in session "corrupt-parent"')


def _after_turn_start(session: Session) -> None:
    session.append("turn/start", {"turn": 1})


def _after_step_start(session: Session) -> None:
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})


def _after_user_message(session: Session) -> None:
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message("open"), surface_op="append")


def _after_assistant_message(session: Session) -> None:
    _after_step_start(session)
    session.append("assistant/message", assistant("partial"), surface_op="append")


def _after_tool_call(session: Session) -> None:
    _after_step_start(session)
    session.append("assistant/message", assistant("calling", "call-open"), surface_op="append")
    session.append("tool/call", {"turn": 1, "step": 1, "callId": "call-open", "name": "bash",
                                 "arguments": "{}"})


def _after_step_end(session: Session) -> None:
    _after_step_start(session)
    session.append("step/end", {"turn": 1, "step": 1})


@pytest.mark.parametrize("build", [_after_turn_start, _after_step_start, _after_user_message,
                                   _after_assistant_message, _after_tool_call, _after_step_end])
def test_boundary_inside_an_open_turn_is_refused(build: Any) -> None:
    source = new_session("open-parent")
    build(source)
    boundary = source.events[-1].seq
    with pytest.raises(ForkError) as caught:
        fork(source, boundary)
    assert caught.value.code == OPEN_TURN
    assert caught.value.detail.startswith(
        f'fork boundary {boundary} in session "open-parent" ends inside open turn 1')


def test_a_boundary_inside_a_turn_names_the_valid_boundary_before_it() -> None:
    source = new_session()
    closed_turn(source, 1)
    before = source.events[-1].seq
    closed_turn(source, 2)
    end = source.events[-1].seq
    with pytest.raises(ForkError) as caught:
        fork(source, before + 2)
    assert caught.value.detail.endswith(f"the nearest valid boundary before it is seq {before}")
    assert turn_end_after(source.events, before + 2) == end  # what the CLI adds from the whole log
    assert turn_end_after(source.events, end) is None


def test_default_boundary_of_a_source_with_an_open_turn_is_refused() -> None:
    source = new_session()
    closed_turn(source, 1)
    open_turn(source, 2)
    with pytest.raises(ForkError, match="ends inside open turn 2") as caught:
        fork(source)
    assert caught.value.code == OPEN_TURN


def test_open_turn_detection_ignores_step_events() -> None:
    # A step left open inside a closed turn breaks the invariants, but fork only looks at turns.
    log = [make_event(type_, seq, 1, freeze(data)) for seq, (type_, data) in enumerate([
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ("step/end", {"turn": 1, "step": 1}),
    ])]
    assert check_fork_boundary(log, None, "s") == 4
    assert check_fork_boundary(log, 2, "s") == 3
    with pytest.raises(ForkError, match="open turn 1"):
        check_fork_boundary(log, 1, "s")


def test_check_fork_boundary_returns_the_seed_length() -> None:
    source = new_session()
    closed_turn(source, 1)
    closed_turn(source, 2)
    assert check_fork_boundary(source.events, None, "parent") == 6
    assert check_fork_boundary(source.events, 2, "parent") == 3
    assert check_fork_boundary([], None, "parent") == 0


def test_no_child_is_made_when_the_boundary_is_refused() -> None:
    source = new_session()
    open_turn(source, 1)
    before = list(source.events)
    with pytest.raises(ForkError):
        fork(source, child_id="child")
    assert list(source.events) == before


def test_default_child_id_names_the_parent() -> None:
    source = new_session()
    closed_turn(source, 1)
    first, second = fork(source), fork(source)
    assert re.fullmatch(r"parent-fork-[0-9a-f]{12}", first.id)
    assert first.id != second.id
    assert first.header.id == first.id


def test_child_does_not_inherit_origin_depth_or_preset() -> None:
    source = new_session(origin="subagent", delegation_depth=2, agent_preset="reviewer")
    closed_turn(source, 1)
    child = fork(source, child_id="child")
    header = child.header
    assert (header.origin, header.delegation_depth, header.agent_preset) == (None, None, None)
    assert header.cwd is None
    assert "cwd" not in header.to_wire()
    assert header.to_wire()["parentSession"] == "parent"
    assert header.to_wire()["seedLength"] == 3


def test_child_continues_from_the_prefix() -> None:
    source = new_session()
    closed_turn(source, 1, "first")
    closed_turn(source, 2, "second")
    child = fork(source, 2, "child")
    appended = child.append("turn/start", {"turn": 2})
    assert appended.seq == 4  # seed 0..2, end-seed 3
    assert source.events[3].type == "turn/start" and len(source.events) == 6
