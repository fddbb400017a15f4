"""Recorder: writes well-formed turns and steps for an agent loop (spec session-core §1, §7, §11).

The loop says what happened (a text delta, a model reply, a tool call); the recorder picks the
event types, numbers turns and steps, assembles the assistant message from its chunks, logs a
request header only when it changes, and closes steps and turns on every exit path.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from agentlog.core.aio import run, running_loop
from agentlog.core.events import STEP_START, TODO_WRITE, TURN_END, TURN_START, USER_MESSAGE, Event
from agentlog.core.failure import llm_failure
from agentlog.core.invariants import InvariantChecker
from agentlog.core.jsonvalue import FrozenDict, freeze, frozen_dict, frozen_object
from agentlog.core.session import Session
from agentlog.errors import InvalidEventError, UsageError
from agentlog.recording.step import Step
from agentlog.recording.values import (
    CLOSED,
    NEW,
    OPEN,
    contain,
    kind_tagged,
    located,
    turn_end_reason,
    user_message_data,
)

if TYPE_CHECKING:
    from agentlog.store.writer import LiveSession

__all__ = ["Flush", "Recorder", "Step", "Turn", "turn_end_reason"]

logger = logging.getLogger("agentlog")

Flush = Callable[[], object]
"""A checkpoint: a blocking callable, or an async one (awaited by the ``a``-prefixed methods)."""

COMPLETED: Final = frozen_dict({"kind": "completed"})
MAX_TOKENS: Final = frozen_dict({"kind": "max-tokens"})
_TODO_STATUSES: Final = frozenset({"pending", "in_progress", "completed"})


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

    Every append is checked against the turn/step/tool invariants (spec §11): a plain ``Session``
    gets an ``InvariantChecker`` unless ``check_invariants=False``; a ``LiveSession`` keeps the
    choice its store made (``store.start(..., check_invariants=False)``). Never two checkers.
    """

    __slots__ = ("_active", "_last_turn", "_open_in_log", "_overflows", "_requested", "_scanned",
                 "compactor", "flush", "session")

    def __init__(self, session: Session | LiveSession, *, flush: Flush | None = None,
                 checkpoint: bool = True, compactor: Any = None,
                 check_invariants: bool | None = None) -> None:
        if not isinstance(session, Session):
            live = session
            session = live.session
            if flush is None and checkpoint:
                flush = live.flush
            if check_invariants is None:
                check_invariants = live.checks_invariants
        if check_invariants is None or check_invariants:
            if not InvariantChecker.attached(session):
                InvariantChecker.attach(session, replay="last-turn")
        elif InvariantChecker.attached(session):
            raise UsageError("check_invariants=False, but this session is already checked: opt out where "
                             "the session is made (store.start/open/fork(..., check_invariants=False))",
                             session_id=session.id)
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
        for _seq, entry in events.entries(self._scanned):  # packed stream chunks stay packed
            kind = entry.type
            if kind == TURN_START and isinstance(entry, Event):
                turn = entry.data.get("turn") if isinstance(entry.data, dict) else None
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
        if running_loop() is None:
            run(hook(self.session))
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
        self._state = NEW
        self._step: Step | None = None
        self._steps = 0
        self._truncated = False

    @property
    def number(self) -> int:
        """The turn number (0 until started)."""
        return self._number

    @property
    def is_open(self) -> bool:
        return self._state == OPEN

    @located(TURN_START)
    def start(self) -> Turn:
        """Log ``turn/start``; the context managers call this for you."""
        recorder = self._recorder
        if self._state != NEW:
            raise UsageError("this turn was already started; call recorder.turn() for a new one")
        if recorder._active is not None:
            raise UsageError(f"turn {recorder._active.number} is still open; end it first",
                             session_id=self._session.id)
        number = recorder._next_turn_number()
        self._session.append(TURN_START, frozen_dict({"turn": number}))
        self._number = number
        self._state = OPEN
        recorder._active = self
        return self

    def __enter__(self) -> Turn:
        return self.start()

    async def __aenter__(self) -> Turn:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._state != OPEN:
            return
        if exc is None:
            self.end()
            return
        try:
            self._finish(turn_end_reason(exc))
        except Exception as failure:
            self._abandon()
            contain(exc, f"the end of turn {self._number}", failure)

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, tb)

    @located(STEP_START)
    def step(self) -> Step:
        """The next step of this turn; ``step/start`` is logged when it starts."""
        self._require_open("step")
        return Step(self)

    @located(USER_MESSAGE)
    def user_message(self, content: str | Sequence[Any], *, source: Mapping[str, Any] | None = None,
                     id: str | None = None) -> Event:
        """Log a ``user/message`` (surface append); ``content`` is text or content blocks."""
        self._require_open("user_message")
        return self._session.append(USER_MESSAGE, user_message_data(content, source, id), surface_op="append")

    @located(TODO_WRITE)
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

    @located(TURN_END)
    def end(self, reason: Mapping[str, Any] | None = None) -> Event:
        """Close any open step and log ``turn/end`` (default ``completed``, or ``max-tokens`` if marked)."""
        self._require_open("end")
        frozen = COMPLETED if reason is None else kind_tagged(reason, "data.reason")
        return self._finish(frozen)

    def abort(self, cause: str | Mapping[str, Any] = "user") -> Event:
        """End the turn ``aborted``; ``cause`` is a kind (user, parent, disposed) or a cause object."""
        reason = frozen_dict({"kind": cause}) if isinstance(cause, str) else cause
        return self.end({"kind": "aborted", "reason": reason})

    @located(TURN_END)
    def fail(self, error: BaseException | Mapping[str, Any]) -> Event:
        """End the turn ``error`` with an LlmFailure (from an exception or given as a mapping)."""
        if isinstance(error, BaseException):
            failure = llm_failure(error)
        else:
            failure = frozen_object(error, "data.reason.error")
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
        self._state = CLOSED
        self._recorder._active = None
        self._recorder._overflows = 0
        return event

    def _abandon(self) -> None:
        self._state = CLOSED
        self._step = None
        if self._recorder._active is self:
            self._recorder._active = None

    def _require_open(self, what: str) -> None:
        if self._state != OPEN:
            state = "has not started" if self._state == NEW else "has ended"
            name = f"turn {self._number}" if self._number else "this turn"
            raise UsageError(f"turn.{what}() needs an open turn, but {name} {state}",
                             session_id=self._session.id)

