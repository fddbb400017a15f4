"""Crash repair: the synthetic events that close a turn a crash left open (spec session-core §10).

Repair only ever appends. It never edits, drops or truncates logged events and never
touches plugin brackets (``compaction/*``, approvals, ...). A store applies it to cold
sessions only; a live session with an open turn is never repaired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agentlog.core.events import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    Event,
    is_safe_int,
    make_event,
)
from agentlog.core.jsonvalue import FrozenDict, freeze
from agentlog.errors import InvalidEventError

__all__ = [
    "NOT_STARTED_TEXT",
    "OUTCOME_UNKNOWN_TEXT",
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "interrupted_turn_closers",
]

TOOL_NOT_STARTED: Final = "TOOL_NOT_STARTED"
"""Error code of a synthetic result for a requested call that was never recorded as started."""

TOOL_OUTCOME_UNKNOWN: Final = "TOOL_OUTCOME_UNKNOWN"
"""Error code of a synthetic result for a started call whose result was never recorded."""

OUTCOME_UNKNOWN_TEXT: Final = (
    "This tool call was interrupted after it started, and its result was never recorded, so "
    "its outcome is unknown. Retry it only if the operation is read-only or idempotent. If it "
    "may have had side effects, first verify the external state or ask the user. Do not retry "
    "it blindly."
)
"""Model-facing advice on a started call whose outcome is unknown (kept stable: logs hold it)."""

NOT_STARTED_TEXT: Final = (
    "This tool call was interrupted before it was recorded as started, so it never ran. "
    "Retry it if it is still needed."
)
"""Model-facing advice on a requested call that never started (kept stable: logs hold it)."""

_OUTCOME_UNKNOWN_ERROR: Final = freeze({"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN})
_NOT_STARTED_ERROR: Final = freeze({"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED})
_INTERRUPTED: Final = freeze({"kind": "interrupted"})


@dataclass(slots=True)
class _PendingCall:
    """A tool call the model requested that has no result yet."""

    step: Any
    call_seq: int | None = None


def _get(value: Any, key: str) -> Any:
    """``value[key]`` when ``value`` is a JSON object, else None (appended data is unchecked)."""
    return value.get(key) if isinstance(value, dict) else None


def _call_id(value: Any) -> str | None:
    """A usable call id: a non-empty string (no other value can be answered)."""
    return value if type(value) is str and value else None


def _requested_calls(data: Any) -> list[str]:
    """The ids of the ``tool-call`` blocks of an ``assistant/message``, in block order."""
    content = _get(_get(data, "message"), "content")
    if not isinstance(content, (list, tuple)):
        return []
    ids = []
    for block in content:
        if _get(block, "type") == "tool-call":
            call_id = _call_id(_get(block, "id"))
            if call_id is not None:
                ids.append(call_id)
    return ids


@dataclass(slots=True)
class _Tail:
    """What the scan knows at the end of the log: the open turn and step, unanswered calls."""

    turn_open: bool = False
    step_open: bool = False
    turn: Any = None
    turn_seq: int = 0
    step: Any = None
    pending: dict[str, _PendingCall] = field(default_factory=dict)

    def feed(self, event: Event) -> None:
        """Move past one event (X1)."""
        kind, data = event.type, event.data
        if kind == TURN_START:
            self.turn_open, self.step_open, self.turn = True, False, _get(data, "turn")
            self.turn_seq = event.seq
            self.pending.clear()
        elif kind == TURN_END:
            self.turn_open = self.step_open = False
            self.pending.clear()
        elif kind == STEP_START:
            self.step_open, self.step = True, _get(data, "step")
        elif kind == STEP_END:
            self.step_open = False
            self.pending.clear()
        elif kind == ASSISTANT_MESSAGE:
            for call_id in _requested_calls(data):
                self.pending[call_id] = _PendingCall(_get(data, "step"))
        elif kind == TOOL_CALL:  # "" is never a key: call ids are non-empty
            started = self.pending.get(_call_id(_get(data, "callId")) or "")
            if started is not None:
                started.call_seq = event.seq
        elif kind == TOOL_RESULT:
            answered = _call_id(_get(_get(_get(data, "message"), "source"), "callId"))
            self.pending.pop(answered or "", None)


def interrupted_turn_closers(events: Sequence[Event]) -> list[Event]:
    """The events that close the log's open turn, or ``[]`` when no turn is open (X1-X3).

    One error ``tool/result`` per unanswered call of the open step, then ``step/end`` if a
    step is open, then ``turn/end`` with reason ``interrupted``. Seqs continue the log and
    every closer reuses the last event's time, so repair is deterministic. ``events`` is
    only read. An open turn without a turn number cannot be closed: ``InvalidEventError``.
    """
    tail = _Tail()
    for index in range(_last_turn_boundary(events), len(events)):
        tail.feed(events[index])
    if not tail.turn_open or not events:
        return []
    last = events[-1]
    seq, time, turn = last.seq + 1, last.time, tail.turn
    if not (is_safe_int(turn) and turn > 0):  # a closer naming no turn would be refused by the next load
        raise InvalidEventError(
            f"cannot close the interrupted turn: its turn/start at seq {tail.turn_seq} has no "
            f"positive integer turn number (data.turn is {turn!r})",
            seq=tail.turn_seq, event_type=TURN_START, path="data.turn",
        )
    closers: list[Event] = []
    for call_id, call in tail.pending.items():
        closers.append(_synthetic_result(seq, time, turn, call_id, call))
        seq += 1
    if tail.step_open:
        closers.append(make_event(STEP_END, seq, time, freeze({"turn": turn, "step": tail.step})))
        seq += 1
    closers.append(make_event(TURN_END, seq, time, freeze({"turn": turn, "reason": _INTERRUPTED})))
    return closers


def _last_turn_boundary(events: Sequence[Event]) -> int:
    """Index of the last ``turn/start`` or ``turn/end`` (0 if none): both reset the scan's state,
    so scanning from there is the same as scanning the whole log, and O(1) for a balanced one."""
    for index in range(len(events) - 1, -1, -1):
        if events[index].type in _TURN_BOUNDARIES:
            return index
    return 0


_TURN_BOUNDARIES: Final = frozenset({TURN_START, TURN_END})


def _synthetic_result(seq: int, time: int, turn: Any, call_id: str, call: _PendingCall) -> Event:
    """An error ``tool/result`` answering ``call_id``, appended to the surface."""
    started = call.call_seq is not None
    message: FrozenDict = freeze({
        "id": f"interrupted-tool-result-{call_id}-{seq}",
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [{
            "type": "tool-result",
            "toolCallId": call_id,
            "isError": True,
            "content": [{"type": "text", "text": OUTCOME_UNKNOWN_TEXT if started else NOT_STARTED_TEXT}],
        }],
    })
    data = freeze({
        "turn": turn,
        "step": call.step,
        "message": message,
        "error": _OUTCOME_UNKNOWN_ERROR if started else _NOT_STARTED_ERROR,
    })
    cited = (call.call_seq,) if call.call_seq is not None else None
    return make_event(TOOL_RESULT, seq, time, data, "append", cited, op_first=True)


def last_turn_is_open(events: Sequence[Event]) -> bool:
    """True when the last ``turn/start`` has no ``turn/end`` after it."""
    for event in reversed(events):
        if event.type == TURN_END:
            return False
        if event.type == TURN_START:
            return True
    return False
