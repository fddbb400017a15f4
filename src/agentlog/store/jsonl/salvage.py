"""Salvage of a damaged transcript: what can still be read, and exactly what cannot.

A load refuses damage in the middle of a log. ``salvage_log`` reads past it instead: every line
(raw) or frame (zstd) is tried on its own. A consistent salvaged log is the longest run of
readable records whose seqs continue the log without a gap: damaged bytes are skipped when the
next readable record continues exactly where the log stopped (they held no event); at the first
seq that does not follow, the salvage stops, and the readable records after it are reported as
dropped (renumbering them would break what refers to seqs: surface replacements, compactions).
``salvage_log`` is pure; ``salvage_into`` reads the file and writes the new session.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import frozen_dict
from agentlog.core.repair import interrupted_turn_closers
from agentlog.errors import AgentlogError, SessionCorruptionError, SessionNotFoundError, UsageError
from agentlog.store import codec
from agentlog.store.jsonl.forks import is_shared, public_header
from agentlog.store.jsonl.format import first_stored_seq, parse_header_line
from agentlog.store.jsonl.zstd_frames import (
    MAX_RECORD_BYTES,
    FrameWalker,
    bounded_decompressor,
    decode_frame,
    decode_torn_frame,
    frame_pieces,
    next_good_frame,
    too_long,
)
from agentlog.store.records import StoredLog
from agentlog.store.validate import validate_stored

if TYPE_CHECKING:
    from agentlog.store.jsonl.store import JsonlStore

__all__ = ["Dropped", "Loss", "Salvage", "Salvaged", "salvage_into", "salvage_log"]


@dataclass(frozen=True, slots=True)
class Loss:
    """Bytes that could not be read: ``size`` bytes at file ``offset`` (``what`` they were)."""

    offset: int
    size: int
    what: str


@dataclass(frozen=True, slots=True)
class Dropped:
    """Readable records left out because their seqs do not continue the salvaged log: one run
    of contiguous seqs, starting at file ``offset``."""

    offset: int
    first_seq: int
    last_seq: int


@dataclass(slots=True)
class Salvage:
    """The header, the consistent events, what was unreadable and what was readable but dropped."""

    header: SessionHeader
    events: list[Event] = field(default_factory=list)
    lost: list[Loss] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)

    @property
    def gap_at(self) -> int | None:
        """The first seq missing before a dropped record (where the salvage stopped), or None."""
        return None if not self.dropped else first_stored_seq(self.header) + len(self.events)


@dataclass(frozen=True, slots=True)
class Salvaged:
    """A salvage written (or, dry, planned) as session ``into``: its events and closers, and why
    valid-looking events were cut (``invalid``: they fail the restore rules), if they were."""

    into: str
    salvage: Salvage
    events: list[Event]
    closers: list[Event]
    invalid: str | None
    written: bool


def salvage_into(store: JsonlStore, session_id: str, into: str, *, dry_run: bool = False) -> Salvaged:
    """Salvage the transcript of ``session_id`` into a new session ``into`` of the same store;
    the original is only read. The new log is validated as a load would, and its interrupted
    turn (if the salvage ends inside one) is closed as a load's repair would close it."""
    path = store._find(session_id)
    if path is None:
        raise SessionNotFoundError("session not found", session_id=session_id)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SessionCorruptionError(f"cannot read {path}: {exc}", session_id=session_id,
                                     file=str(path)) from None
    salvage = salvage_log(data, compressed=store.compressed, path=str(path))
    if is_shared(salvage.header):
        raise UsageError("a fork that shares its parent's prefix by reference cannot be salvaged on its "
                         "own: salvage its parent, or materialize it while it still loads",
                         session_id=session_id)
    events, invalid = _valid_prefix(session_id, salvage)
    closers = interrupted_turn_closers(events)
    written = bool(events) and not dry_run
    if written:
        header = public_header(salvage.header)
        extra = frozen_dict({**header.extra, "salvagedFrom": session_id})
        store.create(replace(header, id=into, extra=extra))
        store.append(into, [*events, *closers])
    return Salvaged(into, salvage, events, closers, invalid, written)


def _valid_prefix(session_id: str, salvage: Salvage) -> tuple[list[Event], str | None]:
    """The salvaged events a load would accept: cut before the first event the restore rules refuse."""
    events, invalid = salvage.events, None
    while events:
        try:
            session, _closers = validate_stored(session_id, StoredLog(salvage.header, events, "salvage"))
        except SessionCorruptionError as exc:
            if exc.seq is None or not 0 <= exc.seq < len(events):
                return [], str(exc)
            events, invalid = events[:exc.seq], str(exc)
            continue
        return list(session.events), invalid
    return [], invalid


