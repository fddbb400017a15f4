"""Recorder: writes well-formed turns and steps for an agent loop (spec session-core §1, §7, §11).

The loop says what happened (a text delta, a model reply, a tool call); the recorder picks the
event types, numbers turns and steps, assembles the assistant message from its chunks, logs a
request header only when it changes, and closes steps and turns on every exit path.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from agentlog.errors import InvalidEventError, UsageError
from agentlog.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
    is_safe_int,
)
from agentlog.jsonvalue import FrozenDict, freeze, frozen_dict, valid_text
from agentlog.repair import NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT, TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from agentlog.request_header import canonical_header, check_request_header_shape, header_equals
from agentlog.session import Session

if TYPE_CHECKING:
    from agentlog.store.writer import LiveSession

__all__ = ["Flush", "Recorder", "Step", "Turn", "llm_failure", "turn_end_reason"]

logger = logging.getLogger("agentlog")

Flush = Callable[[], object]
"""A checkpoint: a blocking callable, or an async one (awaited by the ``a``-prefixed methods)."""

COMPLETED: Final = frozen_dict({"kind": "completed"})
MAX_TOKENS: Final = frozen_dict({"kind": "max-tokens"})
USER_SOURCE: Final = frozen_dict({"kind": "user"})
_OUTCOME_UNKNOWN_ERROR: Final = frozen_dict({"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN})
_NOT_STARTED_ERROR: Final = frozen_dict({"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED})
_TODO_STATUSES: Final = frozenset({"pending", "in_progress", "completed"})
_new_dict = dict.__new__
_fill = dict.update
_DELTA_KINDS: Final = {"text-delta": "text", "reasoning-delta": "reasoning", "tool-call-delta": "tool-call"}
_NEW, _OPEN, _CLOSED = 0, 1, 2


def _check_text(value: object, what: str, *, empty: bool = True) -> str:
    """``value`` as a valid-Unicode ``str`` (non-empty unless ``empty``), else InvalidEventError."""
    if type(value) is not str:
        raise InvalidEventError(f"{what} must be a str, got {type(value).__name__}")
    if not value.isascii() and not valid_text(value):
        raise InvalidEventError(f"{what} contains a lone surrogate (not valid Unicode)")
    if not empty and not value:
        raise InvalidEventError(f"{what} must not be empty")
    return value


def _clean_text(text: str) -> str:
    """Text made safe to log (lone surrogates escaped): closing a turn must not fail on it."""
    return text if text.isascii() or valid_text(text) else text.encode("utf-8", "backslashreplace").decode()


def _frozen_object(value: object, root: str) -> FrozenDict:
    """``value`` (a mapping) validated and frozen as a JSON object."""
    if type(value) is FrozenDict:
        return value
    if isinstance(value, Mapping) and type(value) is not dict:
        value = dict(value)
    frozen = freeze(value, root=root, what="non-JSON-serializable data")
    if type(frozen) is not FrozenDict:
        raise InvalidEventError(f"{root} must be a JSON object, got {type(value).__name__}", path=root)
    return frozen


def _kind_tagged(value: object, root: str) -> FrozenDict:
    frozen = _frozen_object(value, root)
    if type(frozen.get("kind")) is not str or not frozen["kind"]:
        raise InvalidEventError(f"{root} needs a non-empty string kind", path=f"{root}.kind")
    return frozen


def _content_blocks(content: object, root: str) -> tuple[Any, ...]:
    """A str becomes one text block; a sequence of block objects is validated and frozen."""
    if type(content) is str:
        return (frozen_dict({"type": "text", "text": _check_text(content, root)}),)
    blocks = freeze(content, root=root, what="non-JSON-serializable data")
    if type(blocks) is not tuple:
        raise InvalidEventError(f"{root} must be a str or a list of content blocks", path=root)
    for index, block in enumerate(blocks):
        if type(block) is not FrozenDict or type(block.get("type")) is not str:
            raise InvalidEventError("content block needs a string type", path=f"{root}[{index}]")
    return blocks


def _user_message(content: object, source: object, message_id: str | None) -> FrozenDict:
    return frozen_dict({
        "id": _message_id(message_id),
        "role": "user",
        "content": _content_blocks(content, "data.content"),
        "source": USER_SOURCE if source is None else _kind_tagged(source, "data.source"),
    })


def _message_id(message_id: str | None) -> str:
    return str(uuid.uuid4()) if message_id is None else _check_text(message_id, "message id", empty=False)


def _attr(obj: object, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def llm_failure(exc: BaseException) -> FrozenDict:
    """The LlmFailure ``{message, code, status?, providerRetryAfterMs?, requestId?}`` of an exception.

    An ``llm_failure`` mapping on the exception wins; else ``code``/``status`` (or
    ``status_code``)/``request_id``/``provider_retry_after_ms`` attributes; else code ``UNKNOWN``.
    """
    provided = _attr(exc, "llm_failure")
    if isinstance(provided, Mapping):
        try:
            failure = _frozen_object(provided, "error")
        except InvalidEventError:
            failure = None
        if failure is not None and type(failure.get("message")) is str and type(failure.get("code")) is str:
            return failure
    code = _attr(exc, "code")
    if type(code) is str and code:
        parts: dict[str, Any] = {"message": _clean_text(str(exc) or type(exc).__name__),
                                 "code": _clean_text(code)}
    else:
        text = str(exc)
        parts = {"message": _clean_text(f"{type(exc).__name__}: {text}" if text else type(exc).__name__),
                 "code": "UNKNOWN"}
    status = _attr(exc, "status")
    status = status if is_safe_int(status) else _attr(exc, "status_code")
    if is_safe_int(status):
        parts["status"] = status
    retry = _attr(exc, "provider_retry_after_ms")
    if is_safe_int(retry) and retry >= 0:
        parts["providerRetryAfterMs"] = retry
    request_id = _attr(exc, "request_id")
    if type(request_id) is str and request_id:
        parts["requestId"] = _clean_text(request_id)
    return frozen_dict(parts)


def _is_abort(exc: BaseException) -> bool:
    return isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))


def turn_end_reason(exc: BaseException) -> FrozenDict:
    """The turn-end reason for an exception: aborted by the user, disposed, or an error."""
    if _is_abort(exc):
        return frozen_dict({"kind": "aborted", "reason": frozen_dict({"kind": "user"})})
    if not isinstance(exc, Exception):  # SystemExit, GeneratorExit: the loop is going away
        return frozen_dict({"kind": "aborted", "reason": frozen_dict({"kind": "disposed"})})
    return frozen_dict({"kind": "error", "error": llm_failure(exc)})


def _contain(exc: BaseException, what: str, failure: Exception) -> None:
    exc.add_note(f"agentlog: {what} could not be logged: {type(failure).__name__}: {failure}")


class Recorder:
    """Writes turns and steps into ``session`` with the event vocabulary and order of DSH's loop.

    ``flush`` (optional) is a checkpoint run after the request header is logged (before each
    model request) and after each ``tool/call`` (before the tool runs), so a crash never loses
    a completed step. Given a ``LiveSession``, the recorder uses its ``flush`` unless
    ``checkpoint=False``.

    ``compactor`` (a ``agentlog.compaction.engine.Compactor``) gives automatic compaction: before
    each ``step/start`` it runs the pressure check inside the open turn (never failing the step),
    and ``step.on_request_error(exc)`` / ``await step.aon_request_error(exc)`` runs context-overflow
    recovery, returning True when the surface was replaced so the loop retries the request in the
    same step. Inside an event loop use ``async with turn.step()`` so the check can be awaited.
    """

    __slots__ = ("_active", "_last_turn", "_open_in_log", "_overflows", "_requested", "_scanned",
                 "compactor", "flush", "session")

    def __init__(self, session: Session | LiveSession, *, flush: Flush | None = None,
                 checkpoint: bool = True, compactor: Any = None) -> None:
        if not isinstance(session, Session):
            live = session
            session = live.session
            if flush is None and checkpoint:
                flush = live.flush
        self.session = session
        self.flush = flush if checkpoint else None
        self.compactor = compactor
        self._scanned = 0
        self._last_turn = 0
        self._open_in_log = False
        self._requested = False
        self._overflows = 0  # overflow retries since the last successful response or idle
        self._active: Turn | None = None

    def turn(self) -> Turn:
        """A new turn, numbered after the log's last; ``turn/start`` is logged when it starts."""
        return Turn(self)

    @property
    def active_turn(self) -> Turn | None:
        """The turn this recorder has open, if any."""
        return self._active

    def _next_turn_number(self) -> int:
        """Scan new events (O(new)) for turn boundaries; refuse when the log has a turn open."""
        events = self.session.events
        for event in events[self._scanned :]:
            kind = event.type
            if kind == TURN_START:
                turn = event.data.get("turn") if isinstance(event.data, dict) else None
                if type(turn) is int:
                    self._last_turn = turn
                self._open_in_log = True
            elif kind == TURN_END:
                self._open_in_log = False
        self._scanned = len(events)
        if self._open_in_log:
            raise UsageError(f"turn {self._last_turn} is still open in the log; end it (or repair the "
                             "session) before recording a new turn", session_id=self.session.id)
        return self._last_turn + 1

    def _check_sync_flush(self) -> None:
        if self.flush is not None and inspect.iscoroutinefunction(self.flush):
            raise UsageError("flush is async: use `await step.arequest_header(...)` and "
                             "`await step.atool_call(...)`", session_id=self.session.id)

    def _flush_sync(self) -> None:
        if self.flush is None:
            return
        result = self.flush()
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()
            raise UsageError("flush returned an awaitable: use the `a`-prefixed step methods",
                             session_id=self.session.id)

    async def _flush_async(self) -> None:
        if self.flush is None:
            return
        result = self.flush()
        if inspect.isawaitable(result):
            await result

    def _hook(self, name: str) -> Any:
        """The compactor's loop hook ``name`` (None without a compactor that has it)."""
        hook = getattr(self.compactor, name, None) if self.compactor is not None else None
        return hook if callable(hook) else None

    def _pre_step(self) -> None:
        """The compactor's pre-step pressure check, run to completion (a warning inside a loop)."""
        hook = self._hook("abefore_step")
        if hook is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(hook(self.session))
            return
        logger.warning('session "%s": pre-step compaction skipped: a step started synchronously inside a '
                       "running event loop; use `async with turn.step()`", self.session.id)


