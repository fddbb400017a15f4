"""SqliteStore: every session in one SQLite database (spec persistence §5), on agentlog's own schema.

DSH's schema 17 is the reference and its rules are kept: STRICT tables, ``application_id`` and
``user_version`` checked at open and inside every write transaction and never migrated,
every schema object compared with the reference (an extra index or column is refused),
``synchronous=FULL``, WAL by default, packed chunk rows of 3..1,024 members and at most 1 MiB
of JSON recognized by ``ignorable = 0``, row JSON of 4 KiB or more zstd-compressed only when
that is strictly smaller, provenance as a varint/ZigZag blob, a seek-based ``read_from``, the
stale-writer guard (``stored next seq is N``) inside ``BEGIN IMMEDIATE``, and the torn-tail rule
(a bad row after the last committed ``turn/end`` is a torn tail, before it corruption).

The schema differs from DSH's, so the file carries its own identity (application id
``0x41474C47`` "AGLG", user_version 1) and refuses DSH's and any other foreign file:

- sessions have an integer ``key`` that event rows reference: smaller rows and primary-key
  index than a repeated TEXT id, and a deleted-then-recreated id never meets old rows;
- ``extra`` keeps a header's unknown keys, so headers round-trip as they do in JSONL;
- ``base_key``/``base_length``: a fork child references its parent's immutable prefix instead
  of copying it (O(1) bytes); the foreign key makes SQLite itself refuse to delete a parent
  that a child references, and ``materialize`` copies the prefix;
- ``op_first`` keeps the wire order of events that write ``surfaceOp`` before
  ``sourceEventSeqs`` (DSH's repair closers), so they re-encode byte for byte.

Writer locks are ``flock``s on ``<db>.locks/<sha256(id)>``: the kernel drops them when the
holder dies, even by SIGKILL, with no pid reuse to misjudge and no stale row to clean up; the
holder's pid is written in the file only for the error message. Readers take no lock and, in
WAL mode, never wait for a writer. A ``:memory:`` database is private to this process and
locks in memory.

Threads: one connection (``check_same_thread=False``) serialized by a lock; LiveSession
writers and readers of this process take turns on it (rows are decoded outside the lock),
other processes get their own. The last five full reads are cached, keyed by revision. Every
``sqlite3`` error is mapped to the most specific agentlog error, the original chained.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import sqlite3
import stat
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, Final, NoReturn, TypeAlias
from urllib.parse import quote

import orjson
import zstandard

from agentlog.errors import (
    AgentlogError,
    ConcurrentWriterError,
    InvalidEventError,
    InvalidHeaderError,
    PersistenceIOError,
    SessionCorruptionError,
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
    UsageError,
)
from agentlog.events import TURN_END, Event, surface_op_to_wire
from agentlog.header import FORMAT_VERSION, SessionHeader
from agentlog.jsonvalue import MAX_SAFE_INTEGER, dumps, loads, valid_text
from agentlog.legacy import STORED_EVENT_TYPES, chain_writers, upgrade_legacy_chain
from agentlog.packed import resolve_entries
from agentlog.store.base import DEFAULT_WRITE_DELAY_MS, Store, _State
from agentlog.store.codec import (
    MIN_RUN,
    ROW_TAGS,
    SQLITE_MAX_BYTES,
    SQLITE_MAX_MEMBERS,
    decode_row,
    pack_chunk_runs,
)
from agentlog.store.filelock import lock_session_file
from agentlog.store.records import Snapshot, StoredLog, WriterLock

__all__ = [
    "APPLICATION_ID",
    "COMPRESS_AT",
    "DSH_APPLICATION_ID",
    "JOURNAL_MODES",
    "SCHEMA",
    "USER_VERSION",
    "SqliteStore",
    "decode_physical_row",
    "decode_seqs",
    "encode_rows",
    "encode_seqs",
    "scan_rows",
]

APPLICATION_ID: Final = 0x41474C47
"""``PRAGMA application_id`` of an agentlog database ("AGLG")."""

USER_VERSION: Final = 1
"""``PRAGMA user_version``: the schema version this build reads and writes (never migrated)."""

DSH_APPLICATION_ID: Final = 0x44534850
"""DSH's application id ("DSHP"): its schema-17 files are refused with a clear message."""

COMPRESS_AT: Final = 4096
"""Row JSON of at least this many UTF-8 bytes is stored zstd-compressed when that is smaller."""

ZSTD_LEVEL: Final = 3
MAX_SCALAR_BYTES: Final = 1 << 30
"""Decompression bound of a scalar row (SQLite's own value-size limit is about 1 GB)."""

JOURNAL_MODES: Final = {
    "wal": "PRAGMA journal_mode = WAL",
    "delete": "PRAGMA journal_mode = DELETE",
    "truncate": "PRAGMA journal_mode = TRUNCATE",
    "persist": "PRAGMA journal_mode = PERSIST",
}
"""The supported journal modes and their fixed statements (no SQL is assembled at run time)."""

