"""The checks a cold read runs on a stored log before it becomes a Session (spec persistence §6).

Pure: refuse retired and unknown event types (the rules of ``agentlog.core.storable``), upgrade
legacy shapes in memory, restore the session (unsealed), compute an interrupted turn's closers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from agentlog.core.events import Event
from agentlog.core.packed import LogEntry
from agentlog.core.repair import interrupted_turn_closers
from agentlog.core.session import Session
from agentlog.core.storable import (
    PLAIN_STORED_TYPES,
    check_turn_start,
    first_legacy,
    refuse_retired,
    refuse_unknown,
)
from agentlog.errors import (
    AgentlogError,
    InvalidEventError,
    SessionCorruptionError,
    SessionFormatUnsupportedError,
)
from agentlog.legacy.upgrade import needs_prefix, upgrade_legacy, upgrade_legacy_chain
from agentlog.store.records import StoredLog

__all__ = ["current_log", "validate_appended", "validate_stored"]


def current_log(session_id: str, events: Sequence[LogEntry], writers: Sequence[tuple[int, str]] = (),
                first_seq: int = 0) -> Sequence[LogEntry]:
    """``events`` in their current shape: the legacy upgrade (``agentlog.legacy``) runs only when
    an event says it is legacy; a current log passes unchanged, without entering it."""
    if first_legacy(events) is None:
        return events
    return upgrade_legacy_chain(session_id, events, writers, first_seq)


def validate_stored(session_id: str, stored: StoredLog) -> tuple[Session, list[Event]]:
    """The stored log restored as an unsealed Session, and the closers of its interrupted turn."""
    events = [*stored.events, *stored.recovered]
    try:
        if stored.header.id != session_id:
            raise InvalidEventError(f"header id {stored.header.id!r} does not match")
        plain = PLAIN_STORED_TYPES
        for event in events:
            if event.type not in plain:  # packed chunk runs are plain: their type is assistant/chunk
                refuse_retired(cast(Event, event), session_id)
                refuse_unknown(cast(Event, event), session_id)
        upgraded = current_log(session_id, events, stored.writers)  # in memory only
        session = Session._unsealed(session_id, upgraded, stored.header)
        closers = interrupted_turn_closers(session.events)
    except SessionFormatUnsupportedError:
        raise
    except AgentlogError as exc:  # keep the inner location as fields, not only as text
        raise SessionCorruptionError(
            f'stored session "{session_id}" failed validation: {exc}', session_id=session_id,
            seq=exc.seq, event_type=exc.event_type, path=exc.path,
        ) from exc
    return session, closers


def validate_appended(session_id: str, base: Session, batch: Sequence[Event]) -> Session:
    """``base`` (a validated log) continued by ``batch``, checked as a load of both would check it.

    A cold ``append`` must never store what ``load`` refuses (DESIGN §8); ``base`` is not changed.
    """
    try:
        for event in batch:
            refuse_unknown(event, session_id)
        upgraded: Sequence[LogEntry] = batch
        if first_legacy(batch) is None:
            pass  # a current batch: no legacy upgrade, as a load of it would not run one
        elif needs_prefix(batch):  # a legacy replacement names what it replaces: upgrade in context
            upgraded = upgrade_legacy(session_id, [*base._log, *batch])[len(base._log):]
        else:  # as load will, without copying the log
            upgraded = upgrade_legacy(session_id, list(batch))
        for entry in upgraded:
            check_turn_start(cast(Event, entry), session_id)
        candidate = Session._fork_of(base, base.seq, base.header, seal=False)
        candidate._load_seed(upgraded)
    except SessionFormatUnsupportedError:
        raise
    except AgentlogError as exc:
        raise InvalidEventError(
            f"append refused: a load of the session would refuse it: {exc.detail}", session_id=session_id,
            seq=exc.seq, event_type=exc.event_type, path=exc.path,
        ) from exc
    return candidate
