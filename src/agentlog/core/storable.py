"""What a store may hold: the per-event rules of a cold read, shared by every append path.

A store never holds a log it would refuse (DESIGN §8): ``load`` refuses retired types, unknown
types not marked ``ignorable`` and malformed or rewritable legacy shapes before the Session
restore validator runs, so a store's sessions and its cold ``append`` check the same rules
(``check_appendable``) when an event enters, from this one list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from agentlog.core.events import (
    ASSISTANT_MESSAGE,
    KNOWN_EVENT_TYPES,
    LEGACY_HEADER_DELTA,
    LEGACY_STEERING,
    REQUEST_HEADER,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
    is_safe_int,
)
from agentlog.core.seed import SHAPED_TYPES, check_shapes
from agentlog.errors import InvalidEventError, SessionFormatUnsupportedError

__all__ = [
    "APPEND_PLAIN_TYPES",
    "EXAMINED_TYPES",
    "LEGACY_EVENT_TYPES",
    "PLAIN_STORED_TYPES",
    "RETIRED_TYPES",
    "STORED_EVENT_TYPES",
    "check_appendable",
    "check_turn_start",
    "first_legacy",
    "identified",
    "is_current",
    "refuse_retired",
    "refuse_unknown",
]

LEGACY_EVENT_TYPES: Final = frozenset({LEGACY_STEERING})
"""Retired types that a stored log may still hold because loading upgrades them."""

STORED_EVENT_TYPES: Final = KNOWN_EVENT_TYPES | LEGACY_EVENT_TYPES
"""Types a stored event may have without being marked ``ignorable``."""

EXAMINED_TYPES: Final = frozenset({TURN_START, TURN_END, USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT,
                                   LEGACY_STEERING})
"""The only types that can hold a legacy shape: every other event costs one set lookup."""

RETIRED_TYPES: Final = frozenset({LEGACY_HEADER_DELTA, "mode/set"})
"""Types no reader accepts any more (spec persistence §6.2a)."""

PLAIN_STORED_TYPES: Final = STORED_EVENT_TYPES - RETIRED_TYPES - {REQUEST_HEADER}
"""Stored types that neither refusal can apply to (the bulk of a log, packed rows included)."""

APPEND_PLAIN_TYPES: Final = PLAIN_STORED_TYPES - SHAPED_TYPES - EXAMINED_TYPES
"""Types no rule of ``check_appendable`` applies to: ``Session.append`` logs them unchecked."""


def refuse_retired(event: Event, session_id: str | None) -> None:
    """Retired types and the retired ``request/header`` reason ``fallback``."""
    if event.type in RETIRED_TYPES:
        raise InvalidEventError(f"unsupported legacy {event.type} at seq {event.seq}",
                                session_id=session_id, seq=event.seq)
    if event.type == REQUEST_HEADER and isinstance(event.data, dict) and (
        event.data.get("reason") == "fallback"
    ):
        raise InvalidEventError(
            f'unsupported legacy request/header reason "fallback" at seq {event.seq}',
            session_id=session_id, seq=event.seq,
        )


def refuse_unknown(event: Event, session_id: str | None) -> None:
    """A type outside the known vocabulary must be marked ``ignorable`` (spec E3)."""
    if event.type not in STORED_EVENT_TYPES and not event.ignorable:
        raise SessionFormatUnsupportedError(
            f"event type {event.type!r} at seq {event.seq} is not marked ignorable; "
            "it was likely written by a newer agentlog or DSH",
            session_id=session_id, seq=event.seq,
        )


def check_appendable(event: Event, session_id: str, *, stored: bool) -> None:
    """Refuse, as it enters, an event that restore would refuse on its own: retired types and
    the message and header shapes always; with ``stored`` (a store's sessions and its cold
    ``append``) also what a cold read refuses or rewrites: unknown types not marked
    ``ignorable`` (append cannot mark one) and legacy shapes."""
    refuse_retired(event, session_id)
    if event.type in SHAPED_TYPES:
        check_shapes(event, event.type)
    if stored:
        if event.type not in STORED_EVENT_TYPES and not event.ignorable:
            raise InvalidEventError(
                f"event type {event.type!r} is not in the known vocabulary and not marked ignorable: "
                "a store would refuse to load it", session_id=session_id, seq=event.seq,
            )
        if event.type in EXAMINED_TYPES and not is_current(event):
            raise InvalidEventError(
                f"{event.type} has a pre-react-loop shape that loading would rewrite or refuse; "
                "append its current form", session_id=session_id, seq=event.seq, event_type=event.type,
            )
        check_turn_start(event, session_id)


def check_turn_start(event: Event, session_id: str) -> None:
    """A stored ``turn/start`` names a positive integer turn: every ``turn/end`` (a repair's
    closer too) must name it, and a load refuses one that names none."""
    data = event.data
    if event.type == TURN_START and not (isinstance(data, dict) and _is_turn(data.get("turn"))):
        raise InvalidEventError(
            "turn/start data must be an object with a positive integer turn: no turn/end could close it",
            session_id=session_id, seq=event.seq, event_type=TURN_START, path="data.turn",
        )


def _is_turn(value: object) -> bool:
    return is_safe_int(value) and value >= 1  # type: ignore[operator]


# -- current or legacy: the test that keeps current logs out of the legacy upgrade -------------------

_TURN_END_KEYS: Final = frozenset({"turn", "reason"})
_BARE_REASONS: Final = frozenset({"completed", "blocked", "max-tokens", "interrupted"})
_REWRITTEN_REASONS: Final = _BARE_REASONS | {"aborted", "disposed", "error"}


def first_legacy(events: Sequence[Any]) -> int | None:
    """The index of the first event that is not in its current shape, or None (a current log).

    Stores call the legacy upgrade (``agentlog.legacy``) only when this finds one; packed chunk
    runs pass by their ``type``, which is never examined."""
    examined = EXAMINED_TYPES
    for index, event in enumerate(events):
        if event.type in examined and not is_current(event):
            return index
    return None


def is_current(event: Event) -> bool:
    """True when ``event`` certainly has its current shape, so the legacy upgrade would leave it
    as it is; False when it may be legacy (the upgrade then rewrites it or refuses it)."""
    kind: str = event.type
    data = event.data
    if kind == TURN_END:
        return not isinstance(data, dict) or _current_turn_end(data)
    if kind == TURN_START:
        return not (isinstance(data, dict) and "trigger" in data)
    if kind == USER_MESSAGE:
        return identified(data)
    if kind in (ASSISTANT_MESSAGE, TOOL_RESULT):
        return isinstance(data, dict) and identified(data.get("message"))
    return kind != LEGACY_STEERING


def _current_turn_end(data: Any) -> bool:
    reason = data.get("reason")
    if data.keys() != _TURN_END_KEYS or not _is_turn(data["turn"]) or not isinstance(reason, dict):
        return False
    kind = reason.get("kind")
    if type(kind) is not str:
        return False
    if kind in _BARE_REASONS:
        return len(reason) == 1
    if kind == "aborted":
        return "reason" in reason
    if kind == "error":
        return "error" in reason
    return kind not in _REWRITTEN_REASONS  # the reason union is open: other kinds are current


def identified(message: Any) -> bool:
    """A message object with a non-empty string ``id`` (messages have had ids since the react loop)."""
    if not isinstance(message, dict):
        return False
    ident = message.get("id")
    return type(ident) is str and ident != ""
