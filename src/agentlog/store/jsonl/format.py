"""The JSONL store's file format, without I/O: header line, batches, and the log scanner.

Byte-compatible with DSH format v0 (spec persistence §4.3-§4.7, §4.10, §6). A transcript is
the header line, then one storage record per line (``store.codec``), either as plain UTF-8
(``session.jsonl``) or as concatenated zstd frames (``session.jsonl.zstd``: a header frame,
then one frame per durable batch). ``scan_log`` reads either back into the valid contiguous
prefix and tells a tolerable torn tail from corruption of the committed region.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, NoReturn

import zstandard

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.packed import LogEntry, resolve_entries
from agentlog.errors import (
    AgentlogError,
    InvalidEventError,
    SessionCorruptionError,
    SessionFormatUnsupportedError,
)
from agentlog.store import codec
from agentlog.store.jsonl.header import (
    SHARED_PREFIX_KEY,
    encode_header_line,
    parse_header_line,
    try_parse_header_line,
)
from agentlog.store.jsonl.lines import MARK_STEP, LineIssue, LineScanner
from agentlog.store.jsonl.paths import (
    NO_CWD_PROJECT,
    TRANSCRIPT_RAW,
    TRANSCRIPT_ZSTD,
    decode_session_id,
    encode_session_id,
    project_key,
)
from agentlog.store.jsonl.zstd_frames import (
    MAX_RECORD_BYTES,
    FrameScan,
    FrameWalker,
    bounded_decompressor,
    compress_frame,
    decode_frame,
    decode_torn_frame,
    frame_pieces,
    scan_zstd_frames,
    too_long,
)

__all__ = [
    "MARK_STEP",
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
    "check_record_lengths",
    "decode_session_id",
    "decode_torn_frame",
    "encode_batch",
    "encode_header_line",
    "encode_session_id",
    "first_stored_seq",
    "parse_header_line",
    "project_key",
    "read_first_line",
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


def check_record_lengths(plain: bytes, first_seq: int | None) -> bytes:
    """``plain`` when none of its lines exceeds ``MAX_RECORD_BYTES`` (what a zstd reader accepts);
    else ``InvalidEventError`` naming the batch's first seq (None: the header line)."""
    if len(plain) <= MAX_RECORD_BYTES:
        return plain
    longest = max(map(len, plain.split(b"\n"))) + 1
    if longest > MAX_RECORD_BYTES:
        what = "the session header" if first_seq is None else f"an event of the batch from seq {first_seq}"
        raise InvalidEventError(
            f"{what} encodes to a {longest}-byte line, over the {MAX_RECORD_BYTES}-byte cap of a zstd "
            "transcript's records (store it outside the log, or use ?compression=none)", seq=first_seq)
    return plain


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


def _corruption_of(issue: LineIssue, path: str) -> SessionCorruptionError:
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


_PARTIAL_STEP: Final = 1 << 16
"""Bytes fed to the line scanner between checks of ``until_seq`` (raw transcripts)."""


def _scan_raw(data: bytes, path: str, until_seq: int | None = None) -> LogScan:
    newline = data.find(b"\n")
    if newline < 0:
        raise SessionCorruptionError("empty or header-less session log", file=path, offset=0)
    header_end = newline + 1
    header = parse_header_line(data[:header_end], path=path)
    first_seq = first_stored_seq(header)
    scanner = LineScanner(header_end, path, first_seq)
    try:
        if until_seq is None:
            scanner.write(data[header_end:])
        else:
            for start in range(header_end, len(data), _PARTIAL_STEP):
                if first_seq + len(scanner.events) >= until_seq and scanner.issue is None:
                    return LogScan(header, header_end, scanner.events, scanner.committed, None, True,
                                   scanner.unknown)
                scanner.write(data[start:start + _PARTIAL_STEP])
    except LineIssue as issue:
        raise _corruption_of(issue, path) from None
    committed = scanner.committed
    torn = TornTail(committed, [], len(data) - committed) if committed < len(data) else None
    return LogScan(header, header_end, scanner.events, committed, torn, unknown=scanner.unknown,
                   marks=scanner.marks_before(committed))


def _header_frame(data: bytes, span: tuple[int, int], path: str,
                  decompressor: zstandard.ZstdDecompressor | None = None) -> bytes:
    """The first frame's plaintext, which must be exactly one newline-terminated line."""
    plaintext = decode_frame(data, span, path=path, decompressor=decompressor, limit=MAX_RECORD_BYTES)
    if not plaintext or plaintext.find(b"\n") != len(plaintext) - 1:
        raise SessionCorruptionError(
            f"{_CORRUPT_ZSTD}: first frame is not exactly one header line", file=path, offset=span[0]
        )
    return plaintext


_PAGE: Final = 4096
"""The granularity in which a file system loses an append's data (delayed allocation)."""


def _zero_filled_end(data: bytes, span: tuple[int, int]) -> int | None:
    """Where the zero run ending the file begins, when it ends the frame at ``span`` and is what
    delayed allocation leaves of a frame whose last pages never came: a run that covers at least
    the checksum or holds a page boundary (not one chance zero byte at a damaged frame's end)."""
    start, end = span
    if end != len(data) or data[end - 1] != 0:
        return None
    zero_start = start + len(data[start:end].rstrip(b"\0"))
    if end - zero_start >= 4 or (end - 1) // _PAGE * _PAGE >= zero_start:
        return zero_start
    return None


