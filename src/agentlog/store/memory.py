"""MemoryStore: the store contract held in process memory, for tests and demos.

It enforces the same rules as the durable backends (contiguous seqs, one writer per
session, lazy materialization, committed repair, a parent kept until its forks are
materialized), so code tested against it behaves the same on disk.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.errors import ConcurrentWriterError, SessionLockedError, SessionNotFoundError, UsageError
from agentlog.store.base import DEFAULT_WRITE_DELAY_MS, Store
from agentlog.store.hooks import _State
from agentlog.store.incarnation import new_incarnation, stored_at
from agentlog.store.records import Listing, Snapshot, StoredLog, WriterLock

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Stored:
    header: SessionHeader
    events: list[Event] = field(default_factory=list)
    incarnation: str = field(default_factory=lambda: new_incarnation().hex)
    revision: int = 0
    base: str | None = None
    """The parent whose prefix this fork shares, as a durable fork by reference does (None: a copy)."""


class _MemoryLock(WriterLock):
    def __init__(self, store: MemoryStore, session_id: str) -> None:
        self._store = store
        self._session_id = session_id
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            with self._store._locks_guard:
                self._store._locked.discard(self._session_id)


class MemoryStore(Store):
    """Sessions kept in a dict; nothing survives the process."""

    name = "memory"

    def __init__(self, *, write_delay_ms: int = DEFAULT_WRITE_DELAY_MS) -> None:
        super().__init__(write_delay_ms=write_delay_ms)
        self._store_id = uuid.uuid4().hex
        self._sessions: dict[str, _Stored] = {}
        self._locked: set[str] = set()
        self._locks_guard = threading.Lock()

    def reopen(self) -> MemoryStore:
        """A new store instance over the same sessions, as if the process had restarted."""
        other = MemoryStore(write_delay_ms=self.write_delay_ms)
        other._store_id = self._store_id
        other._sessions = self._sessions
        other._locked, other._locks_guard = self._locked, self._locks_guard  # locks are shared too
        return other

    def _revision(self, stored: _Stored) -> str:
        return f"memory:{self._store_id}:{stored.incarnation}:{stored.revision}"

    def _load_stored(self, session_id: str) -> StoredLog | None:
        stored = self._sessions.get(session_id)
        if stored is None:
            return None
        return StoredLog(stored.header, list(stored.events), self._revision(stored))

    def _stored_exists(self, session_id: str) -> bool:
        return session_id in self._sessions

    def _append_batch(self, header: SessionHeader, events: Sequence[Event], *, materialize: bool) -> None:
        stored = self._sessions.get(header.id)
        if stored is None:
            stored = self._sessions[header.id] = _Stored(header)
        if events and events[0].seq != len(stored.events):  # another instance wrote since our read
            raise ConcurrentWriterError(
                f"append seq mismatch: stored next seq is {len(stored.events)}, batch starts at "
                f"{events[0].seq}", session_id=header.id, seq=events[0].seq)
        stored.events.extend(events)
        stored.revision += 1

    def _commit_repair(self, header: SessionHeader, torn: Any, events: Sequence[Event]) -> None:
        self._append_batch(header, events, materialize=False)

    def _listing(self) -> Listing:
        return Listing([Snapshot(s.header, self._revision(s), stored_at(s.incarnation))
                        for s in self._sessions.values()])

    def _acquire_writer_lock(self, session_id: str) -> WriterLock:
        with self._locks_guard:
            if session_id in self._locked:
                raise SessionLockedError(
                    f"session is already open for writing by process {os.getpid()}",
                    session_id=session_id, pid=os.getpid(),
                )
            self._locked.add(session_id)
        return _MemoryLock(self, session_id)

    def _writer_pid(self, session_id: str) -> int | None:
        with self._locks_guard:
            return os.getpid() if session_id in self._locked else None

    def _write_fork_prefix(self, header: SessionHeader, prefix: Sequence[Event], state: _State,
                           suffix: Sequence[Event] = ()) -> None:
        """Copy the seed, but keep the parent referenced until ``materialize`` (the durable rules)."""
        super()._write_fork_prefix(header, prefix, state, suffix)
        if prefix:
            self._sessions[header.id].base = header.parent_session

    def materialize(self, session_id: str) -> None:
        """Release the parent this fork references (its events are already its own)."""
        self._check_open()
        with self._serialized(session_id):
            if session_id in self._live:
                raise UsageError("cannot materialize a live session; close it first", session_id=session_id)
            stored = self._sessions.get(session_id)
            if stored is None:
                raise SessionNotFoundError("session not found", session_id=session_id)
            stored.base = None

    def _delete_stored(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def _children_of(self, session_id: str) -> list[str]:
        return [sid for sid, stored in self._sessions.items() if stored.base == session_id]
