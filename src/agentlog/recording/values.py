"""The values a recorder logs: its input checks and the turn-end reasons of exceptions (spec session-core §7).

Shared by ``recorder.py`` (Recorder, Turn) and ``step.py`` (Step); pure functions.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, Protocol, TypeVar

from agentlog.core.aio import is_cancellation
from agentlog.core.events import is_safe_int
from agentlog.core.failure import llm_failure
from agentlog.core.jsonvalue import FrozenDict, freeze, frozen_dict, frozen_object, valid_text
from agentlog.errors import AgentlogError, InvalidEventError

__all__ = ["CLOSED", "NEW", "OPEN", "USER_SOURCE", "check_text", "check_usage", "contain", "content_blocks",
           "is_abort", "kind_tagged", "located", "new_message_id",
           "turn_end_reason", "user_message_data"]

if TYPE_CHECKING:
    from agentlog.core.session import Session


class _Recording(Protocol):
    """A Turn or a Step: what ``located`` reads to name where a refusal happened."""

    @property
    def _session(self) -> Session: ...


_S = TypeVar("_S", bound=_Recording)
_P = ParamSpec("_P")
_R = TypeVar("_R")

USER_SOURCE: Final = frozen_dict({"kind": "user"})
NEW, OPEN, CLOSED = 0, 1, 2


def check_text(value: object, what: str, *, path: str, empty: bool = True) -> str:
    """``value`` as a valid-Unicode ``str`` (non-empty unless ``empty``), else an error at ``path``."""
    if type(value) is not str:
        raise InvalidEventError(f"{what} must be a str, got {type(value).__name__}", path=path)
    if not value.isascii() and not valid_text(value):
        raise InvalidEventError(f"{what} contains a lone surrogate (not valid Unicode)", path=path)
    if not empty and not value:
        raise InvalidEventError(f"{what} must not be empty", path=path)
    return value


_Method = Callable[Concatenate[_S, _P], _R]


def located(event_type: str) -> Callable[[_Method[_S, _P, _R]], _Method[_S, _P, _R]]:
    """A Turn/Step method whose refusals name the session, ``event_type`` and the seq it would have had."""
    def wrap(method: _Method[_S, _P, _R]) -> _Method[_S, _P, _R]:
        @functools.wraps(method)
        def located_method(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return method(self, *args, **kwargs)
            except AgentlogError as exc:
                session = self._session
                raise exc.locate(session_id=session.id, seq=session.seq, event_type=event_type) from None
        return located_method
    return wrap


def kind_tagged(value: object, root: str) -> FrozenDict:
    frozen = frozen_object(value, root)
    if type(frozen.get("kind")) is not str or not frozen["kind"]:
        raise InvalidEventError(f"{root} needs a non-empty string kind", path=f"{root}.kind")
    return frozen


def content_blocks(content: object, root: str) -> tuple[Any, ...]:
    """A str becomes one text block; a sequence of block objects is validated and frozen."""
    if type(content) is str:
        return (frozen_dict({"type": "text", "text": check_text(content, root, path=f"{root}[0].text")}),)
    blocks = freeze(content, root=root, what="non-JSON-serializable data")
    if type(blocks) is not tuple:
        raise InvalidEventError(f"{root} must be a str or a list of content blocks", path=root)
    for index, block in enumerate(blocks):
        if type(block) is not FrozenDict or type(block.get("type")) is not str:
            raise InvalidEventError("content block needs a string type", path=f"{root}[{index}]")
    return blocks


def user_message_data(content: object, source: object, message_id: str | None) -> FrozenDict:
    return frozen_dict({
        "id": new_message_id(message_id, "data.id"),
        "role": "user",
        "content": content_blocks(content, "data.content"),
        "source": USER_SOURCE if source is None else kind_tagged(source, "data.source"),
    })


def new_message_id(message_id: str | None, path: str) -> str:
    """A fresh uuid4, or the caller's id checked as a non-empty string at ``path``."""
    return str(uuid.uuid4()) if message_id is None else check_text(message_id, "message id", path=path,
                                                                   empty=False)


def is_abort(exc: BaseException) -> bool:
    return isinstance(exc, KeyboardInterrupt) or is_cancellation(exc)


def turn_end_reason(exc: BaseException) -> FrozenDict:
    """The turn-end reason for an exception: aborted by the user, disposed, or an error."""
    if is_abort(exc):
        return frozen_dict({"kind": "aborted", "reason": frozen_dict({"kind": "user"})})
    if not isinstance(exc, Exception):  # SystemExit, GeneratorExit: the loop is going away
        return frozen_dict({"kind": "aborted", "reason": frozen_dict({"kind": "disposed"})})
    return frozen_dict({"kind": "error", "error": llm_failure(exc)})


def contain(exc: BaseException, what: str, failure: Exception) -> None:
    exc.add_note(f"agentlog: {what} could not be logged: {type(failure).__name__}: {failure}")



def check_usage(usage: Any) -> FrozenDict:
    """TokenUsage: ``{inputTokens, outputTokens, cacheReadTokens?, cacheWriteTokens?, reasoningTokens?}``."""
    frozen = frozen_object(usage, "data.usage")
    for key in ("inputTokens", "outputTokens"):
        if key not in frozen:
            raise InvalidEventError(f"usage lacks {key}", path=f"data.usage.{key}")
    for key, value in frozen.items():
        if not (is_safe_int(value) and value >= 0):
            raise InvalidEventError("token counts must be non-negative integers", path=f"data.usage.{key}")
    return frozen
