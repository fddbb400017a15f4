"""The OpenAI Responses API adapter: the real ``openai`` client against a scripted local server."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from agentlog import Recorder, Session, thaw
from agentlog.compaction.engine import Compactor
from agentlog.core.invariants import check_invariants
from agentlog.integrations.openai_chat import chat_failure, chat_header
from agentlog.integrations.openai_responses import (
    arecord_responses_stream,
    aresponses_stream,
    record_response,
    record_responses_stream,
    responses_request,
    responses_stream,
    to_responses_input,
)
from agentlog.recording.recorder import Step
from tests.compaction.helpers import FixedSummarizer, new_session, record_turn
from tests.integrations.helpers import HTTP_ERRORS, aclient, chunks, client, messages, run_tools, turn_end
from tests.integrations.server import Provider, error, json_reply, sse, sse_cut

PATH_ARG = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = [{"type": "function", "function": {"name": name, "description": description, "parameters": PATH_ARG}}
         for name, description in (("read_file", "Read a file."), ("list_dir", "List a directory."))]
SYSTEM = "You are a terse coding agent."
FINAL_TEXT = "a.txt says hello; the directory has two files."
CUT_BEFORE = b'{"type":"response.function_call_arguments.delta","sequence_number":19'
"""The cut stream ends in read_file's arguments, before their last delta."""

REASONING_ITEM = {"id": "rs_R1", "type": "reasoning",
                  "summary": [{"type": "summary_text", "text": "The user wants the file and the listing."}],
                  "encrypted_content": "gAAAAB-enc-1"}