SCHEMA: Final = (
    """CREATE TABLE store_identity (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id TEXT NOT NULL
) STRICT""",
    """CREATE TABLE sessions (
  key INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  version INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  cwd TEXT,
  parent_session TEXT,
  seed_length INTEGER,
  origin TEXT,
  delegation_depth INTEGER,
  agent_preset TEXT,
  extra TEXT,
  base_key INTEGER REFERENCES sessions (key),
  base_length INTEGER,
  incarnation TEXT NOT NULL,
  revision INTEGER NOT NULL,
  CHECK ((base_key IS NULL) = (base_length IS NULL))
) STRICT""",
    """CREATE TABLE events (
  session INTEGER NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  time INTEGER NOT NULL,
  data ANY NOT NULL,
  source_event_seqs BLOB,
  surface_op TEXT,
  ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  op_first INTEGER CHECK (op_first IS NULL OR op_first = 1),
  PRIMARY KEY (session, seq)
) STRICT""",
)
"""The schema, one statement each (run in the transaction that stamps the identity)."""

# -- statements (fixed text; values are always bound) ---------------------------------------------

_SESSION_COLUMNS: Final = (
    "key, id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
    "agent_preset, extra, base_key, base_length, incarnation, revision"
)
_ROW_COLUMNS: Final = "seq, type, time, data, source_event_seqs, surface_op, ignorable, op_first"

