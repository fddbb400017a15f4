"""A stream that ends without its terminal event is a cut reply, whatever the adapter.

The real ``openai`` and ``anthropic`` clients read hand-written SSE fixtures from the scripted
local server, ended early but cleanly (a whole HTTP body, so the SDK raises nothing): the
adapter keeps what arrived as chunks, logs a ``finish`` chunk of kind error naming the provider,
the stream and how many chunks arrived, appends no assistant message and raises.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from agentlog import Recorder, Session, thaw
from agentlog.core.invariants import check_invariants
from agentlog.integrations import anthropic_messages, openai_chat
from agentlog.integrations.anthropic_messages import (
    anthropic_request,
    arecord_messages_stream,
    record_messages_stream,
)
from agentlog.integrations.openai_chat import arecord_chat_stream, chat_header, record_chat_stream
from agentlog.integrations.openai_responses import (
    arecord_responses_stream,
    record_responses_stream,
    responses_request,
)
from tests.compaction.helpers import new_session
from tests.integrations.helpers import chunks, messages, turn_end
from tests.integrations.server import Provider, Reply, sse, sse_ended


@dataclasses.dataclass(frozen=True)
class Adapter:
    """One adapter as the tests drive it: its SDK clients, how to open a stream, how to record it."""

    name: str
    header: dict[str, Any]
    client: Callable[[Provider], Any]
    aclient: Callable[[Provider], Any]
    open: Callable[[Any, Session], Any]  # the SDK stream, or for an async client its awaitable
    record: Callable[..., Any]
    arecord: Callable[..., Any]


def _openai(kind: type[Any]) -> Callable[[Provider], Any]:
    return lambda provider: kind(base_url=provider.base_url, api_key="k", max_retries=0, timeout=10)


def _anthropic(kind: type[Any]) -> Callable[[Provider], Any]:
    return lambda provider: kind(base_url=provider.base_url.removesuffix("/v1"), api_key="k", max_retries=0,
                                 timeout=10)


CHAT = Adapter(
    "chat", chat_header("gpt-4o"), _openai(openai.OpenAI), _openai(openai.AsyncOpenAI),
    lambda sdk, session: sdk.chat.completions.create(model="gpt-4o", stream=True,
                                                     messages=[{"role": "user", "content": "go"}]),
    record_chat_stream, arecord_chat_stream)
RESPONSES = Adapter(
    "responses", chat_header("gpt-5"), _openai(openai.OpenAI), _openai(openai.AsyncOpenAI),
    lambda sdk, session: sdk.responses.create(model="gpt-5", stream=True, **responses_request(session)),
    record_responses_stream, arecord_responses_stream)
ANTHROPIC = Adapter(
    "anthropic", chat_header("claude-sonnet-4-5", provider="anthropic"),
    _anthropic(anthropic.Anthropic), _anthropic(anthropic.AsyncAnthropic),
    lambda sdk, session: sdk.messages.create(model="claude-sonnet-4-5", max_tokens=64, stream=True,
                                             **anthropic_request(session)),
    record_messages_stream, arecord_messages_stream)


def run(adapter: Adapter, provider: Provider, session: Session, reply: Reply, *, mode: str) -> list[Any]:
    """One turn of one step of ``session`` streamed from ``reply`` through ``adapter`` (sync or async);
    the items the app received."""
    provider.queue(reply)
    received: list[Any] = []
    if mode == "sync":
        with Recorder(session).turn() as turn, turn.step() as step:
            step.user_message("go")
            step.request_header(adapter.header)
            received.extend(adapter.record(step, adapter.open(adapter.client(provider), session)))
        return received

    async def main() -> None:
        sdk = adapter.aclient(provider)
        try:
            async with Recorder(session).turn() as turn, turn.step() as step:
                step.user_message("go")
                await step.arequest_header(adapter.header)
                stream = await adapter.open(sdk, session)
                received.extend([item async for item in adapter.arecord(step, stream)])
        finally:
            await sdk.close()

    asyncio.run(main())
    return received


CHAT_FINISH = b'data: {"id":"chatcmpl-A1b2C3","object":"chat.completion.chunk","created":1733000000,' \
    b'"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_50cad350e4","choices":[{"index":0,"delta":{},' \
    b'"logprobs":null,"finish_reason":"stop"}]'
FINAL_TEXT = "a.txt says hello; the directory has two files."
CUT_REPLIES = [
    # (adapter, the reply ended early, the SDK error raised, the text that arrived, what the message names)
    (CHAT, lambda: sse_ended("openai_final_text", CHAT_FINISH), openai_chat.IncompleteStreamError,
     FINAL_TEXT, ["openai Chat Completions stream", "after 2 chunks", "without a finish reason"]),
    (RESPONSES, lambda: sse_ended("responses_final_text", b"event: response.completed"),
     openai_chat.IncompleteStreamError, FINAL_TEXT,
     ["openai Responses stream", "after 10 chunks",
      "without response.completed, response.incomplete or response.failed"]),
    (ANTHROPIC, lambda: sse_ended("anthropic_final_text", b"event: message_delta"),
     anthropic_messages.IncompleteStreamError, "Both are small.",
     ["anthropic Messages stream", "after 4 chunks", "without a stop reason"]),
]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("adapter", "reply", "raised", "text", "named"), CUT_REPLIES,
                         ids=[case[0].name for case in CUT_REPLIES])
def test_a_stream_ended_before_its_terminal_event_fails_the_step_and_keeps_its_chunks(
    provider: Provider, adapter: Adapter, reply: Callable[[], Reply], raised: type[BaseException],
    text: str, named: list[str], mode: str,
) -> None:
    session = new_session()
    with pytest.raises(raised) as caught:
        run(adapter, provider, session, reply(), mode=mode)
    failure = thaw(caught.value.llm_failure)  # type: ignore[attr-defined]
    assert failure["code"] == "CONNECTION_ERROR"
    for words in named:
        assert words in failure["message"], failure["message"]
    assert str(caught.value) == failure["message"]
    assert caught.value.request.url.path.endswith(("/chat/completions", "/responses", "/messages"))
    logged = chunks(session)
    assert logged[-1] == {"type": "finish", "reason": {"kind": "error", "error": failure}}
    assert {c["type"] for c in logged[:-1]} == {"text-delta"}  # what arrived is kept, as chunks
    assert "".join(c["text"] for c in logged[:-1]) == text
    assert messages(session) == []  # nothing reaches the surface as if the reply were whole
    assert [m["role"] for m in session.derive_messages()] == ["user"]
    assert turn_end(session) == {"kind": "error", "error": failure}
    check_invariants(session.events)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_responses_error_event_that_ends_the_stream_fails_the_step_with_its_failure(
    provider: Provider, mode: str,
) -> None:
    session = new_session()
    with pytest.raises(openai_chat.IncompleteStreamError) as caught:
        run(RESPONSES, provider, session, sse("responses_error_mid_stream"), mode=mode)
    failure = {"message": "The server had an error while processing your request.", "code": "SERVER_ERROR"}
    assert thaw(caught.value.llm_failure) == failure  # type: ignore[attr-defined]
    assert "openai Responses stream ended after 6 chunks on an error event" in str(caught.value)
    assert failure["message"] in str(caught.value)
    logged = chunks(session)
    assert logged == [{"type": "text-delta", "index": 0, "text": "a.txt says hello; "},
                      {"type": "finish", "reason": {"kind": "error", "error": failure}}]  # one finish
    assert messages(session) == []
    assert turn_end(session) == {"kind": "error", "error": failure}
    check_invariants(session.events)


def test_an_anthropic_stream_with_its_stop_reason_but_no_message_stop_is_whole(provider: Provider) -> None:
    # message_delta carries the stop reason and the final usage; only the end marker is missing,
    # as a Chat Completions stream with its finish_reason but no [DONE]
    session = new_session()
    run(ANTHROPIC, provider, session, sse_ended("anthropic_final_text", b"event: message_stop"), mode="sync")
    (message,) = messages(session)
    assert message["message"]["content"] == [{"type": "text", "text": "Both are small."}]
    assert turn_end(session) == {"kind": "completed"}


def test_the_message_names_the_provider_of_the_request_header(provider: Provider) -> None:
    session = new_session()
    deepseek = dataclasses.replace(CHAT, header=chat_header("deepseek-chat", provider="deepseek"))
    reply = sse("deepseek_answer")
    reply.body = reply.body[: reply.body.rindex(b"data: ", 0, reply.body.index(b'"finish_reason":"stop"'))]
    with pytest.raises(openai_chat.IncompleteStreamError) as caught:
        run(deepseek, provider, session, reply, mode="sync")
    assert str(caught.value).startswith("the deepseek Chat Completions stream ended after ")


def test_a_plain_iterable_cut_short_raises_the_incomplete_stream_error(provider: Provider) -> None:
    # not an SDK stream (no HTTP request to name): the error must still be the adapter's own
    chunk = ChatCompletionChunk.model_validate({
        "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"content": "Partial"}, "finish_reason": None}]})
    session = new_session()
    with pytest.raises(openai_chat.IncompleteStreamError) as caught, Recorder(session).turn() as turn, \
            turn.step() as step:
        step.user_message("go")
        step.request_header(chat_header("gpt-4o"))
        list(record_chat_stream(step, [chunk]))
    assert caught.value.request is None
    assert "after 1 chunk without a finish reason" in str(caught.value)
    assert turn_end(session)["error"]["code"] == "CONNECTION_ERROR"
