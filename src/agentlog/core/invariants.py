"""Turn, step and tool-pairing invariants of a session log (spec session-core §11).

One pure transition function serves both the offline check (``check_invariants``) and
the live checker (``InvariantChecker``), so a log is judged by the same rules whether it
is being written or read back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple
from weakref import WeakKeyDictionary

from agentlog.core.events import (
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
    Event,
)
from agentlog.core.jsonvalue import FrozenDict, dumps
from agentlog.core.repair import TOOL_NOT_STARTED
from agentlog.errors import InvariantError

if TYPE_CHECKING:
    from agentlog.core.session import Session

__all__ = [
    "InvariantChecker",
    "Trace",
    "Transition",
    "apply_transition",
    "check_invariants",
    "plan_transition",
]

PendingOp = Literal["keep", "add", "discard", "clear"]


@dataclass(slots=True)
class Trace:
    """Where a log stands: last seq, open turn and step, next numbers, calls awaiting results."""

    last_seq: int = -1
    open_turn: int | None = None
    open_step: int | None = None
    next_turn: int = 1
    next_step: int = 1
    pending: set[str] = field(default_factory=set)


class Transition(NamedTuple):
    """The change one accepted event makes to a ``Trace``, computed before it commits."""

    last_seq: int
    open_turn: int | None
    open_step: int | None
    next_turn: int
    next_step: int
    pending_op: PendingOp = "keep"
    call_id: str | None = None


def _new_transition(fields: tuple[Any, ...]) -> Transition:
    """``Transition(*fields)`` without NamedTuple's Python-level ``__new__``/``_replace`` (hot path)."""
    return tuple.__new__(Transition, fields)


def _with_call(unchanged: Transition, op: PendingOp, call_id: str) -> Transition:
    return _new_transition((*unchanged[:5], op, call_id))


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, (list, tuple)) and value else None


def _is(value: Any, expected: int | None) -> bool:
    """``value`` is the integer ``expected`` (never a bool, never when nothing is open)."""
    return type(value) is int and value == expected


def _show(value: Any) -> str:
    """A value as it reads in an error message: ``null`` for None, JSON otherwise."""
    if value is None:
        return "null"
    if type(value) is int:
        return str(value)
    try:
        text = dumps(value).decode()
    except Exception:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def plan_transition(trace: Trace, event: Event) -> Transition:
    """Check ``event`` against ``trace`` (rules I2-I9) without changing it.

    Raises ``InvariantError`` naming the event's seq and type on the first broken rule;
    otherwise returns the transition to apply once the event has committed.
    """
    if event.seq <= trace.last_seq:
        raise _failure(event, f"seq must strictly increase: saw {event.seq} after {trace.last_seq}")
    unchanged = _new_transition(
        (event.seq, trace.open_turn, trace.open_step, trace.next_turn, trace.next_step, "keep", None)
    )
    rule = _RULES.get(event.type)
    # user/message, session/end-seed and plugin types are unconstrained (I8).
    return unchanged if rule is None else rule(trace, event, unchanged)


def _failure(event: Event, detail: str) -> InvariantError:
    return InvariantError(detail, seq=event.seq, event_type=event.type)


def _turn_start(trace: Trace, event: Event, unchanged: Transition) -> Transition:
    turn = _get(event.data, "turn")
    if trace.open_turn is not None:
        raise _failure(event, f"turn/start {_show(turn)} while turn {trace.open_turn} is still open")
    if not _is(turn, trace.next_turn):
        raise _failure(event, f"turn/start expected turn {trace.next_turn}, got {_show(turn)}")
    return _new_transition((event.seq, trace.next_turn, trace.open_step, trace.next_turn, 1, "keep",
                            None))


def _turn_end(trace: Trace, event: Event, unchanged: Transition) -> Transition:
    turn = _get(event.data, "turn")
    if trace.open_turn is None or not _is(turn, trace.open_turn):
        raise _failure(event, f"turn/end {_show(turn)} does not match open turn {_show(trace.open_turn)}")
    if trace.open_step is not None:
        raise _failure(event, f"turn/end {_show(turn)} while step {trace.open_step} is still open")
    return _new_transition((event.seq, None, trace.open_step, trace.next_turn + 1, trace.next_step, "keep",
                            None))


def _step_start(trace: Trace, event: Event, unchanged: Transition) -> Transition:
    turn, step = _get(event.data, "turn"), _get(event.data, "step")
    if trace.open_turn is None or not _is(turn, trace.open_turn):
        raise _failure(event, f"step/start in turn {_show(turn)} but open turn is {_show(trace.open_turn)}")
    if trace.open_step is not None:
        raise _failure(event, f"step/start {_show(step)} while step {trace.open_step} is still open")
    if not _is(step, trace.next_step):
        raise _failure(
            event, f"step/start expected step {trace.next_step} in turn {trace.open_turn}, got {_show(step)}"
        )
    opened = trace.next_step
    return _new_transition((event.seq, trace.open_turn, opened, trace.next_turn, opened, "keep", None))


