"""Events: the immutable records of a session log, and their wire form.

The wire form is DSH's: compact JSON with keys ``type, seq, time, data``, then
``sourceEventSeqs``, ``surfaceOp`` and ``ignorable`` when present. The static marker rules
(S1-S6) live here because every parsed event passes them; the surface fold builds on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Final, Literal, TypeAlias

import orjson

from agentlog.core.jsonvalue import MAX_SAFE_INTEGER, FrozenDict, dumps, freeze, json_equal, loads, valid_text
from agentlog.errors import InvalidEventError, SurfaceError

__all__ = [
    "CORE_EVENT_TYPES",
    "KNOWN_EVENT_TYPES",
    "SURFACE_TYPES",
    "Event",
    "Replace",
    "SurfaceOp",
    "check_envelope",
    "is_safe_int",
    "make_event",
    "parse_markers",
    "parse_source_seqs",
    "wire_op_first",
    "surface_op_to_wire",
]

TURN_START: Final = "turn/start"
TURN_END: Final = "turn/end"
STEP_START: Final = "step/start"
STEP_END: Final = "step/end"
USER_MESSAGE: Final = "user/message"
ASSISTANT_CHUNK: Final = "assistant/chunk"
ASSISTANT_MESSAGE: Final = "assistant/message"
TOOL_CALL: Final = "tool/call"
TOOL_RESULT: Final = "tool/result"
TODO_WRITE: Final = "todo/write"
REQUEST_HEADER: Final = "request/header"
REQUEST_CONTEXT: Final = "request/context"
END_SEED: Final = "session/end-seed"
LEGACY_HEADER_DELTA: Final = "request/header-delta"
LEGACY_STEERING: Final = "steering/message"
"""A pre-react-loop surface event, readable only from storage (``agentlog.legacy.upgrade`` upgrades it)."""

CORE_EVENT_TYPES: Final = frozenset({
    TURN_START, TURN_END, STEP_START, STEP_END, USER_MESSAGE, ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TODO_WRITE, REQUEST_HEADER,
    REQUEST_CONTEXT, END_SEED,
})

SURFACE_TYPES: Final = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})
"""The only event types that may join the surface (and carry surface metadata)."""

KNOWN_EVENT_TYPES: Final = CORE_EVENT_TYPES | frozenset({
    "approval/asked", "approval/decided", "approval/policy",
    "compaction/start", "compaction/summary", "compaction/prune", "compaction/end",
    "agent-preset/selected", "agent/inbox/spliced", "command/run", "command/done",
    "feedback/record", "goal/change", "hook/invoked", "hook/result", "llm/retry",
    "llm/retry-started", "permission/preset", "plan/mode", "sandbox/mode",
    "schedule/change", "session/title", "session/title-llm-request", "subagent/descriptor",
    "team/member", "team/task", "team/message/queued", "team/message/delivered",
    "tool-workflow/run-start", "tool-workflow/run-end", "tool-workflow/agent-start",
    "tool-workflow/agent-end", "tool/code-dispatch", "tool/code-dispatch-start",
    "web/deepseek-search-llm-request",
})
"""DSH's known vocabulary (48 names): stores refuse other types unless ``ignorable``."""

_ENVELOPE_KEYS: Final = frozenset(
    {"type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable"}
)


@dataclass(frozen=True, slots=True)
class Replace:
    """A surface op that replaces the surface run from seq ``start`` to seq ``end`` (positions)."""

    start: int
    end: int


SurfaceOp: TypeAlias = "Literal['append'] | Replace"


def is_safe_int(value: object) -> bool:
    """An ``int`` (never a ``bool``) within JavaScript's safe range."""
    return type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def surface_op_to_wire(op: SurfaceOp) -> Any:
    """``"append"`` or ``{"op": "replace", "start": s, "end": e}``."""
    if isinstance(op, Replace):
        return {"op": "replace", "start": op.start, "end": op.end}
    return op


_new_tuple = tuple.__new__


