"""Where each transcript ended when a JSONL store last read or wrote it.

A store's direct appends continue its own cursor; another writer may have appended since.
Comparing the file's size with the (next seq, byte size) this store last saw refuses a batch
at a stale cursor before a byte is written, as SQLite and PostgreSQL refuse it by seq.
"""

from __future__ import annotations

import threading

from agentlog.errors import ConcurrentWriterError

__all__ = ["TranscriptEnds"]


class TranscriptEnds:
    """Per session, the (next seq, byte size) at which its transcript was last seen to end."""

    def __init__(self) -> None:
        self._ends: dict[str, tuple[int, int]] = {}
        self._guard = threading.Lock()

    def saw(self, session_id: str, next_seq: int, size: int | None, *, read: bool = False) -> None:
        """Record an end (None: unknown). A read never moves it back: one that raced this
        store's own write saw less of it."""
        with self._guard:
            known = self._ends.get(session_id)
            if size is None:
                self._ends.pop(session_id, None)
            elif not (read and known is not None and known[0] > next_seq):
                self._ends[session_id] = (next_seq, size)

    def seq_at(self, session_id: str) -> int | None:
        """The next seq last seen, or None."""
        with self._guard:
            known = self._ends.get(session_id)
        return None if known is None else known[0]

    def check(self, session_id: str, first_seq: int, size: int, path: str) -> None:
        """Refuse a batch at ``first_seq`` when the file of ``size`` bytes is not where it was seen
        to end; the end is forgotten, so the next read learns the file afresh."""
        with self._guard:
            known = self._ends.get(session_id)
            if known is None or known == (first_seq, size):
                return
            del self._ends[session_id]
        raise ConcurrentWriterError(
            f"append seq mismatch: this store expected the transcript to end at seq {known[0]} "
            f"(byte {known[1]}) but it holds {size} bytes and the batch starts at seq {first_seq}: "
            "another writer appended since this store last read it",
            session_id=session_id, seq=first_seq, file=path, offset=size,
        )