TEXT_ITEM = {"id": "msg_M1", "type": "message", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": "Let me look."}]}
CALL_ITEMS = [
    {"id": "fc_F1", "type": "function_call", "status": "completed", "arguments": '{"path": "a.txt"}',
     "call_id": "call_Kq1", "name": "read_file"},
    {"id": "fc_F2", "type": "function_call", "status": "completed", "arguments": '{"path": "."}',
     "call_id": "call_Zr2", "name": "list_dir"},
]
EXPECTED_NEXT_INPUT = [
    {"role": "user", "content": "What is in a.txt and here?"},
    REASONING_ITEM, TEXT_ITEM, *CALL_ITEMS,
    {"type": "function_call_output", "call_id": "call_Kq1", "output": "output of read_file a.txt"},
    {"type": "function_call_output", "call_id": "call_Zr2", "output": "output of list_dir ."},
]
EXPECTED_CHUNKS = [
    {"type": "reasoning-delta", "index": 0, "text": "The user wants "},
    {"type": "reasoning-delta", "index": 0, "text": "the file and the listing."},
    {"type": "text-delta", "index": 1, "text": "Let me "},
    {"type": "text-delta", "index": 1, "text": "look."},
    {"type": "tool-call-delta", "index": 2, "id": "call_Kq1", "name": "read_file", "argumentsDelta": ""},
    {"type": "tool-call-delta", "index": 2, "id": "call_Kq1", "argumentsDelta": '{"pa'},
    {"type": "tool-call-delta", "index": 2, "id": "call_Kq1", "argumentsDelta": 'th": "a.txt"}'},
    {"type": "tool-call-delta", "index": 3, "id": "call_Zr2", "name": "list_dir", "argumentsDelta": ""},
    {"type": "tool-call-delta", "index": 3, "id": "call_Zr2", "argumentsDelta": '{"path": "."}'},
    {"type": "finish", "reason": {"kind": "tool-calls"}},
    {"type": "usage", "usage": {"inputTokens": 20, "outputTokens": 64, "cacheReadTokens": 200,
                                "reasoningTokens": 32}},
]














def direct(provider: Provider, name: str) -> list[Any]:
    """The same fixture parsed by the SDK with no agentlog in between."""
    provider.queue(sse(name))
    return list(client(provider).responses.create(model="gpt-5", input="x", stream=True))


def check_tool_turn(provider: Provider, session: Session, received: list[Any]) -> None:
    unrecorded = direct(provider, "responses_reasoning_tools")
    assert [e.model_dump() for e in received[: len(unrecorded)]] == [e.model_dump() for e in unrecorded]
    assert chunks(session)[: len(EXPECTED_CHUNKS)] == EXPECTED_CHUNKS
    first, final = messages(session)
    assert first["message"]["content"] == [
        {"type": "reasoning", "text": "The user wants the file and the listing."},
        {"type": "text", "text": "Let me look."},
        {"type": "tool-call", "id": "call_Kq1", "name": "read_file", "arguments": '{"path": "a.txt"}'},
        {"type": "tool-call", "id": "call_Zr2", "name": "list_dir", "arguments": '{"path": "."}'},
    ]
    assert first["usage"] == EXPECTED_CHUNKS[-1]["usage"]
    assert final["message"]["content"] == [{"type": "text", "text": FINAL_TEXT}]
    sent = provider.requests[1]
    assert sent["input"] == EXPECTED_NEXT_INPUT  # reasoning replayed with its id and encrypted_content
    assert sent["instructions"] == SYSTEM
    assert sent["tools"] == [{"type": "function", "name": "read_file", "description": "Read a file.",
                              "parameters": PATH_ARG, "strict": False},
                             {"type": "function", "name": "list_dir", "description": "List a directory.",
                              "parameters": PATH_ARG, "strict": False}]
    assert sent["stream"] is True and sent["model"] == "gpt-5"
    final_item = {"id": "msg_T1", "type": "message", "status": "completed", "role": "assistant", "content": [
        {"type": "output_text", "annotations": [], "logprobs": [], "text": FINAL_TEXT}]}
    assert to_responses_input(session) == [*EXPECTED_NEXT_INPUT, final_item]
    assert turn_end(session) == {"kind": "completed"}
    check_invariants(session.events)


def test_reasoning_text_and_parallel_calls_are_recorded_and_replayed(provider: Provider) -> None:
    provider.queue(sse("responses_reasoning_tools"), sse("responses_final_text"))
    session = new_session()
    recorder, sdk, received = Recorder(session), client(provider), []
    with recorder.turn() as turn:
        for number in (1, 2):
            with turn.step() as step:
                if number == 1:
                    step.user_message("What is in a.txt and here?")
                step.request_header(chat_header("gpt-5", system=SYSTEM, tools=TOOLS))
                received += list(responses_stream(step, session, sdk, model="gpt-5"))
                run_tools(step)
    check_tool_turn(provider, session, received)


def test_the_async_stream_records_the_same_turn(provider: Provider) -> None:
    provider.queue(sse("responses_reasoning_tools"), sse("responses_final_text"))
    session = new_session()
    received: list[Any] = []

    async def main() -> None:
        recorder, sdk = Recorder(session), aclient(provider)
        async with recorder.turn() as turn:
            for number in (1, 2):
                async with turn.step() as step:
                    if number == 1:
                        step.user_message("What is in a.txt and here?")
                    await step.arequest_header(chat_header("gpt-5", system=SYSTEM, tools=TOOLS))
                    if number == 1:
                        stream = await sdk.responses.create(model="gpt-5", stream=True,
                                                            **responses_request(session))
                        received.extend([e async for e in arecord_responses_stream(step, stream)])
                    else:
                        received.extend([e async for e in await aresponses_stream(step, session, sdk,
                                                                                  model="gpt-5")])
                    run_tools(step)
        await sdk.close()

    asyncio.run(main())
    check_tool_turn(provider, session, received)


@contextlib.contextmanager
def streaming_step(provider: Provider, session: Session, reply: Any) -> Iterator[tuple[Step, Any]]:
    """A turn with one step whose request (prompt "go") is answered by ``reply``: (step, SDK stream)."""
    provider.queue(reply)
    with Recorder(session).turn() as turn, turn.step() as step:
        step.user_message("go")
        step.request_header(chat_header("gpt-5"))
        sdk = client(provider)
        yield step, sdk.responses.create(model="gpt-5", stream=True, **responses_request(session))


def one_step(provider: Provider, session: Session, reply: Any) -> list[Any]:
    with Recorder(session).turn() as turn, turn.step() as step:
        step.user_message("go")
        step.request_header(chat_header("gpt-5"))
        provider.queue(reply)
        return list(responses_stream(step, session, client(provider), model="gpt-5"))


def test_max_output_tokens_ends_the_turn_max_tokens(provider: Provider) -> None:
    session = new_session()
    one_step(provider, session, sse("responses_max_tokens"))
    assert {"type": "finish", "reason": {"kind": "max-tokens"}} in chunks(session)
    (message,) = messages(session)
    assert message["message"]["content"] == [{"type": "text", "text": "The answer is a very long"}]
    assert message["usage"] == {"inputTokens": 10, "outputTokens": 16, "cacheReadTokens": 0,
                                "reasoningTokens": 0}
    assert turn_end(session) == {"kind": "max-tokens"}
    assert to_responses_input(session)[-1]["status"] == "incomplete"


def test_a_failed_response_is_logged_as_an_error_finish(provider: Provider) -> None:
    session = new_session()
    received = one_step(provider, session, sse("responses_failed"))
    assert received[-1].type == "response.failed"
    assert chunks(session) == [{"type": "finish", "reason": {"kind": "error", "error": {
        "message": "The model failed to generate a response.", "code": "SERVER_ERROR"}}}]
    assert messages(session)[0]["message"]["content"] == []
    assert to_responses_input(session) == [{"role": "user", "content": "go"}]


def test_a_stream_cut_off_mid_function_call_ends_the_turn_with_a_connection_error(provider: Provider) -> None:
    session = new_session()
    with pytest.raises(openai.APIConnectionError):
        one_step(provider, session, sse_cut("responses_reasoning_tools", CUT_BEFORE))
    reason = turn_end(session)
    assert reason["kind"] == "error" and reason["error"]["code"] == "CONNECTION_ERROR"
    assert [c["type"] for c in chunks(session)][-2:] == ["tool-call-delta", "tool-call-delta"]
    assert messages(session) == []  # no half-assembled message reaches the surface
    assert to_responses_input(session) == [{"role": "user", "content": "go"}]
    check_invariants(session.events)


@pytest.mark.parametrize(("status", "fixture", "headers", "expected"), HTTP_ERRORS)
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


def test_context_overflow_is_compacted_and_retried_in_the_same_step(provider: Provider) -> None:
    session = new_session()
    recorder = Recorder(session, compactor=Compactor(FixedSummarizer(), context_window=10**6))
    for index in (1, 2, 3):
        record_turn(recorder, index, header=chat_header("gpt-5"))
    provider.queue(error(400, "openai_context_length"), sse("responses_final_text"))
    with recorder.turn() as turn, turn.step() as step:
        step.user_message("go on")
        step.request_header(chat_header("gpt-5"))
        for _event in responses_stream(step, session, client(provider), model="gpt-5"):
            pass
    first, retried = (r["input"] for r in provider.requests)
    assert len(retried) < len(first)
    assert "<compacted-summary>" in retried[0]["content"]
    assert retried[-1] == {"role": "user", "content": "go on"}
    assert turn_end(session) == {"kind": "completed"}


def test_a_non_streamed_response_is_recorded(provider: Provider) -> None:
    provider.queue(json_reply("responses_tools"))
    session = new_session()
    with Recorder(session).turn() as turn, turn.step() as step:
        step.user_message("list src")
        step.request_header(chat_header("gpt-5", tools=TOOLS))
        response = client(provider).responses.create(model="gpt-5", **responses_request(session))
        assert record_response(step, response) is response
        run_tools(step)
    (message,) = messages(session)
    assert message["message"]["content"] == [
        {"type": "reasoning", "text": ""},  # a reasoning item with no summary keeps its place
        {"type": "text", "text": "Checking."},
        {"type": "tool-call", "id": "call_N1", "name": "list_dir", "arguments": '{"path": "src"}'}]
    assert message["usage"] == {"inputTokens": 50, "outputTokens": 20, "cacheReadTokens": 0,
                                "reasoningTokens": 8}
    replayed = to_responses_input(session)
    assert replayed[1] == {"id": "rs_N0", "type": "reasoning", "summary": [],
                           "encrypted_content": "gAAAAB-enc-2"}
    assert replayed[-1] == {"type": "function_call_output", "call_id": "call_N1",
                            "output": "output of list_dir src"}


def test_stopping_early_keeps_the_streamed_prefix_as_an_interrupted_message(provider: Provider) -> None:
    session = new_session()
    with streaming_step(provider, session, sse("responses_reasoning_tools")) as (step, stream):
        recording = record_responses_stream(step, stream)
        for event in recording:
            if event.type == "response.output_item.added" and event.item.type == "function_call":
                break
        recording.close()
    (message,) = messages(session)
    assert message["interrupted"] is True
    assert message["message"]["content"] == [
        {"type": "reasoning", "text": "The user wants the file and the listing."},
        {"type": "text", "text": "Let me look."}]
    # shell-less reasoning cannot be replayed (the API needs its id): only the text goes back
    assert to_responses_input(session) == [{"role": "user", "content": "go"},
                                           {"role": "assistant", "content": "Let me look."}]


def test_unanswered_calls_get_a_synthetic_output_in_the_next_request(provider: Provider) -> None:
    session = new_session()
    with streaming_step(provider, session, sse("responses_reasoning_tools")) as (step, stream):
        for _event in record_responses_stream(step, stream):
            pass
        step.tool_call("call_Kq1", "read_file", '{"path": "a.txt"}')
        step.tool_result("call_Kq1", "hello")
    sent = to_responses_input(session)
    assert [item.get("type") for item in sent[-2:]] == ["function_call_output", "function_call_output"]
    assert sent[-1]["call_id"] == "call_Zr2" and "never ran" in sent[-1]["output"]
