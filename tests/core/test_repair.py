"""Crash repair: closers for an interrupted turn (spec session-core §10, repair.spec.ts)."""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.core.events import Event, Replace, make_event
from agentlog.core.header import SessionHeader
from agentlog.core.invariants import check_invariants
from agentlog.core.jsonvalue import freeze, thaw
from agentlog.core.repair import (
    NOT_STARTED_TEXT,
    OUTCOME_UNKNOWN_TEXT,
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    interrupted_turn_closers,
)
from agentlog.core.session import Session
from agentlog.errors import InvalidEventError


def new_session() -> Session:
    ticks = count(100, 10)
    return Session.create("s", clock=lambda: next(ticks))


def assistant(turn: int, step: int, *call_ids: str, text: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [] if text is None else [{"type": "text", "text": text}]
    content += [{"type": "tool-call", "id": cid, "name": "bash", "arguments": "{}"} for cid in call_ids]
    message = {"id": f"a-{turn}-{step}", "role": "assistant", "content": content,
               "source": {"kind": "model", "provider": "mock", "model": "mock"}}
    return {"turn": turn, "step": step, "message": message}


def tool_call(turn: int, step: int, call_id: str) -> dict[str, Any]:
    return {"turn": turn, "step": step, "callId": call_id, "name": "bash", "arguments": "{}"}


def tool_result(turn: int, step: int, call_id: str, text: str = "ok") -> dict[str, Any]:
    block = {"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}]}
    message = {"id": f"r-{call_id}", "role": "user", "source": {"kind": "tool", "callId": call_id},
               "content": [block]}
    return {"turn": turn, "step": step, "message": message}


def open_step_with_calls(session: Session, turn: int, *call_ids: str) -> None:
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("assistant/message", assistant(turn, 1, *call_ids), surface_op="append")


def closed_turn(session: Session, turn: int, call_id: str) -> None:
    open_step_with_calls(session, turn, call_id)
    call = session.append("tool/call", tool_call(turn, 1, call_id))
    session.append("tool/result", tool_result(turn, 1, call_id), surface_op="append",
                   source_event_seqs=[call.seq])
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def types(events: list[Event]) -> list[str]:
    return [event.type for event in events]


def test_balanced_log_needs_no_closers() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert interrupted_turn_closers(session.events) == []


def test_empty_log_needs_no_closers() -> None:
    assert interrupted_turn_closers([]) == []


def test_open_turn_without_step_gets_only_an_interrupted_turn_end() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    [end] = interrupted_turn_closers(session.events)
    assert (end.type, end.seq, end.time) == ("turn/end", 1, 100)
    assert thaw(end.data) == {"turn": 1, "reason": {"kind": "interrupted"}}
    assert end.surface_op is None and end.source_event_seqs is None


@pytest.mark.parametrize("data", [{"uurn": 1}, {"turn": None}, {"turn": 0}, {"turn": "1"}, {"turn": 1.5}])
def test_an_open_turn_without_a_turn_number_is_refused_not_closed_with_a_null_turn(data: Any) -> None:
    """A closer naming no turn would be refused by the next load (found by the JSONL fuzzer)."""
    events = [make_event("turn/start", 0, 100, freeze(data))]
    with pytest.raises(InvalidEventError, match="no positive integer turn number") as info:
        interrupted_turn_closers(events)
    assert (info.value.seq, info.value.event_type, info.value.path) == (0, "turn/start", "data.turn")


def test_open_step_is_closed_before_the_turn() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    closers = interrupted_turn_closers(session.events)
    assert types(closers) == ["step/end", "turn/end"]
    assert [event.seq for event in closers] == [2, 3]
    assert thaw(closers[0].data) == {"turn": 1, "step": 1}
    assert {event.time for event in closers} == {110}


def test_requested_call_without_tool_call_gets_a_not_started_result() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 2})
    session.append("step/start", {"turn": 2, "step": 1})
    session.append("assistant/message", assistant(2, 1, "call-1", text="calling a tool"),
                   surface_op="append")
    closers = interrupted_turn_closers(session.events)
    assert types(closers) == ["tool/result", "step/end", "turn/end"]
    assert [event.seq for event in closers] == [3, 4, 5]
    result = closers[0]
    assert thaw(result.data) == {
        "turn": 2,
        "step": 1,
        "message": {
            "id": "interrupted-tool-result-call-1-3",
            "role": "user",
            "source": {"kind": "tool", "callId": "call-1"},
            "content": [{"type": "tool-result", "toolCallId": "call-1", "isError": True,
                         "content": [{"type": "text", "text": NOT_STARTED_TEXT}]}],
        },
        "error": {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED},
    }
    assert result.surface_op == "append"
    assert result.source_event_seqs is None


