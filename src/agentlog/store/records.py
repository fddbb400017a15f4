"""What stores hand out and take in: inspections and their recoveries, listings, raw artifacts,
stored logs, writer locks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.packed import LogEntry
from agentlog.errors import AgentlogError

__all__ = [
    "Inspection", "Listing", "RawArtifact", "Recovery", "Snapshot", "StoredLog", "Unreadable", "WriterLock",
]


@dataclass(frozen=True, slots=True)
class Recovery:
    """What a read-only look at a damaged or interrupted log found, and what ``load`` would commit.

    ``load`` (and ``open``, a cold ``append``, ``fork``) truncates the torn tail, re-writes
    ``recovered`` and appends ``closers``; until then the stored log is unchanged.
    """

    intact: int
    """Events of the valid committed prefix (a fork's shared prefix included)."""
    torn: bool
    """A torn tail follows the valid prefix and is ignored."""
    torn_offset: int | None
    """Byte offset where the valid prefix ends (file backends; None for databases)."""
    torn_bytes: int | None
    """Bytes of torn tail after ``torn_offset`` (file backends; None for databases)."""
    recovered: tuple[Event, ...]
    """Complete events found inside the torn tail (a torn zstd frame); they are kept."""
    closers: tuple[Event, ...]
    """The synthetic events that would close the interrupted turn (empty when none is open)."""

    @property
    def turn(self) -> int | None:
        """The interrupted turn the closers close, or None."""
        for event in self.closers:
            if event.type == "turn/end":
                return cast(int, event.data["turn"])
        return None

    @staticmethod
    def found(stored: StoredLog, closers: Sequence[Event]) -> Recovery | None:
        """The recovery a read of ``stored`` implies, or None when the log is intact and balanced."""
        if stored.torn is None and not closers:
            return None
        offset, size = stored.torn_span if stored.torn_span is not None else (None, None)
        return Recovery(len(stored.events), stored.torn is not None, offset, size,
                        tuple(stored.recovered), tuple(closers))


@dataclass(frozen=True, slots=True)
class Inspection:
    """A session as stored: its header and an immutable sequence of events.

    Cold reads return a lazy view: packed chunk rows become events only when read.
    ``recovery`` (from ``inspect`` only) says what was ignored or synthesized, None if nothing.
    """

    header: SessionHeader
    events: Sequence[Event]
    recovery: Recovery | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A listed session and its revision token (changes whenever the stored log changes)."""

    header: SessionHeader
    revision: str
    stored_at: int | None = None
    """When this store stored the session (Unix ms; never earlier than it took the session in),
    None when it cannot tell: the transcript's status-change time (JSONL), the time in the
    session's UUIDv7 incarnation (SQLite, PostgreSQL, memory: when the store created it)."""


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A stored session that cannot be listed: where it is, its id when known, and why."""

    session_id: str | None
    where: str
    """The file, directory or row that could not be read."""
    error: AgentlogError
    skipped_by_list: bool = False
    """True for what ``list()`` leaves out silently (spec persistence §4: a JSONL transcript that is
    empty or does not start with a complete header); ``list()`` raises the error of any other."""


@dataclass(frozen=True, slots=True)
class Listing:
    """Every session a store holds: the readable ones, and each unreadable one on its own."""

    snapshots: list[Snapshot]
    unreadable: list[Unreadable] = field(default_factory=list)

    def listed(self) -> list[Snapshot]:
        """What ``Store.list_snapshots`` returns, as the spec lists: a JSONL transcript without a
        header is left out, and any other unreadable session raises its error (a caller is never
        handed a listing that silently lacks it)."""
        for bad in self.unreadable:
            if not bad.skipped_by_list:
                raise bad.error
        return self.snapshots


@dataclass(frozen=True, slots=True)
class RawArtifact:
    """The durable text of a session exactly as written (decoded from zstd if compressed)."""

    header: SessionHeader
    filename: str
    content: str


@dataclass(slots=True)
class StoredLog:
    """What a backend read: the valid contiguous prefix and an opaque torn-tail marker.

    ``recovered`` are complete events found inside a torn tail that must be re-written
    when the tail is truncated (zstd torn frames).
    """

    header: SessionHeader
    events: Sequence[LogEntry]
    """Seq-indexed; a backend may leave packed chunk rows packed (``agentlog.core.packed``)."""
    revision: str
    torn: Any = None
    recovered: list[Event] = field(default_factory=list)
    writers: list[tuple[int, str]] = field(default_factory=list)
    """``(first seq, session id)`` of each segment when ancestors wrote part of the log (a fork
    sharing their prefix), the session's own last; empty when the whole log is its own."""
    torn_span: tuple[int, int] | None = None
    """File backends: ``(offset, bytes)`` of the torn tail (where the valid prefix ends, its size)."""


class WriterLock(ABC):
    """An exclusive right to write one session, held by one ``LiveSession``."""

    @abstractmethod
    def release(self) -> None:
        """Give the lock up (idempotent)."""