_IDENTITY: Final = (
    "SELECT (SELECT user_version FROM pragma_user_version), "
    "(SELECT application_id FROM pragma_application_id), (SELECT schema_version FROM pragma_schema_version)"
)
_OBJECTS: Final = (
    "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
    "ORDER BY type, name"
)
_STAMP: Final = ("PRAGMA application_id = 1095191623", "PRAGMA user_version = 1")
_SELECT_STORE_ID: Final = "SELECT store_id FROM store_identity WHERE singleton = 1"
_INSERT_STORE_ID: Final = "INSERT INTO store_identity (singleton, store_id) VALUES (1, ?)"
_SELECT_SESSION: Final = f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?"
_SELECT_SESSION_BY_KEY: Final = f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE key = ?"
_LIST_SESSIONS: Final = f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY key"
_SESSION_EXISTS: Final = "SELECT 1 FROM sessions WHERE id = ?"
_INSERT_SESSION: Final = (
    "INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, origin, "
    "delegation_depth, agent_preset, extra, base_key, base_length, incarnation, revision) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
)
_BUMP_REVISION: Final = "UPDATE sessions SET revision = revision + 1 WHERE key = ?"
_CLEAR_BASE: Final = "UPDATE sessions SET base_key = NULL, base_length = NULL WHERE key = ?"
_DELETE_SESSION: Final = "DELETE FROM sessions WHERE key = ?"
_CHILDREN: Final = (
    "SELECT child.id FROM sessions AS child JOIN sessions AS parent ON child.base_key = parent.key "
    "WHERE parent.id = ? ORDER BY child.key"
)
_ROWS_FROM: Final = f"SELECT {_ROW_COLUMNS} FROM events WHERE session = ? AND seq >= ? ORDER BY seq"
_ROWS_RANGE: Final = (
    f"SELECT {_ROW_COLUMNS} FROM events WHERE session = ? AND seq >= ? AND seq < ? ORDER BY seq"
)
_PACKED_BEFORE: Final = (
    f"SELECT {_ROW_COLUMNS} FROM events WHERE session = ? AND seq >= ? AND seq < ? AND ignorable = 0 "
    "ORDER BY seq"
)
_TAIL: Final = f"SELECT {_ROW_COLUMNS} FROM events WHERE session = ? ORDER BY seq DESC LIMIT 2"
_INSERT_ROW: Final = (
    "INSERT INTO events (session, seq, type, time, data, source_event_seqs, surface_op, ignorable, "
    "op_first) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_DELETE_ROWS_FROM: Final = "DELETE FROM events WHERE session = ? AND seq >= ?"

_CORRUPT: Final = "corrupt session log"
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_JOURNAL_RETRY_S: Final = 0.010
_MAX_BUSY_MS: Final = 2_147_483_647
_CACHE_SIZE: Final = 5

Row: TypeAlias = tuple[Any, ...]
"""One physical row: seq, type, time, data, source_event_seqs, surface_op, ignorable, op_first."""


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


def _data_value(raw: bytes, compressor: zstandard.ZstdCompressor) -> str | bytes:
    """TEXT for JSON under ``COMPRESS_AT`` bytes or when zstd does not make it smaller, else a BLOB."""
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
                record[1], kind, record[2], _data_value(dumps(record[3]), compressor),
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
    reader = zstandard.ZstdDecompressor().decompressobj()
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


def _writers(segments: Sequence[tuple[int, int, list[Row], str]], own_start: int,
             session_id: str) -> list[tuple[int, str]]:
    """``StoredLog.writers`` of a fork chain read as ``_prefix_rows`` segments."""
    shared = [(start, writer) for start, _limit, _rows, writer in segments]
    return chain_writers(shared, own_start, session_id)


def _why(exc: BaseException) -> str:
    return exc.detail if isinstance(exc, AgentlogError) else str(exc)


def _try_decode(row: Row) -> list[Event] | str:
    """The row's events, or why it does not decode."""
    try:
        return decode_physical_row(row)
    except _ROW_ERRORS as exc:
        return _why(exc)


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
            result = _try_decode(row)
            if isinstance(result, list):
                decoded[index] = result
                committed = index
                break
    events: list[Event] = []
    expected = start
    for index, row in enumerate(rows):
        result = decoded.pop(index, None) or _try_decode(row)
        if isinstance(result, list) and result[0][1] != expected:
            result = f"rows are not contiguous: expected seq {expected}"
        if isinstance(result, str):
            if index > committed:
                return RowScan(events, row[0])
            raise SessionCorruptionError(
                f"{_CORRUPT}: invalid committed physical row at seq {row[0]}: {result}", seq=row[0]
            )
        events.extend(result)
        expected = result[-1][1] + 1
    return RowScan(events)


def _scan_prefix(rows: Sequence[Row], start: int, limit: int) -> list[Event]:
    """Events ``[start, limit)`` of a referenced parent prefix: every defect is corruption."""
    events: list[Event] = []
    expected = start
    for row in rows:
        result = _try_decode(row)
        if isinstance(result, list) and result[0][1] != expected:
            result = f"rows are not contiguous: expected seq {expected}"
        if isinstance(result, str):
            raise SessionCorruptionError(
                f"{_CORRUPT}: invalid physical row at seq {row[0]} of a shared fork prefix: {result}",
                seq=row[0],
            )
        events.extend(event for event in result if event[1] < limit)
        expected = result[-1][1] + 1
    if expected < limit:
        raise SessionCorruptionError(
            f"fork parent no longer holds the {limit} events this fork shares (rows end at seq {expected})"
        )
    return events


def _scan_suffix(rows: Sequence[Row], base: int, from_seq: int) -> list[Event]:
    """Events with ``seq >= from_seq`` of a seek read, from rows starting at ``base``: the valid
    contiguous run only (reading stops silently at the first defective or non-contiguous row)."""
    events: list[Event] = []
    expected = base
    for row in rows:
        result = _try_decode(row)
        if isinstance(result, str) or result[0][1] != expected:
            break
        expected = result[-1][1] + 1
        if result[0][1] >= from_seq:
            events.extend(result)
        else:
            events.extend(event for event in result if event[1] >= from_seq)
    return events


# -- session rows (pure) ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Info:
    """A stored session row: header, own key, shared prefix reference and revision parts."""

    header: SessionHeader
    key: int
    base_key: int | None
    base_length: int | None
    incarnation: str
    revision: int

    @property
    def start(self) -> int:
        """The first seq of the session's own rows."""
        return self.base_length or 0


def _bad_metadata(session_id: object, why: str) -> NoReturn:
    sid = session_id if type(session_id) is str else None
    raise SessionCorruptionError(f"{_CORRUPT}: invalid stored metadata row: {why}", session_id=sid)


def _optional(value: object, kind: type, session_id: object, name: str) -> None:
    if value is not None and type(value) is not kind:
        _bad_metadata(session_id, f"{name} must be NULL or {kind.__name__}")


def _session_info(row: Row) -> _Info:
    """Validate a ``sessions`` row (§5.11) and build its header."""
    (key, sid, version, created_at, cwd, parent, seed_length, origin, depth, preset, extra,
     base_key, base_length, incarnation, revision) = row
    if type(sid) is not str or not sid:
        _bad_metadata(None, "id must be a non-empty string")
    if type(key) is not int:
        _bad_metadata(sid, "key must be an integer")
    if type(version) is not int:
        _bad_metadata(sid, "version must be an integer")
    if version != FORMAT_VERSION:
        newer = version > FORMAT_VERSION
        raise SessionFormatUnsupportedError(
            f"uses log format v{version}, but this build reads only v{FORMAT_VERSION}; "
            + ("it was written by a newer agentlog or DSH — upgrade agentlog" if newer else
               "it is older than the supported v0, and this build ships no upgrade path"),
            session_id=sid,
        )
    for value, kind, name in ((created_at, int, "created_at"), (cwd, str, "cwd"),
                              (parent, str, "parent_session"), (seed_length, int, "seed_length"),
                              (origin, str, "origin"),
                              (depth, int, "delegation_depth"), (preset, str, "agent_preset"),
                              (extra, str, "extra"), (base_key, int, "base_key"),
                              (base_length, int, "base_length")):
        _optional(value, kind, sid, name)
    if created_at is None:
        _bad_metadata(sid, "created_at must be an integer")
    if base_length is not None and (base_length < 0 or base_key is None):
        _bad_metadata(sid, "base_length must be non-negative and come with base_key")
    if type(incarnation) is not str or not _is_uuid(incarnation):
        _bad_metadata(sid, "incarnation must be a UUID")
    if type(revision) is not int or revision < 0:
        _bad_metadata(sid, "revision must be a non-negative integer")
    extras: Any = {}
    if extra is not None:
        try:
            extras = loads(extra)
        except ValueError:
            _bad_metadata(sid, "extra is not JSON")
        if type(extras) is not dict:
            _bad_metadata(sid, "extra must be a JSON object")
    try:
        header = SessionHeader(id=sid, created_at=created_at, cwd=cwd, parent_session=parent,
                               seed_length=seed_length, origin=origin, delegation_depth=depth,
                               agent_preset=preset, extra=extras)
    except InvalidHeaderError as exc:
        _bad_metadata(sid, exc.detail)
    return _Info(header, key, base_key, base_length, incarnation, revision)


def _header_values(header: SessionHeader) -> tuple[Any, ...]:
    extra = dumps(header.extra).decode("utf-8") if header.extra else None
    return (header.id, header.version, header.created_at, header.cwd, header.parent_session,
            header.seed_length, header.origin, header.delegation_depth, header.agent_preset, extra)


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def _normalized(sql: object) -> object:
    return re.sub(r"\s+", " ", sql).strip() if type(sql) is str else sql


def _refuse_unknown(events: Sequence[Event], session_id: str) -> None:
    """Seek reads check the vocabulary of the returned suffix only (§1.9)."""
    for event in events:
        if event[0] not in STORED_EVENT_TYPES and not event[6]:
            raise SessionFormatUnsupportedError(
                f"event type {event[0]!r} at seq {event[1]} is not marked ignorable; "
                "it was likely written by a newer agentlog or DSH",
                session_id=session_id, seq=event[1],
            )


# -- sqlite3 errors -----------------------------------------------------------------------------------

_SQLITE_BUSY: Final = 5
_SQLITE_LOCKED: Final = 6
_SQLITE_CORRUPT: Final = 11
_SQLITE_NOTADB: Final = 26
_IO_CODES: Final = frozenset({3, 8, 9, 10, 13, 14, 15, 22, 23})
"""PERM, READONLY, INTERRUPT, IOERR, FULL, CANTOPEN, PROTOCOL, NOLFS, AUTH."""


def _primary(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if type(code) is int else None


def _translate(exc: sqlite3.Error, *, session_id: str | None, file: str | None,
               busy_ms: int) -> AgentlogError:
    """The most specific agentlog error for a ``sqlite3`` error (callers chain the original)."""
    primary = _primary(exc)
    code = getattr(exc, "sqlite_errorname", None)
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return PersistenceIOError(
            f"the database stayed locked by another connection for longer than busy_timeout_ms={busy_ms} "
            f"({exc}); retry, or raise busy_timeout_ms", session_id=session_id, file=file, code=code)
    if primary in _IO_CODES:
        return PersistenceIOError(f"database I/O failed: {exc}", session_id=session_id, file=file, code=code)
    if primary == _SQLITE_CORRUPT:
        return SessionCorruptionError(f"{_CORRUPT}: the database file is damaged ({exc})",
                                      session_id=session_id, file=file, code=code)
    if primary == _SQLITE_NOTADB:
        return StoreError(f"not an agentlog SQLite database ({exc})", session_id=session_id, file=file,
                          code=code)
    return StoreError(f"SQLite failed: {exc}", session_id=session_id, file=file, code=code)


# -- locks ---------------------------------------------------------------------------------------------


class _MemoryLock(WriterLock):
    """A lock of a ``:memory:`` store: a member of the store's in-process set."""

    def __init__(self, held: set[str], guard: threading.Lock, session_id: str) -> None:
        self._held, self._guard, self._session_id = held, guard, session_id
        self._active = True

    def release(self) -> None:
        with self._guard:
            if self._active:
                self._active = False
                self._held.discard(self._session_id)


# -- the store -------------------------------------------------------------------------------------------


class SqliteStore(Store):
    """Sessions in one SQLite database file (or ``:memory:``), opened lazily on first use."""

    name = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        write_delay_ms: int = DEFAULT_WRITE_DELAY_MS,
        busy_timeout_ms: int = 5000,
        journal_mode: str = "wal",
    ) -> None:
        super().__init__(write_delay_ms=write_delay_ms)
        raw = os.fspath(path)
        if type(raw) is not str or not raw:
            raise ValueError(f"path must be a non-empty str or os.PathLike[str], got {path!r}")
        if "\0" in raw:
            raise ValueError("the database path contains a NUL character")
        if type(busy_timeout_ms) is not int or not 0 <= busy_timeout_ms <= _MAX_BUSY_MS:
            raise ValueError(f"busy_timeout_ms must be an integer between 0 and {_MAX_BUSY_MS}, "
                             f"got {busy_timeout_ms!r}")
        if journal_mode not in JOURNAL_MODES:
            raise ValueError(f"journal_mode must be one of {', '.join(JOURNAL_MODES)}, got {journal_mode!r}")
        self.memory = raw == ":memory:"
        self.path = raw if self.memory else os.path.abspath(raw)
        self.busy_timeout_ms = busy_timeout_ms
        self.journal_mode = journal_mode
        self._db_lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._reference: list[tuple[Any, ...]] | None = None
        self._schema_cookie: int | None = None
        self._revision_prefix = ""
        self._cache: OrderedDict[str, tuple[str, StoredLog]] = OrderedDict()
        self._memory_locks: set[str] = set()
        self._memory_guard = threading.Lock()

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r}, journal_mode={self.journal_mode!r})"

    # -- connection ------------------------------------------------------------------------------------

    @property
    def _file(self) -> str | None:
        return None if self.memory else self.path

    @contextlib.contextmanager
    def _translated(self, session_id: str | None) -> Iterator[None]:
        """Map every ``sqlite3`` error (and an unencodable id) to an agentlog error."""
        try:
            yield
        except sqlite3.Error as exc:
            raise _translate(exc, session_id=session_id, file=self._file,
                             busy_ms=self.busy_timeout_ms) from exc
        except UnicodeEncodeError as exc:
            raise InvalidHeaderError("session ids and header strings must be valid Unicode (no lone "
                                     "surrogates) to be stored in SQLite", session_id=session_id) from exc

    def _connection(self) -> sqlite3.Connection:
        """The open connection (caller holds ``_db_lock``), opening and checking the file first."""
        self._check_open()
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        started = time.monotonic()
        if self.memory:
            target, uri = ":memory:", False
        else:
            self._prepare_path()
            target, uri = f"file:{quote(self.path)}?mode=rw", True
        conn = sqlite3.connect(target, timeout=self.busy_timeout_ms / 1000, isolation_level=None,
                               check_same_thread=False, uri=uri)
        try:
            self._configure(conn, started)
        except BaseException:
            conn.close()
            raise
        return conn

    def _prepare_path(self) -> None:
        """Spec §5.2-§5.3: a private parent directory, then the file created exclusively (0600)."""
        parent = os.path.dirname(self.path)
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
            info = os.lstat(parent)
        except OSError as exc:
            raise PersistenceIOError(f"cannot create the database directory: {exc}", file=self.path) from exc
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise StoreError(f"the database directory {parent} is not a real directory (symlink or file)",
                             file=self.path)
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise StoreError(f"the database directory {parent} must be owned by the current user and not "
                             "group- or world-writable (chmod 700)", file=self.path)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            os.close(fd)
        except FileExistsError:
            pass
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EISDIR):
                raise PersistenceIOError(f"cannot create the database file: {exc}", file=self.path) from exc
        try:
            info = os.lstat(self.path)
        except OSError as exc:
            raise PersistenceIOError(f"cannot inspect the database file: {exc}", file=self.path) from exc
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
            raise StoreError("the database path is not a regular file (symlink or directory)", file=self.path)
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise StoreError("the database file must be owned by the current user with no group or other "
                             "permissions (chmod 600)", file=self.path)
        self._revision_prefix = f"sqlite:{info.st_dev}:{info.st_ino}:"

    def _configure(self, conn: sqlite3.Connection, started: float) -> None:
        """Spec §5.3, in order: hardening pragmas, schema identity, journal mode, synchronous, store id."""
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("PRAGMA mmap_size = 0")
        if conn.execute("PRAGMA trusted_schema").fetchone()[0] != 0 or (
            not self.memory and conn.execute("PRAGMA mmap_size").fetchone()[0] != 0
        ):
            raise StoreError("SQLite refused trusted_schema=OFF or mmap_size=0", file=self._file)
        conn.execute("PRAGMA foreign_keys = ON")
        self._ensure_schema(conn)
        self._set_journal_mode(conn, started)
        conn.execute("PRAGMA synchronous = FULL")
        if conn.execute("PRAGMA synchronous").fetchone()[0] != 2:
            raise StoreError("SQLite refused synchronous=FULL", file=self._file)
        row = conn.execute(_SELECT_STORE_ID).fetchone()
        if row is None or type(row[0]) is not str or not _is_uuid(row[0]):
            raise StoreError("the database has no valid store identity", file=self._file)
        if self.memory:
            self._revision_prefix = "memory:"
        self._revision_prefix += f"store:{row[0]}:"

    def _reference_objects(self) -> list[tuple[Any, ...]]:
        """The schema objects a correct database holds, built from ``SCHEMA`` in a throwaway database."""
        if self._reference is None:
            scratch = sqlite3.connect(":memory:")
            try:
                for statement in SCHEMA:
                    scratch.execute(statement)
                rows = scratch.execute(_OBJECTS).fetchall()
            finally:
                scratch.close()
            self._reference = [tuple(_normalized(part) for part in row) for row in rows]
        return self._reference

    def _check_identity(self, conn: sqlite3.Connection, *, mutation: bool) -> None:
        """Refuse a foreign or changed database (application id, schema version, schema objects)."""
        user_version, application_id, cookie = conn.execute(_IDENTITY).fetchone()
        when = " (changed before mutation)" if mutation else ""
        if application_id == DSH_APPLICATION_ID:
            raise SessionFormatUnsupportedError(
                f"the database is a DeepSeek Harness store (application id {application_id}, schema version "
                f"{user_version}){when}; agentlog's SQLite store has its own schema: use a separate file",
                file=self._file)
        if application_id != APPLICATION_ID:
            raise StoreError(f"the database has application id {application_id}, not agentlog's "
                             f"{APPLICATION_ID}{when}: it belongs to another application", file=self._file)
        if user_version != USER_VERSION:
            raise SessionFormatUnsupportedError(
                f"the database uses agentlog SQLite schema version {user_version}, which is incompatible "
                f"with this build ({USER_VERSION}){when}; "
                + ("it was written by a newer agentlog — upgrade agentlog" if user_version > USER_VERSION
                   else "this build ships no migration"), file=self._file)
        if cookie != self._schema_cookie:
            objects = [tuple(_normalized(part) for part in row) for row in conn.execute(_OBJECTS)]
            if objects != self._reference_objects():
                raise StoreError(f"the database lacks the required schema objects or has extra ones{when} "
                                 "(its tables, columns, indexes, triggers and views must match agentlog's)",
                                 file=self._file)
            self._schema_cookie = cookie

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        """Create the schema in a pristine database (one transaction), then check the identity."""
        conn.execute("BEGIN")
        try:
            user_version, application_id, _ = conn.execute(_IDENTITY).fetchone()
            objects = conn.execute(_OBJECTS).fetchall()
        finally:
            conn.execute("COMMIT")
        if user_version == 0 and application_id == 0 and not objects:
            conn.execute("BEGIN IMMEDIATE")
            try:
                user_version, application_id, _ = conn.execute(_IDENTITY).fetchone()
                objects = conn.execute(_OBJECTS).fetchall()
                if user_version == 0 and application_id == 0 and not objects:
                    for statement in SCHEMA:
                        conn.execute(statement)
                    conn.execute(_INSERT_STORE_ID, (str(uuid.uuid4()),))
                    for statement in _STAMP:
                        conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            user_version, application_id, _ = conn.execute(_IDENTITY).fetchone()
            objects = conn.execute(_OBJECTS).fetchall()
        if user_version == 0 and (application_id != 0 or objects):
            raise StoreError(
                f"the database has an unversioned schema or application identity (application id "
                f"{application_id}, {len(objects)} schema objects): not an agentlog database",
                file=self._file)
        self._check_identity(conn, mutation=False)

    def _set_journal_mode(self, conn: sqlite3.Connection, started: float) -> None:
        """Switch the journal mode, retrying SQLITE_BUSY every 10 ms until the busy budget is spent."""
        deadline = started + self.busy_timeout_ms / 1000
        while True:
            try:
                mode = conn.execute(JOURNAL_MODES[self.journal_mode]).fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if _primary(exc) != _SQLITE_BUSY or time.monotonic() + _JOURNAL_RETRY_S > deadline:
                    raise
                time.sleep(_JOURNAL_RETRY_S)
        expected = "memory" if self.memory else self.journal_mode
        if str(mode).lower() != expected:
            raise StoreError(f"SQLite kept journal mode {mode!r} instead of {expected!r}", file=self._file)

    # -- transactions ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self, session_id: str | None = None) -> Iterator[sqlite3.Connection]:
        """A deferred read transaction (a consistent snapshot; in WAL mode it never waits for writers)."""
        with self._db_lock, self._translated(session_id):
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    @contextlib.contextmanager
    def _writing(self, session_id: str | None) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` with the identity re-checked; commit, or roll back on any error."""
        with self._db_lock, self._translated(session_id):
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._check_identity(conn, mutation=True)
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                self._rollback(conn, exc, session_id)
                raise
            finally:
                self._cache.pop(session_id or "", None)

    def _rollback(self, conn: sqlite3.Connection, cause: BaseException, session_id: str | None) -> None:
        if not conn.in_transaction:
            return
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error as failure:
            detail = _why(cause) if isinstance(cause, AgentlogError) else str(cause)
            raise PersistenceIOError(f"{detail}; rolling back also failed: {failure}", session_id=session_id,
                                     file=self._file) from cause

    def _revision(self, info: _Info) -> str:
        return f"{self._revision_prefix}incarnation:{info.incarnation}:revision:{info.revision}"

    # -- reading ---------------------------------------------------------------------------------------

    def _info(self, conn: sqlite3.Connection, session_id: str) -> _Info | None:
        row = conn.execute(_SELECT_SESSION, (session_id,)).fetchone()
        try:
            return None if row is None else _session_info(row)
        except AgentlogError as exc:  # a damaged session row: name the database it is in
            raise exc.locate(file=self._file) from None

    def _prefix_rows(self, conn: sqlite3.Connection, info: _Info) -> list[tuple[int, int, list[Row], str]]:
        """Rows of the parent prefixes a fork chain shares, oldest first: (start, limit, rows, writer id)."""
        segments: list[tuple[int, int, list[Row], str]] = []
        limit = info.start
        base_key = info.base_key
        seen = {info.key}
        while base_key is not None:
            row = conn.execute(_SELECT_SESSION_BY_KEY, (base_key,)).fetchone()
            if row is None or base_key in seen:
                raise SessionCorruptionError("fork parent reference is missing or circular",
                                             session_id=info.header.id, file=self._file)
            seen.add(base_key)
            parent = _session_info(row)
            start = parent.start
            if start < limit:
                rows = conn.execute(_ROWS_RANGE, (base_key, start, limit)).fetchall()
                segments.append((start, limit, rows, parent.header.id))
            limit = min(limit, start)
            base_key = parent.base_key
        segments.reverse()
        return segments

    def _load_stored(self, session_id: str) -> StoredLog | None:
        with self._reading(session_id) as conn:
            info = self._info(conn, session_id)
            if info is None:
                return None
            revision = self._revision(info)
            cached = self._cache.get(session_id)
            if cached is not None and cached[0] == revision:
                self._cache.move_to_end(session_id)
                stored = cached[1]
                return StoredLog(stored.header, stored.events, revision, stored.torn,
                                 writers=list(stored.writers))  # events: an immutable tuple, shared
            segments = self._prefix_rows(conn, info)
            rows = conn.execute(_ROWS_FROM, (info.key, info.start)).fetchall()
        events: list[Event] = []
        writers = _writers(segments, info.start, session_id)
        try:
            for start, limit, prefix, _writer in segments:
                events.extend(_scan_prefix(prefix, start, limit))
            scan = scan_rows(rows, info.start)
        except SessionCorruptionError as exc:
            raise exc.locate(session_id=session_id, file=self._file) from None
        events.extend(scan.events)
        torn = None if scan.torn is None else (scan.torn, revision)
        stored = StoredLog(info.header, tuple(events), revision, torn, writers=writers)
        with self._db_lock:
            self._cache[session_id] = (revision, stored)
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return StoredLog(info.header, stored.events, revision, torn, writers=list(writers))

    def _load_stored_from(self, session_id: str, from_seq: int) -> StoredLog | None:
        """Seek read (§5.9): only rows from the one holding ``from_seq`` on are read and decoded."""
        with self._reading(session_id) as conn:
            info = self._info(conn, session_id)
            if info is None:
                return None
            if from_seq < info.start:
                segments = self._prefix_rows(conn, info)
                rows = conn.execute(_ROWS_FROM, (info.key, info.start)).fetchall()
                base = info.start
            else:
                segments = []
                base = from_seq
                low = max(info.start, from_seq - (SQLITE_MAX_MEMBERS - 1))
                for row in conn.execute(_PACKED_BEFORE, (info.key, low, from_seq)).fetchall():
                    result = _try_decode(row)
                    if isinstance(result, str) or result[-1][1] >= from_seq:
                        base = row[0]
                        break
                rows = conn.execute(_ROWS_FROM, (info.key, base)).fetchall()
        events: list[Event] = []
        try:
            for start, limit, prefix, _writer in segments:
                events.extend(_scan_prefix(prefix, start, limit))
        except SessionCorruptionError as exc:
            raise exc.locate(session_id=session_id, file=self._file) from None
        del events[:from_seq]
        events.extend(_scan_suffix(rows, base, from_seq))
        _refuse_unknown(events, session_id)
        return StoredLog(info.header, events, self._revision(info),
                         writers=_writers(segments, info.start, session_id))

    def _stored_exists(self, session_id: str) -> bool:
        with self._reading(session_id) as conn:
            return conn.execute(_SESSION_EXISTS, (session_id,)).fetchone() is not None

    def _list_snapshots(self) -> list[Snapshot]:
        with self._reading() as conn:
            rows = conn.execute(_LIST_SESSIONS).fetchall()
        snapshots = []
        for row in rows:
            try:
                info = _session_info(row)
            except AgentlogError as exc:  # a damaged session row: name the database it is in
                raise exc.locate(file=self._file) from None
            snapshots.append(Snapshot(info.header, self._revision(info)))
        return snapshots

    # -- writing ---------------------------------------------------------------------------------------

    def _tail_next(self, conn: sqlite3.Connection, info: _Info) -> int:
        """The stored next seq, from the last two physical rows (a defective tail refuses appends).

        Unlike DSH this does not look further back for a packed row overlapping them: only a
        foreign write can make one, and the full read that precedes any resumed write catches it.
        """
        rows = conn.execute(_TAIL, (info.key,)).fetchall()
        if not rows:
            return info.start
        rows.reverse()
        expected = None
        for row in rows:
            result = _try_decode(row)
            if isinstance(result, list) and expected is not None and result[0][1] != expected:
                result = f"rows are not contiguous: expected seq {expected}"
            if isinstance(result, str):
                raise SessionCorruptionError(
                    f"{_CORRUPT}: invalid physical tail at seq {row[0]}: {result}; load the session to "
                    "repair it", session_id=info.header.id, seq=row[0], file=self._file)
            expected = result[-1][1] + 1
        assert expected is not None
        return int(expected)

    def _insert_session(self, conn: sqlite3.Connection, header: SessionHeader,
                        base_key: int | None = None, base_length: int | None = None) -> int:
        if conn.execute(_SESSION_EXISTS, (header.id,)).fetchone() is not None:
            raise SessionExistsError("session already has a persisted log", session_id=header.id)
        cursor = conn.execute(_INSERT_SESSION, (*_header_values(header), base_key, base_length,
                                                str(uuid.uuid4())))
        key = cursor.lastrowid
        assert key is not None
        return key

    def _append_batch(self, header: SessionHeader, events: Sequence[Event], *, materialize: bool) -> None:
        rows = encode_rows(events)
        sid = header.id
        with self._writing(sid) as conn:
            if materialize:
                key, next_seq = self._insert_session(conn, header), 0
            else:
                info = self._info(conn, sid)
                if info is None:
                    raise ConcurrentWriterError("the stored session vanished (another process deleted it)",
                                                session_id=sid)
                key, next_seq = info.key, self._tail_next(conn, info)
            if events[0].seq != next_seq:
                raise ConcurrentWriterError(
                    f"append seq mismatch: stored next seq is {next_seq}, batch starts at {events[0].seq} "
                    "(another writer appended first)", session_id=sid, seq=events[0].seq)
            conn.executemany(_INSERT_ROW, [(key, *row) for row in rows])
            conn.execute(_BUMP_REVISION, (key,))

    def _commit_repair(self, header: SessionHeader, torn: Any, events: Sequence[Event]) -> None:
        """Truncate the torn tail seen by the read, append closers; refused as stale if the log changed.

        The torn marker carries the revision it was read at, so staleness needs no rescan.
        """
        rows = encode_rows(events)
        sid = header.id
        with self._writing(sid) as conn:
            info = self._info(conn, sid)
            if info is None:
                raise SessionCorruptionError("repair refused: the session metadata row is missing",
                                             session_id=sid)
            if torn is not None:
                marker, seen = torn
                if self._revision(info) != seen:
                    raise ConcurrentWriterError(
                        f"repair is stale: the log changed since its torn tail at seq {marker} was read",
                        session_id=sid, seq=marker)
                conn.execute(_DELETE_ROWS_FROM, (info.key, marker))
            next_seq = self._tail_next(conn, info)
            if events and events[0].seq != next_seq:
                raise ConcurrentWriterError(
                    f"repair is stale: closer starts at seq {events[0].seq}, but the stored log continues at "
                    f"seq {next_seq}", session_id=sid, seq=events[0].seq)
            conn.executemany(_INSERT_ROW, [(info.key, *row) for row in rows])
            conn.execute(_BUMP_REVISION, (info.key,))

    def _write_fork_prefix(self, header: SessionHeader, prefix: Sequence[Event], state: _State,
                           suffix: Sequence[Event] = ()) -> None:
        """Materialize the child as a reference to its parent's prefix: one row, whatever the length."""
        if not prefix:
            return
        with self._writing(header.id) as conn:
            parent = self._info(conn, header.parent_session or "")
            if parent is None:
                raise SessionNotFoundError("fork parent has no stored log", session_id=header.parent_session)
            key = self._insert_session(conn, header, parent.key, len(prefix))
            conn.execute(_BUMP_REVISION, (key,))
        state.materialized = True
        state.cursor = len(prefix)

    def materialize(self, session_id: str) -> None:
        """Copy a fork child's shared prefix into its own rows (the parent may then be deleted)."""
        self._check_open()
        with self._serialized(session_id):
            if session_id in self._live:
                raise UsageError("cannot materialize a live session; close it first", session_id=session_id)
            with self._writing(session_id) as conn:
                info = self._info(conn, session_id)
                if info is None:
                    raise SessionNotFoundError("session not found", session_id=session_id)
                if info.base_key is None:
                    return
                events: list[Event] = []
                segments = self._prefix_rows(conn, info)
                try:
                    for start, limit, prefix, _writer in segments:
                        events.extend(_scan_prefix(prefix, start, limit))
                except SessionCorruptionError as exc:
                    raise exc.locate(session_id=session_id, file=self._file) from None
                # The copy holds the prefix as its writers' sessions read it (legacy ids named after them).
                writers = _writers(segments, info.start, session_id)
                copied = resolve_entries(upgrade_legacy_chain(session_id, events, writers))
                conn.executemany(_INSERT_ROW, [(info.key, *row) for row in encode_rows(copied)])
                conn.execute(_CLEAR_BASE, (info.key,))
                conn.execute(_BUMP_REVISION, (info.key,))

    # -- locks, children, deletion ---------------------------------------------------------------------------

    def _lock_path(self, session_id: str) -> Path:
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]
        return Path(f"{self.path}.locks") / digest

    def _acquire_writer_lock(self, session_id: str) -> WriterLock:
        self._check_open()
        if self.memory:
            with self._memory_guard:
                if session_id in self._memory_locks:
                    raise SessionLockedError(f"session is open for writing by process {os.getpid()}",
                                             session_id=session_id, pid=os.getpid())
                self._memory_locks.add(session_id)
            return _MemoryLock(self._memory_locks, self._memory_guard, session_id)
        return lock_session_file(self._lock_path(session_id), session_id)

    def _children_of(self, session_id: str) -> list[str]:
        with self._reading(session_id) as conn:
            return [row[0] for row in conn.execute(_CHILDREN, (session_id,))]

    def _delete_stored(self, session_id: str) -> None:
        try:
            with self._writing(session_id) as conn:
                info = self._info(conn, session_id)
                if info is not None:
                    conn.execute(_DELETE_SESSION, (info.key,))
        except StoreError as exc:
            if isinstance(exc.__cause__, sqlite3.IntegrityError):
                raise UsageError("cannot delete: fork children reference this session (a fork was created "
                                 "meanwhile)", session_id=session_id) from exc.__cause__
            raise
        if not self.memory:  # we hold its lock: a waiting opener re-checks the inode and retries
            with contextlib.suppress(OSError):
                os.unlink(self._lock_path(session_id))

    def _close_backend(self) -> None:
        with self._db_lock:
            conn, self._conn = self._conn, None
            self._cache.clear()
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
