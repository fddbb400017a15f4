"""Storage records: packed chunk rows and the JSONL line codec (spec session-core §12, persistence §4.3-§4.4).

A durable batch is stored as records, one per line: events verbatim, except that each run of
three or more consecutive, whitelisted ``assistant/chunk`` deltas of one block becomes one
packed row. Reading is layout-blind: packed and unpacked lines decode to the same events.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import accumulate, pairwise
from math import copysign
from typing import Any, Final, NoReturn, TypeAlias, cast

import orjson

from agentlog.core.events import ASSISTANT_CHUNK, Event
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER, loads, valid_text
from agentlog.core.packed import ChunkRun, LogEntry, slots_of
from agentlog.errors import InvalidEventError, SessionCorruptionError

__all__ = [
    "MIN_RUN",
    "REASONING_ROW",
    "ROW_TAGS",
    "SQLITE_MAX_BYTES",
    "SQLITE_MAX_MEMBERS",
    "TEXT_ROW",
    "TOOL_CALL_ROW",
    "StorageRecord",
    "decode_line",
    "decode_line_entry",
    "decode_row",
    "decode_row_run",
    "decode_storage_record",
    "encode_batch",
    "encode_records",
    "pack_chunk_runs",
]

TEXT_ROW: Final = "text-chunks"
REASONING_ROW: Final = "reasoning-chunks"
TOOL_CALL_ROW: Final = "tool-call-chunks"
ROW_TAGS: Final = frozenset({TEXT_ROW, REASONING_ROW, TOOL_CALL_ROW})
"""Type tags of packed rows; a logical event with one of these types cannot be stored in JSONL."""

MIN_RUN: Final = 3
"""Fewest members a writer packs (a format constant; readers accept any non-empty row)."""

SQLITE_MAX_MEMBERS: Final = 1024
SQLITE_MAX_BYTES: Final = 1_048_576
"""SQLite row caps (persistence §5.5): members per row, UTF-8 bytes of the row's serialized data."""

StorageRecord: TypeAlias = "Event | dict[str, Any]"
"""One stored line's value: an ``Event`` verbatim, or a packed row (a plain dict)."""

_MAX: Final = MAX_SAFE_INTEGER
_TEXT_DELTA: Final = "text-delta"
_REASONING_DELTA: Final = "reasoning-delta"
_TOOL_CALL_DELTA: Final = "tool-call-delta"
_TAG_OF_KIND: Final = {
    _TEXT_DELTA: TEXT_ROW, _REASONING_DELTA: REASONING_ROW, _TOOL_CALL_DELTA: TOOL_CALL_ROW,
}

_DATA_KEYS: Final = ("turn", "step", "chunk")
_TEXT_KEYS: Final = ("type", "index", "text")
_CALL_KEYS: Final = ("type", "index", "id", "argumentsDelta")
_NAMED_CALL_KEYS: Final = ("type", "index", "id", "name", "argumentsDelta")

_ROW_ENVELOPE: Final = frozenset({"type", "seq0", "time0", "data"})
_TEXT_ROW_KEYS: Final = frozenset({"turn", "step", "index", "dt", "texts"})
_CALL_ROW_KEYS: Final = frozenset({"turn", "step", "index", "dt", "id", "args"})
_NAMED_CALL_ROW_KEYS: Final = _CALL_ROW_KEYS | {"name"}

_RunKey: TypeAlias = tuple[Any, ...]


def _is_number(value: object) -> bool:
    """A lossless JSON number: a safe ``int`` (never ``bool``) or a finite ``float`` other than -0.0."""
    kind = type(value)
    if kind is int:
        return -_MAX <= value <= _MAX  # type: ignore[operator]
    if kind is float:
        return value - value == 0.0 and (value != 0.0 or copysign(1.0, value) > 0)  # type: ignore[operator]
    return False


# -- packing ----------------------------------------------------------------------------


