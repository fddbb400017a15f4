"""Turn/step/tool-pairing invariants, offline and live (spec session-core §11, invariant.spec.ts)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentlog.core.events import Event, Replace, make_event
from agentlog.core.invariants import InvariantChecker, Trace, check_invariants, plan_transition
from agentlog.core.jsonvalue import freeze, thaw
from agentlog.core.repair import TOOL_NOT_STARTED
from agentlog.core.session import Session
from agentlog.errors import AgentlogError, InvariantError


def checked(session_id: str = "s", seed: list[dict[str, Any]] | None = None) -> Session:
    """A session whose appends are checked live."""
    session = Session.create(session_id, seed=seed, clock=lambda: 1)
    InvariantChecker.attach(session)
    return session


def user_message(text: str = "hi") -> dict[str, Any]:
    return {"id": f"u-{text}", "role": "user", "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"}}


def assistant(turn: int, step: int, *call_ids: str) -> dict[str, Any]:
    content = [{"type": "tool-call", "id": cid, "name": "echo", "arguments": "{}"} for cid in call_ids]
    return {"turn": turn, "step": step, "message": {
        "id": f"a-{turn}-{step}", "role": "assistant", "content": content,
        "source": {"kind": "model", "provider": "mock", "model": "mock"}}}


def tool_call(turn: int, step: int, call_id: str) -> dict[str, Any]:
    return {"turn": turn, "step": step, "callId": call_id, "name": "echo", "arguments": "{}"}


def tool_result(turn: int, step: int, call_id: str, text: str = "ok", *, is_error: bool = False,
                error: dict[str, Any] | None = None) -> dict[str, Any]:
    block = {"type": "tool-result", "toolCallId": call_id, "isError": is_error,
             "content": [{"type": "text", "text": text}]}
    data: dict[str, Any] = {"turn": turn, "step": step, "message": {
        "id": f"r-{call_id}-{text}", "role": "user", "source": {"kind": "tool", "callId": call_id},
        "content": [block]}}
    if error is not None:
        data["error"] = error
    return data


def completed(turn: int) -> dict[str, Any]:
    return {"turn": turn, "reason": {"kind": "completed"}}


def event(type_: str, seq: int, data: Any, surface_op: Any = None) -> Event:
    return make_event(type_, seq, 1, freeze(data), surface_op)


def append_tool_round(session: Session, turn: int, call_id: str, text: str = "ok") -> Event:
    """A closed step with one answered call; returns the tool/result."""
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("tool/call", tool_call(turn, 1, call_id))
    result = session.append("tool/result", tool_result(turn, 1, call_id, text), surface_op="append")
    session.append("step/end", {"turn": turn, "step": 1})
    return result


# -- accepted logs ---------------------------------------------------------------------------------


def test_well_formed_turn_step_and_tool_sequence_is_accepted() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message(), surface_op="append")
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("assistant/chunk", {"turn": 1, "step": 1,
                                       "chunk": {"type": "text-delta", "index": 0, "text": "h"}})
    session.append("assistant/message", assistant(1, 1, "c1"), surface_op="append")
    session.append("tool/call", tool_call(1, 1, "c1"))
    session.append("tool/result", tool_result(1, 1, "c1"), surface_op="append")
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", completed(1))
    check_invariants(session.events)
    assert len(session.events) == 9


def test_turn_with_zero_steps_is_accepted() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", completed(1))
    session.append("turn/start", {"turn": 2})


def test_step_numbers_restart_at_one_in_each_turn() -> None:
    session = checked()
    for turn in (1, 2):
        session.append("turn/start", {"turn": turn})
        for step in (1, 2):
            session.append("step/start", {"turn": turn, "step": step})
            session.append("step/end", {"turn": turn, "step": step})
        session.append("turn/end", completed(turn))


def test_todo_header_and_context_are_accepted_inside_a_step() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("todo/write", {"todos": []})
    session.append("request/header", {"header": {"config": {"provider": "p", "model": "m"}},
                                      "reason": "initial"})
    session.append("request/context", {"provider": "p", "model": "m"})


def test_user_message_and_unknown_plugin_events_are_accepted_between_turns() -> None:
    session = checked()
    session.append("user/message", user_message("idle context"), surface_op="append")
    session.append("plugin/marker", {})
    session.append("turn/start", {"turn": 1})


def test_not_started_repair_result_is_accepted_without_a_tool_call() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    not_started = {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
    session.append("tool/result", tool_result(1, 1, "crashed", is_error=True, error=not_started),
                   surface_op="append")
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}})


def test_not_started_code_without_an_error_block_still_needs_a_call() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    with pytest.raises(InvariantError, match="no prior tool/call"):
        session.append("tool/result", tool_result(1, 1, "x", error={"code": TOOL_NOT_STARTED}),
                       surface_op="append")


def test_unresolved_calls_are_allowed_at_step_end() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("tool/call", tool_call(1, 1, "c1"))
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "error",
                                                      "error": {"message": "boom", "code": "UNKNOWN"}}})


def test_tool_result_replacement_inside_a_later_turn_is_accepted() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    original = append_tool_round(session, 1, "rewrite", "original")
    session.append("turn/end", completed(1))
    session.append("turn/start", {"turn": 2})
    data = thaw(original.data)
    data["message"]["content"][0]["content"] = [{"type": "text", "text": "pruned"}]
    rewrite = session.append("tool/result", data, surface_op=Replace(original.seq, original.seq),
                             source_event_seqs=[original.seq])
    assert list(session.surface.nodes) == [rewrite.seq]


# -- refusals --------------------------------------------------------------------------------------


def test_duplicate_seq_is_refused() -> None:
    log = [event("turn/start", 0, {"turn": 1}), event("turn/end", 0, completed(1))]
    with pytest.raises(InvariantError, match="seq must strictly increase") as caught:
        check_invariants(log)
    assert (caught.value.seq, caught.value.event_type, caught.value.session_id) == (0, "turn/end", None)


def test_live_checker_refuses_a_seq_it_has_already_seen() -> None:
    checker = InvariantChecker()
    checker.feed(event("turn/start", 0, {"turn": 1}))
    with pytest.raises(InvariantError, match="seq must strictly increase: saw 0 after 0"):
        checker.validate(event("turn/end", 0, completed(1)))


def test_seqs_may_skip_but_not_go_back() -> None:
    check_invariants([event("turn/start", 0, {"turn": 1}), event("turn/end", 5, completed(1))])
    with pytest.raises(InvariantError, match="saw 3 after 5"):
        check_invariants([event("turn/start", 5, {"turn": 1}), event("turn/end", 3, completed(1))])


def test_turn_start_while_a_turn_is_open_is_refused() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(InvariantError, match="turn 1 is still open"):
        session.append("turn/start", {"turn": 2})


def test_turn_end_naming_another_turn_is_refused() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(InvariantError, match="does not match open turn 1"):
        session.append("turn/end", completed(2))


def test_turn_end_with_no_open_turn_is_refused() -> None:
    with pytest.raises(InvariantError, match="does not match open turn null"):
        check_invariants([event("turn/end", 0, completed(1))])


def test_skipped_turn_number_is_refused() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", completed(1))
    with pytest.raises(InvariantError, match="expected turn 2, got 3"):
        session.append("turn/start", {"turn": 3})


@pytest.mark.parametrize("turn", [True, 1.0, "1", None])
def test_turn_number_must_be_an_integer(turn: Any) -> None:
    with pytest.raises(InvariantError, match="expected turn 1"):
        check_invariants([event("turn/start", 0, {"turn": turn})])


def test_turn_start_without_data_object_is_refused_not_crashed() -> None:
    with pytest.raises(InvariantError, match="expected turn 1, got null"):
        check_invariants([event("turn/start", 0, None)])


def test_request_context_outside_a_turn_is_refused() -> None:
    session = checked()
    with pytest.raises(InvariantError, match="outside any open turn"):
        session.append("request/context", {"provider": "mock", "model": "m", "contextWindow": 128_000})


@pytest.mark.parametrize(("type_", "data"), [
    ("todo/write", {"todos": []}),
    ("request/header", {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"}),
])
def test_turn_scoped_events_outside_a_turn_are_refused(type_: str, data: Any) -> None:
    with pytest.raises(InvariantError, match="outside any open turn"):
        check_invariants([event(type_, 0, data)])


def test_step_start_naming_another_turn_is_refused() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(InvariantError, match="open turn is 1"):
        session.append("step/start", {"turn": 2, "step": 1})


def test_step_start_outside_a_turn_is_refused() -> None:
    with pytest.raises(InvariantError, match="open turn is null"):
        check_invariants([event("step/start", 0, {"turn": 1, "step": 1})])


def test_nested_step_and_turn_end_inside_a_step_are_refused() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    with pytest.raises(InvariantError, match="while step 1 is still open"):
        session.append("step/start", {"turn": 1, "step": 2})
    with pytest.raises(InvariantError, match="while step 1 is still open"):
        session.append("turn/end", completed(1))
    with pytest.raises(InvariantError, match="open is turn 1/step 1"):
        session.append("step/end", {"turn": 1, "step": 2})
    with pytest.raises(InvariantError, match="open is turn 1/step 1"):
        session.append("assistant/message", assistant(1, 2), surface_op="append")


def test_skipped_step_number_is_refused() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("step/end", {"turn": 1, "step": 1})
    with pytest.raises(InvariantError, match="expected step 2 in turn 1, got 3"):
        session.append("step/start", {"turn": 1, "step": 3})
    session.append("turn/end", completed(1))


def test_chunk_outside_a_step_is_refused() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(InvariantError, match="open is turn 1/step null"):
        session.append("assistant/chunk", {"turn": 1, "step": 1,
                                           "chunk": {"type": "text-delta", "index": 0, "text": "x"}})


def test_tool_call_outside_a_step_is_refused() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(InvariantError, match="open is turn 1/step null"):
        session.append("tool/call", tool_call(1, 1, "c1"))


def test_result_without_a_call_is_refused() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    with pytest.raises(InvariantError, match="no prior tool/call"):
        session.append("tool/result", tool_result(1, 1, "ghost"), surface_op="append")


def test_fresh_result_outside_a_step_is_refused() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(InvariantError, match="open is turn 1/step null"):
        session.append("tool/result", tool_result(1, 1, "closed"), surface_op="append")


def test_result_in_a_later_step_cannot_answer_an_earlier_call() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("tool/call", tool_call(1, 1, "c1"))
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 2})
    with pytest.raises(InvariantError, match="no prior tool/call in this step"):
        session.append("tool/result", tool_result(1, 2, "c1"), surface_op="append")


def test_a_call_is_answered_only_once() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    append_tool_round(session, 1, "c1")
    session.append("step/start", {"turn": 1, "step": 2})
    with pytest.raises(InvariantError, match="no prior tool/call"):
        session.append("tool/result", tool_result(1, 2, "c1"), surface_op="append")


def test_tool_result_replacement_outside_a_turn_is_refused() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    original = append_tool_round(session, 1, "rewrite", "original")
    session.append("turn/end", completed(1))
    data = thaw(original.data)
    data["message"]["content"][0]["content"] = [{"type": "text", "text": "pruned"}]
    with pytest.raises(InvariantError, match="outside any open turn"):
        session.append("tool/result", data, surface_op=Replace(original.seq, original.seq),
                       source_event_seqs=[original.seq])


def test_refused_append_leaves_the_log_unchanged() -> None:
    session = checked()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(InvariantError) as caught:
        session.append("turn/start", {"turn": 2})
    assert len(session.events) == 1
    assert (caught.value.session_id, caught.value.seq, caught.value.event_type) == ("s", 1, "turn/start")
    assert str(caught.value).startswith('session "s", turn/start, seq 1: ')


# -- live checker ----------------------------------------------------------------------------------


def test_veto_by_a_later_validator_does_not_advance_the_trace() -> None:
    session = checked()
    vetoes = iter([True])

    def veto(candidate: Event) -> None:
        if next(vetoes, False):
            raise AgentlogError("later veto")

    session.add_validator(veto)
    with pytest.raises(AgentlogError, match="later veto"):
        session.append("turn/start", {"turn": 1})
    assert len(session.events) == 0
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", completed(1))


def test_throwing_observer_does_not_stop_the_transition(caplog: pytest.LogCaptureFixture) -> None:
    session = Session.create("s", clock=lambda: 1)

    def hostile(committed: Event) -> None:
        raise RuntimeError("hostile observer")

    session.subscribe(hostile)
    InvariantChecker.attach(session)
    with caplog.at_level(logging.WARNING, logger="agentlog"):
        session.append("turn/start", {"turn": 1})
        session.append("turn/end", completed(1))
    assert len([r for r in caplog.records if "hostile observer" in r.getMessage()]) == 2
    with pytest.raises(InvariantError, match="expected turn 2, got 1"):
        session.append("turn/start", {"turn": 1})


def test_invalid_seed_fails_attach_with_the_session_id() -> None:
    bad_seed = [{"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}},
                {"type": "turn/start", "seq": 1, "time": 0, "data": {"turn": 2}}]
    session = Session.create("bad", seed=bad_seed)
    with pytest.raises(InvariantError, match="turn 1 is still open") as caught:
        InvariantChecker.attach(session)
    assert (caught.value.session_id, caught.value.seq) == ("bad", 1)
    session.append("turn/start", {"turn": 9})  # nothing was registered


def test_sessions_are_tracked_independently() -> None:
    a, b = checked("a"), checked("b")
    a.append("turn/start", {"turn": 1})
    b.append("turn/start", {"turn": 1})
    a.append("turn/end", completed(1))
    with pytest.raises(InvariantError, match="turn 1 is still open"):
        b.append("turn/start", {"turn": 2})


def test_reattaching_rebuilds_the_trace_from_the_log() -> None:
    session = Session.create("s", clock=lambda: 1)
    detach = InvariantChecker.attach(session)
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    detach()
    InvariantChecker.attach(session)
    session.append("assistant/chunk", {"turn": 1, "step": 1,
                                       "chunk": {"type": "text-delta", "index": 0, "text": "h"}})
    with pytest.raises(InvariantError, match="turn 1 is still open"):
        session.append("turn/start", {"turn": 2})


def test_end_seed_is_accepted_between_turns() -> None:
    seed = [{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
            {"type": "turn/end", "seq": 1, "time": 2, "data": completed(1)}]
    session = checked("between", seed)
    assert session.events[-1].type == "session/end-seed"
    session.append("turn/start", {"turn": 2})


def test_end_seed_inside_an_open_turn_moves_no_cursor() -> None:
    session = checked("open", [{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}])
    assert [e.type for e in session.events] == ["turn/start", "session/end-seed"]
    with pytest.raises(InvariantError, match="turn 1 is still open"):
        session.append("turn/start", {"turn": 2})
    session.append("turn/end", completed(1))


def test_end_seed_inside_an_open_step_keeps_pending_calls() -> None:
    log = [event("turn/start", 0, {"turn": 1}), event("step/start", 1, {"turn": 1, "step": 1}),
           event("tool/call", 2, tool_call(1, 1, "c1")), event("session/end-seed", 3, {}),
           event("tool/result", 4, tool_result(1, 1, "c1"), "append")]
    check_invariants(log)


def test_detaching_removes_the_checks() -> None:
    session = Session.create("s", clock=lambda: 1)
    detach = InvariantChecker.attach(session)
    session.append("turn/start", {"turn": 1})
    detach()
    detach()  # idempotent
    session.append("turn/start", {"turn": 2})
    assert len(session.events) == 2


def test_validation_is_pure_until_commit() -> None:
    checker = InvariantChecker()
    checker.validate(event("turn/start", 0, {"turn": 1}))
    assert checker.trace == Trace()
    checker.commit(event("turn/start", 0, {"turn": 1}))  # a different object: re-planned
    assert (checker.trace.open_turn, checker.trace.last_seq) == (1, 0)


def test_plan_transition_does_not_touch_the_trace() -> None:
    trace = Trace(last_seq=3, open_turn=1, open_step=1, next_turn=1, next_step=1, pending={"c1"})
    transition = plan_transition(trace, event("step/end", 4, {"turn": 1, "step": 1}))
    assert trace.pending == {"c1"} and trace.open_step == 1
    assert (transition.open_step, transition.next_step, transition.pending_op) == (None, 2, "clear")
