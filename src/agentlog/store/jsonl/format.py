"""The JSONL store's file format, without I/O: header line, batches, and the log scanner.

Byte-compatible with DSH format v0 (spec persistence §4.3-§4.7, §4.10, §6). A transcript is
the header line, then one storage record per line (``store.codec``), either as plain UTF-8
(``session.jsonl``) or as concatenated zstd frames (``session.jsonl.zstd``: a header frame,
then one frame per durable batch). ``scan_log`` reads either back into the valid contiguous
prefix and tells a tolerable torn tail from corruption of the committed region.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Final, NoReturn

import zstandard

from agentlog.core.events import TURN_END, Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import loads
from agentlog.core.packed import ChunkRun, LogEntry, resolve_entries
from agentlog.core.storable import STORED_EVENT_TYPES
from agentlog.errors import AgentlogError, SessionCorruptionError, SessionFormatUnsupportedError
from agentlog.store import codec
from agentlog.store.jsonl.header import (
    SHARED_PREFIX_KEY,
    encode_header_line,
    js_text,
    parse_header_line,
    try_parse_header_line,
)
from agentlog.store.jsonl.paths import (
    NO_CWD_PROJECT,
    TRANSCRIPT_RAW,
    TRANSCRIPT_ZSTD,
    decode_session_id,
    encode_session_id,
    project_key,
)
from agentlog.store.jsonl.zstd_frames import (
    FrameScan,
    FrameWalker,
    compress_frame,
    decode_frame,
    decode_torn_frame,
    scan_zstd_frames,
)

__all__ = [
    "NO_CWD_PROJECT",
    "SHARED_PREFIX_KEY",
    "TRANSCRIPT_RAW",
    "TRANSCRIPT_ZSTD",
    "FrameScan",
    "LogScan",
    "TornTail",
    "compress_frame",
    "decode_complete_frames",
    "decode_frame",
    "decode_session_id",
    "decode_torn_frame",
    "encode_batch",
    "encode_header_line",
    "encode_session_id",
    "first_stored_seq",
    "parse_header_line",
    "project_key",
    "read_header_prefix",
    "scan_log",
    "scan_suffix",
    "scan_zstd_frames",
    "try_parse_header_line",
]

_CORRUPT: Final = "corrupt session log"
_CORRUPT_ZSTD: Final = "corrupt Zstandard session log"

# -- batches ----------------------------------------------------------------------------------


def encode_batch(events: Sequence[Event], *, pack: bool = True) -> bytes:
    """The JSONL bytes of one durable batch (chunk runs packed unless ``pack=False``); ``b""`` if empty."""
    return codec.encode_batch(events, pack=pack)


# -- scanning ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TornTail:
    """A tolerable damaged tail: truncate the file here, then re-append ``recovered`` (zstd only)."""

    truncate_to: int
    recovered: list[Event]
    size: int
    """Bytes of the tail from ``truncate_to`` to the end of the file (what a read ignores)."""


@dataclass(frozen=True, slots=True)
class LogScan:
    """A transcript read back: the header, the valid contiguous prefix, and any torn tail.

    Offsets are physical file offsets. ``committed_end`` is the end of the last accepted line
    (raw) or of the last complete frame (zstd).
    """

    header: SessionHeader
    header_end: int
    events: list[LogEntry]
    """Seq-indexed slots: an ``Event``, or the ``ChunkRun`` of a packed row (``resolve_entries``)."""
    committed_end: int
    torn: TornTail | None
    partial: bool = False
    """True when scanning stopped at ``until_seq``: nothing after ``committed_end`` was examined."""
    unknown: Event | None = None
    """The first accepted event (torn-tail records included) of a type this build does not know
    and that is not marked ignorable: ``scan_log`` refuses the log for it."""
    marks: tuple[tuple[int, int], ...] = ()
    """(seq, byte offset) of a line or frame start about every ``MARK_STEP`` bytes of the
    committed region: what rebuilds a stale seek index (``jsonl_seek``)."""


class _Issue(Exception):  # noqa: N818 - internal; converted before it leaves the module
    """The first defect after which events stop being accepted."""

    def __init__(self, detail: str, offset: int) -> None:
        super().__init__(detail)
        self.detail = detail
        self.offset = offset


class _LineScanner:
    """The §4.7 line rules over the bytes after the header, fed in pieces (lines may span them).

    The first unparsable line or seq gap stops acceptance; later lines are decoded only to look
    for ``turn/end``, whose presence turns that defect into corruption of the committed region.
    """

    __slots__ = ("committed", "events", "first_seq", "fragment", "fragment_where", "input_bytes", "issue",
                 "last_where", "line_no", "marks", "next_mark", "path", "unknown")

    def __init__(self, header_bytes: int, path: str, first_seq: int = 0) -> None:
        self.first_seq = first_seq
        self.events: list[LogEntry] = []  # a packed row fills its slots with one shared ChunkRun
        self.unknown: Event | None = None
        self.issue: _Issue | None = None
        self.line_no = 1
        self.input_bytes = header_bytes
        self.committed = header_bytes
        self.fragment: list[bytes] = []  # pieces of a line spanning writes, joined once it ends
        self.fragment_where = header_bytes
        self.path = path
        self.marks: list[tuple[int, int]] = []
        self.last_where = -1
        self.next_mark = 0

    def write(self, chunk: bytes, frame_start: int | None = None) -> None:
        """Consume the next bytes; ``frame_start`` names their zstd frame (raw: None)."""
        start = self.input_bytes
        self.input_bytes += len(chunk)
        parts = chunk.split(b"\n")
        tail = parts.pop()
        for part in parts:
            end = start + len(part) + 1
            if self.fragment:
                self.fragment.append(part)
                line, where = b"".join(self.fragment), self.fragment_where
                self.fragment = []
            else:
                line, where = part, start if frame_start is None else frame_start
            self._consume(line, end, where)
            start = end
        if tail:
            if not self.fragment:
                self.fragment_where = start if frame_start is None else frame_start
            self.fragment.append(tail)

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
        self.issue = _Issue(
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
            self.issue = _Issue(f"{_CORRUPT}: unparsable committed event at line {self.line_no}", where)
            return
        tag = value.get("type") if type(value) is dict else None
        if type(tag) is str and tag in codec.ROW_TAGS:
            self.issue = _Issue(
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
        self.issue = _Issue(
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


def _corruption_of(issue: _Issue, path: str) -> SessionCorruptionError:
    return SessionCorruptionError(issue.detail, file=path, offset=issue.offset)


def _refuse_unknown(event: Event, path: str) -> NoReturn:
    """An event type this build does not know, not marked ignorable: written by a newer build.

    ``STORED_EVENT_TYPES`` is DSH's vocabulary plus the legacy types upgraded on load.
    """
    raise SessionFormatUnsupportedError(
        f"event type {event[0]!r} at seq {event[1]} is unknown and not marked ignorable, likely "
        f"written by a newer agentlog/DSH (raw log: {path})",
        seq=event[1], event_type=event[0], file=path,
    )


def first_stored_seq(header: SessionHeader) -> int:
    """The seq of a transcript's first event: a shared-prefix fork stores only what follows its seed."""
    if header.extra.get(SHARED_PREFIX_KEY) is True and header.seed_length is not None:
        return header.seed_length
    return 0