def _feed_frame(scanner: LineScanner, data: bytes, span: tuple[int, int], path: str,
                decompressor: zstandard.ZstdDecompressor, last: bool) -> bool:
    """Stream one complete frame into the scanner; False (scanner as before) when it is the last
    frame, fails to decode and ends the file in zeros: a torn tail, not damage. A defect inside
    any other complete frame is corruption at once (nothing after it can make it a torn tail)."""
    saved = scanner.snapshot() if last and _zero_filled_end(data, span) is not None else None
    pieces = frame_pieces(data, span, path=path, decompressor=decompressor)
    while True:
        try:
            piece = next(pieces, None)
        except SessionCorruptionError:
            if saved is None:
                raise
            scanner.rollback(saved)
            return False
        if piece is None:
            return True
        scanner.write(piece, span[0])
        if scanner.issue is not None and saved is None:
            raise _torn_record(scanner.issue, path)


def _torn_record(issue: LineIssue, path: str) -> SessionCorruptionError:
    return SessionCorruptionError(
        f"{_CORRUPT_ZSTD}: complete frame contains a torn JSONL record "
        f"({issue.detail.removeprefix(_CORRUPT + ': ')})", file=path, offset=issue.offset)


def _scan_zstd(data: bytes, path: str, until_seq: int | None = None) -> LogScan:
    first = scan_zstd_frames(data, max_frames=1, path=path).frames
    if not first:
        raise SessionCorruptionError(f"{_CORRUPT_ZSTD}: empty or header-less session log",
                                     file=path, offset=0)
    decompressor = bounded_decompressor()
    header_plain = _header_frame(data, first[0], path, decompressor)
    header = parse_header_line(header_plain, path=path)
    structure = scan_zstd_frames(data, path=path, tolerate_tail=True)
    frames = structure.frames
    torn_start, torn_end = structure.torn_start, len(data)
    first_seq = first_stored_seq(header)
    scanner = LineScanner(len(header_plain), path, first_seq, MAX_RECORD_BYTES)
    try:
        for index, span in enumerate(frames[1:], 1):
            if until_seq is not None and first_seq + len(scanner.events) >= until_seq and (
                scanner.issue is None and scanner.committed == scanner.input_bytes
            ):
                return LogScan(header, first[0][1], scanner.events, span[0], None, True, scanner.unknown)
            if not _feed_frame(scanner, data, span, path, decompressor, index == len(frames) - 1):
                frames, torn_start, torn_end = frames[:-1], span[0], _zero_filled_end(data, span) or span[0]
        if scanner.issue is not None:
            raise _torn_record(scanner.issue, path)
        if scanner.committed != scanner.input_bytes:
            raise SessionCorruptionError(
                f"{_CORRUPT_ZSTD}: complete frame contains a torn JSONL record",
                file=path, offset=scanner.uncommitted_where(),
            )
        committed_events = len(scanner.events)
        torn: TornTail | None = None
        if torn_start is not None:
            scanner.write(decode_torn_frame(data[torn_start:torn_end]), torn_start)
            recovered = resolve_entries(scanner.events[committed_events:], first_seq + committed_events)
            torn = TornTail(torn_start, recovered, len(data) - torn_start)
    except LineIssue as issue:
        raise _corruption_of(issue, path) from None
    events = scanner.events[:committed_events] if torn is not None else scanner.events
    end = torn.truncate_to if torn is not None else frames[-1][1]
    return LogScan(header, first[0][1], events, frames[-1][1], torn, unknown=scanner.unknown,
                   marks=scanner.marks_before(end))


def read_first_line(data: bytes, *, path: str) -> bytes:
    """The first line of a zstd transcript, decoding its first frame only (newline excluded)."""
    first = scan_zstd_frames(data, max_frames=1, path=path).frames
    if not first:
        raise SessionCorruptionError(f"{_CORRUPT_ZSTD}: empty or header-less session log",
                                     file=path, offset=0)
    return decode_frame(data, first[0], path=path, limit=MAX_RECORD_BYTES).split(b"\n", 1)[0]


def decode_complete_frames(data: bytes, *, path: str) -> bytes:
    """The concatenated plaintext of every complete frame (a torn final frame is left out);
    a line longer than ``MAX_RECORD_BYTES`` is refused before more is decoded."""
    frames = scan_zstd_frames(data, path=path).frames
    if not frames:
        raise SessionCorruptionError(f"{_CORRUPT_ZSTD}: empty or header-less session log",
                                     file=path, offset=0)
    decompressor = bounded_decompressor()
    pieces: list[bytes] = []
    run = 0  # bytes since the last newline
    for span in frames:
        for piece in frame_pieces(data, span, path=path, decompressor=decompressor):
            first = piece.find(b"\n")
            run = run + len(piece) if first < 0 else run + first + 1
            if run > MAX_RECORD_BYTES:
                raise too_long(MAX_RECORD_BYTES, span[0], path)
            if first >= 0:
                run = len(piece) - piece.rfind(b"\n") - 1
            pieces.append(piece)
    return b"".join(pieces)


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
                line = decode_frame(bytes(buffer), (0, end), path=path, limit=MAX_RECORD_BYTES)
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
    scanner = LineScanner(offset, path, first_seq, MAX_RECORD_BYTES if compressed else None)
    try:
        if not compressed:
            scanner.write(data)
        else:
            structure = scan_zstd_frames(data, path=path)
            if structure.torn_start is not None:
                return None
            decompressor = bounded_decompressor()
            for start, end in structure.frames:
                for piece in frame_pieces(data, (start, end), path=path, decompressor=decompressor):
                    scanner.write(piece, offset + start)
    except (LineIssue, AgentlogError):
        return None
    if scanner.issue is not None or scanner.unknown is not None or scanner.committed != scanner.input_bytes:
        return None
    return scanner.events
