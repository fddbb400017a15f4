"""The Anthropic Messages adapter: the real ``anthropic`` client against a scripted local server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import pytest

from agentlog import Recorder, Session, thaw
from agentlog.compaction.engine import Compactor
from agentlog.core.events import ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TURN_END
from agentlog.core.invariants import check_invariants
from agentlog.integrations.anthropic_messages import (
    anthropic_error,
    anthropic_request,
    arecord_messages_stream,
    record_messages_stream,
    tool_calls,
)
from agentlog.integrations.openai_messages import chat_header
from agentlog.recording.recorder import Step
from tests.compaction.helpers import FixedSummarizer, new_session, record_turn
from tests.integrations.server import Provider, error, sse, sse_cut

MODEL = "claude-sonnet-4-5"
SYSTEM = "You are a terse coding agent."
TOOLS = [{"name": name, "description": description,
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}
         for name, description in (("read_file", "Read a file."), ("list_dir", "List a directory."))]
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"


def client(provider: Provider) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=provider.base_url.removesuffix("/v1"), api_key="k", max_retries=0,
                               timeout=10)


def header() -> dict[str, Any]:
    return chat_header(MODEL, provider="anthropic", system=SYSTEM, tools=TOOLS)


def create(session: Session) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 1024, "stream": True, **anthropic_request(session)}


def events_of(session: Session, kind: str) -> list[Any]:
    return [thaw(e.data) for e in session.events if e.type == kind]


def run_tools(step: Step) -> None:
    for call in tool_calls(step):
        step.tool_call(call["id"], call["name"], call["arguments"])
        step.tool_result(call["id"], f"{call['name']} {json.loads(call['arguments'])['path']} ok")


EXPECTED_ASSISTANT = [
    {"type": "thinking", "thinking": "The user wants two things.", "signature": SIGNATURE},
    {"type": "redacted_thinking", "data": REDACTED},
    {"type": "text", "text": "Reading both."},
    {"type": "tool_use", "id": "toolu_01A", "name": "read_file", "input": {"path": "a.txt"}},
    {"type": "tool_use", "id": "toolu_01B", "name": "list_dir", "input": {"path": "."}},
]
EXPECTED_RESULTS = [
    {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "read_file a.txt ok"},
    {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "list_dir . ok"},
]


def check_turn(provider: Provider, session: Session, received: list[Any]) -> None:
    provider.queue(sse("anthropic_thinking_tools"))
    unrecorded = list(client(provider).messages.create(model=MODEL, max_tokens=1, messages=[], stream=True))
    assert [type(e) for e in received[: len(unrecorded)]] == [type(e) for e in unrecorded]
    assert [e.model_dump() for e in received[: len(unrecorded)]] == [e.model_dump() for e in unrecorded]
    chunks = [c["chunk"] for c in events_of(session, ASSISTANT_CHUNK)]
    assert chunks[:4] == [{"type": "reasoning-delta", "index": 0, "text": ""},
                          {"type": "reasoning-delta", "index": 0, "text": "The user wants two "},
                          {"type": "reasoning-delta", "index": 0, "text": "things."},
                          {"type": "text-delta", "index": 2, "text": ""}]
    assert {"type": "finish", "reason": {"kind": "tool-calls"}} in chunks
    first, final = events_of(session, ASSISTANT_MESSAGE)
    assert first["message"]["content"] == [
        {"type": "reasoning", "text": "The user wants two things."},
        {"type": "text", "text": "Reading both."},
        {"type": "tool-call", "id": "toolu_01A", "name": "read_file", "arguments": '{"path": "a.txt"}'},
        {"type": "tool-call", "id": "toolu_01B", "name": "list_dir", "arguments": '{"path": "."}'},
    ]
    assert first["message"]["source"]["replayState"] == {
        "anthropic": {"signatures": [SIGNATURE], "redacted": [{"at": 1, "data": REDACTED}]}}
    assert first["usage"] == {"inputTokens": 472, "outputTokens": 89, "cacheReadTokens": 100,
                              "cacheWriteTokens": 20}
    assert final["message"]["content"] == [{"type": "text", "text": "Both are small."}]
    sent = provider.requests[1]
    assert sent["system"] == SYSTEM
    assert sent["tools"][0] == {"name": "read_file", "description": "Read a file.",
                                "input_schema": TOOLS[0]["parameters"]}
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Read a.txt and list ."}]},
        {"role": "assistant", "content": EXPECTED_ASSISTANT},
        {"role": "user", "content": EXPECTED_RESULTS},
    ]
    assert anthropic_request(session)["messages"][-1] == {
        "role": "assistant", "content": [{"type": "text", "text": "Both are small."}]}
    assert events_of(session, TURN_END)[-1]["reason"] == {"kind": "completed"}
    check_invariants(session.events)


def test_thinking_signatures_and_parallel_tool_use_round_trip(provider: Provider) -> None:
    provider.queue(sse("anthropic_thinking_tools"), sse("anthropic_final_text"))
    session = new_session()
    received: list[Any] = []
    with Recorder(session).turn() as turn:
        for number in (1, 2):
            with turn.step() as step:
                if number == 1:
                    step.user_message("Read a.txt and list .")
                step.request_header(header())
                received += record_messages_stream(step, client(provider).messages.create(**create(session)))
                run_tools(step)
    check_turn(provider, session, received)


def test_the_async_stream_records_the_same_turn(provider: Provider) -> None:
    provider.queue(sse("anthropic_thinking_tools"), sse("anthropic_final_text"))
    session = new_session()
    received: list[Any] = []

    async def main() -> None:
        sdk = anthropic.AsyncAnthropic(base_url=provider.base_url.removesuffix("/v1"), api_key="k",
                                       max_retries=0, timeout=10)
        async with Recorder(session).turn() as turn:
            for number in (1, 2):
                async with turn.step() as step:
                    if number == 1:
                        step.user_message("Read a.txt and list .")
                    await step.arequest_header(header())
                    stream = await sdk.messages.create(**create(session))
                    received.extend([event async for event in arecord_messages_stream(step, stream)])
                    run_tools(step)
        await sdk.close()

    asyncio.run(main())
    check_turn(provider, session, received)


def one_step(provider: Provider, session: Session, reply: Any, recorder: Recorder | None = None) -> None:
    provider.queue(reply)
    with (recorder or Recorder(session)).turn() as turn, turn.step() as step:
        step.user_message("go")
        step.request_header(header())
        try:
            stream = client(provider).messages.create(**create(session))
        except anthropic.APIError as exc:
            raise anthropic_error(exc) from None
        for _event in record_messages_stream(step, stream):
            pass


def reason(session: Session) -> Any:
    return events_of(session, TURN_END)[-1]["reason"]


def test_max_tokens_ends_the_turn_max_tokens(provider: Provider) -> None:
    session = new_session()
    one_step(provider, session, sse("anthropic_max_tokens"))
    assert reason(session) == {"kind": "max-tokens"}
    (message,) = events_of(session, ASSISTANT_MESSAGE)
    assert message["message"]["content"] == [{"type": "text", "text": "A long"}]


def test_an_error_event_mid_stream_ends_the_turn_with_its_type(provider: Provider) -> None:
    session = new_session()
    with pytest.raises(anthropic.APIStatusError):
        one_step(provider, session, sse("anthropic_overloaded_mid_stream"))
    assert reason(session)["error"] == {"message": "Overloaded", "code": "OVERLOADED_ERROR"}
    assert events_of(session, ASSISTANT_MESSAGE) == []
    check_invariants(session.events)


def test_a_stream_cut_off_mid_tool_use_ends_the_turn_with_a_connection_error(provider: Provider) -> None:
    session = new_session()
    with pytest.raises(Exception) as caught:  # the SDK lets its HTTP client's error through unchanged
        one_step(provider, session, sse_cut("anthropic_thinking_tools", b'.txt\\"}"}}'))
    assert type(caught.value).__name__ == "RemoteProtocolError"
    assert reason(session)["error"]["code"] == "CONNECTION_ERROR"
    prompt_only = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    assert anthropic_request(session)["messages"] == prompt_only


def test_rate_limit_carries_retry_after_and_request_id(provider: Provider) -> None:
    session = new_session()
    with pytest.raises(anthropic.RateLimitError):
        one_step(provider, session,
                 error(429, "anthropic_rate_limit", {"retry-after": "2", "request-id": "r9"}))
    body = json.loads(error(429, "anthropic_rate_limit").body)
    assert reason(session)["error"] == {"message": body["error"]["message"], "code": "RATE_LIMITED",
                                        "status": 429, "providerRetryAfterMs": 2000, "requestId": "r9"}


def test_prompt_too_long_goes_through_the_compactors_overflow_path(provider: Provider) -> None:
    session = new_session()
    recorder = Recorder(session, compactor=Compactor(FixedSummarizer(), context_window=10**6))
    for index in (1, 2, 3):
        record_turn(recorder, index, header=header())
    provider.queue(error(400, "anthropic_prompt_too_long"), sse("anthropic_final_text"))
    with recorder.turn() as turn, turn.step() as step:
        step.user_message("go on")
        step.request_header(header())
        while True:
            try:
                stream = client(provider).messages.create(**create(session))
                break
            except anthropic.APIError as exc:
                if not step.on_request_error(anthropic_error(exc)):
                    raise
        for _event in record_messages_stream(step, stream):
            pass
    first, retried = (r["messages"] for r in provider.requests)
    assert len(retried) < len(first)
    assert "<compacted-summary>" in json.dumps(retried[0])
    assert retried[-1]["content"][-1] == {"type": "text", "text": "go on"}
    assert reason(session) == {"kind": "completed"}
