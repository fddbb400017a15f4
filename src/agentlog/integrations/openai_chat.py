"""OpenAI Chat Completions adapter (the ``openai`` SDK and every OpenAI-compatible server).

``record_chat_stream(step, stream)`` passes each SDK chunk on unchanged while logging text,
``reasoning_content``, tool-call deltas, usage and the finish reason, then the assembled
``assistant/message``; ``record_chat_completion`` does the same for a non-streamed reply.
Provider errors are re-raised carrying an agentlog ``llm_failure``; so is a stream that ends
without a finish reason (``IncompleteStreamError``: cut short, though its body closed cleanly;
the step keeps what arrived as chunks and a ``finish`` chunk of kind error, and no message).
``chat_stream`` opens a
streamed request built from the log (``agentlog.integrations.openai_messages``, re-exported here)
and retries it in the same step when the compactor recovered from a context overflow.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, Final

from agentlog.core.failure import llm_failure
from agentlog.core.jsonvalue import FrozenDict, frozen_dict
from agentlog.core.openai_wire import usage_from_openai
from agentlog.core.session import Session
from agentlog.errors import MissingExtraError
from agentlog.integrations.common import (
    CONTEXT_OVERFLOW_CODE,
    StepRecording,
    arelay,
    connection_failure,
    is_context_overflow,
    is_transport_error,
    relay,
    status_failure,
    tool_calls,
)
from agentlog.integrations.openai_messages import ReasoningReplay, chat_header, chat_tools, to_chat_messages
from agentlog.recording.recorder import Step

try:
    import openai
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "agentlog.integrations.openai_chat needs the openai SDK: pip install 'agentlog[openai]'"
    ) from exc

__all__ = [
    "CONTENT_FILTER_CODE",
    "CONTEXT_OVERFLOW_CODE",
    "IncompleteStreamError",
    "achat_stream",
    "arecord_chat_stream",
    "chat_error",
    "chat_failure",
    "chat_header",
    "chat_stream",
    "chat_tools",
    "record_chat_completion",
    "record_chat_stream",
    "to_chat_messages",
    "tool_calls",
]

CONTENT_FILTER_CODE: Final = "CONTENT_FILTER"
"""The failure code of the ``finish`` chunk logged for ``finish_reason: content_filter``."""
_FINISH: Final = {
    "stop": frozen_dict({"kind": "stop"}),
    "tool_calls": frozen_dict({"kind": "tool-calls"}),
    "function_call": frozen_dict({"kind": "tool-calls"}),
    "length": frozen_dict({"kind": "max-tokens"}),
    "content_filter": frozen_dict({"kind": "error", "error": frozen_dict({
        "message": "the provider's content filter stopped the output", "code": CONTENT_FILTER_CODE})}),
}
_CONTEXT_CODES: Final = frozenset({"context_length_exceeded", "string_above_max_length"})


# -- provider errors -----------------------------------------------------------------------------


def chat_failure(exc: BaseException) -> FrozenDict:
    """The LlmFailure of an ``openai`` exception: context overflow, rate limit, HTTP status, connection.

    Context-length errors get code ``CONTEXT_WINDOW_EXCEEDED`` (what ``Compactor`` recovers from),
    429 ``RATE_LIMITED`` with ``providerRetryAfterMs`` from the response headers.
    """
    if isinstance(exc, openai.APIStatusError):
        error = exc.body if isinstance(exc.body, Mapping) else {}
        raw = error.get("message")
        return status_failure(exc.status_code, raw if isinstance(raw, str) else str(exc),
                              overflow=exc.code in _CONTEXT_CODES, headers=exc.response.headers,
                              request_id=exc.request_id)
    if isinstance(exc, openai.APIConnectionError):
        return connection_failure(exc, timeout=isinstance(exc, openai.APITimeoutError))
    if is_transport_error(exc):  # SDKs before 3.14 do not wrap a connection lost mid-stream
        return connection_failure(exc, timeout="Timeout" in type(exc).__name__)
    if isinstance(exc, openai.APIError):  # an ``error`` event inside the stream
        overflow = exc.code in _CONTEXT_CODES or is_context_overflow(exc.message)
        code = CONTEXT_OVERFLOW_CODE if overflow else "PROVIDER_ERROR"
        return frozen_dict({"message": exc.message, "code": code})
    return llm_failure(exc)


def chat_error(exc: BaseException) -> BaseException:
    """``exc`` itself, carrying ``chat_failure(exc)`` as its ``llm_failure`` attribute.

    The recorder reads that attribute for the turn's error reason and the compactor for
    overflow recovery: ``if not step.on_request_error(chat_error(exc)): raise``.
    """
    if (isinstance(exc, openai.OpenAIError) or is_transport_error(exc)) and not isinstance(
            getattr(exc, "llm_failure", None), Mapping):
        exc.llm_failure = chat_failure(exc)  # type: ignore[attr-defined]
    return exc


class IncompleteStreamError(openai.APIConnectionError):
    """A stream that ended without its terminal event (Chat: no finish reason, no ``[DONE]``;
    Responses: no ``response.completed``/``incomplete``/``failed``): the reply was cut short.

    A connection error, as a dropped one is (code ``CONNECTION_ERROR``): a proxy or server that
    closes the body cleanly mid-reply leaves the SDK nothing to raise. ``llm_failure`` is the
    failure the step logged; ``request`` is the SDK stream's (None for a stream that has none).
    """

    def __init__(self, request: Any, failure: Mapping[str, Any] | None = None, *,
                 message: str | None = None) -> None:
        text = message or (failure["message"] if failure is not None else
                           "the stream ended without a finish reason (no [DONE]): the reply is cut")
        if request is None:  # not an SDK stream: the SDK's constructor needs a request to copy
            openai.OpenAIError.__init__(self, text)
            self.request, self.message, self.body = None, text, None  # type: ignore[assignment]
            self.code = self.param = self.type = None
        else:
            super().__init__(request=request, message=text)
        if failure is not None:
            self.llm_failure = failure


# -- recording -----------------------------------------------------------------------------------


class _ChatStream(StepRecording):
    """The mapping of one completion's chunks onto a step (choice 0 only)."""

    family = "openai"
    api = "Chat Completions"

    def __init__(self, step: Step, provider: str | None, model: str | None, stream: object) -> None:
        super().__init__(step, provider, model, stream)
        self._ids: dict[int, str] = {}  # tool-call index -> call id
        self._finished = False

    def feed(self, chunk: ChatCompletionChunk) -> None:
        step = self.step
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            extra = delta.model_extra
            if extra:
                reasoning = extra.get("reasoning_content", extra.get("reasoning"))
                if type(reasoning) is str and reasoning:
                    step.reasoning_delta(reasoning)
            content = delta.content
            if content:
                step.text_delta(content)
            if delta.refusal:
                step.text_delta(delta.refusal)
            if delta.tool_calls:
                for call in delta.tool_calls:
                    self._tool_call(call.index, call.id, call.function)
            if choice.finish_reason is not None:
                self.finish(choice.finish_reason)
        if chunk.usage is not None:
            self.usage(chunk.usage)

    def _tool_call(self, index: int, call_id: str | None, function: Any) -> None:
        known = self._ids.get(index)
        name = function.name if function is not None else None
        args = (function.arguments if function is not None else None) or ""
        if known is None or (call_id and name and call_id != known):  # a new id and name: a new call
            known = self._ids[index] = call_id or f"call_{uuid.uuid4().hex}"  # (Ollama reuses indexes)
        elif not args and not name:
            return  # an empty delta adds nothing
        self.step.tool_call_delta(known, name or None, args)

    def done(self) -> None:
        if not self._finished:
            message, failure = self.cut_off("a finish reason (no [DONE])")
            raise IncompleteStreamError(self.request, failure, message=message)
        super().done()

    def finish(self, reason: str) -> None:
        self._finished = True
        mapped = _FINISH.get(reason)
        if mapped is None:
            mapped = frozen_dict({"kind": "stop", "providerReason": reason})
        self.step.chunk(frozen_dict({"type": "finish", "reason": mapped}))

    def usage(self, raw: Any) -> None:
        usage = usage_from_openai(raw.model_dump() if hasattr(raw, "model_dump") else dict(raw))
        if usage is not None and "inputTokens" in usage and "outputTokens" in usage:
            self.step.chunk(frozen_dict({"type": "usage", "usage": frozen_dict(usage)}))


