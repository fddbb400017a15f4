"""Put imported sessions into a store: a new session once, the same id again only on ``replace``."""

from __future__ import annotations

import time
from typing import Final, Literal

from agentlog.errors import ConcurrentWriterError, SessionExistsError, SessionLockedError
from agentlog.importers.builder import Imported
from agentlog.store.base import Store

__all__ = ["Outcome", "save_imported"]

Outcome = Literal["imported", "replaced", "skipped"]
"""What ``save_imported`` did: a new session, a replacement, or nothing (the id was taken)."""

_RETRY_S: Final = 0.05


def save_imported(store: Store, imported: Imported, *, replace: bool = False, wait: float = 10.0) -> Outcome:
    """Write ``imported`` as one checked batch (``Store.append`` validates it as a load would).

    An id the store already holds is left alone (``skipped``): importing a file twice is a
    no-op. With ``replace`` the stored session is deleted first (refused while forks share it).
    While another writer holds the session (a concurrent import of the same file), wait up to
    ``wait`` seconds for it, then decide again; past that its ``SessionLockedError`` propagates.
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
    outcome: Outcome = "imported"
    try:
        store.create(header)
    except SessionExistsError:
        if not replace:
            return "skipped"
        store.delete(header.id)
        store.create(header)
        outcome = "replaced"
    store.append(header.id, imported.events)  # refused: the store forgets the lazy creation
    return outcome
