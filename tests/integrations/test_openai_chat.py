"""The OpenAI Chat Completions adapter: the real ``openai`` client against a scripted local server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from agentlog import Recorder, Session, thaw
from agentlog.compaction.engine import Compactor
from agentlog.core.invariants import check_invariants
from agentlog.integrations.openai_chat import (
    arecord_chat_stream,
    chat_error,
    chat_failure,
    record_chat_completion,
    record_chat_stream,
)
from agentlog.integrations.openai_messages import chat_header, chat_tools, to_chat_messages
from agentlog.recording.recorder import Step
from tests.compaction.helpers import FixedSummarizer, new_session, record_turn
from tests.integrations.helpers import HTTP_ERRORS, aclient, chunks, client, messages, run_tools, turn_end
from tests.integrations.server import Provider, error, json_reply, sse, sse_cut, sse_ended

PATH_ARG = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = [{"type": "function", "function": {"name": name, "description": description, "parameters": PATH_ARG}}
         for name, description in (("read_file", "Read a file."), ("list_dir", "List a directory."))]
SYSTEM = "You are a terse coding agent."
FINAL_TEXT = "a.txt says hello; the directory has two files."
THOUGHT = "The user wants the file.Call read_file."
CUT_BEFORE = b'{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"th'
"""The cut stream ends just before the chunk holding the rest of call 2's arguments."""






def request(session: Session, model: str = "gpt-4o") -> dict[str, Any]:
    """The keyword arguments of the next streamed request, built from the log."""
    return {"model": model, "messages": to_chat_messages(session), "tools": chat_tools(session),
            "stream": True, "stream_options": {"include_usage": True}}










def direct(provider: Provider, name: str) -> list[ChatCompletionChunk]:
    """The same fixture parsed by the SDK with no agentlog in between."""
    provider.queue(sse(name))
    return list(client(provider).chat.completions.create(model="gpt-4o", messages=[], stream=True))


EXPECTED_TOOL_CHUNKS = [
    {"type": "text-delta", "index": 0, "text": "Let me "},
    {"type": "text-delta", "index": 0, "text": "look."},
    {"type": "tool-call-delta", "index": 1, "id": "call_Kq1", "name": "read_file", "argumentsDelta": ""},
    {"type": "tool-call-delta", "index": 1, "id": "call_Kq1", "argumentsDelta": '{"pa'},
    {"type": "tool-call-delta", "index": 1, "id": "call_Kq1", "argumentsDelta": 'th": "a.txt"}'},
    {"type": "tool-call-delta", "index": 2, "id": "call_Zr2", "name": "list_dir", "argumentsDelta": ""},
    {"type": "tool-call-delta", "index": 2, "id": "call_Zr2", "argumentsDelta": '{"path": "."}'},
    {"type": "finish", "reason": {"kind": "tool-calls"}},
    {"type": "usage", "usage": {"inputTokens": 20, "outputTokens": 42, "cacheReadTokens": 100,
                                "reasoningTokens": 0}},
]
EXPECTED_NEXT_MESSAGES = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "What is in a.txt and here?"},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "call_Kq1", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
        {"id": "call_Zr2", "type": "function",
         "function": {"name": "list_dir", "arguments": '{"path": "."}'}},
    ]},
    {"role": "tool", "tool_call_id": "call_Kq1", "content": "output of read_file a.txt"},
    {"role": "tool", "tool_call_id": "call_Zr2", "content": "output of list_dir ."},
]


def check_tool_turn(provider: Provider, session: Session, received: list[Any]) -> None:
    """What both the sync and the async tool turn must have logged and sent."""
    assert all(type(chunk) is ChatCompletionChunk for chunk in received)
    unrecorded = direct(provider, "openai_parallel_tools")
    assert [c.model_dump() for c in received] == [c.model_dump() for c in unrecorded]
    assert chunks(session)[: len(EXPECTED_TOOL_CHUNKS)] == EXPECTED_TOOL_CHUNKS
    first, final = messages(session)
    assert first["message"]["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool-call", "id": "call_Kq1", "name": "read_file", "arguments": '{"path": "a.txt"}'},
        {"type": "tool-call", "id": "call_Zr2", "name": "list_dir", "arguments": '{"path": "."}'},
    ]
    assert first["message"]["source"] == {"kind": "model", "provider": "openai", "model": "gpt-4o"}
    assert first["usage"] == EXPECTED_TOOL_CHUNKS[-1]["usage"]
    assert final["message"]["content"] == [{"type": "text", "text": FINAL_TEXT}]
    assert provider.requests[1]["messages"] == EXPECTED_NEXT_MESSAGES  # what the server was sent
    assert provider.requests[0]["tools"] == TOOLS
    final_message = {"role": "assistant", "content": FINAL_TEXT}
    assert to_chat_messages(session) == [*EXPECTED_NEXT_MESSAGES, final_message]
    assert turn_end(session) == {"kind": "completed"}
    check_invariants(session.events)