def record_chat_stream(step: Step, stream: Iterable[ChatCompletionChunk], *, provider: str | None = None,
                       model: str | None = None) -> Iterator[ChatCompletionChunk]:
    """Yield every chunk of ``stream`` unchanged while logging it into ``step``.

    At the end of the stream the ``assistant/message`` is logged (provider and model default
    to the request header's); a provider error is re-raised as ``chat_error(exc)``, and a stream
    that ends without a finish reason logs a ``finish`` chunk of kind error naming the provider
    and how many chunks arrived, appends no message and raises ``IncompleteStreamError`` (the
    turn ends ``error``); stopping early keeps the streamed prefix as an interrupted message. Ask
    for usage with ``stream_options={"include_usage": True}``.
    """
    return relay(_ChatStream(step, provider, model, stream), stream, chat_error, Exception)


def arecord_chat_stream(step: Step, stream: AsyncIterable[ChatCompletionChunk], *,
                        provider: str | None = None,
                        model: str | None = None) -> AsyncIterator[ChatCompletionChunk]:
    """``record_chat_stream`` for ``AsyncOpenAI`` streams (``async for``)."""
    return arelay(_ChatStream(step, provider, model, stream), stream, chat_error, Exception)


def record_chat_completion(step: Step, completion: ChatCompletion, *, provider: str | None = None,
                           model: str | None = None) -> ChatCompletion:
    """Log a non-streamed ``ChatCompletion`` (choice 0) as the step's ``assistant/message``; returns it."""
    blocks: list[Any] = []
    usage = None
    if completion.choices:
        choice = completion.choices[0]
        message = choice.message
        extra = message.model_extra or {}
        reasoning = extra.get("reasoning_content", extra.get("reasoning"))
        if type(reasoning) is str and reasoning:
            blocks.append({"type": "reasoning", "text": reasoning})
        text = (message.content or "") + (message.refusal or "")
        if text:
            blocks.append({"type": "text", "text": text})
        for call in message.tool_calls or ():
            function = getattr(call, "function", None)
            if function is not None:
                blocks.append({"type": "tool-call", "id": call.id, "name": function.name,
                               "arguments": function.arguments})
        if choice.finish_reason == "length":
            step.max_tokens()
    if completion.usage is not None:
        usage = usage_from_openai(completion.usage.model_dump())
    step.assistant(provider=provider, model=model, content=blocks,
                   usage=usage if usage and "inputTokens" in usage and "outputTokens" in usage else None)
    return completion


