"""The line rules of a transcript (spec persistence §4.7), fed the bytes after its header in pieces.

``LineScanner`` accepts the valid contiguous prefix of storage records and latches the first
defect (``LineIssue``); ``format.scan_log`` turns a latched defect into a torn tail or corruption.
"""

from __future__ import annotations

import json
from itertools import repeat
from typing import Any, Final

from agentlog.core.events import TURN_END, Event
from agentlog.core.jsonvalue import loads
from agentlog.core.packed import ChunkRun, LogEntry
from agentlog.core.storable import STORED_EVENT_TYPES
from agentlog.errors import AgentlogError, SessionCorruptionError, SessionFormatUnsupportedError
from agentlog.store import codec
from agentlog.store.jsonl.header import js_text
from agentlog.store.jsonl.zstd_frames import too_long

__all__ = ["MARK_STEP", "LineIssue", "LineScanner"]

_CORRUPT: Final = "corrupt session log"

MARK_STEP: Final = 1 << 16
"""Bytes of transcript between two ``LogScan.marks``."""


class LineIssue(Exception):  # noqa: N818 - internal; converted before it leaves the store
    """The first defect after which events stop being accepted."""

    def __init__(self, detail: str, offset: int) -> None:
        super().__init__(detail)
        self.detail = detail
        self.offset = offset