class Turn:
    """One turn: ``turn/start`` on entry, ``turn/end`` with the right reason on every exit."""

    __slots__ = ("_number", "_recorder", "_session", "_state", "_step", "_steps", "_truncated")

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._session = recorder.session
        self._number = 0
        self._state = _NEW
        self._step: Step | None = None
        self._steps = 0
        self._truncated = False

    @property
    def number(self) -> int:
        """The turn number (0 until started)."""
        return self._number

    @property
    def is_open(self) -> bool:
        return self._state == _OPEN

    def start(self) -> Turn:
        """Log ``turn/start``; the context managers call this for you."""
        recorder = self._recorder
        if self._state != _NEW:
            raise UsageError("this turn was already started; call recorder.turn() for a new one")
        if recorder._active is not None:
            raise UsageError(f"turn {recorder._active.number} is still open; end it first",
                             session_id=self._session.id)
        number = recorder._next_turn_number()
        self._session.append(TURN_START, frozen_dict({"turn": number}))
        self._number = number
        self._state = _OPEN
        recorder._active = self
        return self

    def __enter__(self) -> Turn:
        return self.start()

    async def __aenter__(self) -> Turn:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._state != _OPEN:
            return
        if exc is None:
            self.end()
            return
        try:
            self._finish(turn_end_reason(exc))
        except Exception as failure:
            self._abandon()
            _contain(exc, f"the end of turn {self._number}", failure)

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, tb)

    def step(self) -> Step:
        """The next step of this turn; ``step/start`` is logged when it starts."""
        self._require_open("step")
        return Step(self)

    def user_message(self, content: str | Sequence[Any], *, source: Mapping[str, Any] | None = None,
                     id: str | None = None) -> Event:
        """Log a ``user/message`` (surface append); ``content`` is text or content blocks."""
        self._require_open("user_message")
        return self._session.append(USER_MESSAGE, _user_message(content, source, id), surface_op="append")

    def todo_write(self, todos: Sequence[Mapping[str, Any]]) -> Event:
        """Log the whole todo list (``todo/write``; last write wins)."""
        self._require_open("todo_write")
        frozen = freeze(list(todos), root="data.todos", what="non-JSON-serializable data")
        for index, todo in enumerate(frozen):
            if (type(todo) is not FrozenDict or type(todo.get("content")) is not str
                    or todo.get("status") not in _TODO_STATUSES):
                raise InvalidEventError("todo needs content and status pending|in_progress|completed",
                                        path=f"data.todos[{index}]")
        return self._session.append(TODO_WRITE, frozen_dict({"todos": frozen}))

    def max_tokens(self) -> None:
        """Mark the turn truncated: it will end ``max-tokens`` instead of ``completed`` (sticky)."""
        self._truncated = True

    def end(self, reason: Mapping[str, Any] | None = None) -> Event:
        """Close any open step and log ``turn/end`` (default ``completed``, or ``max-tokens`` if marked)."""
        self._require_open("end")
        frozen = COMPLETED if reason is None else _kind_tagged(reason, "data.reason")
        return self._finish(frozen)

    def abort(self, cause: str | Mapping[str, Any] = "user") -> Event:
        """End the turn ``aborted``; ``cause`` is a kind (user, parent, disposed) or a cause object."""
        reason = frozen_dict({"kind": cause}) if isinstance(cause, str) else cause
        return self.end({"kind": "aborted", "reason": reason})

    def fail(self, error: BaseException | Mapping[str, Any]) -> Event:
        """End the turn ``error`` with an LlmFailure (from an exception or given as a mapping)."""
        if isinstance(error, BaseException):
            failure = llm_failure(error)
        else:
            failure = _frozen_object(error, "data.reason.error")
            if type(failure.get("message")) is not str or type(failure.get("code")) is not str:
                raise InvalidEventError("an LlmFailure needs a string message and code",
                                        path="data.reason.error")
        return self.end({"kind": "error", "error": failure})

    def block(self) -> Event:
        """End the turn ``blocked``."""
        return self.end({"kind": "blocked"})

    def _finish(self, reason: FrozenDict) -> Event:
        kind = reason["kind"]
        if kind == "completed" and self._truncated:
            reason = MAX_TOKENS
        step = self._step
        if step is not None:
            if kind in ("completed", "max-tokens"):
                step.end()
            else:
                step._close_abnormally(abort=kind == "aborted")
        event = self._session.append(TURN_END, frozen_dict({"turn": self._number, "reason": reason}))
        self._state = _CLOSED
        self._recorder._active = None
        self._recorder._overflows = 0
        return event

    def _abandon(self) -> None:
        self._state = _CLOSED
        self._step = None
        if self._recorder._active is self:
            self._recorder._active = None

    def _require_open(self, what: str) -> None:
        if self._state != _OPEN:
            state = "has not started" if self._state == _NEW else "has ended"
            name = f"turn {self._number}" if self._number else "this turn"
            raise UsageError(f"turn.{what}() needs an open turn, but {name} {state}",
                             session_id=self._session.id)