def test_not_started_text_says_retry_if_still_needed() -> None:
    assert "before it was recorded as started" in NOT_STARTED_TEXT
    assert "Retry it if it is still needed." in NOT_STARTED_TEXT


def test_answered_call_gets_no_result_only_closers() -> None:
    session = new_session()
    open_step_with_calls(session, 2, "call-1")
    session.append("tool/result", tool_result(2, 1, "call-1"), surface_op="append")
    assert types(interrupted_turn_closers(session.events)) == ["step/end", "turn/end"]


def test_call_of_an_already_closed_step_gets_no_result() -> None:
    session = new_session()
    open_step_with_calls(session, 2, "call-1")
    session.append("step/end", {"turn": 2, "step": 1})
    [end] = interrupted_turn_closers(session.events)
    assert (end.type, end.seq) == ("turn/end", 4)


def test_calls_of_an_earlier_completed_turn_are_ignored() -> None:
    session = new_session()
    open_step_with_calls(session, 1, "old-call")
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    open_step_with_calls(session, 2, "new-call")
    closers = interrupted_turn_closers(session.events)
    assert types(closers) == ["tool/result", "step/end", "turn/end"]
    assert closers[0].data["message"]["source"]["callId"] == "new-call"
    assert closers[0].data["turn"] == 2


def test_only_unanswered_calls_get_results_in_request_order() -> None:
    session = new_session()
    open_step_with_calls(session, 1, "call-a", "call-b", "call-c")
    session.append("tool/result", tool_result(1, 1, "call-b"), surface_op="append")
    closers = interrupted_turn_closers(session.events)
    assert types(closers) == ["tool/result", "tool/result", "step/end", "turn/end"]
    assert [event.data["message"]["source"]["callId"] for event in closers[:2]] == ["call-a", "call-c"]
    assert [event.data["message"]["id"] for event in closers[:2]] == [
        "interrupted-tool-result-call-a-4", "interrupted-tool-result-call-c-5"]


def test_replacement_result_also_answers_a_call() -> None:
    session = new_session()
    open_step_with_calls(session, 1, "call-a")
    original = session.append("tool/result", tool_result(1, 1, "call-a", "long"), surface_op="append")
    session.append("tool/result", tool_result(1, 1, "call-a", "pruned"),
                   surface_op=Replace(original.seq, original.seq), source_event_seqs=[original.seq])
    assert types(interrupted_turn_closers(session.events)) == ["step/end", "turn/end"]