class LineScanner:
    """The §4.7 line rules over the bytes after the header, fed in pieces (lines may span them).

    The first unparsable line or seq gap stops acceptance; later lines are decoded only to look
    for ``turn/end``, whose presence turns that defect into corruption of the committed region.
    """

    __slots__ = ("committed", "events", "first_seq", "fragment", "fragment_bytes", "fragment_where",
                 "input_bytes", "issue", "last_where", "limit", "line_no", "marks", "next_mark", "path",
                 "unknown")

    def __init__(self, header_bytes: int, path: str, first_seq: int = 0, limit: int | None = None) -> None:
        self.first_seq = first_seq
        self.limit = limit  # the longest record accepted (zstd: MAX_RECORD_BYTES), None: any
        self.events: list[LogEntry] = []  # a packed row fills its slots with one shared ChunkRun
        self.unknown: Event | None = None
        self.issue: LineIssue | None = None
        self.line_no = 1
        self.input_bytes = header_bytes
        self.committed = header_bytes
        self.fragment: list[bytes] = []  # pieces of a line spanning writes, joined once it ends
        self.fragment_bytes = 0
        self.fragment_where = header_bytes
        self.path = path
        self.marks: list[tuple[int, int]] = []
        self.last_where = -1
        self.next_mark = 0

    def snapshot(self) -> tuple[Any, ...]:
        """The state ``rollback`` returns to (before a frame that may turn out to be a torn tail)."""
        return (len(self.events), self.unknown, self.issue, self.line_no, self.input_bytes, self.committed,
                list(self.fragment), self.fragment_bytes, self.fragment_where, len(self.marks),
                self.last_where, self.next_mark)

    def rollback(self, state: tuple[Any, ...]) -> None:
        (events, self.unknown, self.issue, self.line_no, self.input_bytes, self.committed, self.fragment,
         self.fragment_bytes, self.fragment_where, marks, self.last_where, self.next_mark) = state
        del self.events[events:]
        del self.marks[marks:]

    def write(self, chunk: bytes, frame_start: int | None = None) -> None:
        """Consume the next bytes; ``frame_start`` names their zstd frame (raw: None)."""
        if self.issue is not None:
            self._write_latched(chunk, frame_start)
            return
        start = self.input_bytes
        self.input_bytes += len(chunk)
        parts = chunk.split(b"\n")
        tail = parts.pop()
        for part in parts:
            end = start + len(part) + 1
            if self.fragment:
                line, where = self._joined(part), self.fragment_where
            else:
                line, where = part, start if frame_start is None else frame_start
                self._check_length(len(part) + 1, where)
            self._consume(line, end, where)
            start = end
        if tail:
            if not self.fragment:
                self.fragment_where = start if frame_start is None else frame_start
            self._extend(tail)

    def _write_latched(self, chunk: bytes, frame_start: int | None) -> None:
        """After a defect only a later ``turn/end`` matters: lines wholly inside ``chunk`` are
        looked at one by one only when the chunk holds that text at all."""
        first = chunk.find(b"\n")
        if first < 0:
            self.input_bytes += len(chunk)
            if chunk:
                self._extend(chunk)
            return
        last = chunk.rfind(b"\n")
        start = self.input_bytes
        self.write_lines(chunk[:first + 1], frame_start, start)
        middle = chunk[first + 1:last + 1]
        if b"turn/end" in middle:
            self.write_lines(middle, frame_start, start + first + 1)
        else:
            self.line_no += middle.count(b"\n")
        self.input_bytes = start + len(chunk)
        if last + 1 < len(chunk):
            self._extend(chunk[last + 1:])

    def write_lines(self, lines: bytes, frame_start: int | None, start: int) -> None:
        """Consume newline-terminated ``lines`` that start at input byte ``start`` (latched state)."""
        for part in lines.split(b"\n")[:-1]:
            end = start + len(part) + 1
            line = self._joined(part) if self.fragment else part
            self._consume(line, end, start if frame_start is None else frame_start)
            start = end

    def _extend(self, piece: bytes) -> None:
        """Add ``piece`` to the unfinished line, refusing one longer than ``limit``."""
        self._check_length(self.fragment_bytes + len(piece), self.fragment_where)
        self.fragment.append(piece)
        self.fragment_bytes += len(piece)

    def _joined(self, part: bytes) -> bytes:
        """The unfinished line completed by ``part`` (its newline follows)."""
        self._check_length(self.fragment_bytes + len(part) + 1, self.fragment_where)
        self.fragment.append(part)
        line = b"".join(self.fragment)
        self.fragment, self.fragment_bytes = [], 0
        return line

    def _check_length(self, size: int, where: int) -> None:
        if self.limit is not None and size > self.limit:
            raise too_long(self.limit, where, self.path)

    def _consume(self, line: bytes, end: int, where: int) -> None:
        self.line_no += 1
        if self.issue is not None:
            if b"turn/end" in line and _holds_turn_end(line):
                raise self.issue
            return
        try:
            entry = codec.decode_line_entry(line)
        except AgentlogError:
            self._undecodable(line, where)
            return
        events = self.events
        expected = self.first_seq + len(events)
        if isinstance(entry, ChunkRun):  # members are numbered seq0, seq0+1, ...
            if entry.seq0 != expected:
                self._gap(entry.events(), expected, where)
                return
            events.extend(repeat(entry, entry.count))
        elif entry[1] != expected:
            self._gap([entry], expected, where)
            return
        else:
            events.append(entry)
            if entry[0] not in STORED_EVENT_TYPES and not entry[6] and self.unknown is None:
                self.unknown = entry
        if where != self.last_where:  # the first line read at a new line or frame start
            self.last_where = where
            if where >= self.next_mark:
                self.marks.append((expected, where))
                self.next_mark = where + MARK_STEP
        self.committed = end

    def marks_before(self, end: int) -> tuple[tuple[int, int], ...]:
        """The marks of the region before byte ``end`` (a torn tail's are left out)."""
        return tuple(mark for mark in self.marks if mark[1] < end)

    def _gap(self, decoded: list[Event], expected: int, where: int) -> None:
        """Latch a seq gap; it is corruption at once when the offending row holds a ``turn/end``."""
        offset, got = next((offset, event[1]) for offset, event in enumerate(decoded)
                           if event[1] != expected + offset)
        self.issue = LineIssue(
            f"{_CORRUPT}: seq gap in committed region at line {self.line_no} "
            f"(expected {expected + offset}, got {got})", where,
        )
        if any(event[0] == TURN_END for event in decoded):
            raise self.issue

    def _undecodable(self, line: bytes, where: int) -> None:
        """Classify a line the codec refused: torn/garbled, unrepresentable, or an invalid event."""
        try:
            value = loads(line)
        except ValueError:  # orjson.JSONDecodeError included
            if _is_javascript_json(line):
                raise SessionFormatUnsupportedError(
                    f"line {self.line_no} is valid JSON that agentlog cannot represent losslessly "
                    f"(a lone surrogate or an out-of-range number) (raw log: {self.path})",
                    file=self.path, offset=where,
                ) from None
            self.issue = LineIssue(f"{_CORRUPT}: unparsable committed event at line {self.line_no}", where)
            return
        tag = value.get("type") if type(value) is dict else None
        if type(tag) is str and tag in codec.ROW_TAGS:
            self.issue = LineIssue(
                f"{_CORRUPT}: unparsable committed event at line {self.line_no} (malformed "
                f"{tag} storage row)", where,
            )
            return
        seq = value.get("seq") if type(value) is dict else None
        if seq == self.first_seq + len(self.events) and type(seq) is not bool:
            # DSH would accept this record and then fail restore validation: unloadable either way.
            try:
                codec.decode_storage_record(value)
            except AgentlogError as exc:
                raise SessionCorruptionError(
                    f"{_CORRUPT}: invalid committed event at line {self.line_no}: {exc}",
                    file=self.path, offset=where,
                ) from None
        self.issue = LineIssue(
            f"{_CORRUPT}: seq gap in committed region at line {self.line_no} "
            f"(expected {self.first_seq + len(self.events)}, got {js_text(seq)})", where,
        )
        if type(value) is dict and value.get("type") == TURN_END:
            raise self.issue

    def uncommitted_where(self) -> int:
        """Where the first bytes that were not accepted begin (for error offsets)."""
        return self.issue.offset if self.issue is not None else self.fragment_where


def _holds_turn_end(line: bytes) -> bool:
    """Whether a line after a defect decodes to (or, unvalidated, claims to be) a ``turn/end``."""
    try:
        return any(event[0] == TURN_END for event in codec.decode_line(line))
    except AgentlogError:
        pass
    try:
        value = loads(line)
    except ValueError:  # orjson.JSONDecodeError included
        return False
    return type(value) is dict and value.get("type") == TURN_END


def _is_javascript_json(line: bytes) -> bool:
    """Whether JavaScript's ``JSON.parse`` would accept a line that orjson refused."""

    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    try:
        json.loads(line, parse_constant=refuse)
    except ValueError:
        return False
    return True
