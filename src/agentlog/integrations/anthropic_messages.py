"""Anthropic Messages adapter (the ``anthropic`` SDK): stream events into a step.

``record_messages_stream(step, stream)`` passes each event of ``messages.create(stream=True)``
on unchanged while logging text, thinking (signatures kept in the message's replay state so the
next request is valid), ``tool_use`` input deltas, usage and the stop reason, then the assembled
``assistant/message``. Request building lives in ``agentlog.integrations.anthropic_request``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, Final

from agentlog.core.failure import llm_failure
from agentlog.core.jsonvalue import FrozenDict, dumps, frozen_dict
from agentlog.errors import MissingExtraError
from agentlog.integrations.anthropic_request import (
    anthropic_request,
    anthropic_system,
    anthropic_tools,
    to_anthropic_messages,
)
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
from agentlog.recording.recorder import Step

try:
    import anthropic
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "agentlog.integrations.anthropic_messages needs the anthropic SDK: pip install 'agentlog[anthropic]'"
    ) from exc

__all__ = [
    "IncompleteStreamError",
    "anthropic_error",
    "anthropic_failure",
    "anthropic_request",
    "anthropic_system",
    "anthropic_tools",
    "arecord_messages_stream",
    "record_messages_stream",
    "to_anthropic_messages",
    "tool_calls",
]

_STOP: Final = {
    "end_turn": frozen_dict({"kind": "stop"}),
    "stop_sequence": frozen_dict({"kind": "stop"}),
    "tool_use": frozen_dict({"kind": "tool-calls"}),
    "max_tokens": frozen_dict({"kind": "max-tokens"}),
    "model_context_window_exceeded": frozen_dict({"kind": "max-tokens",
                                                  "providerReason": "model_context_window_exceeded"}),
    "refusal": frozen_dict({"kind": "error", "error": frozen_dict({
        "message": "the model refused to continue (stop_reason refusal)", "code": "CONTENT_FILTER"})}),
}


def _error_object(body: object) -> Mapping[str, Any]:
    """The ``error`` object of an Anthropic error body ``{type: error, error: {type, message}}``."""
    error = body.get("error") if isinstance(body, Mapping) else None
    return error if isinstance(error, Mapping) else {}


def anthropic_failure(exc: BaseException) -> FrozenDict:
    """The LlmFailure of an ``anthropic`` exception ("prompt is too long" -> ``CONTEXT_WINDOW_EXCEEDED``)."""
    if isinstance(exc, anthropic.APIStatusError):
        error = _error_object(exc.body)  # SDKs before 0.7x have no ``api_message`` / ``type``
        message = getattr(exc, "api_message", None) or error.get("message") or str(exc)
        if exc.response.status_code == 200:  # an ``error`` event inside the stream
            kind = str(getattr(exc, "type", None) or error.get("type") or "provider_error").upper()
            code = CONTEXT_OVERFLOW_CODE if is_context_overflow(message) else kind
            return frozen_dict({"message": message, "code": code})
        return status_failure(exc.status_code, message, overflow=False, headers=exc.response.headers,
                              request_id=exc.request_id)
    if isinstance(exc, anthropic.APIConnectionError):
        return connection_failure(exc, timeout=isinstance(exc, anthropic.APITimeoutError))
    if is_transport_error(exc):  # the SDK does not wrap a connection lost mid-stream
        return connection_failure(exc, timeout="Timeout" in type(exc).__name__)
    return llm_failure(exc)


def anthropic_error(exc: BaseException) -> BaseException:
    """``exc`` itself, carrying ``anthropic_failure(exc)`` as its ``llm_failure`` (see ``chat_error``)."""
    if (isinstance(exc, anthropic.AnthropicError) or is_transport_error(exc)) and (
        getattr(exc, "llm_failure", None) is None
    ):
        exc.llm_failure = anthropic_failure(exc)  # type: ignore[attr-defined]
    return exc


class IncompleteStreamError(anthropic.APIConnectionError):
    """A stream that ended without a stop reason (no ``message_delta`` with ``stop_reason``, no
    ``message_stop``): the reply was cut short, though its body closed cleanly.

    A connection error, as a dropped one is; ``llm_failure`` is the failure the step logged.
    """

    def __init__(self, request: Any, failure: Mapping[str, Any]) -> None:
        super().__init__(message=failure["message"], request=request)
        self.llm_failure = failure


class _MessageStream(StepRecording):
    """The mapping of one message's events onto a step; block indexes are Anthropic's."""

    family = "anthropic"
    api = "Messages"

    def __init__(self, step: Step, provider: str | None, model: str | None, stream: object) -> None:
        super().__init__(step, provider, model, stream)
        self._stopped = False  # a stop reason arrived: the message is whole (message_stop only ends it)
        self._ids: dict[int, str] = {}  # tool_use index -> id
        self._indexes: set[int] = set()  # indexes that have a block in the assembled message
        self._signatures: dict[int, str] = {}
        self._thinking: set[int] = set()  # indexes of thinking blocks
        self._redacted: dict[int, str] = {}
        self._usage: dict[str, int] = {}

    def _delta(self, kind: str, index: int, **fields: Any) -> None:
        self._indexes.add(index)
        self.step.chunk(frozen_dict({"type": kind, "index": index, **fields}))

    def feed(self, event: Any) -> None:
        kind = event.type
        if kind == "content_block_delta":
            delta, index = event.delta, event.index
            if delta.type == "text_delta":
                self._delta("text-delta", index, text=delta.text)
            elif delta.type == "thinking_delta":
                self._thinking.add(index)
                self._delta("reasoning-delta", index, text=delta.thinking)
            elif delta.type == "input_json_delta" and index in self._ids:
                self._delta("tool-call-delta", index, id=self._ids[index], argumentsDelta=delta.partial_json)
            elif delta.type == "signature_delta":
                self._signatures[index] = self._signatures.get(index, "") + delta.signature
        elif kind == "content_block_start":
            self._start(event.index, event.content_block)
        elif kind == "message_start":
            self._add_usage(event.message.usage)
        elif kind == "message_delta":
            self._add_usage(event.usage)
            reason = event.delta.stop_reason
            if reason is not None:
                self._stopped = True
                mapped = _STOP.get(reason) or frozen_dict({"kind": "stop", "providerReason": reason})
                self.step.chunk(frozen_dict({"type": "finish", "reason": mapped}))
            if "inputTokens" in self._usage and "outputTokens" in self._usage:
                self.step.chunk(frozen_dict({"type": "usage", "usage": frozen_dict(self._usage)}))

    def _start(self, index: int, block: Any) -> None:
        kind = block.type
        if kind == "text":
            self._delta("text-delta", index, text=block.text)
        elif kind == "thinking":
            self._thinking.add(index)
            self._delta("reasoning-delta", index, text=block.thinking)
            if block.signature:
                self._signatures[index] = block.signature
        elif kind == "redacted_thinking":
            self._redacted[index] = block.data
        elif kind == "tool_use":
            self._ids[index] = block.id
            arguments = dumps(block.input).decode() if block.input else ""
            self._delta("tool-call-delta", index, id=block.id, name=block.name, argumentsDelta=arguments)

    def _add_usage(self, usage: Any) -> None:
        """Anthropic counts are disjoint already; later events carry cumulative totals."""
        for key, name in (("inputTokens", "input_tokens"), ("outputTokens", "output_tokens"),
                          ("cacheReadTokens", "cache_read_input_tokens"),
                          ("cacheWriteTokens", "cache_creation_input_tokens")):
            value = getattr(usage, name, None)
            if type(value) is int:
                self._usage[key] = value

    def done(self) -> None:
        if not self._stopped:
            raise IncompleteStreamError(self.request, self.cut_off("a stop reason")[1])
        super().done()

    def replay_state(self) -> Any:
        """Signatures per thinking block and redacted blocks by position, for the next request."""
        order = sorted(self._indexes)
        thinking = [i for i in order if i in self._thinking]
        state: dict[str, Any] = {}
        if thinking:
            state["signatures"] = [self._signatures.get(i, "") for i in thinking]
        if self._redacted:
            state["redacted"] = [{"at": sum(1 for i in order if i < index), "data": data}
                                 for index, data in sorted(self._redacted.items())]
        return {"anthropic": state} if state else None


def record_messages_stream(step: Step, stream: Iterable[Any], *, provider: str | None = None,
                           model: str | None = None) -> Iterator[Any]:
    """Yield every event of ``stream`` unchanged while logging it into ``step``.

    A stream that ends without a stop reason keeps what arrived as chunks, logs a ``finish``
    chunk of kind error naming the provider and how many events arrived, appends no message and
    raises ``IncompleteStreamError``; one that has its stop reason but lost only ``message_stop``
    is whole. Errors, stopping early and provider/model defaults work as in ``record_chat_stream``.
    """
    return relay(_MessageStream(step, provider, model, stream), stream, anthropic_error, Exception)


def arecord_messages_stream(step: Step, stream: AsyncIterable[Any], *, provider: str | None = None,
                            model: str | None = None) -> AsyncIterator[Any]:
    """``record_messages_stream`` for ``AsyncAnthropic`` streams (``async for``)."""
    return arelay(_MessageStream(step, provider, model, stream), stream, anthropic_error, Exception)