def _member(event: Event) -> tuple[_RunKey, str] | None:
    """The run key and payload of a packable chunk event (K1), or None to store it verbatim.

    Key orders must be DSH's canonical ones, so that expanding the row rebuilds the event
    byte for byte. Number types are part of the key: ``1`` and ``1.0`` never share a run.
    """
    if event[0] != ASSISTANT_CHUNK or event[4] is not None or event[5] is not None or event[6]:
        return None
    seq, time, data = event[1], event[2], event[3]
    if type(seq) is not int or not 0 <= seq <= _MAX or type(time) is not int or not -_MAX <= time <= _MAX:
        return None
    if not isinstance(data, dict) or tuple(data) != _DATA_KEYS:
        return None
    turn, step, chunk = data["turn"], data["step"], data["chunk"]
    if not isinstance(chunk, dict):
        return None
    # ``type(x) is int`` first: the common case, and events from a Session hold only safe ints.
    if (type(turn) is not int and not _is_number(turn)) or (type(step) is not int and not _is_number(step)):
        return None
    kind, index = chunk.get("type"), chunk.get("index")
    if type(index) is not int and not _is_number(index):
        return None
    keys = tuple(chunk)
    if keys == _TEXT_KEYS and kind in (_TEXT_DELTA, _REASONING_DELTA):
        text = chunk["text"]
        if type(text) is not str:
            return None
        return (kind, type(turn), turn, type(step), step, type(index), index), text
    if kind == _TOOL_CALL_DELTA and keys in (_CALL_KEYS, _NAMED_CALL_KEYS):
        call_id, args, name = chunk["id"], chunk["argumentsDelta"], chunk.get("name")
        named = len(keys) == 5
        if type(call_id) is not str or type(args) is not str or (named and type(name) is not str):
            return None
        return (kind, type(turn), turn, type(step), step, type(index), index, call_id, named, name), args
    return None


def _run_key(run: ChunkRun) -> _RunKey:
    """The run key ``_member`` gives each member of a packed run (K1)."""
    _times, turn, step, index, kind, _payload, call_id, named, name = run.parts()
    if kind == _TOOL_CALL_DELTA:
        return (kind, type(turn), turn, type(step), step, type(index), index, call_id, named, name)
    return (kind, type(turn), turn, type(step), step, type(index), index)


def _row(key: _RunKey, seq0: int, times: Sequence[int], payloads: Sequence[str], start: int,
         stop: int) -> dict[str, Any]:
    """The packed row for members ``start..stop`` of a run (K3), keys in DSH's write order."""
    kind = key[0]
    body: dict[str, Any] = {
        "turn": key[2],
        "step": key[4],
        "index": key[6],
        "dt": [later - earlier for earlier, later in pairwise(times[start:stop])],
    }
    if kind == _TOOL_CALL_DELTA:
        body["id"] = key[7]
        if key[8]:
            body["name"] = key[9]
        body["args"] = list(payloads[start:stop])
    else:
        body["texts"] = list(payloads[start:stop])
    return {"type": _TAG_OF_KIND[kind], "seq0": seq0 + start, "time0": times[start], "data": body}


_Source: TypeAlias = "Event | tuple[ChunkRun, int, int]"


class _Run:
    """The run being gathered: its key, first seq, members' times and payloads, and where they
    came from (events, or spans of packed runs), so a run too short to pack is stored verbatim."""

    __slots__ = ("key", "next_seq", "payloads", "seq0", "sources", "times")

    def __init__(self, key: _RunKey, seq0: int) -> None:
        self.key = key
        self.seq0 = seq0
        self.next_seq = seq0
        self.times: list[int] = []
        self.payloads: list[str] = []
        self.sources: list[_Source] = []

    def follows(self, key: _RunKey, seq: int, time: int) -> bool:
        """Whether a member with this key, seq and time continues the run."""
        return key == self.key and seq == self.next_seq and -_MAX <= time - self.times[-1] <= _MAX

    def events(self, start: int = 0) -> list[Event]:
        """The members from position ``start`` on, as events."""
        out: list[Event] = []
        for source in self.sources:
            if isinstance(source, Event):
                out.append(source)
            else:
                run, first, stop = source
                out.extend(run.event(seq) for seq in range(first, stop))
        return out[start:]

    def emit(self, out: list[StorageRecord], max_members: int | None, max_bytes: int | None) -> None:
        """Append the finished run: a row when long enough, else its events (greedy split under caps)."""
        count = len(self.times)
        if count < MIN_RUN:
            out.extend(self.events())
            return
        key, seq0, times, payloads = self.key, self.seq0, self.times, self.payloads
        if max_members is None and max_bytes is None:
            out.append(_row(key, seq0, times, payloads, 0, count))
            return
        cap = count if max_members is None else max_members

        def fits(start: int, stop: int) -> dict[str, Any] | None:
            row = _row(key, seq0, times, payloads, start, stop)
            return row if max_bytes is None or len(orjson.dumps(row["data"])) <= max_bytes else None

        start = 0
        while count - start >= MIN_RUN:
            high = min(cap, count - start)
            row = fits(start, start + high)
            if row is None:
                low_row = fits(start, start + MIN_RUN)
                if low_row is None:  # this member cannot share a row: it stays scalar
                    out.append(self.events(start)[0])
                    start += 1
                    continue
                low = MIN_RUN  # largest fitting size so far; ``high`` does not fit
                row = low_row
                while high - low > 1:
                    middle = (low + high) // 2
                    candidate = fits(start, start + middle)
                    if candidate is None:
                        high = middle
                    else:
                        low, row = middle, candidate
                high = low
            out.append(row)
            start += high
        if start < count:
            out.extend(self.events(start))