def _step_end(trace: Trace, event: Event, unchanged: Transition) -> Transition:
    _require_open_step(trace, event)
    return _new_transition((event.seq, trace.open_turn, None, trace.next_turn, trace.next_step + 1, "clear",
                            None))


def _step_scoped(trace: Trace, event: Event, unchanged: Transition) -> Transition:
    _require_open_step(trace, event)
    return unchanged


def _tool_call(trace: Trace, event: Event, unchanged: Transition) -> Transition:
    _require_open_step(trace, event)
    call_id = _as_call_id(_get(event.data, "callId"))
    return unchanged if call_id is None else _with_call(unchanged, "add", call_id)


def _tool_result(trace: Trace, event: Event, unchanged: Transition) -> Transition:
    if event.surface_op != "append":
        # A replacement rewrites a result the surface already holds: turn work, not a new call.
        if trace.open_turn is None:
            raise _failure(event, "tool/result surface replacement appended outside any open turn")
        return unchanged
    _require_open_step(trace, event)
    raw_id = _get(_get(_get(event.data, "message"), "source"), "callId")
    call_id = _as_call_id(raw_id)
    if (call_id is None or call_id not in trace.pending) and not _is_not_started(event.data):
        raise _failure(event, f"tool/result for {_show(raw_id)} with no prior tool/call in this step")
    return unchanged if call_id is None else _with_call(unchanged, "discard", call_id)


def _turn_scoped(trace: Trace, event: Event, unchanged: Transition) -> Transition:
    if trace.open_turn is None:
        raise _failure(event, f"{event.type} appended outside any open turn "
                              "(core execution events must be turn-enclosed)")
    return unchanged


_RULES: Final[dict[str, Callable[[Trace, Event, Transition], Transition]]] = {
    TURN_START: _turn_start,
    TURN_END: _turn_end,
    STEP_START: _step_start,
    STEP_END: _step_end,
    ASSISTANT_CHUNK: _step_scoped,
    ASSISTANT_MESSAGE: _step_scoped,
    TOOL_CALL: _tool_call,
    TOOL_RESULT: _tool_result,
    TODO_WRITE: _turn_scoped,
    REQUEST_HEADER: _turn_scoped,
    REQUEST_CONTEXT: _turn_scoped,
}


_IN_STEP: Final = frozenset({ASSISTANT_CHUNK, ASSISTANT_MESSAGE})
"""Types whose only rule is naming the open turn and step (``InvariantChecker``'s fast path)."""


def _require_open_step(trace: Trace, event: Event) -> None:
    """A step-scoped event must name the open turn and the open step (I4, I5)."""
    turn, step = _get(event.data, "turn"), _get(event.data, "step")
    if trace.open_step is None or not (_is(turn, trace.open_turn) and _is(step, trace.open_step)):
        raise _failure(
            event,
            f"{event.type} names turn {_show(turn)}/step {_show(step)} but open is "
            f"turn {_show(trace.open_turn)}/step {_show(trace.open_step)}",
        )


def _as_call_id(value: Any) -> str | None:
    """Call ids pair only as strings; any other value can never match a call."""
    return value if type(value) is str else None


def _is_not_started(data: Any) -> bool:
    """The synthetic result crash repair writes for a call that never started (I6)."""
    block = _first(_get(_get(data, "message"), "content"))
    return _get(block, "isError") is True and _get(_get(data, "error"), "code") == TOOL_NOT_STARTED


def apply_transition(trace: Trace, transition: Transition) -> None:
    """Advance ``trace`` by a transition that ``plan_transition`` returned for it."""
    trace.last_seq = transition.last_seq
    trace.open_turn = transition.open_turn
    trace.open_step = transition.open_step
    trace.next_turn = transition.next_turn
    trace.next_step = transition.next_step
    op = transition.pending_op
    if op == "clear":
        trace.pending.clear()
    elif op == "add" and transition.call_id is not None:
        trace.pending.add(transition.call_id)
    elif op == "discard" and transition.call_id is not None:
        trace.pending.discard(transition.call_id)


def check_invariants(events: Iterable[Event]) -> None:
    """Raise ``InvariantError`` at the first event of ``events`` that breaks a rule of §11."""
    trace = Trace()
    for event in events:
        apply_transition(trace, plan_transition(trace, event))


