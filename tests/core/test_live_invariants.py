"""Store-handed sessions and the Recorder check the turn/step invariants on append (issue 11, item 5)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import AgentlogError, InvariantError, Recorder, Session, UsageError
from agentlog.core.header import SessionHeader
from agentlog.core.invariants import InvariantChecker, check_invariants
from agentlog.store.writer import LiveSession
from tests.contract.conftest import (  # noqa: F401 - fixtures
    StoreFactory,
    _drop_postgres_schemas,
    backend,
    open_store,
)

CHUNK = {"type": "text-delta", "index": 0, "text": "h"}
HEADER = {"systemPrompt": "s", "tools": [], "config": {"provider": "p", "model": "m"}}


def result(call_id: str, turn: int = 1, step: int = 1) -> dict[str, Any]:
    block = {"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": "ok"}],
             "isError": False}
    return {"turn": turn, "step": step, "message": {"id": f"r-{call_id}", "role": "user", "content": [block],
                                                    "source": {"kind": "tool", "callId": call_id}}}


def closed_turn(recorder: Recorder) -> None:
    with recorder.turn() as turn, turn.step() as step:
        step.user_message("hi")
        step.request_header(HEADER)
        step.text_delta("hello")
        step.assistant()


def refused(session: Session, kind: str, data: dict[str, Any], match: str, **markers: Any) -> None:
    """``append`` is refused with an InvariantError naming session, type and seq; the log is unchanged."""
    before = session.seq
    with pytest.raises(InvariantError, match=match) as caught:
        session.append(kind, data, **markers)
    assert (caught.value.session_id, caught.value.event_type, caught.value.seq) == (session.id, kind, before)
    assert session.seq == before


def ill_formed_appends_are_refused(session: Session, turn: int = 1) -> None:
    """The three appends of item 5, in a new turn ``turn`` of ``session``."""
    session.append("turn/start", {"turn": turn})
    refused(session, "turn/start", {"turn": turn + 1}, "still open")
    refused(session, "turn/end", {"turn": turn + 7, "reason": {"kind": "completed"}}, "does not match open")
    session.append("step/start", {"turn": turn, "step": 1})
    refused(session, "tool/result", result("nope", turn), "no prior tool/call", surface_op="append")
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    check_invariants(session.events)


def test_a_started_session_checks_its_appends(open_store: StoreFactory) -> None:  # noqa: F811
    live = open_store().start(SessionHeader(id="s", created_at=1))
    ill_formed_appends_are_refused(live.session)
    live.close()
    check_invariants(open_store().load("s").events)


def test_an_opened_session_is_checked_from_where_its_log_stands(open_store: StoreFactory) -> None:  # noqa: F811
    live = open_store().start(SessionHeader(id="s", created_at=1))
    closed_turn(Recorder(live))
    live.close()
    reopened = open_store().open("s")
    refused(reopened.session, "turn/start", {"turn": 1}, "expected turn 2")
    ill_formed_appends_are_refused(reopened.session, 2)
    reopened.close()


def test_a_fork_child_is_checked_from_its_seed(open_store: StoreFactory) -> None:  # noqa: F811
    store = open_store()
    live = store.start(SessionHeader(id="p", created_at=1))
    closed_turn(Recorder(live))
    live.close()
    child = open_store().fork("p", child_id="c")
    refused(child.session, "step/start", {"turn": 1, "step": 2}, "open turn is null")
    refused(child.session, "turn/start", {"turn": 1}, "expected turn 2")
    child.session.append("turn/start", {"turn": 2})
    refused(child.session, "turn/start", {"turn": 3}, "still open")
    child.close()


def test_opting_out_accepts_a_foreign_order_on_start_open_and_fork(open_store: StoreFactory) -> None:  # noqa: F811
    store = open_store()
    live = store.start(SessionHeader(id="raw", created_at=1), check_invariants=False)
    assert not live.checks_invariants
    live.session.append("turn/start", {"turn": 5})
    live.session.append("turn/end", {"turn": 5, "reason": {"kind": "completed"}})
    live.session.append("turn/end", {"turn": 9, "reason": {"kind": "completed"}})
    live.close()
    with pytest.raises(InvariantError):
        check_invariants(open_store().load("raw").events)
    again = open_store().open("raw", check_invariants=False)
    again.session.append("turn/end", {"turn": 10, "reason": {"kind": "completed"}})
    again.close()
    child = open_store().fork("raw", child_id="raw-child", check_invariants=False)
    child.session.append("turn/end", {"turn": 11, "reason": {"kind": "completed"}})
    child.close()


def test_the_recorder_checks_a_plain_session_and_refuses_the_turn_it_did_not_write() -> None:
    session = Session.create("plain", clock=lambda: 1)
    recorder = Recorder(session)
    assert InvariantChecker.attached(session)
    with recorder.turn():
        refused(session, "turn/start", {"turn": 2}, "still open")
        refused(session, "turn/end", {"turn": 3, "reason": {"kind": "completed"}}, "does not match")


def test_the_recorder_opt_out_is_explicit_and_never_adds_a_second_checker() -> None:
    unchecked = Session.create("u", clock=lambda: 1)
    Recorder(unchecked, check_invariants=False)
    assert not InvariantChecker.attached(unchecked)
    unchecked.append("turn/end", {"turn": 4, "reason": {"kind": "completed"}})  # accepted: opted out

    checked = Session.create("c", clock=lambda: 1)
    InvariantChecker.attach(checked)
    Recorder(checked)
    Recorder(checked)
    assert len(checked._validators) == 1
    with pytest.raises(UsageError, match="already checked") as caught:
        Recorder(checked, check_invariants=False)
    assert caught.value.session_id == "c"


def test_a_recorder_over_a_live_session_keeps_the_stores_choice(open_store: StoreFactory) -> None:  # noqa: F811
    store = open_store()
    checked: LiveSession = store.start(SessionHeader(id="a", created_at=1))
    Recorder(checked)
    assert len(checked.session._validators) == 1
    raw = store.start(SessionHeader(id="b", created_at=1), check_invariants=False)
    Recorder(raw)
    assert not InvariantChecker.attached(raw.session)
    checked.close()
    raw.close()


def test_tool_call_before_the_assistant_message_is_refused() -> None:
    session = Session.create("order", clock=lambda: 1)
    with Recorder(session).turn() as turn, turn.step() as step:
        step.request_header(HEADER)
        before = session.seq
        with pytest.raises(UsageError, match="before this step's assistant/message") as caught:
            step.tool_call("c1", "ls", "{}")
        assert (caught.value.session_id, caught.value.event_type, caught.value.seq) == ("order", "tool/call",
                                                                                        before)
        assert session.seq == before
        step.assistant(content=[{"type": "tool-call", "id": "c1", "name": "ls", "arguments": "{}"}])
        step.tool_call("c1", "ls", "{}")
        step.tool_result("c1", "ok")
    check_invariants(session.events)


def test_a_vetoed_step_end_leaves_the_step_open_for_the_next_chunk() -> None:
    session = Session.create("veto", clock=lambda: 1)
    InvariantChecker.attach(session)
    vetoes = iter([True])

    def veto(candidate: Any) -> None:
        if candidate.type == "step/end" and next(vetoes, False):
            raise UsageError("later veto")

    session.add_validator(veto)
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    with pytest.raises(UsageError, match="later veto"):
        session.append("step/end", {"turn": 1, "step": 1})
    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": CHUNK})
    session.append("step/end", {"turn": 1, "step": 1})
    refused(session, "assistant/chunk", {"turn": 1, "step": 1, "chunk": CHUNK}, "open is turn 1/step null")


_KINDS = ["turn/start", "turn/end", "step/start", "step/end", "assistant/chunk", "tool/call", "tool/result",
          "request/context", "user/message"]


@st.composite
def candidates(draw: st.DrawFn) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """An append that is often, but not always, well-formed where it lands."""
    kind = draw(st.sampled_from(_KINDS))
    turn, step = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    call = draw(st.sampled_from(["c1", "c2"]))
    if kind in ("turn/start", "turn/end"):
        data = {"turn": turn, "reason": {"kind": "completed"}} if kind == "turn/end" else {"turn": turn}
        return kind, data, {}
    if kind == "assistant/chunk":
        return kind, {"turn": turn, "step": step, "chunk": CHUNK}, {}
    if kind == "tool/call":
        return kind, {"turn": turn, "step": step, "callId": call, "name": "n", "arguments": "{}"}, {}
    if kind == "tool/result":
        return kind, result(call, turn, step), {"surface_op": "append"}
    if kind == "request/context":
        return kind, {"provider": "p", "model": "m"}, {}
    if kind == "user/message":
        return kind, {"id": f"u{draw(st.integers(0, 10**6))}", "role": "user", "source": {"kind": "user"},
                      "content": [{"type": "text", "text": "hi"}]}, {"surface_op": "append"}
    return kind, {"turn": turn, "step": step}, {}


@settings(max_examples=60, deadline=None)
@given(st.lists(candidates(), max_size=40))
def test_the_live_checker_accepts_exactly_what_check_invariants_accepts(
        appends: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
    session = Session.create("prop", clock=lambda: 1)
    InvariantChecker.attach(session, replay="last-turn")
    for kind, data, markers in appends:
        before = list(session.events)
        try:
            session.append(kind, data, **markers)
        except AgentlogError as exc:
            assert list(session.events) == before
            if not isinstance(exc, InvariantError):
                continue  # a payload refusal (say, a reused message id): not this property's business
            shadow = Session.create("shadow", clock=lambda: 1)
            for event in before:
                shadow.append(event.type, event.data, surface_op=event.surface_op,
                              source_event_seqs=event.source_event_seqs)
            shadow.append(kind, data, **markers)
            with pytest.raises(InvariantError):
                check_invariants(shadow.events)
        else:
            check_invariants(session.events)
