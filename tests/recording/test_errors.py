"""Every Recorder refusal names session, event type, would-be seq and payload path (issue 11, item 7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentlog import AgentlogError, InvalidEventError, Recorder, Session, UsageError
from agentlog.recording.recorder import Step, Turn

HEADER = {"systemPrompt": "s", "tools": [], "config": {"provider": "p", "model": "m"}}

Call = Callable[[Turn, Step], Any]

CASES: list[tuple[str, Call, str, str]] = [
    ("step.user_message(None)", lambda turn, step: step.user_message(None), "user/message", "data.content"),
    ("turn.user_message(None)", lambda turn, step: turn.user_message(None), "user/message", "data.content"),
    ("text_delta(42)", lambda turn, step: step.text_delta(42), "assistant/chunk", "data.chunk.text"),
    ('request_header("x")', lambda turn, step: step.request_header("x"), "request/header", "data.header"),
    ("user_message(lone surrogate)", lambda turn, step: step.user_message("a\ud800"), "user/message",
     "data.content[0].text"),
    ("text_delta(lone surrogate)", lambda turn, step: step.text_delta("a\ud800"), "assistant/chunk",
     "data.chunk.text"),
    ("reasoning_delta(lone surrogate)", lambda turn, step: step.reasoning_delta("\udfff"), "assistant/chunk",
     "data.chunk.text"),
    ("tool_call_delta(lone surrogate id)", lambda turn, step: step.tool_call_delta("c\ud800", "n", "{}"),
     "assistant/chunk", "data.chunk.id"),
    ("chunk(lone surrogate)",
     lambda turn, step: step.chunk({"type": "text-delta", "index": 0, "text": "\ud800"}),
     "assistant/chunk", "data.chunk.text"),
    ("request_header(lone surrogate)",
     lambda turn, step: step.request_header({**HEADER, "systemPrompt": "\ud800"}),
     "request/header", "data.header.systemPrompt"),
    ("request context", lambda turn, step: step.request_header(HEADER, context={"provider": "p"}),
     "request/context", "data.model"),
    ("assistant(lone surrogate)", lambda turn, step: step.assistant(
        content=[{"type": "text", "text": "\ud800"}], provider="p", model="m"),
     "assistant/message", "data.message.content[0].text"),
    ("assistant(model=42)", lambda turn, step: step.assistant(content=[], provider="p", model=42),
     "assistant/message", "data.message.source.model"),
    ("tool_result(lone surrogate)",
     lambda turn, step: step.tool_result("c1", "\ud800", is_error=True,
                                         error={"name": "x", "code": "TOOL_NOT_STARTED"}),
     "tool/result", "data.message.content[0].content[0].text"),
    ("todo_write", lambda turn, step: turn.todo_write([{"content": 1}]), "todo/write", "data.todos[0]"),
    ("turn.end(bad reason)", lambda turn, step: turn.end({"kind": 3}), "turn/end", "data.reason.kind"),
    ("user_message(id='')", lambda turn, step: step.user_message("x", id=""), "user/message", "data.id"),
]


@pytest.mark.parametrize(("name", "call", "event_type", "path"), CASES, ids=[case[0] for case in CASES])
def test_a_refused_input_names_session_type_seq_and_path(name: str, call: Call, event_type: str,
                                                         path: str) -> None:
    session = Session.create("rec-errors", clock=lambda: 1)
    turn = Recorder(session).turn().start()
    step = turn.step().start()
    before = list(session.events)
    with pytest.raises(InvalidEventError) as caught:
        call(turn, step)
    error = caught.value
    assert isinstance(error, AgentlogError)
    assert (error.session_id, error.event_type, error.seq) == ("rec-errors", event_type, len(before))
    assert error.path == path
    assert f'session "rec-errors", {event_type}, seq {len(before)}' in str(error) and path in str(error)
    assert list(session.events) == before


def test_state_refusals_name_the_session_type_and_seq_too() -> None:
    session = Session.create("rec-state", clock=lambda: 1)
    turn = Recorder(session).turn().start()
    step = turn.step().start()
    step.end()
    with pytest.raises(UsageError, match="needs an open step") as caught:
        step.text_delta("late")
    where = (caught.value.session_id, caught.value.event_type, caught.value.seq)
    assert where == ("rec-state", "assistant/chunk", session.seq)