def pack_chunk_runs(
    events: Iterable[Event],
    *,
    max_members: int | None = None,
    max_bytes: int | None = None,
) -> list[StorageRecord]:
    """Storage records for one durable batch, in order (K1-K3).

    Each run of at least three consecutive packable chunk deltas (same kind, turn, step,
    block index and call identity; seq +1; time gap a safe integer) becomes one row; every
    other event passes through as itself. ``max_members``/``max_bytes`` cap rows for the
    SQLite layout (``SQLITE_MAX_MEMBERS``, ``SQLITE_MAX_BYTES``): longer runs split greedily.
    A live session's batch (a ``LogSlice``) hands over its packed runs whole: their members
    are packed from the run's lists, never built as events, into the same records.
    """
    if max_members is not None and max_members < MIN_RUN:
        raise ValueError(f"max_members must be at least {MIN_RUN}, got {max_members}")
    out: list[StorageRecord] = []
    run: _Run | None = None
    for item in slots_of(events):
        if item.__class__ is tuple:  # a span of a packed run: members seq first..stop-1
            chunks, first, stop = item
            parts, offset = chunks.parts(), chunks.seq0
            times, payloads = parts[0], parts[5]
            key = _run_key(chunks)
            if run is None or not run.follows(key, first, times[first - offset]):
                if run is not None:
                    run.emit(out, max_members, max_bytes)
                run = _Run(key, first)
            run.times.extend(times[first - offset : stop - offset])
            run.payloads.extend(payloads[first - offset : stop - offset])
            run.sources.append(item)
            run.next_seq = stop
            continue
        event = cast(Event, item)
        member = _member(event)
        if member is None:
            if run is not None:
                run.emit(out, max_members, max_bytes)
                run = None
            out.append(event)
            continue
        key, payload = member
        seq = event[1]
        if run is None or not run.follows(key, seq, event[2]):
            if run is not None:
                run.emit(out, max_members, max_bytes)
            run = _Run(key, seq)
        run.times.append(event[2])
        run.payloads.append(payload)
        run.sources.append(event)
        run.next_seq = seq + 1
    if run is not None:
        run.emit(out, max_members, max_bytes)
    return out


def encode_records(records: Iterable[StorageRecord]) -> bytes:
    """JSONL bytes of storage records: one compact JSON value per line, each ending in ``\\n``.

    Byte-identical to DSH's writer. Refuses an event whose type is a row tag: JSONL would
    read it back as a (malformed) packed row.
    """
    parts: list[bytes] = []
    for record in records:
        if type(record) is Event:
            if record[0] in ROW_TAGS:
                raise InvalidEventError(
                    f"event type {record[0]!r} is reserved for packed storage rows and cannot be "
                    "stored in JSONL", seq=record[1], event_type=record[0],
                )
            parts.append(record.to_json())
        else:
            parts.append(orjson.dumps(record))
    if not parts:
        return b""
    parts.append(b"")
    return b"\n".join(parts)


def encode_batch(events: Sequence[Event], *, pack: bool = True) -> bytes:
    """JSONL bytes of one durable batch, packed (DSH's default ``packChunks``) or one event a line."""
    return encode_records(pack_chunk_runs(events) if pack else events)


# -- decoding ---------------------------------------------------------------------------


def _malformed(tag: str, why: str, seq: int | None = None) -> NoReturn:
    raise SessionCorruptionError(f"malformed {tag} storage row: {why}", seq=seq)


def decode_storage_record(value: Any) -> list[Event]:
    """The events one parsed line stores (K4).

    A row-tagged object is strictly validated and expanded (``SessionCorruptionError``
    "malformed <tag> storage row: ..." on any defect); any other value is one event,
    validated by ``Event.from_wire`` (``InvalidEventError``).
    """
    if isinstance(value, dict):
        tag = value.get("type")
        if type(tag) is str and tag in ROW_TAGS:
            if value.keys() != _ROW_ENVELOPE:
                _malformed(tag, "envelope must be exactly {type, seq0, time0, data}")
            return decode_row(tag, value["seq0"], value["time0"], value["data"])
    return [Event.from_wire(value)]


def decode_line(raw: bytes | bytearray | memoryview | str) -> list[Event]:
    """Parse one stored line and decode it; unparsable JSON raises ``SessionCorruptionError``."""
    entry = decode_line_entry(raw)
    return entry.events() if isinstance(entry, ChunkRun) else [entry]