def test_a_parallel_tool_call_turn_is_recorded_and_replayed(provider: Provider) -> None:
    provider.queue(sse("openai_parallel_tools"), sse("openai_final_text"))
    session = new_session()
    recorder, sdk, received = Recorder(session), client(provider), []
    with recorder.turn() as turn:
        for number in (1, 2):
            with turn.step() as step:
                if number == 1:
                    step.user_message("What is in a.txt and here?")
                step.request_header(chat_header("gpt-4o", system=SYSTEM, tools=TOOLS))
                stream = sdk.chat.completions.create(**request(session))
                received += [chunk for chunk in record_chat_stream(step, stream)]
                run_tools(step)
    check_tool_turn(provider, session, received[:11])


def test_the_async_stream_records_the_same_turn(provider: Provider) -> None:
    provider.queue(sse("openai_parallel_tools"), sse("openai_final_text"))
    session = new_session()
    received: list[Any] = []

    async def main() -> None:
        recorder, sdk = Recorder(session), aclient(provider)
        async with recorder.turn() as turn:
            for number in (1, 2):
                async with turn.step() as step:
                    if number == 1:
                        step.user_message("What is in a.txt and here?")
                    await step.arequest_header(chat_header("gpt-4o", system=SYSTEM, tools=TOOLS))
                    stream = await sdk.chat.completions.create(**request(session))
                    received.extend([chunk async for chunk in arecord_chat_stream(step, stream)])
                    run_tools(step)
        await sdk.close()

    asyncio.run(main())
    check_tool_turn(provider, session, received[:11])


def deepseek_turn(provider: Provider, session: Session, recorder: Recorder, prompt: str,
                  *fixtures: str) -> None:
    with recorder.turn() as turn:
        for number, _fixture in enumerate(fixtures):
            with turn.step() as step:
                if number == 0:
                    step.user_message(prompt)
                step.request_header(chat_header("deepseek-reasoner", provider="deepseek", tools=TOOLS[:1]))
                stream = client(provider).chat.completions.create(**request(session, "deepseek-reasoner"))
                for _chunk in record_chat_stream(step, stream):
                    pass
                run_tools(step)


def test_deepseek_reasoning_interleaved_with_text_and_thinking_mode_replay(provider: Provider) -> None:
    provider.queue(sse("deepseek_reasoning_tool"), sse("deepseek_answer"), sse("deepseek_answer"),
                   sse("deepseek_answer"))
    session = new_session()
    recorder = Recorder(session)
    deepseek_turn(provider, session, recorder, "Read b.txt", "deepseek_reasoning_tool", "deepseek_answer")
    deepseek_turn(provider, session, recorder, "Thanks", "deepseek_answer")
    first = messages(session)[0]
    assert first["message"]["content"] == [
        {"type": "reasoning", "text": "The user wants the file."},
        {"type": "text", "text": "Reading it."},
        {"type": "reasoning", "text": "Call read_file."},
        {"type": "tool-call", "id": "call_00_ds1", "name": "read_file", "arguments": '{"path":"b.txt"}'},
    ]
    assert first["message"]["source"]["provider"] == "deepseek"
    assert first["usage"] == {"inputTokens": 44, "outputTokens": 50, "cacheReadTokens": 256,
                              "reasoningTokens": 30}
    with recorder.turn() as turn, turn.step() as step:
        step.user_message("Bye")
        sent = to_chat_messages(session)
    assistants = [m for m in sent if m["role"] == "assistant"]
    # turn 1 made a tool call: its reasoning must go back; turn 2 made none: its reasoning is dropped
    assert [m.get("reasoning_content") for m in assistants] == [
        THOUGHT, "It says hi.", None]
    assert assistants[0]["content"] == "Reading it."
    # the request the server got for turn 1's second step carried the reasoning back
    assert provider.requests[1]["messages"][1]["reasoning_content"] == THOUGHT
    assert all("reasoning_content" not in m for m in to_chat_messages(session, reasoning="none"))
    assert [m.get("reasoning_content") for m in to_chat_messages(session, reasoning="all")
            if m["role"] == "assistant"] == [THOUGHT, "It says hi.", "It says hi."]


