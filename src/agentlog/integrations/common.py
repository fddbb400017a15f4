"""What every provider adapter needs whatever the SDK: a step's tool calls, HTTP failures."""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar, TypeVar

from agentlog.compaction.engine import CONTEXT_OVERFLOW_CODE
from agentlog.core.failure import clean_text
from agentlog.core.jsonvalue import FrozenDict, frozen_dict
from agentlog.core.openai_wire import CONTEXT_HINT, STATUS_CODES, retry_after_ms
from agentlog.errors import AgentlogError
from agentlog.recording.recorder import Step

__all__ = [
    "CONTEXT_OVERFLOW_CODE",
    "StepRecording",
    "aclose_stream",
    "arelay",
    "close_stream",
    "connection_failure",
    "is_context_overflow",
    "is_transport_error",
    "relay",
    "status_failure",
    "tool_calls",
]

T = TypeVar("T")
_PROMPT_TOO_LONG = re.compile(r"prompt is too long|input is too long|exceeds the context", re.IGNORECASE)


def tool_calls(step: Step) -> list[FrozenDict]:
    """The ``tool-call`` blocks ``{id, name, arguments}`` of the step's assistant message, in order."""
    message = step.message
    if message is None:
        return []
    return [block for block in message.data["message"]["content"] if block.get("type") == "tool-call"]


def is_context_overflow(message: str) -> bool:
    """Does a provider's error message say the request did not fit the context window?"""
    return bool(CONTEXT_HINT.search(message) or _PROMPT_TOO_LONG.search(message))


def status_failure(status: int, message: str, *, overflow: bool, headers: Mapping[str, str],
                   request_id: str | None) -> FrozenDict:
    """The LlmFailure of an HTTP error reply; ``overflow`` says the provider reported a context overflow.

    Codes: ``CONTEXT_WINDOW_EXCEEDED`` (what the compactor recovers from), ``RATE_LIMITED``
    (with ``providerRetryAfterMs`` from the headers), ``SERVER_ERROR`` for 5xx, else by status.
    """
    code = STATUS_CODES.get(status, "SERVER_ERROR" if status >= 500 else "HTTP_ERROR")
    if status in (400, 413, 422) and (overflow or is_context_overflow(message)):
        code = CONTEXT_OVERFLOW_CODE
    parts: dict[str, Any] = {"message": message, "code": code, "status": status}
    retry = retry_after_ms(headers)
    if retry is not None:
        parts["providerRetryAfterMs"] = retry
    if request_id:
        parts["requestId"] = request_id
    return frozen_dict(parts)


def connection_failure(exc: BaseException, *, timeout: bool) -> FrozenDict:
    """The LlmFailure of a request that timed out or lost its connection (the cause named)."""
    if timeout:
        return frozen_dict({"message": str(exc), "code": "TIMEOUT"})
    cause = exc.__cause__
    detail = f"{exc}: {type(cause).__name__}: {cause}" if cause is not None else str(exc)
    return frozen_dict({"message": detail, "code": "CONNECTION_ERROR"})


def is_transport_error(exc: BaseException) -> bool:
    """An HTTP client's own transport error (httpx, httpcore), which some SDKs let through mid-stream."""
    return type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2")


def close_stream(stream: object) -> None:
    """Close an SDK stream the loop stopped reading or that failed, so its connection is released."""
    close = getattr(stream, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            close()


async def aclose_stream(stream: object) -> None:
    """``close_stream`` for async SDK streams (``await stream.close()``)."""
    close = getattr(stream, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            result = close()
            if inspect.isawaitable(result):
                await result


class StepRecording:
    """One provider response being logged into a step; subclasses map the SDK's items (``feed``).

    ``relay`` counts the items it feeds (``received``); ``request`` is the SDK stream's HTTP
    request, when it has one, for the errors raised about it.
    """

    family: ClassVar[str] = "model"  # the provider a stream is named after when no header names one
    api: ClassVar[str] = "provider"  # the API whose stream this is, for messages: "Chat Completions"

    def __init__(self, step: Step, provider: str | None, model: str | None, stream: object = None) -> None:
        self.step = step
        self.provider = provider
        self.model = model
        self.received = 0
        self.request: Any = getattr(getattr(stream, "response", None), "request", None)

    def feed(self, item: Any) -> None:
        raise NotImplementedError

    def replay_state(self) -> Any:
        """Provider state the next request needs (``source.replayState``), or None."""
        return None

    def done(self) -> None:
        self.step.assistant(provider=self.provider, model=self.model, replay_state=self.replay_state())

    def provider_name(self) -> str:
        """Who answered: the ``provider`` given, else the request header's, else the SDK's family."""
        if self.provider:
            return self.provider
        header = self.step.session.request_header()
        config = header.get("config") if isinstance(header, Mapping) else None
        named = config.get("provider") if isinstance(config, Mapping) else None
        return named if isinstance(named, str) and named else self.family

    def cut_off(self, missing: str, *, how: str = "",
                failure: FrozenDict | None = None) -> tuple[str, FrozenDict]:
        """The stream ended without ``missing`` (its terminal event): the reply is cut.

        Logs a ``finish`` chunk of kind error (unless ``failure``, already logged, says why) and
        returns the message naming the provider, the stream and how many chunks arrived, with the
        failure to raise (code ``CONNECTION_ERROR``, as for a dropped connection).
        """
        count = self.received
        message = clean_text(f"the {self.provider_name()} {self.api} stream ended after {count} "
                             f"chunk{'' if count == 1 else 's'}{how} without {missing}: the reply is cut")
        if failure is not None:
            return f"{message}; {failure['message']}", failure
        failure = frozen_dict({"message": message, "code": "CONNECTION_ERROR"})
        reason = frozen_dict({"kind": "error", "error": failure})
        self.step.chunk(frozen_dict({"type": "finish", "reason": reason}))
        return message, failure

    def stopped_early(self) -> None:
        """The caller stopped reading: keep the streamed prefix as an interrupted message."""
        step = self.step
        if step.message is None and step.turn.is_open:
            with contextlib.suppress(AgentlogError):  # the step closed before the generator was finalized
                step.assistant(provider=self.provider, model=self.model, interrupted=True,
                               replay_state=self.replay_state())


def relay(recording: StepRecording, stream: Iterable[T], annotate: Callable[[BaseException], object],
          errors: type[BaseException] | tuple[type[BaseException], ...]) -> Iterator[T]:
    """Yield ``stream``'s items unchanged, each fed to ``recording`` first; ``errors`` are annotated."""
    try:
        for item in stream:
            recording.received += 1
            recording.feed(item)
            yield item
    except GeneratorExit:
        recording.stopped_early()
        close_stream(stream)
        raise
    except errors as exc:
        annotate(exc)
        close_stream(stream)
        raise
    recording.done()


async def arelay(recording: StepRecording, stream: AsyncIterable[T],
                 annotate: Callable[[BaseException], object],
                 errors: type[BaseException] | tuple[type[BaseException], ...]) -> AsyncIterator[T]:
    """``relay`` for async streams."""
    try:
        async for item in stream:
            recording.received += 1
            recording.feed(item)
            yield item
    except GeneratorExit:
        recording.stopped_early()
        await aclose_stream(stream)
        raise
    except errors as exc:
        annotate(exc)
        await aclose_stream(stream)
        raise
    recording.done()
