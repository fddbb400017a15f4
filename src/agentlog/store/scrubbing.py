"""What a backend does for ``agentlog scrub``: rewrite a session's stored bytes or rows in place,
keep its scrub journal and the per-store key that hashes removed values, dispose of old bytes.

The journal is the store's, not the log's: an event would change the event count and a type DSH
does not know would break its reader. Each record says when, which seqs changed and an
HMAC-SHA256 of every removed value under the store's key (never the value itself).
"""

from __future__ import annotations

import hashlib
import hmac
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.errors import UsageError
from agentlog.store.base import Store
from agentlog.store.records import WriterLock

__all__ = ["ScrubBackend", "keyed_hash"]


def keyed_hash(key: bytes, value: str) -> str:
    """HMAC-SHA256 of a removed value under the store's scrub key, hex: it proves which value was
    removed to whoever holds both, and tells nothing to anyone without the key."""
    return hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


class ScrubBackend(ABC):
    """One store's side of a scrub; ``ops.scrub`` drives it session by session."""

    caveats: tuple[str, ...] = ()
    """What this backend cannot guarantee to have removed (printed after every scrub)."""
    text_scrubber: Callable[[str], str] | None = None
    """How the text of a side file (a cut torn tail's copy) is scrubbed; set by the caller."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @contextmanager
    def locked(self, session_ids: Sequence[str]) -> Iterator[None]:
        """Hold the writer lock of every session (refused, naming it, while another process writes
        one; refused while this store has it open for writing)."""
        taken: list[WriterLock] = []
        try:
            for sid in session_ids:
                if sid in self.store._live:
                    raise UsageError("cannot scrub a live session; close it first", session_id=sid)
                taken.append(self.store._take_writer_lock(sid, "scrub"))
            yield
        finally:
            for lock in reversed(taken):
                lock.release()

    @abstractmethod
    def key(self) -> bytes:
        """The store's scrub key (made on first use, kept by the store)."""

    @abstractmethod
    def journal(self, session_id: str) -> list[dict[str, Any]]:
        """The scrub records of a session, oldest first ([] when never scrubbed)."""

    @abstractmethod
    def own_start(self, session_id: str) -> int:
        """The first seq the session holds itself (a fork by reference reads the ones before)."""

    @abstractmethod
    def rewrite(self, session_id: str, header: SessionHeader, events: Sequence[Event],
                record: dict[str, Any]) -> list[str]:
        """Replace the session's stored header and own events (``events`` is the whole scrubbed log)
        atomically, rebuild what derives from them, append ``record``; returns notes to print."""

    def tidy(self, session_id: str) -> list[str]:
        """Scrub what the backend keeps beside a session whose log needed no rewrite (side files)."""
        return []

    def dispose(self) -> list[str]:
        """After every rewrite: remove old bytes the backend still holds (VACUUM...); notes to print."""
        return []