@contextlib.contextmanager
def streaming_step(provider: Provider, session: Session, reply: Any) -> Iterator[tuple[Step, Any]]:
    """A turn with one step whose request (prompt "go") is answered by ``reply``: (step, SDK stream)."""
    provider.queue(reply)
    with Recorder(session).turn() as turn, turn.step() as step:
        step.user_message("go")
        step.request_header(chat_header("gpt-4o"))
        try:
            stream = client(provider).chat.completions.create(**request(session))
        except openai.APIError as exc:
            raise chat_error(exc) from None
        yield step, stream


def one_step(provider: Provider, session: Session, reply: Any) -> list[Any]:
    """One turn of one streamed step against ``reply``; the chunks the app received."""
    with streaming_step(provider, session, reply) as (step, stream):
        return list(record_chat_stream(step, stream))


def test_finish_length_ends_the_turn_max_tokens(provider: Provider) -> None:
    session = new_session()
    one_step(provider, session, sse("openai_length"))
    assert {"type": "finish", "reason": {"kind": "max-tokens"}} in chunks(session)
    assert messages(session)[0]["message"]["content"] == [
        {"type": "text", "text": "The answer is a very long"}]
    assert turn_end(session) == {"kind": "max-tokens"}


def test_finish_content_filter_is_logged_with_the_partial_message(provider: Provider) -> None:
    session = new_session()
    one_step(provider, session, sse("openai_content_filter"))
    assert chunks(session)[-1] == {"type": "finish", "reason": {"kind": "error", "error": {
        "message": "the provider's content filter stopped the output", "code": "CONTENT_FILTER"}}}
    assert messages(session)[0]["message"]["content"] == [{"type": "text", "text": "I can"}]


def test_a_stream_cut_off_mid_tool_call_ends_the_turn_with_a_connection_error(provider: Provider) -> None:
    session = new_session()
    # openai >= 3.14 raises APIConnectionError; older SDKs let the HTTP client's error through
    with pytest.raises((openai.APIConnectionError, httpx.TransportError)) as caught:
        one_step(provider, session, sse_cut("openai_cut_mid_tool", CUT_BEFORE))
    assert caught.value.llm_failure["code"] == "CONNECTION_ERROR"  # type: ignore[union-attr]
    reason = turn_end(session)
    assert reason["kind"] == "error" and reason["error"]["code"] == "CONNECTION_ERROR"
    assert [c["type"] for c in chunks(session)] == ["tool-call-delta", "tool-call-delta"]
    assert messages(session) == []  # no half-assembled message reaches the surface
    assert to_chat_messages(session) == [{"role": "user", "content": "go"}]
    check_invariants(session.events)


FINISH_STOP = b'data: {"id":"chatcmpl-A1b2C3","object":"chat.completion.chunk","created":1733000000,' \
    b'"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_50cad350e4","choices":[{"index":0,"delta":{},' \
    b'"logprobs":null,"finish_reason":"stop"}]'
"""The chunk of ``openai_final_text`` that carries its finish reason."""


def async_step(provider: Provider, session: Session, reply: Any) -> list[Any]:
    """``one_step`` through ``AsyncOpenAI`` and ``arecord_chat_stream``."""
    provider.queue(reply)
    received: list[Any] = []

    async def main() -> None:
        sdk = aclient(provider)
        try:
            async with Recorder(session).turn() as turn, turn.step() as step:
                step.user_message("go")
                await step.arequest_header(chat_header("gpt-4o"))
                stream = await sdk.chat.completions.create(**request(session))
                received.extend([chunk async for chunk in arecord_chat_stream(step, stream)])
        finally:
            await sdk.close()

    asyncio.run(main())
    return received


@pytest.mark.parametrize("run", [one_step, async_step])
def test_a_stream_that_ends_without_a_finish_reason_fails_the_turn(provider: Provider, run: Any) -> None:
    # the body ends cleanly (no [DONE], no finish_reason): the SDK sees no error, but the reply is cut
    session = new_session()
    with pytest.raises(openai.APIConnectionError) as caught:
        run(provider, session, sse_ended("openai_final_text", FINISH_STOP))
    failure = caught.value.llm_failure  # type: ignore[attr-defined]
    assert failure["code"] == "CONNECTION_ERROR" and "finish reason" in failure["message"]
    assert caught.value.request.url.path == "/v1/chat/completions"  # the SDK's own request, named
    assert turn_end(session) == {"kind": "error", "error": thaw(failure)}
    # what was streamed is kept, then a finish of kind error (more in test_stream_ends.py)
    assert [c["type"] for c in chunks(session)] == ["text-delta", "finish"]
    assert chunks(session)[-1]["reason"] == {"kind": "error", "error": thaw(failure)}
    assert messages(session) == []  # no half message reaches the surface, as for a dropped connection
    check_invariants(session.events)


