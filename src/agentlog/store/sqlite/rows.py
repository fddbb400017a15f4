"""The SQLite store's physical rows (pure): provenance varints, row encoding/decoding, row scans.

A row holds one event, or a packed chunk run (``ignorable = 0``); row JSON of ``COMPRESS_AT``
bytes or more is stored zstd-compressed when that is strictly smaller; ``sourceEventSeqs`` is a
varint/ZigZag blob. Scans apply the torn-tail rule: a bad row after the last committed
``turn/end`` is a torn tail, before it corruption.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Final, TypeAlias

import orjson
import zstandard

from agentlog.core.events import TURN_END, Event, surface_op_to_wire
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER, dumps, loads, valid_text
from agentlog.core.storable import STORED_EVENT_TYPES
from agentlog.errors import (
    AgentlogError,
    InvalidEventError,
    SessionCorruptionError,
    SessionFormatUnsupportedError,
)
from agentlog.legacy.upgrade import chain_writers
from agentlog.store.codec import (
    MIN_RUN,
    ROW_TAGS,
    SQLITE_MAX_BYTES,
    SQLITE_MAX_MEMBERS,
    decode_row,
    pack_chunk_runs,
)
from agentlog.store.jsonl.zstd_frames import MAX_RECORD_BYTES, MAX_WINDOW_BYTES

__all__ = [
    "COMPRESS_AT",
    "CORRUPT",
    "Row",
    "RowScan",
    "Segment",
    "decode_physical_row",
    "decode_seqs",
    "encode_rows",
    "encode_seqs",
    "fork_writers",
    "refuse_unknown",
    "scan_prefix",
    "scan_rows",
    "scan_suffix",
    "try_decode",
    "why",
]

COMPRESS_AT: Final = 4096
"""Row JSON of at least this many UTF-8 bytes is stored zstd-compressed when that is smaller."""

ZSTD_LEVEL: Final = 3
MAX_SCALAR_BYTES: Final = MAX_RECORD_BYTES
"""The longest JSON a scalar row may hold, refused on write and before decompression on read: the
JSONL store's record cap, so a zstd bomb in a row is a corruption error, not gigabytes of memory."""

CORRUPT: Final = "corrupt session log"
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"

Row: TypeAlias = tuple[Any, ...]
"""One physical row: seq, type, time, data, source_event_seqs, surface_op, ignorable, op_first."""

Segment: TypeAlias = tuple[int, int, list[Row], str]
"""Rows of a shared fork prefix: its first seq, the seq it is shared up to, its rows, its writer id."""

# -- provenance varints (pure) ---------------------------------------------------------------------


def _varint(value: int, out: bytearray) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_seqs(seqs: Sequence[int]) -> bytes:
    """``sourceEventSeqs`` as a blob: the first value as an unsigned LEB128 varint, then each
    next one as the ZigZag varint of its delta (order and duplicates kept; ``[]`` is ``b""``)."""
    out = bytearray()
    previous = 0
    for index, value in enumerate(seqs):
        if type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
            raise InvalidEventError(
                f"sourceEventSeqs values must be non-negative safe integers, got {value!r}")
        if index == 0:
            _varint(value, out)
        else:
            delta = value - previous
            _varint(delta << 1 if delta >= 0 else ((-delta) << 1) - 1, out)
        previous = value
    return bytes(out)


def decode_seqs(blob: bytes) -> tuple[int, ...]:
    """The inverse of ``encode_seqs``; refuses truncated, non-canonical, over-long and unsafe varints."""
    if type(blob) is not bytes:
        raise ValueError("source_event_seqs must be a blob")
    if not blob:
        return ()
    first = 0
    for position, byte in enumerate(blob[:8]):  # fast path: one varint, then one-byte deltas
        first |= (byte & 0x7F) << (7 * position)
        if not byte & 0x80:
            rest = blob[position + 1 :]
            if (position == 0 or byte) and (not rest or max(rest) < 0x80):
                values = tuple(accumulate(map(_ZIGZAG_BYTE.__getitem__, rest), initial=first))
                if min(values) >= 0 and max(values) <= MAX_SAFE_INTEGER:
                    return values
            break
    return _decode_seqs_slow(blob)


_ZIGZAG_BYTE: Final = tuple((byte >> 1) if not byte & 1 else -((byte + 1) >> 1) for byte in range(128))


