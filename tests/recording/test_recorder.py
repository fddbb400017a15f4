"""The Recorder: well-formed turns and steps for an agent loop (spec session-core §1, §7, §11)."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from benchmarks.workload import workload_events

from agentlog import InvalidEventError, InvariantError, Session, UsageError, thaw
from agentlog.core.events import Event
from agentlog.core.failure import llm_failure
from agentlog.core.invariants import InvariantChecker, check_invariants
from agentlog.core.jsonvalue import FrozenDict
from agentlog.core.repair import NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT
from agentlog.recording.recorder import Recorder

HEADER: dict[str, Any] = {"config": {"provider": "p", "model": "m"}}


@pytest.fixture
def session() -> Iterator[Session]:
    """A fresh session on a fake clock, checked live against the §11 invariants."""
    created = Session.create("rec", clock=itertools.count(1).__next__)
    detach = InvariantChecker.attach(created)
    yield created
    detach()
    check_invariants(created.events)


def call_block(call_id: str) -> dict[str, Any]:
    """A model message's tool-call block (``tool_call`` comes after the message that asks for it)."""
    return {"type": "tool-call", "id": call_id, "name": "run", "arguments": "{}"}


def types(session: Session, start: int = 0) -> list[str]:
    return [event.type for event in session.events][start:]


def wire(event: Event) -> dict[str, Any]:
    plain: dict[str, Any] = thaw(event.to_wire())
    return plain


def one_step_turn(recorder: Recorder, text: str = "ok", header: dict[str, Any] | None = None) -> None:
    with recorder.turn() as turn, turn.step() as step:
        step.request_header(header or HEADER)
        step.text_delta(text)
        step.assistant()


class BoomError(Exception):
    """A non-LLM failure raised by the agent loop."""


# -- the typical order -------------------------------------------------------------------


def test_scripted_turn_matches_the_spec_typical_order(session: Session) -> None:
    recorder = Recorder(session)
    with recorder.turn() as turn, turn.step() as step:
        step.user_message("hi", id="m1")
        step.request_header(HEADER)
        step.text_delta("ok")
        step.assistant(provider="p", model="m", id="m2")
    expected = [
        {"type": "turn/start", "data": {"turn": 1}},
        {"type": "step/start", "data": {"turn": 1, "step": 1}},
        {"type": "user/message", "data": {"id": "m1", "role": "user",
                                          "content": [{"type": "text", "text": "hi"}],
                                          "source": {"kind": "user"}}, "surfaceOp": "append"},
        {"type": "request/header", "data": {"header": {"config": {"provider": "p", "model": "m"}},
                                             "reason": "initial"}},
        {"type": "assistant/chunk",
         "data": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "ok"}}},
        {"type": "assistant/message",
         "data": {"turn": 1, "step": 1, "message": {
             "id": "m2", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
             "source": {"kind": "model", "provider": "p", "model": "m"}}},
         "sourceEventSeqs": [4], "surfaceOp": "append"},
        {"type": "step/end", "data": {"turn": 1, "step": 1}},
        {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]
    got = [wire(event) for event in session.events]
    for index, event in enumerate(got):
        assert event.pop("seq") == index
        del event["time"]
    assert got == expected


def test_a_turn_with_tools_follows_message_call_result_order(session: Session) -> None:
    recorder = Recorder(session)
    with recorder.turn() as turn:
        with turn.step() as step:
            step.user_message("read it")
            step.request_header(HEADER)
            step.text_delta("let me look")
            step.tool_call_delta("c1", "read_file", '{"path":')
            step.tool_call_delta("c1", None, '"a.py"}')
            step.assistant()
            call = step.tool_call("c1", "read_file", '{"path":"a.py"}')
            result = step.tool_result("c1", "print(1)")
        with turn.step() as step:
            step.request_header(HEADER)
            step.text_delta("done")
            step.assistant()
    assert types(session) == [
        "turn/start", "step/start", "user/message", "request/header", "assistant/chunk",
        "assistant/chunk", "assistant/chunk", "assistant/message", "tool/call", "tool/result",
        "step/end", "step/start", "assistant/chunk", "assistant/message", "step/end", "turn/end",
    ]
    assert result.source_event_seqs == (call.seq,)
    assert result.surface_op == "append"
    assert call.data == {"turn": 1, "step": 1, "callId": "c1", "name": "read_file",
                         "arguments": '{"path":"a.py"}'}
    assert [m["role"] for m in session.derive_messages()] == ["user", "assistant", "user", "assistant"]


