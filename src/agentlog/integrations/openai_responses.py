"""OpenAI Responses API adapter (the ``openai`` SDK's ``client.responses``): stream events into a step.

``record_responses_stream(step, stream)`` passes each event of ``responses.create(stream=True)``
on unchanged while logging output text, refusals, reasoning summaries, function-call argument
deltas, usage and how the response ended; the ``assistant/message`` is then the response's own
output items (``agentlog.integrations.responses_items``), their shells kept so the next request
replays them exactly (reasoning ids and ``encrypted_content`` included). ``record_response``
does the same for a non-streamed ``Response``; ``responses_stream`` opens a streamed request
built from the log and retries it in the same step when the compactor recovered from a context
overflow. Provider errors carry an ``llm_failure`` as in the Chat Completions adapter.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Any, Final

from agentlog.core.jsonvalue import FrozenDict, frozen_dict
from agentlog.core.session import Session
from agentlog.errors import MissingExtraError
from agentlog.integrations.common import (
    CONTEXT_OVERFLOW_CODE,
    StepRecording,
    arelay,
    is_context_overflow,
    relay,
    tool_calls,
)
from agentlog.integrations.openai_chat import CONTENT_FILTER_CODE, IncompleteStreamError, chat_error
from agentlog.integrations.responses_items import (
    REPLAY_KEY,
    responses_request,
    responses_tools,
    responses_usage,
    split_items,
    to_responses_input,
)
from agentlog.recording.recorder import Step

try:
    import openai
    from openai.types.responses import Response, ResponseStreamEvent
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "agentlog.integrations.openai_responses needs the openai SDK: pip install 'agentlog[openai]'"
    ) from exc

__all__ = [
    "IncompleteStreamError",
    "arecord_responses_stream",
    "aresponses_stream",
    "record_response",
    "record_responses_stream",
    "response_finish",
    "responses_request",
    "responses_stream",
    "responses_tools",
    "to_responses_input",
    "tool_calls",
]

_CONTEXT_CODES: Final = frozenset({"context_length_exceeded", "string_above_max_length"})
_STOP: Final = frozen_dict({"kind": "stop"})
_TOOL_CALLS: Final = frozen_dict({"kind": "tool-calls"})
_TERMINAL: Final = "response.completed, response.incomplete or response.failed"


def _error_reason(code: Any, message: Any) -> FrozenDict:
    text = message if isinstance(message, str) else "the response failed"
    overflow = code in _CONTEXT_CODES or is_context_overflow(text)
    name = CONTEXT_OVERFLOW_CODE if overflow else str(code or "PROVIDER_ERROR").upper()
    return frozen_dict({"kind": "error", "error": frozen_dict({"message": text, "code": name})})


def response_finish(response: Any) -> FrozenDict:
    """How a ``Response`` ended as a StreamFinishReason: stop, tool-calls, max-tokens or error."""
    status = getattr(response, "status", None)
    if status == "incomplete":
        details = getattr(response, "incomplete_details", None)
        reason = getattr(details, "reason", None)
        if reason == "max_output_tokens":
            return frozen_dict({"kind": "max-tokens"})
        if reason == "content_filter":
            return frozen_dict({"kind": "error", "error": frozen_dict({
                "message": "the provider's content filter stopped the output", "code": CONTENT_FILTER_CODE})})
        return frozen_dict({"kind": "stop", "providerReason": str(reason or "incomplete")})
    if status == "failed":
        error = getattr(response, "error", None)
        return _error_reason(getattr(error, "code", None), getattr(error, "message", None))
    if any(getattr(item, "type", None) in ("function_call", "custom_tool_call")
           for item in getattr(response, "output", None) or ()):
        return _TOOL_CALLS
    return _STOP


def _plain(item: Any) -> Any:
    """An SDK model as the JSON the server sent (unset fields left out)."""
    return item.to_dict() if hasattr(item, "to_dict") else item


class _ResponseStream(StepRecording):
    """The mapping of one response's events onto a step."""

    family = "openai"
    api = "Responses"

    def __init__(self, step: Step, provider: str | None, model: str | None, stream: object) -> None:
        super().__init__(step, provider, model, stream)
        self._calls: dict[int, list[str]] = {}  # output index -> [call id, arguments streamed]
        self._final: list[Any] | None = None  # the output of the terminal response event
        self._error: FrozenDict | None = None  # the failure of the last ``error`` event

    def feed(self, event: Any) -> None:  # ResponseStreamEvent: a union mypy cannot narrow by .type
        kind = event.type
        step = self.step
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            if event.delta:
                step.text_delta(event.delta)
        elif kind == "response.reasoning_summary_text.delta" or kind == "response.reasoning_text.delta":
            if event.delta:
                step.reasoning_delta(event.delta)
        elif kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            call = self._calls.get(event.output_index)
            if call is not None and event.delta:
                call[1] += event.delta
                step.tool_call_delta(call[0], None, event.delta)
        elif kind == "response.output_item.added":
            item = event.item
            if item.type in ("function_call", "custom_tool_call"):
                streamed = (item.arguments if item.type == "function_call" else item.input) or ""
                self._calls[event.output_index] = [item.call_id, streamed]
                step.tool_call_delta(item.call_id, item.name, streamed)
        elif kind == "response.function_call_arguments.done":
            self._rest(event.output_index, event.arguments)
        elif kind == "response.custom_tool_call_input.done":
            self._rest(event.output_index, event.input)
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._end(event.response)
        elif kind == "error":
            reason = _error_reason(event.code, event.message)
            self._error = reason["error"]
            step.chunk(frozen_dict({"type": "finish", "reason": reason}))

    def _rest(self, index: int, arguments: str) -> None:
        """Arguments the deltas did not carry (a server that sends only ``.done``)."""
        call = self._calls.get(index)
        if call is not None and arguments != call[1] and arguments.startswith(call[1]):
            self.step.tool_call_delta(call[0], None, arguments[len(call[1]):])
            call[1] = arguments

    def _end(self, response: Any) -> None:
        self._final = [_plain(item) for item in response.output or ()]
        self.step.chunk(frozen_dict({"type": "finish", "reason": response_finish(response)}))
        usage = responses_usage(_plain(response.usage)) if response.usage is not None else None
        if usage is not None:
            self.step.chunk(frozen_dict({"type": "usage", "usage": frozen_dict(usage)}))

    def done(self) -> None:
        if self._final is None:  # no terminal event: the reply is cut, whatever the deltas hold
            how = "" if self._error is None else " on an error event,"
            message, failure = self.cut_off(_TERMINAL, how=how, failure=self._error)
            raise IncompleteStreamError(self.request, failure, message=message)
        blocks, shells = split_items(self._final)
        self.step.assistant(provider=self.provider, model=self.model, content=blocks,
                            replay_state={REPLAY_KEY: shells})


