"""What a store may hold: the per-event rules of a cold read, shared by every append path.

A store never holds a log it would refuse (DESIGN §8): ``load`` refuses retired types, unknown
types not marked ``ignorable`` and malformed or rewritable legacy shapes before the Session
restore validator runs, so a store's sessions and its cold ``append`` check the same rules
(``check_appendable``) when an event enters, from this one list.
"""

from __future__ import annotations

from typing import Final

from agentlog.core.events import LEGACY_HEADER_DELTA, REQUEST_HEADER, TURN_START, Event, is_safe_int
from agentlog.core.seed import SHAPED_TYPES, check_shapes
from agentlog.errors import InvalidEventError, SessionFormatUnsupportedError
from agentlog.legacy.upgrade import EXAMINED_TYPES, STORED_EVENT_TYPES, check_current

__all__ = [
    "APPEND_PLAIN_TYPES",
    "PLAIN_STORED_TYPES",
    "RETIRED_TYPES",
    "check_appendable",
    "check_turn_start",
    "refuse_retired",
    "refuse_unknown",
]

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
        check_current(session_id, event)
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