def test_logged_tool_call_gets_an_outcome_unknown_result_citing_it() -> None:
    session = new_session()
    open_step_with_calls(session, 1, "call-1")
    call = session.append("tool/call", tool_call(1, 1, "call-1"))
    closers = interrupted_turn_closers(session.events)
    assert types(closers) == ["tool/result", "step/end", "turn/end"]
    result = closers[0]
    assert result.surface_op == "append"
    assert result.source_event_seqs == (call.seq,) == (3,)
    assert thaw(result.data["error"]) == {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
    [block] = result.data["message"]["content"]
    assert block["isError"] is True
    assert thaw(block["content"]) == [{"type": "text", "text": OUTCOME_UNKNOWN_TEXT}]


def test_outcome_unknown_text_warns_against_blind_retry() -> None:
    text = OUTCOME_UNKNOWN_TEXT
    assert "outcome is unknown" in text
    assert "only if the operation is read-only or idempotent" in text
    assert "verify the external state or ask the user" in text
    assert "Do not retry it blindly" in text


def test_tool_call_without_a_requested_call_gets_no_result() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("tool/call", tool_call(1, 1, "orphan"))
    assert types(interrupted_turn_closers(session.events)) == ["step/end", "turn/end"]


def test_closers_continue_after_a_trailing_end_seed_with_its_time() -> None:
    session = new_session()
    open_step_with_calls(session, 1, "call-1")
    restored = Session.restore("s", session.events, SessionHeader(id="s"))
    assert restored.events[-1].type == "session/end-seed"
    closers = interrupted_turn_closers(restored.events)
    assert closers[0].seq == restored.events[-1].seq + 1
    assert {event.time for event in closers} == {restored.events[-1].time}


def test_repair_reads_without_changing_the_log() -> None:
    session = new_session()
    open_step_with_calls(session, 1, "call-1")
    log = list(session.events)
    before = [event.to_json() for event in log]
    interrupted_turn_closers(log)
    assert [event.to_json() for event in log] == before
    assert len(log) == 3


def test_closers_are_deeply_frozen() -> None:
    session = new_session()
    open_step_with_calls(session, 1, "call-1")
    result = interrupted_turn_closers(session.events)[0]
    with pytest.raises(TypeError):
        result.data["message"]["content"][0]["content"][0]["text"] = "changed"
    with pytest.raises(TypeError):
        result.data["error"]["code"] = "X"


def test_repair_is_deterministic() -> None:
    session = new_session()
    open_step_with_calls(session, 1, "call-1", "call-2")
    session.append("tool/call", tool_call(1, 1, "call-2"))
    first = interrupted_turn_closers(session.events)
    second = interrupted_turn_closers(session.events)
    assert [event.to_json() for event in first] == [event.to_json() for event in second]


def test_closers_have_dsh_wire_form() -> None:
    session = new_session()
    open_step_with_calls(session, 1, "call-1")
    session.append("tool/call", tool_call(1, 1, "call-1"))
    wire = [event.to_wire() for event in interrupted_turn_closers(session.events)]
    # DSH's repair writes surfaceOp before sourceEventSeqs; agentlog keeps that byte order.
    assert list(wire[0]) == ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]
    assert list(wire[0]["data"]) == ["turn", "step", "message", "error"]
    assert [Event.from_wire(thaw(item)) for item in wire] == interrupted_turn_closers(session.events)


def test_repaired_log_restores_and_keeps_the_invariants() -> None:
    session = new_session()
    closed_turn(session, 1, "done")
    open_step_with_calls(session, 2, "started", "requested")
    session.append("tool/call", tool_call(2, 1, "started"))
    repaired = [*session.events, *interrupted_turn_closers(session.events)]
    check_invariants(repaired)
    restored = Session.restore("s", repaired, SessionHeader(id="s"))
    roles = [(m["role"], m["source"]["kind"]) for m in restored.derive_messages()]
    assert roles == [("assistant", "model"), ("user", "tool"),
                     ("assistant", "model"), ("user", "tool"), ("user", "tool")]


def test_malformed_payloads_do_not_break_the_scan() -> None:
    """Append refuses these shapes now (DESIGN §8), so the events are built directly: the scan
    must still survive them (it also runs on logs it has not validated)."""
    payloads: list[tuple[str, Any, Any]] = [
        ("turn/start", {"turn": 1}, None),
        ("step/start", {"turn": 1, "step": 1}, None),
        ("assistant/message", {"turn": 1, "step": 1, "message": {"content": "nope"}}, "append"),
        ("assistant/message", {"turn": 1, "step": 1, "message": {
            "content": [7, {"type": "tool-call"}, {"type": "tool-call", "id": {"x": 1}}]}}, "append"),
        ("tool/call", {"callId": ["unhashable"]}, None),
        ("tool/result", {"message": {"source": {"callId": {"x": 1}}}}, "append"),
    ]
    events = [make_event(kind, seq, 0, freeze(data), op) for seq, (kind, data, op) in enumerate(payloads)]
    assert types(interrupted_turn_closers(events)) == ["step/end", "turn/end"]