def test_turns_are_numbered_after_the_last_turn_in_the_log() -> None:
    first = Session.create("numbered")
    recorder = Recorder(first)
    one_step_turn(recorder)
    one_step_turn(recorder)
    resumed = Session.restore("numbered", list(first.events), first.header)
    with Recorder(resumed).turn() as turn:
        assert turn.number == 3
        with turn.step() as step:
            assert step.number == 1
        with turn.step() as step:
            assert step.number == 2
    check_invariants(resumed.events)


def test_a_log_with_an_open_turn_refuses_a_new_turn(session: Session) -> None:
    session.append("turn/start", {"turn": 1})
    with pytest.raises(UsageError, match="turn 1 is still open"):
        Recorder(session).turn().start()
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


def test_one_recorder_opens_one_turn_at_a_time(session: Session) -> None:
    recorder = Recorder(session)
    with recorder.turn() as turn:
        assert recorder.active_turn is turn
        with pytest.raises(UsageError, match="still open"):
            recorder.turn().start()
        with pytest.raises(UsageError, match="already started"):
            turn.start()
    assert recorder.active_turn is None


def test_a_second_open_step_is_refused(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step(), pytest.raises(UsageError, match="still open"):
        turn.step().start()


def test_methods_of_a_closed_step_or_turn_are_refused(session: Session) -> None:
    with Recorder(session).turn() as turn:
        with turn.step() as step:
            pass
        with pytest.raises(UsageError, match="has ended"):
            step.text_delta("late")
        with pytest.raises(UsageError, match="has ended"):
            step.user_message("late")
    with pytest.raises(UsageError, match="turn 1 has ended"):
        turn.user_message("late")
    with pytest.raises(UsageError, match="has not started"):
        Recorder(session).turn().user_message("early")
    assert types(session) == ["turn/start", "step/start", "step/end", "turn/end"]


# -- user messages and todos -------------------------------------------------------------


def test_user_message_takes_text_or_blocks_and_a_source(session: Session) -> None:
    with Recorder(session).turn() as turn:
        plain = turn.user_message("hello")
        blocks = turn.user_message([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                                   source={"kind": "plugin", "plugin": "notes"}, id="u-2")
    assert plain.data["role"] == "user" and plain.data["source"] == {"kind": "user"}
    assert uuid.UUID(plain.data["id"]).version == 4
    assert plain.surface_op == "append"
    assert blocks.data["id"] == "u-2"
    assert [b["text"] for b in blocks.data["content"]] == ["a", "b"]
    assert blocks.data["source"] == {"kind": "plugin", "plugin": "notes"}


@pytest.mark.parametrize("content", [["not a block"], [{"text": "no type"}], 5, "bad \ud800"])
def test_user_message_refuses_malformed_content(session: Session, content: Any) -> None:
    with Recorder(session).turn() as turn:
        with pytest.raises(InvalidEventError):
            turn.user_message(content)
        with pytest.raises(InvalidEventError, match="kind"):
            turn.user_message("ok", source={"plugin": "x"})
    assert types(session) == ["turn/start", "turn/end"]


def test_todo_write_logs_the_whole_list_and_checks_status(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        event = step.todo_write([{"content": "write tests", "status": "in_progress"}])
        with pytest.raises(InvalidEventError, match="status"):
            turn.todo_write([{"content": "x", "status": "doing"}])
    assert event.type == "todo/write"
    assert event.data == {"todos": ({"content": "write tests", "status": "in_progress"},)}


# -- the stream --------------------------------------------------------------------------


def test_deltas_build_blocks_in_index_order(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        step.request_header(HEADER)
        seqs = [step.reasoning_delta("think"), step.reasoning_delta("ing"), step.text_delta("Hel"),
                step.text_delta("lo"), step.tool_call_delta("c1", "run", '{"command":'),
                step.tool_call_delta("c2", "read_file", "{}"), step.tool_call_delta("c1", None, '"ls"}')]
        message = step.assistant(usage={"inputTokens": 10, "outputTokens": 3})
    r1, r2, t1, t2, c1, c2, c3 = (session.events[seq] for seq in seqs)
    assert [e.data["chunk"]["index"] for e in (r1, r2, t1, t2, c1, c2, c3)] == [0, 0, 1, 1, 2, 3, 2]
    assert "name" not in c3.data["chunk"] and c1.data["chunk"]["name"] == "run"
    assert c3.data["chunk"] == {"type": "tool-call-delta", "index": 2, "id": "c1", "argumentsDelta": '"ls"}'}
    assert thaw(message.data["message"]["content"]) == [
        {"type": "reasoning", "text": "thinking"},
        {"type": "text", "text": "Hello"},
        {"type": "tool-call", "id": "c1", "name": "run", "arguments": '{"command":"ls"}'},
        {"type": "tool-call", "id": "c2", "name": "read_file", "arguments": "{}"},
    ]
    assert message.source_event_seqs == tuple(e.seq for e in (r1, r2, t1, t2, c1, c2, c3))
    assert message.data["usage"] == {"inputTokens": 10, "outputTokens": 3}


def test_a_text_block_after_another_block_gets_a_new_index(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        first = step.text_delta("a")
        step.reasoning_delta("r")
        second = step.text_delta("b")
        message = step.assistant(provider="p", model="m")
    a, b = session.events[first], session.events[second]
    assert (a.data["chunk"]["index"], b.data["chunk"]["index"]) == (0, 2)
    assert [blk["type"] for blk in message.data["message"]["content"]] == ["text", "reasoning", "text"]


def test_chunk_data_is_built_frozen(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        seq = step.text_delta("x")
        step.assistant(provider="p", model="m")
    event = session.events[seq]
    assert type(seq) is int and event.seq == seq and event.type == "assistant/chunk"
    assert type(event.data) is FrozenDict and type(event.data["chunk"]) is FrozenDict
    with pytest.raises(TypeError):
        event.data["chunk"]["text"] = "y"


@pytest.mark.parametrize("method", ["text_delta", "reasoning_delta"])
@pytest.mark.parametrize("bad", ["lone \udc80 surrogate", b"bytes", 7, None])
def test_deltas_refuse_non_strings_and_lone_surrogates(session: Session, method: str, bad: Any) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        with pytest.raises(InvalidEventError):
            getattr(step, method)(bad)
        with pytest.raises(InvalidEventError):
            step.tool_call_delta("c1", "run", bad)
    assert "assistant/chunk" not in types(session)


def test_generic_chunks_feed_the_message_usage_and_truncation(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        step.chunk({"type": "block-start", "index": 0, "blockType": "text"})
        step.chunk({"type": "text-delta", "index": 0, "text": "par"})
        step.chunk({"type": "text-delta", "index": 0, "text": "tial"})
        step.chunk({"type": "usage", "usage": {"inputTokens": 5, "outputTokens": 4}})
        step.chunk({"type": "finish", "reason": {"kind": "max-tokens"}})
        message = step.assistant(provider="p", model="m")
    assert message.data["message"]["content"] == ({"type": "text", "text": "partial"},)
    assert message.data["usage"] == {"inputTokens": 5, "outputTokens": 4}
    assert len(message.source_event_seqs or ()) == 5
    assert session.events[-1].data["reason"] == {"kind": "max-tokens"}


# -- the assistant message ---------------------------------------------------------------


def test_assistant_without_chunks_cites_no_chunks(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        message = step.assistant(provider="p", model="m")
    assert message.source_event_seqs == ()
    assert message.data["message"]["content"] == ()
    assert uuid.UUID(message.data["message"]["id"]).version == 4
    assert session.derive_messages() == []  # empty content derives nothing


def test_assistant_content_overrides_the_assembled_blocks(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        chunk = step.text_delta("abc")
        message = step.assistant(provider="p", model="m", id="a-1", replay_state={"token": "r"},
                                 content=[{"type": "text", "text": "abc"},
                                          {"type": "tool-call", "id": "c", "name": "n", "arguments": "{}"}])
        step.tool_call("c", "n", "{}")
        step.tool_result("c", "fine")
    assert message.source_event_seqs == (chunk,)
    assert message.data["message"]["id"] == "a-1"
    assert message.data["message"]["source"] == {"kind": "model", "provider": "p", "model": "m",
                                                  "replayState": {"token": "r"}}
    assert len(message.data["message"]["content"]) == 2


def test_assistant_defaults_provider_and_model_to_the_request_header(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        with pytest.raises(UsageError, match="needs provider and model"):
            step.assistant()
        step.request_header({"config": {"provider": "deepseek", "model": "deepseek-chat"}})
        message = step.assistant()
    assert message.data["message"]["source"] == {"kind": "model", "provider": "deepseek",
                                                  "model": "deepseek-chat"}


def test_interrupted_message_omits_undispatched_tool_calls(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        step.text_delta("so far")
        step.tool_call_delta("c1", "run", "{")
        message = step.assistant(provider="p", model="m", interrupted=True)
    assert message.data["interrupted"] is True
    assert message.data["message"]["content"] == ({"type": "text", "text": "so far"},)
    assert len(message.source_event_seqs or ()) == 2


def test_one_assistant_message_per_step_and_no_deltas_after_it(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        step.assistant(provider="p", model="m")
        with pytest.raises(UsageError, match="already has its assistant/message"):
            step.assistant(provider="p", model="m")
        with pytest.raises(UsageError, match="after this step's assistant/message"):
            step.text_delta("late")


@pytest.mark.parametrize("usage", [{"inputTokens": 1}, {"inputTokens": -1, "outputTokens": 0},
                                   {"inputTokens": True, "outputTokens": 0}, [1, 2]])
def test_assistant_refuses_malformed_usage(session: Session, usage: Any) -> None:
    with Recorder(session).turn() as turn, turn.step() as step, pytest.raises(InvalidEventError):
        step.assistant(provider="p", model="m", usage=usage)


def test_tool_call_with_a_nameless_streamed_call_is_refused(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        step.tool_call_delta("c1", None, "{}")
        with pytest.raises(InvalidEventError, match="lacks an id or a name"):
            step.assistant(provider="p", model="m")


# -- tools ---------------------------------------------------------------------------------


def test_tool_result_shape_error_and_meta(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        step.assistant(provider="p", model="m")
        call = step.tool_call("c1", "run", '{"command":"false"}')
        result = step.tool_result("c1", [{"type": "text", "text": "exit 1"}], is_error=True,
                                  error={"name": "ExitError", "code": "EXIT"}, meta={"exit": 1}, id="r-1")
    assert thaw(result.data) == {
        "turn": 1, "step": 1,
        "message": {"id": "r-1", "role": "user",
                    "content": [{"type": "tool-result", "toolCallId": "c1",
                                 "content": [{"type": "text", "text": "exit 1"}], "isError": True}],
                    "source": {"kind": "tool", "callId": "c1"}},
        "error": {"name": "ExitError", "code": "EXIT"},
        "meta": {"exit": 1},
    }
    assert result.source_event_seqs == (call.seq,)


def test_tool_result_needs_a_prior_call_in_this_step(session: Session) -> None:
    recorder = Recorder(session)
    with recorder.turn() as turn:
        with turn.step() as step:
            step.assistant(content=[call_block("c1")], provider="p", model="m")
            step.tool_call("c1", "run", "{}")
        with turn.step() as step:
            with pytest.raises(UsageError, match="no prior tool/call in this step"):
                step.tool_result("c1", "late")
            not_started = step.tool_result("c9", "never ran", is_error=True,
                                           error={"name": "Rejected", "code": "TOOL_NOT_STARTED"})
            step.assistant(content=[call_block("c2")], provider="p", model="m")
            step.tool_call("c2", "run", "{}")
            step.tool_result("c2", "ok")
            with pytest.raises(UsageError, match="already has its tool/result"):
                step.tool_result("c2", "twice")
            with pytest.raises(UsageError, match="already logged"):
                step.tool_call("c2", "run", "{}")
    assert not_started.source_event_seqs is None


# -- request header and context ------------------------------------------------------------


def test_header_reasons_initial_change_and_no_duplicates(session: Session) -> None:
    recorder = Recorder(session)
    changed = {"config": {"provider": "p", "model": "m2"}}
    with recorder.turn() as turn:
        with turn.step() as step:
            first = step.request_header(HEADER)
        with turn.step() as step:
            same = step.request_header({"config": {"provider": "p", "model": "m"}, "system": ""})
        with turn.step() as step:
            change = step.request_header(changed)
    with recorder.turn() as turn, turn.step() as step:
        again = step.request_header(changed)
    assert first is not None and first.data["reason"] == "initial"
    assert same is None and again is None
    assert change is not None and change.data["reason"] == "change"
    assert change.data["header"] == changed
    assert types(session).count("request/header") == 2


def test_a_new_recorder_over_a_log_with_headers_logs_resume(session: Session) -> None:
    one_step_turn(Recorder(session))
    recorder = Recorder(session)
    with recorder.turn() as turn:
        with turn.step() as step:
            resumed = step.request_header(HEADER)
        with turn.step() as step:
            assert step.request_header(HEADER) is None
    assert resumed is not None and resumed.data["reason"] == "resume"
    assert [e.data["reason"] for e in session.events if e.type == "request/header"] == ["initial", "resume"]


def test_request_header_refuses_a_header_without_provider(session: Session) -> None:
    with Recorder(session).turn() as turn, turn.step() as step:
        with pytest.raises(InvalidEventError, match="lacks provider/model"):
            step.request_header({"config": {"model": "m"}})
        with pytest.raises(InvalidEventError, match="request/context lacks provider"):
            step.request_header(HEADER, context={"model": "m"})
        with pytest.raises(InvalidEventError, match="contextWindow"):
            step.request_header(HEADER, context={"provider": "p", "model": "m", "contextWindow": 0})
    assert "request/header" not in types(session)


def test_request_context_is_logged_only_when_it_changes(session: Session) -> None:
    context = {"provider": "p", "model": "m", "contextWindow": 128000}
    with Recorder(session).turn() as turn:
        for _ in range(3):
            with turn.step() as step:
                step.request_header(HEADER, context=context)
        with turn.step() as step:
            step.request_header(HEADER, context={"provider": "p", "model": "m"})
    with Recorder(session).turn() as turn, turn.step() as step:
        step.request_header(HEADER, context={"provider": "p", "model": "m"})
    contexts = [e for e in session.events if e.type == "request/context"]
    assert [dict(e.data) for e in contexts] == [context, {"provider": "p", "model": "m"}]
    header_at = types(session).index("request/header")
    assert types(session)[header_at + 1] == "request/context"
    assert session.request_context() == {"provider": "p", "model": "m"}


# -- checkpoints ---------------------------------------------------------------------------


class CountingFlush:
    """A real checkpoint that remembers the last logged event each time it runs."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.seen: list[str] = []

    def __call__(self) -> None:
        self.seen.append(self.session.events[-1].type)


def test_flush_runs_before_the_model_request_and_before_each_tool_runs(session: Session) -> None:
    flush = CountingFlush(session)
    recorder = Recorder(session, flush=flush, compactor="kept")
    assert recorder.compactor == "kept"
    with recorder.turn() as turn:
        with turn.step() as step:
            step.user_message("go")
            step.request_header(HEADER)
            assert flush.seen == ["request/header"]
            step.tool_call_delta("a", "run", "{}")
            step.tool_call_delta("b", "run", "{}")
            step.assistant()
            assert len(flush.seen) == 1  # no checkpoint for chunks or the message
            step.tool_call("a", "run", "{}")
            step.tool_result("a", "ok")
            step.tool_call("b", "run", "{}")
            step.tool_result("b", "ok")
        with turn.step() as step:
            step.request_header(HEADER)  # unchanged: not logged, still a checkpoint
    assert flush.seen == ["request/header", "tool/call", "tool/call", "step/start"]


def test_async_flush_is_awaited_by_the_async_twins(session: Session) -> None:
    seen: list[str] = []

    async def aflush() -> None:
        await asyncio.sleep(0)
        seen.append(session.events[-1].type)

    async def loop() -> None:
        recorder = Recorder(session, flush=aflush)
        async with recorder.turn() as turn, turn.step() as step:
            with pytest.raises(UsageError, match="flush is async"):
                step.request_header(HEADER)
            with pytest.raises(UsageError, match="flush is async"):
                step.tool_call("c", "run", "{}")
            await step.arequest_header(HEADER)
            step.tool_call_delta("c", "run", "{}")
            step.assistant()
            await step.atool_call("c", "run", "{}")
            step.tool_result("c", "ok")

    asyncio.run(loop())
    assert seen == ["request/header", "tool/call"]
    assert types(session).count("request/header") == 1 and types(session).count("tool/call") == 1


def test_a_sync_flush_works_in_the_async_twins(session: Session) -> None:
    flush = CountingFlush(session)

    async def loop() -> None:
        async with Recorder(session, flush=flush).turn() as turn, turn.step() as step:
            await step.arequest_header(HEADER)
            step.assistant(content=[call_block("c")])
            await step.atool_call("c", "run", "{}")
            step.tool_result("c", "ok")

    asyncio.run(loop())
    assert flush.seen == ["request/header", "tool/call"]


# -- exits ---------------------------------------------------------------------------------


def test_an_exception_ends_the_step_and_the_turn_with_an_error_and_is_reraised(session: Session) -> None:
    with pytest.raises(BoomError, match="disk full"), Recorder(session).turn() as turn, turn.step() as step:
        step.text_delta("x")
        raise BoomError("disk full")
    assert types(session)[-2:] == ["step/end", "turn/end"]
    failure = {"message": "BoomError: disk full", "code": "UNKNOWN"}
    assert thaw(session.events[-1].data) == {"turn": 1, "reason": {"kind": "error", "error": failure}}


class ProviderError(Exception):
    """An LLM failure with the attributes an SDK error carries."""

    def __init__(self) -> None:
        super().__init__("rate limited")
        self.code = "RATE_LIMIT"
        self.status = 429
        self.request_id = "req-1"
        self.provider_retry_after_ms = 2000


class CarriedFailureError(Exception):
    """An exception that carries its own LlmFailure."""

    llm_failure: ClassVar[dict[str, Any]] = {"message": "context too long", "code": "CONTEXT_OVERFLOW",
                                             "status": 400}


def test_llm_failure_reads_code_status_request_id_or_a_given_failure() -> None:
    assert llm_failure(ProviderError()) == {"message": "rate limited", "code": "RATE_LIMIT",
                                            "status": 429, "providerRetryAfterMs": 2000,
                                            "requestId": "req-1"}
    assert llm_failure(CarriedFailureError("x")) == CarriedFailureError.llm_failure
    assert llm_failure(ValueError()) == {"message": "ValueError", "code": "UNKNOWN"}
    assert llm_failure(ValueError("bad \ud800"))["message"] == "ValueError: bad \\ud800"


def test_an_llm_exception_fills_the_failure_of_the_error_turn(session: Session) -> None:
    with pytest.raises(ProviderError), Recorder(session).turn():
        raise ProviderError()
    assert session.events[-1].data["reason"]["error"]["code"] == "RATE_LIMIT"
    assert types(session) == ["turn/start", "turn/end"]


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, asyncio.CancelledError])
def test_an_interrupt_ends_the_turn_aborted_by_the_user(session: Session,
                                                        interrupt: type[BaseException]) -> None:
    with pytest.raises(interrupt), Recorder(session).turn() as turn, turn.step():
        raise interrupt()
    assert types(session) == ["turn/start", "step/start", "step/end", "turn/end"]
    assert session.events[-1].data["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}


def test_an_exception_caught_inside_the_turn_still_closes_the_step(session: Session) -> None:
    with Recorder(session).turn() as turn:
        with pytest.raises(BoomError), turn.step():
            raise BoomError()
        with turn.step() as step:
            assert step.number == 2
    assert types(session) == ["turn/start", "step/start", "step/end", "step/start", "step/end", "turn/end"]
    assert session.events[-1].data["reason"] == {"kind": "completed"}


def test_a_failed_step_answers_its_unanswered_tool_calls(session: Session) -> None:
    with pytest.raises(BoomError), Recorder(session).turn() as turn, turn.step() as step:
        step.tool_call_delta("ran", "run", "{}")
        step.tool_call_delta("queued", "run", "{}")
        step.assistant(provider="p", model="m")
        call = step.tool_call("ran", "run", "{}")
        raise BoomError()
    ran, queued = (e for e in session.events if e.type == "tool/result")
    assert ran.source_event_seqs == (call.seq,)
    assert ran.data["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    assert ran.data["message"]["content"][0]["content"][0]["text"] == OUTCOME_UNKNOWN_TEXT
    assert queued.source_event_seqs is None
    assert queued.data["error"]["code"] == "TOOL_NOT_STARTED"
    assert queued.data["message"]["content"][0]["content"][0]["text"] == NOT_STARTED_TEXT
    assert all(e.data["message"]["content"][0]["isError"] for e in (ran, queued))
    assert types(session)[-2:] == ["step/end", "turn/end"]


def test_an_interrupted_stream_keeps_its_prefix_as_an_interrupted_message(session: Session) -> None:
    with pytest.raises(KeyboardInterrupt), Recorder(session).turn() as turn, turn.step() as step:
        step.request_header(HEADER)
        step.text_delta("half an ans")
        step.tool_call_delta("c", "run", "{")
        raise KeyboardInterrupt
    message = next(e for e in session.events if e.type == "assistant/message")
    assert message.data["interrupted"] is True
    assert message.data["message"]["content"] == ({"type": "text", "text": "half an ans"},)
    assert "tool/result" not in types(session)


def test_a_failure_to_close_does_not_hide_the_original_exception(session: Session) -> None:
    def veto_turn_end(event: Event) -> None:
        if event.type == "turn/end":
            raise InvariantError("vetoed")

    recorder = Recorder(session)
    remove = session.add_validator(veto_turn_end)
    with pytest.raises(BoomError) as caught, recorder.turn():
        raise BoomError()
    remove()
    assert any("could not be logged" in note for note in caught.value.__notes__)
    assert recorder.active_turn is None
    session.append("turn/end", {"turn": 1, "reason": {"kind": "error", "error": {"message": "x",
                                                                                   "code": "UNKNOWN"}}})


# -- explicit ends -------------------------------------------------------------------------


def test_explicit_end_reasons(session: Session) -> None:
    recorder = Recorder(session)
    with recorder.turn() as turn:
        turn.abort()
    with recorder.turn() as turn:
        turn.abort("parent")
    with recorder.turn() as turn:
        turn.block()
    with recorder.turn() as turn:
        turn.fail(ProviderError())
    with recorder.turn() as turn:
        with pytest.raises(InvalidEventError, match="needs a string message and code"):
            turn.fail({"message": "no code"})
        turn.fail({"message": "quota", "code": "QUOTA"})
    with recorder.turn() as turn:
        turn.end({"kind": "plugin-stop", "detail": "x"})
    reasons = [thaw(e.data["reason"]) for e in session.events if e.type == "turn/end"]
    assert reasons == [
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "aborted", "reason": {"kind": "parent"}},
        {"kind": "blocked"},
        {"kind": "error", "error": llm_failure(ProviderError())},
        {"kind": "error", "error": {"message": "quota", "code": "QUOTA"}},
        {"kind": "plugin-stop", "detail": "x"},
    ]


def test_ending_a_turn_closes_its_open_step(session: Session) -> None:
    recorder = Recorder(session)
    with recorder.turn() as turn, turn.step() as step:
        step.assistant(provider="p", model="m")
        turn.end()
        with pytest.raises(UsageError):
            step.text_delta("after")
    assert types(session) == ["turn/start", "step/start", "assistant/message", "step/end", "turn/end"]


def test_max_tokens_is_sticky_over_later_steps(session: Session) -> None:
    recorder = Recorder(session)
    with recorder.turn() as turn:
        with turn.step() as step:
            step.max_tokens()
        with turn.step():
            pass
    with recorder.turn() as turn:
        turn.max_tokens()
        turn.end({"kind": "completed"})
    with recorder.turn() as turn:
        turn.max_tokens()
        turn.abort()
    reasons = [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"]
    assert reasons == ["max-tokens", "max-tokens", "aborted"]


def test_end_refuses_a_reason_without_kind(session: Session) -> None:
    with Recorder(session).turn() as turn, pytest.raises(InvalidEventError, match="kind"):
        turn.end({"why": "no kind"})


# -- async ----------------------------------------------------------------------------------


def test_async_turns_and_steps(session: Session) -> None:
    async def loop() -> None:
        recorder = Recorder(session)
        async with recorder.turn() as turn, turn.step() as step:
            await step.arequest_header(HEADER)
            step.text_delta("hi")
            step.assistant()

    asyncio.run(loop())
    assert types(session) == ["turn/start", "step/start", "request/header", "assistant/chunk",
                              "assistant/message", "step/end", "turn/end"]


def test_a_cancelled_task_ends_its_turn_aborted(session: Session) -> None:
    started = asyncio.Event()

    async def agent() -> None:
        async with Recorder(session).turn() as turn, turn.step() as step:
            await step.arequest_header(HEADER)
            step.text_delta("partial")
            started.set()
            await asyncio.sleep(60)

    async def main() -> None:
        task = asyncio.create_task(agent())
        await asyncio.wait({task, asyncio.ensure_future(started.wait())},
                           return_when=asyncio.FIRST_COMPLETED)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert types(session)[-3:] == ["assistant/message", "step/end", "turn/end"]
    assert session.events[-1].data["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}


def test_an_async_exception_ends_the_turn_with_an_error(session: Session) -> None:
    async def loop() -> None:
        async with Recorder(session).turn() as turn, turn.step():
            raise BoomError("async")

    with pytest.raises(BoomError):
        asyncio.run(loop())
    assert session.events[-1].data["reason"]["kind"] == "error"


# -- the standard workload -----------------------------------------------------------------


def step_types(step: int, first: bool) -> list[str]:
    """The event types of one workload step (WORKLOAD.md)."""
    head = ["step/start"] + (["user/message"] if step == 1 else []) + (["request/header"] if first else [])
    tools = ["tool/call", "tool/result"] if step <= 3 else []
    return head + ["assistant/chunk"] * 40 + ["assistant/message", *tools, "step/end"]


def test_the_standard_workload_of_two_turns_has_363_events_in_order() -> None:
    events = workload_events(2)
    expected: list[str] = []
    for turn in (1, 2):
        expected.append("turn/start")
        for step in range(1, 5):
            expected.extend(step_types(step, first=turn == 1 and step == 1))
        expected.append("turn/end")
    assert len(events) == 363
    assert [e.type for e in events] == expected
    check_invariants(events)