# -- opening a request from the log --------------------------------------------------------------


def _body(session: Session, request: dict[str, Any], reasoning: ReasoningReplay) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": to_chat_messages(session, reasoning=reasoning)}
    tools = chat_tools(session)
    if tools:
        body["tools"] = tools
    body.update(stream=True, stream_options={"include_usage": True})
    body.update(request)
    return body


def chat_stream(step: Step, session: Session, client: openai.OpenAI, *,
                reasoning: ReasoningReplay = "deepseek", **request: Any) -> Iterator[ChatCompletionChunk]:
    """Stream a request built from ``session`` (messages, tools, usage on) and record it into ``step``.

    ``request`` adds or overrides keyword arguments of ``client.chat.completions.create``. A
    context overflow the recorder's compactor recovers from is retried in this step; any other
    provider error is raised as ``chat_error(exc)`` (before the first chunk).
    """
    while True:
        try:
            stream = client.chat.completions.create(**_body(session, request, reasoning))
        except openai.APIError as exc:
            if step.on_request_error(chat_error(exc)):
                continue
            raise
        return record_chat_stream(step, stream)


async def achat_stream(step: Step, session: Session, client: openai.AsyncOpenAI, *,
                       reasoning: ReasoningReplay = "deepseek",
                       **request: Any) -> AsyncIterator[ChatCompletionChunk]:
    """``chat_stream`` for ``AsyncOpenAI``: ``async for chunk in await achat_stream(...)``."""
    while True:
        try:
            stream = await client.chat.completions.create(**_body(session, request, reasoning))
        except openai.APIError as exc:
            if await step.aon_request_error(chat_error(exc)):
                continue
            raise
        return arecord_chat_stream(step, stream)
