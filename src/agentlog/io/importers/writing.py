"""Put imported sessions into a store: a new session once, the same id again only on ``replace``.

A replacement never leaves the store with neither copy: the new session is written whole under
a stand-in id first (``ID.replacing``, its header marked with ``agentlogReplacing``), and only
then is the old one deleted and the new one written under ``ID``; the stand-in goes last. A
crash between the delete and the final write leaves the complete new session under the stand-in
id; importing again with ``replace`` finishes the swap.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Final, Literal

from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import frozen_dict
from agentlog.errors import (
    AgentlogError,
    ConcurrentWriterError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    UsageError,
)
from agentlog.io.importers.builder import Imported
from agentlog.store.base import Store

__all__ = ["REPLACING_KEY", "Outcome", "save_imported", "stand_in_id"]

Outcome = Literal["imported", "replaced", "skipped"]
"""What ``save_imported`` did: a new session, a replacement, or nothing (the id was taken)."""

REPLACING_KEY: Final = "agentlogReplacing"
"""Header extra of a stand-in session: the id whose replacement it carries."""

_RETRY_S: Final = 0.05


def stand_in_id(session_id: str) -> str:
    """The id a replacement of ``session_id`` is written under before the swap."""
    return f"{session_id}.replacing"


def save_imported(store: Store, imported: Imported, *, replace: bool = False, wait: float = 10.0) -> Outcome:
    """Write ``imported`` as one checked batch (``Store.append`` validates it as a load would).

    An id the store already holds is left alone (``skipped``): importing a file twice is a
    no-op. With ``replace`` the new session is stored whole under a stand-in id before the old
    one is deleted (refused, with nothing changed, while forks reference it). While another
    writer holds the session (a concurrent import of the same file), wait up to ``wait``
    seconds for it, then decide again; past that its ``SessionLockedError`` propagates.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            return _save(store, imported, replace)
        except (SessionLockedError, ConcurrentWriterError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(_RETRY_S)


def _save(store: Store, imported: Imported, replace: bool) -> Outcome:
    header = imported.header
    try:
        _write(store, header, imported)
    except SessionExistsError:
        if not replace:
            return "skipped"
        _swap(store, imported)
        return "replaced"
    if replace:  # an earlier replacement may have crashed after its delete: drop its stand-in
        _drop_stand_in(store, header.id)
    return "imported"


def _write(store: Store, header: SessionHeader, imported: Imported) -> None:
    store.create(header)
    store.append(header.id, imported.events)  # refused: the store forgets the lazy creation


def _swap(store: Store, imported: Imported) -> None:
    """Replace the stored session with ``imported``: stand-in first, then delete, write, tidy."""
    sid = imported.header.id
    stand_in = stand_in_id(sid)
    _drop_stand_in(store, sid)
    extra = frozen_dict({**imported.header.extra, REPLACING_KEY: sid}.items())
    _write(store, dataclasses.replace(imported.header, id=stand_in, extra=extra), imported)
    try:
        store.delete(sid)
    except BaseException as exc:
        store.delete(stand_in)  # nothing changed: the old session stays
        if isinstance(exc, UsageError) and "fork children" in exc.detail:
            reason = exc.detail.removeprefix("cannot delete: ")
            raise UsageError(f"cannot replace: {reason}", session_id=sid) from None
        raise
    _write(store, imported.header, imported)
    store.delete(stand_in)


def _drop_stand_in(store: Store, session_id: str) -> None:
    """Delete the stand-in an interrupted replacement of ``session_id`` left, if there is one."""
    stand_in = stand_in_id(session_id)
    try:
        found = store.inspect(stand_in).header
    except SessionNotFoundError:
        return
    except AgentlogError:
        found = None
    if found is None or found.extra.get(REPLACING_KEY) != session_id:
        raise UsageError(f"cannot replace: the stand-in id {stand_in!r} is taken by another session; "
                         "delete or rename it first", session_id=session_id)
    store.delete(stand_in)