class InvariantChecker:
    """The invariants of one log, checked event by event as it grows.

    ``validate`` is pure; ``commit`` advances the trace. Keeping them apart lets a live
    session veto a candidate without the trace moving (spec I1).
    """

    __slots__ = ("_staged", "_transition", "trace")

    def __init__(self) -> None:
        self.trace = Trace()
        self._staged: Event | None = None
        self._transition: Transition | None = None  # None with an event staged: only last_seq moves

    def validate(self, event: Event) -> None:
        """Check a candidate event (raising ``InvariantError``) and stage its transition."""
        trace = self.trace
        if event[0] in _IN_STEP and event[1] > trace.last_seq and trace.open_step is not None:
            # The common case (stream chunks, messages of the open step) changes nothing but the seq.
            data = event[3]
            if data.__class__ is FrozenDict and _is(data.get("turn"), trace.open_turn) and (
                _is(data.get("step"), trace.open_step)
            ):
                self._staged, self._transition = event, None
                return
        self._staged, self._transition = event, plan_transition(trace, event)

    def commit(self, event: Event) -> None:
        """Advance past a committed event, reusing its validation when it was the last one staged."""
        if self._staged is event:
            self._staged, transition = None, self._transition
            if transition is None:
                self.trace.last_seq = event[1]
                return
        else:
            self._staged, transition = None, plan_transition(self.trace, event)
        apply_transition(self.trace, transition)

    def feed(self, event: Event) -> None:
        """Validate and commit one event (replay, offline streaming checks)."""
        apply_transition(self.trace, plan_transition(self.trace, event))

    @classmethod
    def attach(cls, session: Session, *, replay: Literal["all", "last-turn"] = "all") -> Callable[[], None]:
        """Check every future append of ``session``; returns a function that stops checking.

        Replays the existing events first (raising ``InvariantError`` if they break a rule):
        all of them, or with ``replay="last-turn"`` only those from the last turn boundary on
        (what a store does when it opens a log restore already validated: O(last turn), not
        O(log)). Then validates each candidate before it commits (a failure vetoes the append)
        and advances past it only once the next candidate shows it committed, so a veto by a
        later validator leaves no trace.
        """
        checker = cls()
        events = session.events
        start = 0
        if replay == "last-turn":
            checker.trace, start = _trace_before_last_turn(events)
        try:
            for index in range(start, len(events)):
                checker.feed(events[index])
        except InvariantError as exc:
            raise exc.locate(session_id=session.id) from None
        remove_validator = session._add_validator(*_live_validator(checker.trace))
        _ATTACHED[session] = checker

        def detach() -> None:
            remove_validator()
            if _ATTACHED.get(session) is checker:
                del _ATTACHED[session]

        return detach

    @staticmethod
    def attached(session: Session) -> bool:
        """Whether a live checker is checking ``session``'s appends (so none is added twice)."""
        return session in _ATTACHED


_ATTACHED: Final[WeakKeyDictionary[Session, InvariantChecker]] = WeakKeyDictionary()


def _live_validator(trace: Trace) -> tuple[Callable[[Event], None], Callable[[int, int, int], bool]]:
    """``validate`` for a session's own appends (one hook per append, commits settled lazily),
    and its form for a packed stream delta ``(seq, turn, step)`` that has no ``Event``.

    A session numbers a candidate ``len(log)``, so seqs cannot go backwards, and a staged
    transition committed iff the next candidate's seq is later (the same seq: vetoed). A
    stream chunk or message of the open step changes nothing and costs a few comparisons
    (the open turn and step are mirrored in locals; the Recorder passes the same int objects).
    """
    pending: tuple[int, Transition] | None = None
    open_turn, open_step = trace.open_turn, trace.open_step
    in_step, frozen, chunk = _IN_STEP, FrozenDict, ASSISTANT_CHUNK

    def validate(event: Event) -> None:
        nonlocal pending, open_turn, open_step
        if pending is not None:
            seq, transition = pending
            pending = None
            if seq < event[1]:
                apply_transition(trace, transition)
                open_turn, open_step = trace.open_turn, trace.open_step
        if open_step is not None:
            kind = event[0]
            if kind is chunk or kind in in_step:
                data = event[3]
                if data.__class__ is frozen:
                    step, turn = data.get("step"), data.get("turn")
                    if (step is open_step or (step.__class__ is int and step == open_step)) and (
                        turn is open_turn or (turn.__class__ is int and turn == open_turn)
                    ):
                        return
        trace.last_seq = event[1] - 1  # every earlier event is in the log
        pending = (event[1], plan_transition(trace, event))

    def delta(seq: int, turn: int, step: int) -> bool:
        """The chunk fast path of ``validate``: a delta of the open step changes nothing. False
        (anything else) makes the session pass the delta's ``Event`` to ``validate``."""
        nonlocal pending, open_turn, open_step
        if pending is not None:
            staged, transition = pending
            pending = None
            if staged < seq:
                apply_transition(trace, transition)
                open_turn, open_step = trace.open_turn, trace.open_step
        return open_step is not None and (step is open_step or step == open_step) and (
            turn is open_turn or turn == open_turn
        )

    return validate, delta


def _trace_before_last_turn(events: Sequence[Event]) -> tuple[Trace, int]:
    """The trace just before the log's last turn boundary, and the index to replay from.

    After a ``turn/end`` of turn T nothing is open and the next turn is T + 1; before a
    ``turn/start`` of turn T, T is next. A boundary without an integer turn replays all.
    """
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.type in _BOUNDARIES:
            turn = _get(event.data, "turn")
            if type(turn) is not int:
                return Trace(), 0
            if event.type == TURN_END:
                return Trace(last_seq=event.seq, next_turn=turn + 1), index + 1
            return Trace(last_seq=events[index - 1].seq if index else -1, next_turn=turn), index
    return Trace(), 0


_BOUNDARIES: Final = frozenset({TURN_START, TURN_END})