_Record = tuple[int, int, "list[Event] | None", str]
"""(offset, bytes, its events or None when unreadable, what it is)."""


def salvage_log(data: bytes, *, compressed: bool, path: str) -> Salvage:
    """Everything consistent that can be read from a transcript's bytes (see the module doc).

    Raises ``SessionCorruptionError`` only when the header itself cannot be read.
    """
    header, records = _zstd_records(data, path) if compressed else _raw_records(data, path)
    salvage = Salvage(header)
    expected = first_stored_seq(header)
    for offset, size, events, what in records:
        if events is None:
            salvage.lost.append(Loss(offset, size, what))
        elif salvage.dropped or [event.seq for event in events] != [*range(expected, expected + len(events))]:
            last = salvage.dropped[-1] if salvage.dropped else None
            if last is not None and last.last_seq + 1 == events[0].seq:  # one run of records
                salvage.dropped[-1] = Dropped(last.offset, last.first_seq, events[-1].seq)
            else:
                salvage.dropped.append(Dropped(offset, events[0].seq, events[-1].seq))
        else:
            salvage.events.extend(events)
            expected += len(events)
    return salvage


def _decoded(line: bytes) -> list[Event] | None:
    try:
        events = codec.decode_line(line)
    except AgentlogError:
        return None
    return events or None


def _raw_records(data: bytes, path: str) -> tuple[SessionHeader, Iterator[_Record]]:
    newline = data.find(b"\n")
    if newline < 0:
        raise SessionCorruptionError("empty or header-less session log: nothing to salvage",
                                     file=path, offset=0)
    header = parse_header_line(data[:newline + 1], path=path)

    def records() -> Iterator[_Record]:
        start = newline + 1
        while start < len(data):
            end = data.find(b"\n", start)
            if end < 0:
                yield start, len(data) - start, None, "torn final line"
                return
            yield start, end + 1 - start, _decoded(data[start:end]), "unreadable line"
            start = end + 1

    return header, records()


def _zstd_records(data: bytes, path: str) -> tuple[SessionHeader, Iterator[_Record]]:
    try:
        header_end = FrameWalker(0, path).end(data)
        if header_end is None:
            raise SessionCorruptionError("incomplete header frame", file=path, offset=0)
        line = decode_frame(data, (0, header_end), path=path, limit=MAX_RECORD_BYTES)
    except SessionCorruptionError as exc:
        raise SessionCorruptionError(f"the header frame cannot be read, nothing to salvage ({exc.detail})",
                                     file=path, offset=0) from None
    header = parse_header_line(line, path=path)

    def records() -> Iterator[_Record]:
        offset = header_end
        while offset < len(data):
            try:
                end = FrameWalker(offset, path).end(data)
                if end is None:  # a torn final frame: its complete lines, unverified, as a load keeps them
                    yield from _lines_of(decode_torn_frame(data[offset:]), offset, len(data) - offset)
                    return
                lines = list(_frame_lines(data, (offset, end), path))
            except SessionCorruptionError:
                following = next_good_frame(data, offset + 1) or len(data)
                yield offset, following - offset, None, "damaged frame"
                offset = following
                continue
            for line in lines:
                yield offset, len(line) + 1, _decoded(line), "unreadable line in a frame"
            offset = end

    return header, records()


def _lines_of(plaintext: bytes, offset: int, size: int) -> Iterator[_Record]:
    """The records of a torn frame's plaintext; what is not a whole record is lost."""
    complete = plaintext[:plaintext.rfind(b"\n") + 1]
    for line in complete.split(b"\n")[:-1]:
        yield offset, len(line) + 1, _decoded(line), "unreadable line in a torn frame"
    yield offset, size, None, "torn final frame (the complete records in it are kept)"


def _frame_lines(data: bytes, span: tuple[int, int], path: str) -> Iterator[bytes]:
    """The lines of one complete frame, decoded in bounded pieces (a line over the cap raises)."""
    pending: list[bytes] = []
    pending_bytes = 0
    for piece in frame_pieces(data, span, path=path, decompressor=bounded_decompressor()):
        parts = piece.split(b"\n")
        for part in parts[:-1]:
            yield b"".join((*pending, part))
            pending, pending_bytes = [], 0
        pending.append(parts[-1])
        pending_bytes += len(parts[-1])
        if pending_bytes > MAX_RECORD_BYTES:
            raise too_long(MAX_RECORD_BYTES, span[0], path)
    if pending_bytes:
        raise SessionCorruptionError("a complete frame ends inside a record", file=path, offset=span[0])