def record_responses_stream(step: Step, stream: Iterable[ResponseStreamEvent], *, provider: str | None = None,
                            model: str | None = None) -> Iterator[ResponseStreamEvent]:
    """Yield every event of ``stream`` unchanged while logging it into ``step``.

    The ``assistant/message`` holds the response's output items (reasoning, messages, function
    calls, and any other item kept whole); ``response.incomplete`` for ``max_output_tokens``
    ends the turn max-tokens; ``response.failed`` and ``error`` events are logged as a ``finish``
    chunk of kind error (after ``response.failed`` the app decides, e.g. ``turn.fail``). A stream
    that ends without ``response.completed``, ``.incomplete`` or ``.failed`` (cut, or its last
    word an ``error`` event) keeps what arrived as chunks, logs a ``finish`` chunk of kind error
    naming the provider and how many events arrived (the ``error`` event's own, if any), appends
    no message and raises ``IncompleteStreamError``. Errors, stopping early and the
    provider/model defaults work as in ``record_chat_stream``.
    """
    return relay(_ResponseStream(step, provider, model, stream), stream, chat_error, openai.OpenAIError)


def arecord_responses_stream(step: Step, stream: AsyncIterable[ResponseStreamEvent], *,
                             provider: str | None = None,
                             model: str | None = None) -> AsyncIterator[ResponseStreamEvent]:
    """``record_responses_stream`` for ``AsyncOpenAI`` streams (``async for``)."""
    return arelay(_ResponseStream(step, provider, model, stream), stream, chat_error, openai.OpenAIError)


def record_response(step: Step, response: Response, *, provider: str | None = None,
                    model: str | None = None) -> Response:
    """Log a non-streamed ``Response`` as the step's ``assistant/message``; returns it."""
    finish = response_finish(response)
    if finish["kind"] == "max-tokens":
        step.max_tokens()
    blocks, shells = split_items([_plain(item) for item in response.output or ()])
    usage = responses_usage(_plain(response.usage)) if response.usage is not None else None
    step.assistant(provider=provider, model=model, content=blocks, usage=usage,
                   replay_state={REPLAY_KEY: shells})
    return response


def _body(session: Session, request: dict[str, Any]) -> dict[str, Any]:
    body = responses_request(session)
    body["stream"] = True
    body.update(request)
    return body


def responses_stream(step: Step, session: Session, client: openai.OpenAI,
                     **request: Any) -> Iterator[ResponseStreamEvent]:
    """Stream a request built from ``session`` (input, instructions, tools) and record it into ``step``.

    ``request`` adds or overrides keyword arguments of ``client.responses.create`` (``model``
    at least). A context overflow the recorder's compactor recovers from is retried in this
    step; any other provider error is raised as ``chat_error(exc)`` (before the first event).
    """
    while True:
        try:
            stream = client.responses.create(**_body(session, request))
        except openai.APIError as exc:
            if step.on_request_error(chat_error(exc)):
                continue
            raise
        return record_responses_stream(step, stream)


async def aresponses_stream(step: Step, session: Session, client: openai.AsyncOpenAI,
                            **request: Any) -> AsyncIterator[ResponseStreamEvent]:
    """``responses_stream`` for ``AsyncOpenAI``: ``async for event in await aresponses_stream(...)``."""
    while True:
        try:
            stream = await client.responses.create(**_body(session, request))
        except openai.APIError as exc:
            if await step.aon_request_error(chat_error(exc)):
                continue
            raise
        return arecord_responses_stream(step, stream)