@pytest.mark.parametrize("run", [one_step, async_step])
def test_a_finished_stream_without_done_still_succeeds(provider: Provider, run: Any) -> None:
    session = new_session()
    run(provider, session, sse_ended("openai_final_text", b"data: [DONE]"))
    assert messages(session)[0]["message"]["content"] == [{"type": "text", "text": FINAL_TEXT}]
    assert turn_end(session) == {"kind": "completed"}


@pytest.mark.parametrize(("status", "fixture", "headers", "expected"), [
    *HTTP_ERRORS,
    (400, "deepseek_context_length", {}, {"code": "CONTEXT_WINDOW_EXCEEDED", "status": 400}),
])
def test_http_errors_end_the_turn_with_their_llm_failure(
    provider: Provider, status: int, fixture: str, headers: dict[str, str], expected: dict[str, Any]
) -> None:
    session = new_session()
    with pytest.raises(openai.APIStatusError) as caught:
        one_step(provider, session, error(status, fixture, headers))
    reason = turn_end(session)
    body = json.loads(error(status, fixture).body)["error"]
    assert reason == {"kind": "error", "error": {"message": body["message"], **expected}}
    assert thaw(chat_failure(caught.value)) == reason["error"]
    check_invariants(session.events)


def test_context_overflow_goes_through_the_compactors_overflow_path(provider: Provider) -> None:
    session = new_session()
    recorder = Recorder(session, compactor=Compactor(FixedSummarizer(), context_window=10**6))
    for index in (1, 2, 3):
        record_turn(recorder, index, header=chat_header("gpt-4o"))
    provider.queue(error(400, "openai_context_length"), sse("openai_final_text"))
    with recorder.turn() as turn, turn.step() as step:
        step.user_message("go on")
        step.request_header(chat_header("gpt-4o"))
        while True:
            try:
                stream = client(provider).chat.completions.create(**request(session))
                break
            except openai.APIError as exc:
                if not step.on_request_error(chat_error(exc)):
                    raise
        for _chunk in record_chat_stream(step, stream):
            pass
    first, retried = (r["messages"] for r in provider.requests)
    assert len(retried) < len(first)
    assert "<compacted-summary>" in retried[0]["content"]
    assert retried[-1] == {"role": "user", "content": "go on"}
    assert turn_end(session) == {"kind": "completed"}


def test_a_non_streamed_chat_completion_is_recorded(provider: Provider) -> None:
    provider.queue(json_reply("openai_completion_tools"))
    session = new_session()
    with Recorder(session).turn() as turn, turn.step() as step:
        step.user_message("list src")
        step.request_header(chat_header("gpt-4o", tools=TOOLS))
        completion = client(provider).chat.completions.create(model="gpt-4o",
                                                              messages=to_chat_messages(session))
        assert record_chat_completion(step, completion) is completion
        run_tools(step)
    message = messages(session)[0]
    assert message["message"]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool-call", "id": "call_N1", "name": "list_dir", "arguments": '{"path": "src"}'}]
    assert message["usage"] == {"inputTokens": 50, "outputTokens": 20, "cacheReadTokens": 0,
                                "reasoningTokens": 0}
    assert to_chat_messages(session)[-1] == {"role": "tool", "tool_call_id": "call_N1",
                                             "content": "output of list_dir src"}


def test_stopping_early_keeps_the_streamed_prefix_as_an_interrupted_message(provider: Provider) -> None:
    session = new_session()
    with streaming_step(provider, session, sse("openai_parallel_tools")) as (step, stream):
        recording = record_chat_stream(step, stream)
        for chunk in recording:
            if chunk.choices and chunk.choices[0].delta.tool_calls:
                break
        recording.close()
    (message,) = messages(session)
    assert message["interrupted"] is True
    assert message["message"]["content"] == [{"type": "text", "text": "Let me look."}]


def test_unanswered_tool_calls_get_a_synthetic_result_in_the_next_request(provider: Provider) -> None:
    session = new_session()
    with streaming_step(provider, session, sse("openai_parallel_tools")) as (step, stream):
        for _chunk in record_chat_stream(step, stream):
            pass
        step.tool_call("call_Kq1", "read_file", '{"path": "a.txt"}')
        step.tool_result("call_Kq1", "hello")
    sent = to_chat_messages(session)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert sent[3]["tool_call_id"] == "call_Zr2" and "never ran" in sent[3]["content"]


def test_importing_agentlog_does_not_import_the_provider_sdks() -> None:
    code = ("import sys, agentlog, agentlog.integrations, agentlog.integrations.openai_messages; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'anthropic')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