class Event(tuple):  # type: ignore[type-arg]
    """One immutable log record.

    A tuple subclass for speed (building one costs a single allocation); read it through
    its named attributes. ``data`` is deep-frozen JSON (``FrozenDict``/``tuple``/scalars).
    """

    __slots__ = ()

    type: str = property(itemgetter(0))  # type: ignore[assignment]
    seq: int = property(itemgetter(1))  # type: ignore[assignment]
    time: int = property(itemgetter(2))  # type: ignore[assignment]
    data: Any = property(itemgetter(3))
    surface_op: SurfaceOp | None = property(itemgetter(4))  # type: ignore[assignment]
    source_event_seqs: tuple[int, ...] | None = property(itemgetter(5))  # type: ignore[assignment]
    ignorable: bool = property(itemgetter(6))  # type: ignore[assignment]
    op_first: bool = property(itemgetter(7))  # type: ignore[assignment]
    """True when the wire form writes ``surfaceOp`` before ``sourceEventSeqs`` (DSH's repair does)."""

    def __new__(cls, *args: object, **kwargs: object) -> Event:
        raise TypeError("events are made by Session.append, Session.restore or Event.from_json")

    def __eq__(self, other: object) -> bool:
        """Same envelope, markers and JSON data; compares data without recursion (``True != 1``)."""
        if self is other:
            return True
        if type(other) is not Event:
            return NotImplemented
        return self[:3] == other[:3] and self[4:7] == other[4:7] and json_equal(self[3], other[3])

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self[:7])

    def __repr__(self) -> str:
        extra = ""
        if self[4] is not None:
            extra += f", surface_op={self[4]!r}"
        if self[5] is not None:
            extra += f", source_event_seqs={self[5]!r}"
        if self[6]:
            extra += ", ignorable=True"
        try:
            data = repr(self[3])
        except RecursionError:
            data = f"<{type(self[3]).__name__} too deep to show>"
        return f"Event(type={self[0]!r}, seq={self[1]}, time={self[2]}, data={data}{extra})"

    def to_wire(self) -> dict[str, Any]:
        """The wire object in DSH key order (shares the frozen ``data``)."""
        wire: dict[str, Any] = {"type": self[0], "seq": self[1], "time": self[2], "data": self[3]}
        if self[7]:
            wire["surfaceOp"] = surface_op_to_wire(self[4])
            wire["sourceEventSeqs"] = self[5]
        else:
            if self[5] is not None:
                wire["sourceEventSeqs"] = self[5]
            if self[4] is not None:
                wire["surfaceOp"] = surface_op_to_wire(self[4])
        if self[6]:
            wire["ignorable"] = True
        return wire

    def to_json(self) -> bytes:
        """Compact wire JSON (UTF-8, non-ASCII unescaped), as DSH writes it."""
        return dumps(self.to_wire())

    @staticmethod
    def from_json(raw: bytes | str) -> Event:
        """Parse and fully validate one wire event (envelope, payload, surface markers)."""
        try:
            wire = loads(raw)
        except orjson.JSONDecodeError as exc:
            raise InvalidEventError(f"event is not valid JSON: {exc}") from None
        return Event.from_wire(wire)

    @staticmethod
    def from_wire(wire: Any) -> Event:
        """Validate a parsed wire object (envelope, lossless payload, static surface rules)."""
        check_envelope(wire)
        data = freeze(wire["data"], root="data")
        kind = wire["type"]
        has_op, has_seqs = "surfaceOp" in wire, "sourceEventSeqs" in wire
        if not (has_op or has_seqs or kind in SURFACE_TYPES):  # log-only, no markers: nothing to parse
            parts = (kind, wire["seq"], wire["time"], data, None, None, wire.get("ignorable", False), False)
            event: Event = _new_tuple(Event, parts)
            return event
        op, seqs = parse_markers(
            # A stored steering/message carries user/message markers: it is upgraded into one on load.
            USER_MESSAGE if kind == LEGACY_STEERING and (has_op or has_seqs) else kind,
            wire["seq"], wire.get("surfaceOp"), wire.get("sourceEventSeqs"), has_op=has_op, has_seqs=has_seqs,
        )
        return make_event(kind, wire["seq"], wire["time"], data, op, seqs,
                          wire.get("ignorable", False), wire_op_first(wire))


def wire_op_first(wire: Any) -> bool:
    """True when a wire event has both markers with ``surfaceOp`` first (key order is kept)."""
    if "surfaceOp" not in wire or "sourceEventSeqs" not in wire:
        return False
    for key in wire:
        if key == "surfaceOp":
            return True
        if key == "sourceEventSeqs":
            return False
    return False


def make_event(
    type: str,
    seq: int,
    time: int,
    data: Any,
    surface_op: SurfaceOp | None = None,
    source_event_seqs: tuple[int, ...] | None = None,
    ignorable: bool = False,
    op_first: bool = False,
) -> Event:
    """Build an ``Event`` from parts that are already validated and frozen (no checks).

    ``op_first`` (only meaningful with both markers) keeps a stored event's key order.
    """
    event: Event = _new_tuple(
        Event, (type, seq, time, data, surface_op, source_event_seqs, ignorable,
                op_first and surface_op is not None and source_event_seqs is not None)
    )
    return event