def scan_log(data: bytes, *, compressed: bool, path: str, until_seq: int | None = None) -> LogScan:
    """Read a whole transcript (raw or zstd) into its valid prefix and torn tail (§4.5-§4.7, §6).

    Raises ``SessionCorruptionError`` (with ``file`` and ``offset``) for a defect in the committed
    region and ``SessionFormatUnsupportedError`` for a foreign format version or an unknown,
    non-ignorable event type. Events are decoded by the codec, not validated further.
    With ``until_seq``, scanning may stop (``partial``) once every event below it is read:
    what a fork sharing a prefix needs from its parent.
    """
    scan = _scan_zstd(data, path, until_seq) if compressed else _scan_raw(data, path, until_seq)
    if scan.unknown is not None:
        _refuse_unknown(scan.unknown, path)
    return scan


MARK_STEP: Final = 1 << 16
"""Bytes of transcript between two ``LogScan.marks``."""

_PARTIAL_STEP: Final = 1 << 16
"""Bytes fed to the line scanner between checks of ``until_seq`` (raw transcripts)."""


def _scan_raw(data: bytes, path: str, until_seq: int | None = None) -> LogScan:
    newline = data.find(b"\n")
    if newline < 0:
        raise SessionCorruptionError("empty or header-less session log", file=path, offset=0)
    header_end = newline + 1
    header = parse_header_line(data[:header_end], path=path)
    first_seq = first_stored_seq(header)
    scanner = _LineScanner(header_end, path, first_seq)
    try:
        if until_seq is None:
            scanner.write(data[header_end:])
        else:
            for start in range(header_end, len(data), _PARTIAL_STEP):
                if first_seq + len(scanner.events) >= until_seq and scanner.issue is None:
                    return LogScan(header, header_end, scanner.events, scanner.committed, None, True,
                                   scanner.unknown)
                scanner.write(data[start:start + _PARTIAL_STEP])
    except _Issue as issue:
        raise _corruption_of(issue, path) from None
    committed = scanner.committed
    torn = TornTail(committed, [], len(data) - committed) if committed < len(data) else None
    return LogScan(header, header_end, scanner.events, committed, torn, unknown=scanner.unknown,
                   marks=scanner.marks_before(committed))


def _header_frame(data: bytes, span: tuple[int, int], path: str,
                  decompressor: zstandard.ZstdDecompressor | None = None) -> bytes:
    """The first frame's plaintext, which must be exactly one newline-terminated line."""
    plaintext = decode_frame(data, span, path=path, decompressor=decompressor)
    if not plaintext or plaintext.find(b"\n") != len(plaintext) - 1:
        raise SessionCorruptionError(
            f"{_CORRUPT_ZSTD}: first frame is not exactly one header line", file=path, offset=span[0]
        )
    return plaintext


