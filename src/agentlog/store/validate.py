"""The checks a cold read runs on a stored log before it becomes a Session (spec persistence §6).

Pure functions: refuse retired and unknown event types, upgrade legacy shapes in memory,
restore the session (unsealed) and compute the closers of an interrupted turn.
"""

from __future__ import annotations

from typing import cast

from agentlog.errors import (
    AgentlogError,
    InvalidEventError,
    SessionCorruptionError,
    SessionFormatUnsupportedError,
)
from agentlog.events import LEGACY_HEADER_DELTA, REQUEST_HEADER, Event
from agentlog.legacy import STORED_EVENT_TYPES, upgrade_legacy_chain
from agentlog.repair import interrupted_turn_closers
from agentlog.session import Session
from agentlog.store.records import StoredLog

__all__ = ["refuse_retired", "validate_stored"]


def validate_stored(session_id: str, stored: StoredLog) -> tuple[Session, list[Event]]:
    """The stored log restored as an unsealed Session, and the closers of its interrupted turn."""
    events = [*stored.events, *stored.recovered]
    try:
        if stored.header.id != session_id:
            raise InvalidEventError(f"header id {stored.header.id!r} does not match")
        plain = _PLAIN_TYPES
        for event in events:
            if event.type not in plain:  # packed chunk runs are plain: their type is assistant/chunk
                refuse_retired(cast(Event, event), session_id)
                _refuse_unknown(cast(Event, event), session_id)
        upgraded = upgrade_legacy_chain(session_id, events, stored.writers)  # in memory only
        session = Session._unsealed(session_id, upgraded, stored.header)
    except SessionFormatUnsupportedError:
        raise
    except AgentlogError as exc:
        raise SessionCorruptionError(
            f'stored session "{session_id}" failed validation: {exc}', session_id=session_id
        ) from exc
    return session, interrupted_turn_closers(session.events)


_RETIRED = frozenset({LEGACY_HEADER_DELTA, "mode/set"})
_PLAIN_TYPES = STORED_EVENT_TYPES - _RETIRED - {REQUEST_HEADER}
"""Stored types that neither refusal can apply to (the bulk of a log, packed rows included)."""


def refuse_retired(event: Event, session_id: str) -> None:
    """Refuse an event type or request-header reason that agentlog no longer reads (legacy)."""
    if event.type in _RETIRED:
        raise InvalidEventError(f"unsupported legacy {event.type} at seq {event.seq}",
                                session_id=session_id, seq=event.seq)
    if event.type == REQUEST_HEADER and isinstance(event.data, dict) and (
        event.data.get("reason") == "fallback"
    ):
        raise InvalidEventError(
            f'unsupported legacy request/header reason "fallback" at seq {event.seq}',
            session_id=session_id, seq=event.seq,
        )


def _refuse_unknown(event: Event, session_id: str) -> None:
    """Refuse an unknown type not marked ignorable (a newer writer's log)."""
    if event.type not in STORED_EVENT_TYPES and not event.ignorable:
        raise SessionFormatUnsupportedError(
            f"event type {event.type!r} at seq {event.seq} is not marked ignorable; "
            "it was likely written by a newer agentlog or DSH",
            session_id=session_id, seq=event.seq,
        )
