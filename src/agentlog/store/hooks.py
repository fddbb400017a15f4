"""What a store backend implements, and the per-id machinery every store method shares.

``StoreHooks`` declares the storage hooks a backend fills in (read a stored log, append a
durable batch, commit a repair, list, lock, delete) and owns the state the public contract in
``Store`` works on: per-id serialization, the writer lock taken for one cold write, what this
process knows of each session's durable log, and the per-revision validation caches.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from agentlog.core.events import Event, is_safe_int
from agentlog.core.header import SessionHeader
from agentlog.core.session import Session
from agentlog.errors import SessionLockedError, UsageError
from agentlog.store.records import Inspection, Listing, RawArtifact, StoredLog, WriterLock

__all__ = ["DEFAULT_WRITE_DELAY_MS", "PREPARED_CACHE_SIZE", "LiveHandle", "StoreHooks"]

DEFAULT_WRITE_DELAY_MS = 200
"""The write-behind batching window: a fixed deadline from the first pending event."""

PREPARED_CACHE_SIZE = 5
"""Validated cold sessions kept per store (keyed by revision), as DSH's LRU default."""


class LiveHandle(Protocol):
    """What a store uses of the live sessions it handed out (``agentlog.store.writer.LiveSession``)."""

    @property
    def session(self) -> Session: ...
    @property
    def durable_seq(self) -> int: ...
    def durable_view(self) -> Inspection: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


@dataclass(slots=True)
class _State:
    """What this process knows of one session's durable log."""

    header: SessionHeader
    cursor: int = 0
    materialized: bool = False