class Step:
    """One model call and the tool runs it asked for: ``step/start`` ... ``step/end``."""

    __slots__ = ("_answered", "_blocks", "_calls", "_chunk_seqs", "_last_index", "_last_kind", "_message",
                 "_number", "_recorder", "_session", "_state", "_streaming", "_tool_blocks", "_turn",
                 "_turn_number", "_usage")

    def __init__(self, turn: Turn) -> None:
        self._turn = turn
        self._recorder = turn._recorder
        self._session = turn._session
        self._turn_number = turn.number
        self._number = 0
        self._state = _NEW
        self._streaming = False  # open and no assistant/message yet: deltas allowed
        self._chunk_seqs: list[int] = []
        self._blocks: dict[int, list[Any]] = {}  # index -> [kind, parts, call id, name]
        self._tool_blocks: dict[str, int] = {}  # streamed call id -> block index
        self._last_kind = ""
        self._last_index = -1
        self._usage: Any = None
        self._message: Event | None = None
        self._calls: dict[str, int | None] = {}  # unresolved call id -> tool/call seq (None: not logged)
        self._answered: set[str] = set()

    @property
    def number(self) -> int:
        """The step number within its turn (0 until started)."""
        return self._number

    @property
    def turn(self) -> Turn:
        return self._turn

    @property
    def message(self) -> Event | None:
        """The step's ``assistant/message`` event, once logged."""
        return self._message

    def start(self) -> Step:
        """Run the compactor's pre-step check (if any), then log ``step/start``."""
        self._check_startable()
        self._recorder._pre_step()
        return self._start()

    def _check_startable(self) -> None:
        turn = self._turn
        if self._state != _NEW:
            raise UsageError("this step was already started; call turn.step() for a new one")
        turn._require_open("step")
        if turn._step is not None:
            raise UsageError(f"step {turn._step.number} of turn {turn.number} is still open; end it first",
                             session_id=self._session.id)

    def _start(self) -> Step:
        self._check_startable()
        turn = self._turn
        number = turn._steps + 1
        self._session.append(STEP_START, frozen_dict({"turn": self._turn_number, "step": number}))
        self._number = number
        turn._steps = number
        turn._step = self
        self._state = _OPEN
        self._streaming = True
        return self

    def __enter__(self) -> Step:
        return self.start()

    async def __aenter__(self) -> Step:
        self._check_startable()
        hook = self._recorder._hook("abefore_step")
        if hook is not None:
            await hook(self._session)
        return self._start()

    def on_request_error(self, error: BaseException) -> bool:
        """Context-overflow recovery for a failed model request of this step (blocking form).

        Returns True when the compactor replaced part of the surface: rebuild the request from
        ``session.derive_messages()`` and stream again in this same step. False: raise ``error``.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.aon_request_error(error))
        raise UsageError("step.on_request_error() cannot block inside a running event loop; "
                         "use `await step.aon_request_error(exc)`", session_id=self._session.id)

    async def aon_request_error(self, error: BaseException) -> bool:
        """``on_request_error`` for async loops; the compactor caps retries per successful response."""
        self._require_open("on_request_error")
        if self._message is not None:
            raise UsageError("step.on_request_error() after this step's assistant/message",
                             session_id=self._session.id)
        recorder = self._recorder
        hook = recorder._hook("arecover_overflow")
        if hook is None:
            return False
        retry: bool = await hook(self._session, error, attempts=recorder._overflows)
        if retry:
            recorder._overflows += 1
            self._chunk_seqs = []
            self._blocks = {}
            self._tool_blocks = {}
            self._last_kind, self._last_index = "", -1
            self._usage = None
        return retry

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._state != _OPEN:
            return
        if exc is None:
            self.end()
            return
        try:
            self._close_abnormally(abort=_is_abort(exc) or not isinstance(exc, Exception))
        except Exception as failure:
            self._state = _CLOSED
            self._streaming = False
            self._turn._step = None
            _contain(exc, f"the end of step {self._number}", failure)

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, tb)

    def end(self) -> Event:
        """Log ``step/end``; tool calls still unanswered stay so (the invariants allow it)."""
        self._require_open("end")
        event = self._session.append(STEP_END, frozen_dict({"turn": self._turn_number, "step": self._number}))
        self._state = _CLOSED
        self._streaming = False
        self._turn._step = None
        return event

    def max_tokens(self) -> None:
        """This step was truncated: the whole turn ends ``max-tokens`` (sticky)."""
        self._turn._truncated = True

    # -- messages and request state ------------------------------------------------------

    def user_message(self, content: str | Sequence[Any], *, source: Mapping[str, Any] | None = None,
                     id: str | None = None) -> Event:
        """Log a ``user/message`` (surface append); DSH's loop writes the prompt inside step 1."""
        self._require_open("user_message")
        return self._session.append(USER_MESSAGE, _user_message(content, source, id), surface_op="append")

    def todo_write(self, todos: Sequence[Mapping[str, Any]]) -> Event:
        """Log the whole todo list (``todo/write``)."""
        return self._turn.todo_write(todos)

    def request_header(self, header: Mapping[str, Any], *,
                       context: Mapping[str, Any] | None = None) -> Event | None:
        """Log the request header if it is new to the log (initial/resume/change), then checkpoint.

        ``context`` ``{provider, model, contextWindow?}`` is logged as ``request/context`` when it
        differs from the log's latest. Returns the ``request/header`` event, or None if unchanged.
        """
        self._recorder._check_sync_flush()
        event = self._log_request(header, context)
        self._recorder._flush_sync()
        return event

    async def arequest_header(self, header: Mapping[str, Any], *,
                              context: Mapping[str, Any] | None = None) -> Event | None:
        """``request_header`` whose checkpoint awaits an async ``flush``."""
        event = self._log_request(header, context)
        await self._recorder._flush_async()
        return event

    def _log_request(self, header: Mapping[str, Any], context: Mapping[str, Any] | None) -> Event | None:
        self._require_open("request_header")
        frozen = _frozen_object(header, "data.header")
        check_request_header_shape({"header": frozen}, "request/header")
        ctx = None
        if context is not None:
            ctx = _frozen_object(context, "data")
            for key in ("provider", "model"):
                if type(ctx.get(key)) is not str or not ctx[key]:
                    raise InvalidEventError(f"request/context lacks {key}", path=f"data.{key}")
            window = ctx.get("contextWindow", 1)
            if not (is_safe_int(window) and window > 0):
                raise InvalidEventError("request/context contextWindow must be a positive integer",
                                        path="data.contextWindow")
        session, recorder = self._session, self._recorder
        previous = session.request_header()
        if previous is None:
            reason: str | None = "initial"
        elif not recorder._requested:
            reason = "resume"
        else:
            reason = None if header_equals(previous, canonical_header(frozen)) else "change"
        recorder._requested = True
        event = None
        if reason is not None:
            event = session.append(REQUEST_HEADER, frozen_dict({"header": frozen, "reason": reason}))
        if ctx is not None and session.request_context() != ctx:
            session.append(REQUEST_CONTEXT, ctx)
        return event

    # -- the model's stream --------------------------------------------------------------

    def text_delta(self, text: str) -> Event:
        """Log a ``text-delta`` chunk; consecutive text deltas share one text block."""
        return self._text_chunk(text, "text", "text-delta", "text_delta")

    def reasoning_delta(self, text: str) -> Event:
        """Log a ``reasoning-delta`` chunk; consecutive reasoning deltas share one block."""
        return self._text_chunk(text, "reasoning", "reasoning-delta", "reasoning_delta")

    def _text_chunk(self, text: str, block: str, chunk_type: str, method: str) -> Event:
        """The hot path of both text-like deltas (one call per streamed chunk)."""
        if not self._streaming:
            self._refuse_chunk(method)
        if type(text) is not str or not (text.isascii() or valid_text(text)):
            _check_text(text, method.replace("_", " "))  # raises
        index = self._last_index if self._last_kind == block else self._open_block(block, None, None)
        self._blocks[index][1].append(text)
        chunk = _new_dict(FrozenDict)  # frozen_dict, inlined: one delta per streamed token
        _fill(chunk, type=chunk_type, index=index, text=text)
        data = _new_dict(FrozenDict)
        _fill(data, turn=self._turn_number, step=self._number, chunk=chunk)
        event = self._session.append(ASSISTANT_CHUNK, data)
        self._chunk_seqs.append(event[1])
        return event

    def tool_call_delta(self, id: str, name: str | None, args_delta: str) -> Event:
        """Log a ``tool-call-delta`` chunk; deltas with the same call id build one tool-call block."""
        if not self._streaming:
            self._refuse_chunk("tool_call_delta")
        _check_text(id, "tool call id", empty=False)
        _check_text(args_delta, "tool call arguments delta")
        index = self._tool_blocks.get(id)
        if index is None:
            index = self._open_block("tool-call", id, None)
            self._tool_blocks[id] = index
        block = self._blocks[index]
        if name is not None:
            block[3] = _check_text(name, "tool name", empty=False)
        block[1].append(args_delta)
        self._last_kind, self._last_index = "tool-call", index
        chunk: dict[str, Any] = {"type": "tool-call-delta", "index": index, "id": id}
        if name is not None:
            chunk["name"] = name
        chunk["argumentsDelta"] = args_delta
        return self._chunk(frozen_dict(chunk))

    def chunk(self, chunk: Mapping[str, Any]) -> Event:
        """Log any StreamChunk as given; deltas feed the assembled message, ``usage`` its usage,
        and a ``finish`` for max-tokens marks the turn truncated."""
        if not self._streaming:
            self._refuse_chunk("chunk")
        frozen = _frozen_object(chunk, "data.chunk")
        kind, index = frozen.get("type"), frozen.get("index")
        if type(kind) is not str:
            raise InvalidEventError("stream chunk needs a string type", path="data.chunk.type")
        if kind in _DELTA_KINDS and type(index) is int and index >= 0:
            self._feed(_DELTA_KINDS[kind], index, frozen)
        elif kind == "usage":
            self._usage = frozen.get("usage")
        elif kind == "finish":
            reason = frozen.get("reason")
            if isinstance(reason, dict) and reason.get("kind") == "max-tokens":
                self._turn._truncated = True
        return self._chunk(frozen)

    def _feed(self, kind: str, index: int, chunk: FrozenDict) -> None:
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = [kind, [], chunk.get("id"), None]
        text = chunk.get("argumentsDelta" if kind == "tool-call" else "text")
        if type(text) is str:
            block[1].append(text)
        if kind == "tool-call" and type(chunk.get("name")) is str:
            block[3] = chunk["name"]
        self._last_kind, self._last_index = kind, index

    def _open_block(self, kind: str, call_id: str | None, name: str | None) -> int:
        index = max(self._blocks) + 1 if self._blocks else 0
        self._blocks[index] = [kind, [], call_id, name]
        self._last_kind, self._last_index = kind, index
        return index

    def _chunk(self, chunk: FrozenDict) -> Event:
        event = self._session.append(
            ASSISTANT_CHUNK, frozen_dict({"turn": self._turn_number, "step": self._number, "chunk": chunk})
        )
        self._chunk_seqs.append(event.seq)
        return event

    def _refuse_chunk(self, what: str) -> None:
        self._require_open(what)
        raise UsageError(f"step.{what}() after this step's assistant/message", session_id=self._session.id)

    # -- the model's message -------------------------------------------------------------

    def assistant(self, *, provider: str | None = None, model: str | None = None, usage: Any = None,
                  content: Sequence[Any] | None = None, interrupted: bool = False,
                  id: str | None = None,
                  replay_state: Any = None) -> Event:
        """Log the step's ``assistant/message`` citing its chunks in ``sourceEventSeqs``.

        The content is assembled from the deltas (blocks in index order) unless ``content`` is
        given; ``provider``/``model`` default to the latest request header's config.
        """
        self._require_open("assistant")
        if self._message is not None:
            raise UsageError(f"step {self._number} already has its assistant/message",
                             session_id=self._session.id)
        blocks = (self._assembled(interrupted) if content is None
                  else _content_blocks(content, "data.message.content"))
        source = self._model_source(provider, model, replay_state)
        message = frozen_dict({"id": _message_id(id), "role": "assistant", "content": blocks,
                               "source": source})
        data: dict[str, Any] = {"turn": self._turn_number, "step": self._number, "message": message}
        usage = self._usage if usage is None else _check_usage(usage)
        if usage is not None:
            data["usage"] = usage
        if interrupted:
            data["interrupted"] = True
        event = self._session.append(ASSISTANT_MESSAGE, frozen_dict(data), surface_op="append",
                                     source_event_seqs=tuple(self._chunk_seqs))
        self._message = event
        self._streaming = False
        self._recorder._overflows = 0
        for block in blocks:
            if block.get("type") == "tool-call" and type(block.get("id")) is str:
                self._calls.setdefault(block["id"], None)
        return event

    def _assembled(self, interrupted: bool) -> tuple[Any, ...]:
        blocks: list[Any] = []
        for index in sorted(self._blocks):
            kind, parts, call_id, name = self._blocks[index]
            if kind != "tool-call":
                blocks.append(frozen_dict({"type": kind, "text": "".join(parts)}))
            elif not interrupted:  # an interrupted prefix omits calls that were never dispatched
                if type(call_id) is not str or type(name) is not str:
                    raise InvalidEventError(f"streamed tool call at index {index} lacks an id or a name")
                blocks.append(frozen_dict({"type": "tool-call", "id": call_id, "name": name,
                                           "arguments": "".join(parts)}))
        return tuple(blocks)

    def _model_source(self, provider: str | None, model: str | None, replay_state: Any) -> FrozenDict:
        if provider is None or model is None:
            header = self._session.request_header()
            config = header.get("config") if header is not None else None
            if not isinstance(config, dict):
                raise UsageError("assistant() needs provider and model (no request header logged yet)",
                                 session_id=self._session.id)
            provider = config.get("provider") if provider is None else provider
            model = config.get("model") if model is None else model
        source: dict[str, Any] = {"kind": "model", "provider": _check_text(provider, "provider", empty=False),
                                  "model": _check_text(model, "model", empty=False)}
        if replay_state is not None:
            source["replayState"] = freeze(replay_state, root="data.message.source.replayState")
        return frozen_dict(source)

    # -- tools ---------------------------------------------------------------------------

    def tool_call(self, call_id: str, name: str, arguments: str) -> Event:
        """Log ``tool/call`` (the tool is about to run), then checkpoint before it runs."""
        self._recorder._check_sync_flush()
        event = self._log_call(call_id, name, arguments)
        self._recorder._flush_sync()
        return event

    async def atool_call(self, call_id: str, name: str, arguments: str) -> Event:
        """``tool_call`` whose checkpoint awaits an async ``flush``."""
        event = self._log_call(call_id, name, arguments)
        await self._recorder._flush_async()
        return event

    def _log_call(self, call_id: str, name: str, arguments: str) -> Event:
        self._require_open("tool_call")
        _check_text(call_id, "tool call id", empty=False)
        _check_text(name, "tool name", empty=False)
        _check_text(arguments, "tool arguments")
        if self._calls.get(call_id) is not None or call_id in self._answered:
            raise UsageError(f"tool call {call_id!r} was already logged in this step",
                             session_id=self._session.id)
        event = self._session.append(TOOL_CALL, frozen_dict({
            "turn": self._turn_number, "step": self._number, "callId": call_id, "name": name,
            "arguments": arguments,
        }))
        self._calls[call_id] = event.seq
        return event

    def tool_result(self, call_id: str, content: str | Sequence[Any], *, is_error: bool = False,
                    error: Mapping[str, Any] | None = None, meta: Any = None,
                    id: str | None = None) -> Event:
        """Log the model-facing ``tool/result`` (surface append) citing its ``tool/call``.

        ``error`` ``{name, code}`` is the internal failure identity, ``meta`` a tool-private
        JSON payload. A result needs a prior ``tool_call`` in this step unless it is a
        not-started error (``is_error`` with code ``TOOL_NOT_STARTED``).
        """
        self._require_open("tool_result")
        _check_text(call_id, "tool call id", empty=False)
        if type(is_error) is not bool:
            raise InvalidEventError(f"is_error must be a bool, got {type(is_error).__name__}")
        frozen_error = None if error is None else _frozen_object(error, "data.error")
        call_seq = self._calls.get(call_id)
        not_started = is_error and frozen_error is not None and frozen_error.get("code") == TOOL_NOT_STARTED
        if call_id in self._answered:
            raise UsageError(f"tool call {call_id!r} already has its tool/result",
                             session_id=self._session.id)
        if call_seq is None and not not_started:
            raise UsageError(f"no prior tool/call in this step for call id {call_id!r}; call "
                             "step.tool_call() before the tool runs", session_id=self._session.id)
        block = frozen_dict({"type": "tool-result", "toolCallId": call_id,
                             "content": _content_blocks(content, "data.message.content[0].content"),
                             "isError": is_error})
        message = frozen_dict({"id": _message_id(id), "role": "user", "content": (block,),
                               "source": frozen_dict({"kind": "tool", "callId": call_id})})
        data: dict[str, Any] = {"turn": self._turn_number, "step": self._number, "message": message}
        if frozen_error is not None:
            data["error"] = frozen_error
        if meta is not None:
            data["meta"] = freeze(meta, root="data.meta", what="non-JSON-serializable data")
        event = self._session.append(TOOL_RESULT, frozen_dict(data), surface_op="append",
                                     source_event_seqs=None if call_seq is None else (call_seq,))
        self._calls.pop(call_id, None)
        self._answered.add(call_id)
        return event

    # -- closing on failure --------------------------------------------------------------

    def _close_abnormally(self, *, abort: bool) -> None:
        """Finish a step cut short: keep an aborted stream's prefix, answer unanswered calls, end it."""
        if abort and self._message is None and self._chunk_seqs and (
            self._session.request_header() is not None
        ):
            self.assistant(interrupted=True)
        for call_id, call_seq in list(self._calls.items()):
            started = call_seq is not None
            self.tool_result(
                call_id, OUTCOME_UNKNOWN_TEXT if started else NOT_STARTED_TEXT, is_error=True,
                error=_OUTCOME_UNKNOWN_ERROR if started else _NOT_STARTED_ERROR,
            )
        self.end()

    def _require_open(self, what: str) -> None:
        if self._state != _OPEN:
            state = "has not started" if self._state == _NEW else "has ended"
            raise UsageError(f"step.{what}() needs an open step, but this step {state}",
                             session_id=self._session.id)


def _check_usage(usage: Any) -> FrozenDict:
    """TokenUsage: ``{inputTokens, outputTokens, cacheReadTokens?, cacheWriteTokens?, reasoningTokens?}``."""
    frozen = _frozen_object(usage, "data.usage")
    for key in ("inputTokens", "outputTokens"):
        if key not in frozen:
            raise InvalidEventError(f"usage lacks {key}", path=f"data.usage.{key}")
    for key, value in frozen.items():
        if not (is_safe_int(value) and value >= 0):
            raise InvalidEventError("token counts must be non-negative integers", path=f"data.usage.{key}")
    return frozen