# -- property: any crash point of a well-formed log repairs into a valid, provider-ready log --------


def _user_message(ident: str) -> dict[str, Any]:
    return {"id": ident, "role": "user", "content": [{"type": "text", "text": ident}],
            "source": {"kind": "user"}}


_REASONS = [{"kind": "completed"}, {"kind": "aborted", "reason": {"kind": "user"}}, {"kind": "max-tokens"},
            {"kind": "error", "error": {"message": "boom", "code": "UNKNOWN"}}, {"kind": "blocked"}]


def _step(session: Session, draw: st.DrawFn, turn: int, step: int, results: list[Event]) -> None:
    session.append("step/start", {"turn": turn, "step": step})
    if draw(st.booleans()):
        session.append("request/header", {"header": {"config": {"provider": "p", "model": "m"}},
                                          "reason": "initial" if turn == step == 1 else "change"})
    chunks = [session.append("assistant/chunk", {"turn": turn, "step": step, "chunk": {
        "type": "text-delta", "index": 0, "text": "x"}}).seq for _ in range(draw(st.integers(0, 2)))]
    call_ids = [f"c{turn}-{step}-{k}" for k in range(draw(st.integers(0, 3)))]
    session.append("assistant/message", assistant(turn, step, *call_ids, text="t"), surface_op="append",
                   source_event_seqs=chunks)
    for call_id in call_ids:
        call = session.append("tool/call", tool_call(turn, step, call_id))
        if draw(st.booleans()):
            session.append("plugin/noise", {"n": call.seq})
        results.append(session.append("tool/result", tool_result(turn, step, call_id), surface_op="append",
                                      source_event_seqs=[call.seq]))
    if draw(st.booleans()):
        session.append("todo/write", {"todos": []})
    session.append("step/end", {"turn": turn, "step": step})


def _prune_one(session: Session, draw: st.DrawFn, results: list[Event]) -> None:
    index = draw(st.integers(0, len(results) - 1))
    target = results[index]
    data = thaw(target.data)
    data["message"]["content"][0]["content"] = [{"type": "text", "text": "[pruned]"}]
    results[index] = session.append("tool/result", data, surface_op=Replace(target.seq, target.seq),
                                    source_event_seqs=[target.seq])


@st.composite
def well_formed_logs(draw: st.DrawFn) -> list[Event]:
    """Complete logs the way an agent loop writes them: every requested call gets a result."""
    ticks = count(1)
    session = Session.create("p", clock=lambda: next(ticks))
    results: list[Event] = []
    for turn in range(1, draw(st.integers(0, 4)) + 1):
        if draw(st.booleans()):
            session.append("user/message", _user_message(f"idle-{turn}"), surface_op="append")
        session.append("turn/start", {"turn": turn})
        prune = bool(results) and draw(st.booleans())
        if prune:
            _prune_one(session, draw, results)
        session.append("user/message", _user_message(f"u-{turn}"), surface_op="append")
        for step in range(1, draw(st.integers(0, 3)) + 1):
            _step(session, draw, turn, step, results)
        session.append("turn/end", {"turn": turn, "reason": draw(st.sampled_from(_REASONS))})
    return list(session.events)


def _unanswered_calls(messages: list[Any]) -> list[str]:
    missing = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        answered = {later["source"].get("callId") for later in messages[index + 1:]
                    if later["source"]["kind"] == "tool"}
        missing += [block["id"] for block in message["content"]
                    if block["type"] == "tool-call" and block["id"] not in answered]
    return missing


@settings(max_examples=150, deadline=None)
@given(log=well_formed_logs(), data=st.data())
def test_any_crash_point_repairs_into_a_valid_paired_log(log: list[Event], data: st.DataObject) -> None:
    check_invariants(log)
    prefix = log[: data.draw(st.integers(0, len(log)), label="crash point")]
    closers = interrupted_turn_closers(prefix)
    repaired = prefix + closers
    check_invariants(repaired)
    assert interrupted_turn_closers(repaired) == []
    restored = Session.restore("p", repaired, SessionHeader(id="p"))
    assert _unanswered_calls(restored.derive_messages()) == []