def _decode_seqs_slow(blob: bytes) -> tuple[int, ...]:
    values: list[int] = []
    position, size = 0, len(blob)
    previous = 0
    while position < size:
        value = shift = 0
        start = position
        while True:
            if position >= size:
                raise ValueError(f"truncated provenance varint at byte {start}")
            byte = blob[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
            if position - start >= 8:
                raise ValueError(f"over-long provenance varint at byte {start}")
        if byte == 0 and position - start > 1:
            raise ValueError(f"non-canonical provenance varint at byte {start}")
        if values:
            value = previous + ((value >> 1) if not value & 1 else -((value + 1) >> 1))
        if not 0 <= value <= MAX_SAFE_INTEGER:
            raise ValueError(f"provenance value {value} at byte {start} is outside 0..2^53-1")
        values.append(value)
        previous = value
    return tuple(values)


# -- physical rows (pure) ----------------------------------------------------------------------------


def _data_value(raw: bytes, compressor: zstandard.ZstdCompressor, seq: int = 0,
                kind: str = "") -> str | bytes:
    """TEXT for JSON under ``COMPRESS_AT`` bytes or when zstd does not make it smaller, else a BLOB;
    JSON over ``MAX_SCALAR_BYTES`` is refused (no reader would take it back)."""
    if len(raw) > MAX_SCALAR_BYTES:
        raise InvalidEventError(f"event data is {len(raw)} bytes of JSON, more than {MAX_SCALAR_BYTES} bytes",
                                seq=seq, event_type=kind)
    if len(raw) >= COMPRESS_AT:
        blob = compressor.compress(raw)
        if len(blob) < len(raw):
            return blob
    return raw.decode("utf-8")


def encode_rows(events: Sequence[Event]) -> list[Row]:
    """The physical rows of one durable batch, in seq order (chunk runs packed under the row caps)."""
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=False, write_content_size=True)
    rows: list[Row] = []
    append = rows.append
    for record in pack_chunk_runs(events, max_members=SQLITE_MAX_MEMBERS, max_bytes=SQLITE_MAX_BYTES):
        if type(record) is Event:
            kind, op, seqs = record[0], record[4], record[5]
            if not kind or not valid_text(kind):
                raise InvalidEventError("event type must be a non-empty valid Unicode string",
                                        seq=record[1], event_type=kind)
            append((
                record[1], kind, record[2], _data_value(dumps(record[3]), compressor, record[1], kind),
                None if seqs is None else encode_seqs(seqs),
                None if op is None else orjson.dumps(surface_op_to_wire(op)).decode("utf-8"),
                1 if record[6] else None,
                1 if record[7] else None,
            ))
        else:
            row: dict[str, Any] = record  # type: ignore[assignment]
            append((row["seq0"], row["type"], row["time0"],
                    _data_value(orjson.dumps(row["data"]), compressor), None, None, 0, None))
    return rows


def _row_json(data: Any, limit: int) -> str | bytes:
    """A row's JSON (decompressed when a BLOB), refused when over ``limit`` bytes before parsing."""
    if type(data) is str:  # at most 4 UTF-8 bytes a character: measure only when it could matter
        if len(data) > limit or (len(data) * 4 > limit and not data.isascii()
                                 and len(data.encode("utf-8", "surrogatepass")) > limit):
            raise ValueError(f"row data exceeds {limit} bytes")
        return data
    if type(data) is not bytes:
        raise ValueError("row data must be text or a blob")
    if not data.startswith(_ZSTD_MAGIC):
        raise ValueError("row blob is not a zstd frame")
    size = zstandard.frame_content_size(data)
    if size < 0 or size > limit:
        raise ValueError(f"row blob declares no content size or more than {limit} bytes")
    reader = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW_BYTES).decompressobj()
    plain = reader.decompress(data)
    if len(plain) != size or not reader.eof or reader.unused_data:
        raise ValueError("row blob is not exactly one complete zstd frame")
    return plain


def decode_physical_row(row: Row) -> list[Event]:
    """The logical events one stored row holds; raises on any defect (a row is all or nothing)."""
    seq, kind, time, data, seqs, op, ignorable, op_first = row
    if type(seq) is not int or not 0 <= seq <= MAX_SAFE_INTEGER:
        raise ValueError("seq must be a non-negative safe integer")
    if type(kind) is not str or not kind:
        raise ValueError("type must be a non-empty string")
    if type(time) is not int or not -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER:
        raise ValueError("time must be a safe integer")
    if ignorable == 0 and type(ignorable) is int:
        if kind not in ROW_TAGS:
            raise ValueError(f"packed discriminator (ignorable = 0) on non-row type {kind!r}")
        if seqs is not None or op is not None or op_first is not None:
            raise ValueError("packed row carries surface columns")
        value = loads(_row_json(data, SQLITE_MAX_BYTES))
        return decode_row(kind, seq, time, value, min_members=MIN_RUN, max_members=SQLITE_MAX_MEMBERS)
    if ignorable is not None and ignorable != 1:
        raise ValueError("ignorable must be NULL, 0 or 1")
    if op_first is not None and (op_first != 1 or seqs is None or op is None):
        raise ValueError("op_first must be NULL, or 1 with both surface columns")
    wire: dict[str, Any] = {"type": kind, "seq": seq, "time": time,
                            "data": loads(_row_json(data, MAX_SCALAR_BYTES))}
    if op is not None and type(op) is not str:
        raise ValueError("surface_op must be text")
    if op_first and op is not None:
        wire["surfaceOp"] = loads(op)
    if seqs is not None:
        wire["sourceEventSeqs"] = list(decode_seqs(seqs))
    if op is not None and not op_first:
        wire["surfaceOp"] = loads(op)
    if ignorable:
        wire["ignorable"] = True
    return [Event.from_wire(wire)]