def decode_line_entry(raw: bytes | bytearray | memoryview | str) -> LogEntry:
    """Like ``decode_line``, but a packed row stays packed: a validated ``ChunkRun``."""
    try:
        value = loads(raw)
    except ValueError as exc:  # orjson.JSONDecodeError, or bad UTF-8 in the deep-nesting fallback
        raise SessionCorruptionError(f"unparsable storage record: {exc}") from None
    if value.__class__ is dict:
        tag = value.get("type")
        if tag.__class__ is str and tag in ROW_TAGS:
            if value.keys() != _ROW_ENVELOPE:
                _malformed(tag, "envelope must be exactly {type, seq0, time0, data}")
            return decode_row_run(tag, value["seq0"], value["time0"], value["data"])
    return Event.from_wire(value)


def decode_row(
    tag: str, seq0: Any, time0: Any, data: Any, *, min_members: int = 1, max_members: int | None = None,
) -> list[Event]:
    """Validate a packed row given as parts and expand it into its events (see ``decode_row_run``)."""
    return decode_row_run(tag, seq0, time0, data, min_members=min_members, max_members=max_members).events()


def decode_row_run(  # noqa: C901 - one flat list of checks, in the spec's order
    tag: str,
    seq0: Any,
    time0: Any,
    data: Any,
    *,
    min_members: int = 1,
    max_members: int | None = None,
) -> ChunkRun:
    """Validate a packed row given as parts; its events stay packed until read.

    The parts are the row's tag, ``seq0``, ``time0`` and ``data`` object (a JSONL line's
    fields, or a SQLite row's columns). ``min_members``/``max_members`` tighten the member
    count for the SQLite layout (3..1,024); JSONL accepts any non-empty row.
    """
    if type(seq0) is not int or not 0 <= seq0 <= _MAX:
        _malformed(tag, "seq0 must be a non-negative safe integer")
    if type(time0) is not int or not -_MAX <= time0 <= _MAX:
        _malformed(tag, "time0 must be a safe integer", seq0)
    if not isinstance(data, dict):
        _malformed(tag, "data must be an object", seq0)
    keys = data.keys()
    if tag == TOOL_CALL_ROW:
        named = keys == _NAMED_CALL_ROW_KEYS
        if not named and keys != _CALL_ROW_KEYS:
            _malformed(tag, "data must be exactly {turn, step, index, dt, id, name?, args}", seq0)
        call_id, name = data["id"], data.get("name")
        if type(call_id) is not str or not valid_text(call_id) or (
            named and (type(name) is not str or not valid_text(name))
        ):
            _malformed(tag, "id (and name when present) must be strings", seq0)
        payload_key = "args"
    elif tag in (TEXT_ROW, REASONING_ROW):
        if keys != _TEXT_ROW_KEYS:
            _malformed(tag, "data must be exactly {turn, step, index, dt, texts}", seq0)
        payload_key = "texts"
    else:
        raise SessionCorruptionError(f"unknown storage row tag {tag!r}", seq=seq0)
    turn, step, index = data["turn"], data["step"], data["index"]
    if not (_is_number(turn) and _is_number(step) and _is_number(index)):
        _malformed(tag, "turn/step/index must be numbers", seq0)
    payload = data[payload_key]
    kind = type(payload)
    if (kind is not list and kind is not tuple) or not payload or set(map(type, payload)) != {str}:
        _malformed(tag, f"{payload_key} must be a non-empty string array", seq0)
    if not valid_text("".join(payload)):
        _malformed(tag, f"{payload_key} contains a lone surrogate", seq0)
    count = len(payload)
    dt = data["dt"]
    kind = type(dt)
    if (kind is not list and kind is not tuple) or (
        dt and (set(map(type, dt)) != {int} or min(dt) < -_MAX or max(dt) > _MAX)
    ):
        _malformed(tag, "dt must be an array of safe integers", seq0)
    if len(dt) != count - 1:
        _malformed(tag, f"dt length {len(dt)} does not match {count} members", seq0)
    if count < min_members or (max_members is not None and count > max_members):
        limit = "" if max_members is None else f"..{max_members}"
        _malformed(tag, f"{count} members is outside {min_members}{limit}", seq0)
    if seq0 + count - 1 > _MAX:
        _malformed(tag, "member seqs must stay safe integers", seq0)
    times = list(accumulate(dt, initial=time0))
    if count > 1 and (min(times) < -_MAX or max(times) > _MAX):
        _malformed(tag, "member times must stay safe integers", seq0)
    if tag == TOOL_CALL_ROW:
        parts = (times, turn, step, index, _TOOL_CALL_DELTA, payload, call_id, named, name)
        return ChunkRun(seq0, count, parts)
    delta = _TEXT_DELTA if tag == TEXT_ROW else _REASONING_DELTA
    return ChunkRun(seq0, count, (times, turn, step, index, delta, payload, None, False, None))
