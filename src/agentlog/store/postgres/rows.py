"""Physical rows of the PostgreSQL store: encode a batch, decode and scan stored rows (pure, no I/O).

The layout mirrors the SQLite one (persistence §5.5): a scalar row holds one logical event
(``data`` = JSON of ``event.data``); a packed row holds a run of 3..1,024 chunk deltas of at
most 1 MiB of JSON and is recognized by ``ignorable = false``. Row JSON of 4 KiB or more is
stored zstd-compressed (``data_zstd``) when that is strictly smaller. Provenance
(``sourceEventSeqs``) is a native ``bigint[]``; ``op_first`` keeps the wire order of the
two surface markers so events round-trip byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import orjson
import zstandard

from agentlog.core.events import TURN_END, Event, surface_op_to_wire
from agentlog.core.jsonvalue import dumps, loads
from agentlog.errors import AgentlogError, InvalidEventError, SessionCorruptionError
from agentlog.store.codec import SQLITE_MAX_BYTES, SQLITE_MAX_MEMBERS, decode_row, pack_chunk_runs
from agentlog.store.integrity import row_digest

__all__ = [
    "COMPRESS_AT",
    "MAX_SCALAR_BYTES",
    "ROW_COLUMNS",
    "Row",
    "RowScan",
    "decode_physical_row",
    "encode_columns",
    "encode_rows",
    "same_rows",
    "scan_rows",
    "scan_suffix",
]

COMPRESS_AT: Final = 4096
"""Row JSON of at least this many bytes is zstd-compressed when that is strictly smaller."""

ZSTD_LEVEL: Final = 3
MAX_SCALAR_BYTES: Final = 1 << 30
"""The most JSON one scalar row may decompress to (PostgreSQL's own limit on a text value is
1 GB): a frame declaring more is refused before anything is allocated (a zstd bomb)."""

ROW_COLUMNS: Final = (
    "seq", "type", "time", "data", "data_zstd", "source_event_seqs", "surface_op", "op_first", "ignorable",
)
"""The columns of ``events`` a row tuple holds, in order (``session_id`` comes first in inserts)."""

Row: TypeAlias = tuple[int, str, int, "str | None", "bytes | None", "list[int] | None", "str | None",
                       "bool | None", "bool | None"]
"""One physical row: seq, type, time, data, data_zstd, source_event_seqs, surface_op, op_first, ignorable."""

_CORRUPT: Final = "corrupt session log"
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"


def _body(raw: bytes, compressor: zstandard.ZstdCompressor) -> tuple[str | None, bytes | None]:
    """(text, None) for small or incompressible JSON, else (None, zstd frame)."""
    if len(raw) >= COMPRESS_AT:
        packed = compressor.compress(raw)
        if len(packed) < len(raw):
            return None, packed
    return raw.decode("utf-8"), None


def encode_rows(events: Sequence[Event]) -> list[Row]:
    """The physical rows of one durable batch, in seq order (runs packed under the row caps)."""
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=False, write_content_size=True)
    rows: list[Row] = []
    append = rows.append
    for record in pack_chunk_runs(events, max_members=SQLITE_MAX_MEMBERS, max_bytes=SQLITE_MAX_BYTES):
        if type(record) is Event:
            op, seqs = record[4], record[5]
            raw = dumps(record[3])
            if len(raw) > MAX_SCALAR_BYTES:  # stored, it could never be read back
                raise InvalidEventError(f"event data of {len(raw)} bytes exceeds the {MAX_SCALAR_BYTES} "
                                        "bytes a PostgreSQL row holds", seq=record[1], event_type=record[0])
            append((
                record[1], record[0], record[2], *_body(raw, compressor),
                None if seqs is None else list(seqs),
                None if op is None else dumps(surface_op_to_wire(op)).decode("utf-8"),
                True if record[7] else None,
                True if record[6] else None,
            ))
        else:
            row: dict[str, Any] = record  # type: ignore[assignment]
            append((row["seq0"], row["type"], row["time0"], *_body(orjson.dumps(row["data"]), compressor),
                    None, None, None, False))
    return rows


def encode_columns(session_id: str, events: Sequence[Event]) -> dict[str, list[Any]]:
    """The batch's rows as one list per column (``seqs`` as array literals), with each row's
    integrity digest (``store.integrity.row_digest`` of the session id and the row): the insert's
    parameters."""
    rows = encode_rows(events)
    columns: dict[str, list[Any]] = {
        name: list(values) for name, values in zip(_PARAMS, zip(*rows, strict=True), strict=True)
    } if rows else {name: [] for name in _PARAMS}
    columns["seqs"] = [None if seqs is None else "{" + ",".join(map(str, seqs)) + "}"
                       for seqs in columns["seqs"]]
    columns["digest"] = [row_digest((session_id, *row)) for row in rows]
    return columns


def same_rows(stored: Sequence[Sequence[Any]], events: Sequence[Event]) -> bool:
    """Whether rows read back (``ROW_COLUMNS``, in seq order) are exactly the rows ``events``
    encode to, value for value: text, zstd bytes, provenance and markers alike."""
    return [tuple(row) for row in stored] == encode_rows(events)


_PARAMS: Final = ("seq", "type", "time", "data", "data_zstd", "seqs", "surface_op", "op_first", "ignorable")
"""The parameter names of ``encode_columns`` (``ROW_COLUMNS`` with provenance as ``seqs``)."""


def _row_json(row: Sequence[Any], limit: int) -> bytes | str:
    """The row's JSON text, decompressed when stored as zstd; a frame declaring more than
    ``limit`` bytes is refused before anything is allocated."""
    text, packed = row[3], row[4]
    if text is not None:
        if packed is not None:
            raise ValueError("row has both data and data_zstd")
        if type(text) is not str:
            raise ValueError("data must be text")
        if len(text) > limit:
            raise ValueError(f"data exceeds {limit} bytes")
        return text
    if type(packed) is not bytes or not packed.startswith(_ZSTD_MAGIC):
        raise ValueError("data_zstd must be a zstd frame")
    size = zstandard.frame_content_size(packed)
    if size < 0:
        raise ValueError("data_zstd frame declares no content size")
    if size > limit:
        raise ValueError(f"data_zstd frame declares {size} bytes, more than a row may hold ({limit} bytes)")
    return zstandard.ZstdDecompressor().decompress(packed, max_output_size=size)


def decode_physical_row(row: Sequence[Any]) -> list[Event]:
    """The logical events one stored row holds; raises on any defect (never returns a partial row)."""
    seq, kind, time, ignorable = row[0], row[1], row[2], row[8]
    if type(kind) is not str or not kind:
        raise ValueError("type must be a non-empty string")
    if ignorable is False:
        if row[5] is not None or row[6] is not None or row[7] is not None:
            raise ValueError("packed row carries surface markers")
        raw = _row_json(row, SQLITE_MAX_BYTES)
        if len(raw) > SQLITE_MAX_BYTES:
            raise ValueError(f"packed row data exceeds {SQLITE_MAX_BYTES} bytes")
        return decode_row(kind, seq, time, loads(raw), min_members=3, max_members=SQLITE_MAX_MEMBERS)
    wire: dict[str, Any] = {"type": kind, "seq": seq, "time": time, "data": loads(
        _row_json(row, MAX_SCALAR_BYTES))}
    op_text, seqs, op_first = row[6], row[5], row[7]
    if op_first is not None and op_first is not True:
        raise ValueError("op_first must be NULL or true")
    if op_first and op_text is not None:
        wire["surfaceOp"] = loads(op_text)
    if seqs is not None:
        if type(seqs) is not list:
            raise ValueError("source_event_seqs must be an array")
        wire["sourceEventSeqs"] = seqs
    if op_text is not None and "surfaceOp" not in wire:
        wire["surfaceOp"] = loads(op_text)
    if ignorable is True:
        wire["ignorable"] = True
    elif ignorable is not None:
        raise ValueError("ignorable must be NULL, true or false")
    return [Event.from_wire(wire)]


def _why(exc: Exception) -> str:
    return exc.detail if isinstance(exc, AgentlogError) else str(exc)


_ROW_ERRORS: Final = (AgentlogError, ValueError, TypeError, zstandard.ZstdError)


@dataclass(slots=True)
class RowScan:
    """Decoded events of a row range and where a torn tail starts (``None`` when there is none)."""

    events: list[Event]
    torn: int | None = None


def _last_committed_turn_end(rows: Sequence[Sequence[Any]]) -> int:
    """Index of the last scalar ``turn/end`` row that decodes, or -1 (persistence §5.7 backward pass)."""
    for index in range(len(rows) - 1, -1, -1):
        row = rows[index]
        if row[1] == TURN_END and row[8] is not False:
            try:
                decode_physical_row(row)
            except _ROW_ERRORS:
                continue
            return index
    return -1


def scan_rows(rows: Sequence[Sequence[Any]], start: int, end: int, *, tolerate_torn: bool) -> RowScan:
    """Decode the rows holding seqs ``[start, end)``, in order, checking contiguity.

    A defective row after the last committed ``turn/end`` starts a torn tail when
    ``tolerate_torn`` (the session's own rows); any other defect is corruption. Members of a
    row outside ``[start, end)`` are dropped (a referenced parent prefix may end inside one).
    """
    committed = _last_committed_turn_end(rows) if tolerate_torn else len(rows)
    events: list[Event] = []
    expected = start
    for index, row in enumerate(rows):
        try:
            decoded = decode_physical_row(row)
            decoded = [event for event in decoded if event[1] >= start] if decoded[0][1] < start else decoded
            if not decoded or decoded[0][1] != expected:
                raise ValueError(f"rows are not contiguous: expected seq {expected}")
            if tolerate_torn and decoded[-1][1] >= end:
                raise ValueError(f"row reaches past the stored next seq {end}")
        except _ROW_ERRORS as exc:
            if index > committed:
                return RowScan(events, row[0])
            raise SessionCorruptionError(
                f"{_CORRUPT}: invalid committed physical row at seq {row[0]}: {_why(exc)}", seq=row[0]
            ) from None
        if decoded[-1][1] >= end:
            events.extend(event for event in decoded if event[1] < end)
            return RowScan(events)
        events.extend(decoded)
        expected = decoded[-1][1] + 1
    if expected < end:
        if tolerate_torn:  # trailing rows are missing: nothing to delete, the cursor moves back
            return RowScan(events, expected)
        raise SessionCorruptionError(f"{_CORRUPT}: rows end at seq {expected}, expected {end}", seq=expected)
    return RowScan(events)


def scan_suffix(rows: Sequence[Sequence[Any]], from_seq: int, end: int) -> list[Event]:
    """Events with ``from_seq <= seq < end`` of a seek read: the valid contiguous run only.

    The first row may start before ``from_seq`` (a packed row covering it). Reading stops
    silently at the first defective or non-contiguous row, as the SQLite seek read does.
    """
    events: list[Event] = []
    expected: int | None = None
    for row in rows:
        try:
            decoded = decode_physical_row(row)
        except _ROW_ERRORS:
            break
        if expected is not None and decoded[0][1] != expected:
            break
        if expected is None and decoded[0][1] > from_seq:
            break
        expected = decoded[-1][1] + 1
        events.extend(event for event in decoded if from_seq <= event[1] < end)
        if expected >= end:
            break
    return events