def check_envelope(wire: Any, where: str = "event") -> None:
    """Spec C4: the envelope keys and scalar fields of a wire event."""
    if type(wire) is not dict and type(wire) is not FrozenDict:
        raise InvalidEventError(f"invalid event envelope: {where} is not a JSON object")
    if wire.get("type") == LEGACY_HEADER_DELTA:
        raise InvalidEventError(f"unsupported legacy {LEGACY_HEADER_DELTA} {where}")
    if not wire.keys() <= _ENVELOPE_KEYS:
        extra = next(key for key in wire if key not in _ENVELOPE_KEYS)
        raise InvalidEventError(f"invalid event envelope: {where} has unknown key {extra!r}")
    kind = wire.get("type")
    if type(kind) is not str:
        raise InvalidEventError(f"invalid event envelope: {where} type must be a string")
    if not kind.isascii() and not valid_text(kind):  # it could never be written (UTF-8)
        raise InvalidEventError(f"invalid event envelope: {where} type {kind!r} contains a lone surrogate")
    seq = wire.get("seq")
    if not is_safe_int(seq) or seq < 0:  # type: ignore[operator]
        raise InvalidEventError(
            f"invalid event envelope: {where} seq must be a non-negative safe integer"
        )
    if not is_safe_int(wire.get("time")):
        raise InvalidEventError(f"invalid event envelope: {where} time must be a safe integer")
    if "data" not in wire:
        raise InvalidEventError(f"invalid event envelope: {where} lacks data")
    if "ignorable" in wire and wire["ignorable"] is not True:
        raise InvalidEventError(f"invalid event envelope: {where} ignorable must be true")


# -- the static marker rules (S1-S6) ----------------------------------------------------------


def parse_markers(
    event_type: str,
    seq: int,
    surface_op: Any,
    source_event_seqs: Any,
    *,
    has_op: bool,
    has_seqs: bool,
    range_first: bool = False,
) -> tuple[SurfaceOp | None, tuple[int, ...] | None]:
    """The static marker rules (S1-S6): normalize ``surfaceOp`` and ``sourceEventSeqs``.

    ``surface_op`` may be ``"append"``, a ``Replace`` or the wire object
    ``{"op": "replace", "start": s, "end": e}``. With ``range_first`` a replace's provenance
    is left to ``SurfaceManager`` (S11: it checks the range first, then S4-S7).
    """
    if event_type not in SURFACE_TYPES:
        if has_op:
            raise SurfaceError(f"{event_type} is not surface-eligible and cannot carry surfaceOp")
        if has_seqs:
            raise SurfaceError(
                f"{event_type} is not surface-eligible and cannot carry sourceEventSeqs"
            )
        return None, None
    if not has_op:
        raise SurfaceError(f"{event_type} requires a surfaceOp marker")
    op = _parse_op(surface_op)
    if not has_seqs:
        return op, None
    if range_first and isinstance(op, Replace):
        raw = source_event_seqs
        return op, tuple(raw) if type(raw) is list else raw  # checked by SurfaceManager._plan
    return op, parse_source_seqs(event_type, seq, source_event_seqs)


def _parse_op(raw: Any) -> SurfaceOp:
    if raw == "append" and type(raw) is str:
        return "append"
    if isinstance(raw, Replace):
        start, end = raw.start, raw.end
    elif type(raw) is dict or type(raw) is FrozenDict:
        if set(raw) != {"op", "start", "end"} or raw["op"] != "replace":
            raise SurfaceError(f"invalid replace surfaceOp {dict(raw)!r}")
        start, end = raw["start"], raw["end"]
    else:
        raise SurfaceError(f"invalid surfaceOp {raw!r}: expected 'append' or a replace")
    if not (is_safe_int(start) and is_safe_int(end) and start >= 0 and end >= 0):
        raise SurfaceError(
            f"invalid replace surfaceOp: start and end must be non-negative safe integers, "
            f"got {start!r} and {end!r}"
        )
    return raw if isinstance(raw, Replace) else Replace(start, end)


_INT: Final = {int}


def parse_source_seqs(event_type: str, seq: int, raw: Any) -> tuple[int, ...]:
    if type(raw) not in (list, tuple):
        raise SurfaceError("sourceEventSeqs must be an array when present")
    if not raw and event_type != ASSISTANT_MESSAGE:
        raise SurfaceError(f"sourceEventSeqs must not be empty on {event_type}")
    if raw and set(map(type, raw)) == _INT and min(raw) >= 0 and max(raw) < seq and (
        len(set(raw)) == len(raw)
    ):  # all valid (seq itself is a safe integer); the loops below name the first problem
        return raw if type(raw) is tuple else tuple(raw)
    for value in raw:
        if not is_safe_int(value) or value < 0:
            raise SurfaceError(
                f"sourceEventSeqs must densely contain non-negative safe integers, got {value!r}"
            )
    if len(set(raw)) != len(raw):
        raise SurfaceError("sourceEventSeqs must not contain duplicates")
    for value in raw:
        if value >= seq:
            raise SurfaceError(
                f"sourceEventSeqs must reference earlier events: {value} is not before seq {seq}"
            )
    return raw if type(raw) is tuple else tuple(raw)