class StoreHooks(ABC):
    """The backend hooks and the shared per-id state of a ``Store`` (see ``agentlog.store.base``)."""

    name = "store"

    def __init__(self, *, write_delay_ms: int = DEFAULT_WRITE_DELAY_MS) -> None:
        if not is_safe_int(write_delay_ms) or not 1 <= write_delay_ms <= 2_147_483_647:
            raise ValueError(
                f"write_delay_ms must be an integer between 1 and 2147483647, got {write_delay_ms!r}"
            )
        self.write_delay_ms = write_delay_ms
        self._guard = threading.Lock()
        self._id_locks: dict[str, threading.RLock] = {}
        self._states: dict[str, _State] = {}
        self._live: dict[str, LiveHandle] = {}
        self._prepared: OrderedDict[str, tuple[StoredLog, Session, list[Event]]] = OrderedDict()
        self._fork_sources: OrderedDict[str, tuple[str, Session, int]] = OrderedDict()
        """Validated prefixes that cold forks read: (revision, source, length), like ``_prepared``."""
        self._appending: OrderedDict[str, Session] = OrderedDict()
        """Validated logs that cold appends continue (LRU), so each batch is checked alone."""
        self._closed = False

    # -- hooks for backends ------------------------------------------------------------

    @abstractmethod
    def _load_stored(self, session_id: str) -> StoredLog | None:
        """Read a stored log (header, valid prefix, torn marker), or None if absent."""

    def _load_stored_until(self, session_id: str, until_seq: int) -> StoredLog | None:
        """Read at least the events with ``seq < until_seq`` (a fork's prefix); backends that
        can stop reading early override this. The rest of the log may be absent from the result."""
        return self._load_stored(session_id)

    def _load_stored_from(self, session_id: str, from_seq: int) -> StoredLog | None:
        """Read events with ``seq >= from_seq``; seek-capable backends override this."""
        stored = self._load_stored(session_id)
        if stored is not None:
            stored.events = stored.events[from_seq:]
        return stored

    def _check_new_id(self, session_id: str) -> None:  # noqa: B027 - a hook most backends leave as is
        """Refuse an id this backend cannot store (by default every id goes)."""

    @abstractmethod
    def _stored_exists(self, session_id: str) -> bool:
        """True when any stored artifact holds this id."""

    @abstractmethod
    def _append_batch(self, header: SessionHeader, events: Sequence[Event], *, materialize: bool) -> None:
        """Durably append a contiguous batch; ``materialize`` creates the stored session atomically."""

    @abstractmethod
    def _commit_repair(self, header: SessionHeader, torn: Any, events: Sequence[Event]) -> None:
        """Truncate the torn tail (if ``torn`` is not None), then durably append ``events``."""

    @abstractmethod
    def _listing(self) -> Listing:
        """Every stored session; one that cannot be read is an ``Unreadable`` entry, not a raise."""

    @abstractmethod
    def _acquire_writer_lock(self, session_id: str) -> WriterLock:
        """Take the session's exclusive writer lock or raise ``SessionLockedError``."""

    @abstractmethod
    def _delete_stored(self, session_id: str) -> None:
        """Remove every stored artifact of the session."""

    @abstractmethod
    def _children_of(self, session_id: str) -> list[str]:
        """Ids of stored sessions whose prefix references this one."""

    def _check_writer_lock(self, lock: WriterLock, state: _State,  # noqa: B027 - most locks cannot be lost
                           batch: Sequence[Event]) -> None:
        """Before a live session writes ``batch``: raise if its writer lock was lost under it
        (a backend whose lock lives on a connection that can die overrides this)."""

    def _read_raw(self, session_id: str) -> RawArtifact | None:
        raise UsageError(f"the {self.name} store does not expose raw artifacts", session_id=session_id)

    def _writer_pid(self, session_id: str) -> int | None:
        """The pid holding the session's writer lock, read without taking it; None when nobody
        holds it. ``OSError`` when the backend cannot tell (see ``store.writer_probe``)."""
        raise OSError(f"the {self.name} store cannot tell another process's writer lock")

    def _discard_lock_file(self, session_id: str) -> None:  # noqa: B027 - only file locks leave files
        """Remove the writer lock file of a session that was never stored, unless a writer holds it."""

    def _close_backend(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release backend resources (connections, file handles)."""

    # -- per-id serialization -------------------------------------------------------------

    @contextmanager
    def _serialized(self, session_id: str) -> Iterator[None]:
        with self._guard:
            lock = self._id_locks.setdefault(session_id, threading.RLock())
        with lock:
            yield

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"the {self.name} store is closed")

    @contextmanager
    def _writer_locked(self, session_id: str, action: str) -> Iterator[None]:
        """Hold the session's writer lock for one cold write (an append, a repair).

        While another writer (process or store) holds it, ``SessionLockedError`` names the
        holder and points to the reads that never write.
        """
        lock = self._take_writer_lock(session_id, action)
        try:
            yield
        finally:
            lock.release()

    def _take_writer_lock(self, session_id: str, action: str) -> WriterLock:
        """The session's writer lock; a refusal says what could not be done and what reads instead."""
        try:
            return self._acquire_writer_lock(session_id)
        except SessionLockedError as exc:
            exc.detail = f"cannot {action}: {exc.detail}; inspect() and read_from() read it without writing"
            exc.args = (exc.detail,)
            raise

    def _remember(self, cache: OrderedDict[str, Any], session_id: str, value: Any) -> None:
        """Put ``value`` in one of the per-revision caches, dropping the least recently used."""
        with self._guard:
            cache[session_id] = value
            cache.move_to_end(session_id)
            while len(cache) > PREPARED_CACHE_SIZE:
                cache.popitem(last=False)

    # -- bookkeeping for live sessions ----------------------------------------------------------

    def _attach_live(self, live: LiveHandle) -> None:
        with self._guard:
            self._live[live.session.id] = live

    def _detach_live(self, live: LiveHandle) -> None:
        with self._guard:
            if self._live.get(live.session.id) is live:
                del self._live[live.session.id]
            state = self._states.get(live.session.id)
            if state is not None and not state.materialized:
                del self._states[live.session.id]

    @abstractmethod
    def _persist(self, state: _State, batch: Sequence[Event]) -> None:
        """A live session's durable write of ``batch`` at ``state.cursor`` (``Store`` implements it)."""