def _scan_zstd(data: bytes, path: str, until_seq: int | None = None) -> LogScan:
    first = scan_zstd_frames(data, max_frames=1, path=path).frames
    if not first:
        raise SessionCorruptionError(f"{_CORRUPT_ZSTD}: empty or header-less session log",
                                     file=path, offset=0)
    decompressor = zstandard.ZstdDecompressor()
    header_plain = _header_frame(data, first[0], path, decompressor)
    header = parse_header_line(header_plain, path=path)
    structure = scan_zstd_frames(data, path=path)
    frames = structure.frames
    first_seq = first_stored_seq(header)
    scanner = _LineScanner(len(header_plain), path, first_seq)
    try:
        for span in frames[1:]:
            if until_seq is not None and first_seq + len(scanner.events) >= until_seq and (
                scanner.issue is None and scanner.committed == scanner.input_bytes
            ):
                return LogScan(header, first[0][1], scanner.events, span[0], None, True, scanner.unknown)
            scanner.write(decode_frame(data, span, path=path, decompressor=decompressor), span[0])
        if scanner.committed != scanner.input_bytes:
            raise SessionCorruptionError(
                f"{_CORRUPT_ZSTD}: complete frame contains a torn JSONL record",
                file=path, offset=scanner.uncommitted_where(),
            )
        committed_events = len(scanner.events)
        torn: TornTail | None = None
        torn_start = structure.torn_start
        if torn_start is not None:
            scanner.write(decode_torn_frame(data[torn_start:]), torn_start)
            recovered = resolve_entries(scanner.events[committed_events:], first_seq + committed_events)
            torn = TornTail(torn_start, recovered, len(data) - torn_start)
    except _Issue as issue:
        raise _corruption_of(issue, path) from None
    events = scanner.events[:committed_events] if torn is not None else scanner.events
    end = torn.truncate_to if torn is not None else frames[-1][1]
    return LogScan(header, first[0][1], events, frames[-1][1], torn, unknown=scanner.unknown,
                   marks=scanner.marks_before(end))


def decode_complete_frames(data: bytes, *, path: str) -> bytes:
    """The concatenated plaintext of every complete frame (a torn final frame is left out)."""
    frames = scan_zstd_frames(data, path=path).frames
    if not frames:
        raise SessionCorruptionError(f"{_CORRUPT_ZSTD}: empty or header-less session log",
                                     file=path, offset=0)
    decompressor = zstandard.ZstdDecompressor()
    return b"".join(decode_frame(data, span, path=path, decompressor=decompressor) for span in frames)


# -- listing ----------------------------------------------------------------------------------


def read_header_prefix(chunks: Iterable[bytes], *, compressed: bool, path: str) -> SessionHeader | None:
    """The header of a transcript for listing, reading ``chunks`` only as far as it needs.

    None for what listing skips silently: an empty or header-less file, a first line or
    frame that is incomplete, or a first record that is not a session header. Raises for a
    header frame that fails its checksum or holds more than one line, and for format refusals.
    """
    buffer = bytearray()  # amortized appends: a 50 MB header line costs one pass, not one per chunk
    walker = FrameWalker(0, path)
    for chunk in chunks:
        searched = len(buffer)
        buffer += chunk
        if compressed:
            end = walker.end(buffer)
            if end is None:
                continue
            try:
                line = decode_frame(bytes(buffer), (0, end), path=path)
            except SessionCorruptionError as exc:
                raise SessionCorruptionError(
                    f"{_CORRUPT_ZSTD}: header frame failed validation ({exc.detail})",
                    file=path, offset=0,
                ) from None
            if not line or line.find(b"\n") != len(line) - 1:
                raise SessionCorruptionError(
                    f"{_CORRUPT_ZSTD}: first frame is not exactly one header line", file=path, offset=0
                )
        else:
            newline = buffer.find(b"\n", searched)
            if newline < 0:
                continue
            line = bytes(buffer[:newline + 1])
        return try_parse_header_line(line, path=path)[0]
    return None


def scan_suffix(data: bytes, *, compressed: bool, path: str, offset: int,
                first_seq: int) -> list[LogEntry] | None:
    """The events of a transcript's bytes from ``offset`` (where the batch of ``first_seq`` starts)
    to its end, when they read back cleanly: complete lines or frames, contiguous seqs from
    ``first_seq``, no unknown type. None for anything else: the caller then scans the whole log,
    which names the defect exactly (line numbers count from the file's start)."""
    scanner = _LineScanner(offset, path, first_seq)
    try:
        if not compressed:
            scanner.write(data)
        else:
            structure = scan_zstd_frames(data, path=path)
            if structure.torn_start is not None:
                return None
            decompressor = zstandard.ZstdDecompressor()
            for start, end in structure.frames:
                scanner.write(decode_frame(data, (start, end), path=path, decompressor=decompressor),
                              offset + start)
    except (_Issue, AgentlogError):
        return None
    if scanner.issue is not None or scanner.unknown is not None or scanner.committed != scanner.input_bytes:
        return None
    return scanner.events