_ROW_ERRORS: Final = (AgentlogError, ValueError, TypeError, zstandard.ZstdError)


def fork_writers(segments: Sequence[Segment], own_start: int, session_id: str) -> list[tuple[int, str]]:
    """``StoredLog.writers`` of a fork chain read as ``_prefix_rows`` segments."""
    shared = [(start, writer) for start, _limit, _rows, writer in segments]
    return chain_writers(shared, own_start, session_id)


def why(exc: BaseException) -> str:
    """The detail of an error, without the location an ``AgentlogError`` adds."""
    return exc.detail if isinstance(exc, AgentlogError) else str(exc)


def try_decode(row: Row) -> list[Event] | str:
    """The row's events, or why it does not decode."""
    try:
        return decode_physical_row(row)
    except _ROW_ERRORS as exc:
        return why(exc)


@dataclass(slots=True)
class RowScan:
    """The valid contiguous events of a session's own rows and the first seq of a torn tail."""

    events: list[Event]
    torn: int | None = None


def scan_rows(rows: Sequence[Row], start: int) -> RowScan:
    """Decode a session's own rows (full read, §5.7); rows must continue from ``start``.

    The last scalar ``turn/end`` row that decodes marks the committed region: a defective or
    non-contiguous row at or before it is corruption, one after it starts the torn tail.
    """
    committed = -1
    decoded: dict[int, list[Event]] = {}
    for index in range(len(rows) - 1, -1, -1):
        row = rows[index]
        if row[1] == TURN_END and row[6] != 0:
            result = try_decode(row)
            if isinstance(result, list):
                decoded[index] = result
                committed = index
                break
    events: list[Event] = []
    expected = start
    for index, row in enumerate(rows):
        result = decoded.pop(index, None) or try_decode(row)
        if isinstance(result, list) and result[0][1] != expected:
            result = f"rows are not contiguous: expected seq {expected}"
        if isinstance(result, str):
            if index > committed:
                return RowScan(events, row[0])
            raise SessionCorruptionError(
                f"{CORRUPT}: invalid committed physical row at seq {row[0]}: {result}", seq=row[0]
            )
        events.extend(result)
        expected = result[-1][1] + 1
    return RowScan(events)


def scan_prefix(rows: Sequence[Row], start: int, limit: int) -> list[Event]:
    """Events ``[start, limit)`` of a referenced parent prefix: every defect is corruption."""
    events: list[Event] = []
    expected = start
    for row in rows:
        result = try_decode(row)
        if isinstance(result, list) and result[0][1] != expected:
            result = f"rows are not contiguous: expected seq {expected}"
        if isinstance(result, str):
            raise SessionCorruptionError(
                f"{CORRUPT}: invalid physical row at seq {row[0]} of a shared fork prefix: {result}",
                seq=row[0],
            )
        events.extend(event for event in result if event[1] < limit)
        expected = result[-1][1] + 1
    if expected < limit:
        raise SessionCorruptionError(
            f"fork parent no longer holds the {limit} events this fork shares (rows end at seq {expected})"
        )
    return events


def scan_suffix(rows: Sequence[Row], base: int, from_seq: int) -> list[Event]:
    """Events with ``seq >= from_seq`` of a seek read, from rows starting at ``base``: the valid
    contiguous run only (reading stops silently at the first defective or non-contiguous row)."""
    events: list[Event] = []
    expected = base
    for row in rows:
        result = try_decode(row)
        if isinstance(result, str) or result[0][1] != expected:
            break
        expected = result[-1][1] + 1
        if result[0][1] >= from_seq:
            events.extend(result)
        else:
            events.extend(event for event in result if event[1] >= from_seq)
    return events


def refuse_unknown(events: Sequence[Event], session_id: str) -> None:
    """Seek reads check the vocabulary of the returned suffix only (§1.9)."""
    for event in events:
        if event[0] not in STORED_EVENT_TYPES and not event[6]:
            raise SessionFormatUnsupportedError(
                f"event type {event[0]!r} at seq {event[1]} is not marked ignorable; "
                "it was likely written by a newer agentlog or DSH",
                session_id=session_id, seq=event[1],
            )
