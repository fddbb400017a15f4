"""Packed chunk runs: a stored row of ``assistant/chunk`` deltas kept compact until read.

A cold load validates each packed row as a whole and puts one ``ChunkRun`` in every log slot
the row covers, instead of building one event (and two frozen dicts) per streamed token.
Surface folds, repair and message derivation never read chunk payloads, so a session can be
restored, resumed and projected without expanding its rows; ``Session.events`` expands a run
the first time one of its events is read, and always returns the same ``Event`` objects.

A recording session keeps its stream deltas the same way (``Session._append_delta``): an open
run at the end of the log grows by one member per delta, and a live session's write batch
(``LogSlice``) hands whole runs to the storage codec, which packs them without an ``Event``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Final, TypeAlias, overload

from agentlog.core.events import ASSISTANT_CHUNK, Event, make_event
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER, FrozenDict

__all__ = ["ChunkRun", "EventsView", "LazySpan", "LogEntry", "LogSlice", "SpanReader", "resolve_entries",
           "slots_of", "unspanned"]

LogEntry: TypeAlias = "Event | ChunkRun"
"""A slot of a session's log: an event, or the packed run that holds the event of that seq. A
session resumed from a checkpoint also holds ``LazySpan`` slots below its ``lazy_end``: they
answer ``event(seq)`` like a run (and ``entry(seq)`` with the slot they stand for)."""

SpanReader: TypeAlias = "Callable[[int, int, int, int], list[Event | ChunkRun]]"
"""``read(seq0, count, start, end)``: the slots of a checkpointed span, parsed from its bytes."""

_TOOL_CALL_DELTA: Final = "tool-call-delta"
_expand_lock = threading.Lock()
_new_dict = dict.__new__
_fill = dict.update


class ChunkRun:
    """The validated members of one packed row: ``count`` chunk events from ``seq0``.

    Built by the storage codec after it checked a row, or opened empty by a recording session
    and grown one member at a time (``add``; members are never changed once added), so
    expanding never fails. ``type`` is the type of every member, readable without expanding.
    """

    __slots__ = ("_events", "_parts", "count", "seq0")

    type: ClassVar[str] = ASSISTANT_CHUNK

    def __init__(self, seq0: int, count: int, parts: tuple[Any, ...]) -> None:
        self.seq0 = seq0
        self.count = count
        self._parts = parts  # (times, turn, step, index, kind, payload, call_id, named, name)
        self._events: list[Event] | None = None

    @classmethod
    def opened(cls, seq0: int, turn: int, step: int, index: int, kind: str, call_id: str | None = None,
               name: str | None = None) -> ChunkRun:
        """An empty run of ``kind`` deltas that a session grows (``add``, ``extend``); a
        tool-call run has its call's id, and the tool name if its deltas carry it."""
        return cls(seq0, 0, ([], turn, step, index, kind, [], call_id, name is not None, name))

    def extend(self, turn: int, step: int, index: int, kind: str, call_id: str | None, name: str | None,
               time: int, payload: str) -> bool:
        """Append the next member if a delta with these fields continues this run (same block and
        call identity, a time gap a packed row can store); False leaves the run unchanged. The
        session adds the member's log slot after."""
        parts = self._parts
        times = parts[0]
        if parts[4] != kind or parts[3] != index or parts[2] != step or parts[1] != turn or (
            parts[6] != call_id or parts[8] != name
        ) or not -MAX_SAFE_INTEGER <= time - times[-1] <= MAX_SAFE_INTEGER:
            return False
        times.append(time)
        parts[5].append(payload)
        self.count += 1
        return True

    def add(self, time: int, payload: str) -> None:
        """Append the next member unconditionally (its first, or one ``extend`` would take)."""
        parts = self._parts
        parts[0].append(time)
        parts[5].append(payload)
        self.count += 1

    def parts(self) -> tuple[Any, ...]:
        """``(times, turn, step, index, kind, payload, call_id, named, name)``; the two lists
        may be longer than ``count`` for a run that is still growing: read up to ``count``."""
        return self._parts

    def event(self, seq: int) -> Event:
        """The member with this seq (``seq0 <= seq < seq0 + count``)."""
        return self.events()[seq - self.seq0]

    def events(self) -> list[Event]:
        """Every member, built once (the list is shared: never mutate it; an open run's grows)."""
        events = self._events
        if events is None or len(events) < self.count:
            with _expand_lock:
                events = self._events
                done = 0 if events is None else len(events)
                count = self.count
                if events is None or done < count:
                    times, turn, step, index, kind, payload, call_id, named, name = self._parts
                    more = _expand(self.seq0 + done, times[done:count], turn, step, index, kind,
                                   payload[done:count], call_id, named, name)
                    if events is None:
                        events = self._events = more
                    else:
                        events.extend(more)
        return events

    def __repr__(self) -> str:
        return f"ChunkRun(seq0={self.seq0}, count={self.count})"


class LazySpan:
    """Events ``seq0 .. seq0 + count - 1`` of a validated log prefix, still unparsed.

    A checkpoint (``agentlog.core.checkpoint``) proved by hash that the bytes ``start .. end`` of a
    transcript are the ones validated when it was written, so a resumed session holds one
    ``LazySpan`` in every slot the span covers and parses it on the first read of one of its
    events (through ``read``); later reads return the same objects. It has no single ``type``:
    code that scans slots must read ``event(seq)`` (or ``entries()``) instead.
    """

    __slots__ = ("_entries", "_read", "count", "end", "seq0", "start")

    def __init__(self, seq0: int, count: int, start: int, end: int, read: SpanReader) -> None:
        self.seq0 = seq0
        self.count = count
        self.start = start
        self.end = end
        self._read = read
        self._entries: list[Event | ChunkRun] | None = None

    @property
    def type(self) -> str:
        raise TypeError(f"{self!r} covers many events: read event(seq) for a type")

    def entries(self) -> list[Event | ChunkRun]:
        """The span's slots (events and packed runs), parsed once (shared: never mutate)."""
        entries = self._entries
        if entries is None:
            with _expand_lock:
                entries = self._entries
                if entries is None:
                    entries = self._entries = self._read(self.seq0, self.count, self.start, self.end)
        return entries

    def entry(self, seq: int) -> Event | ChunkRun:
        """The slot of ``seq`` (an event, or its packed run)."""
        return self.entries()[seq - self.seq0]

    def event(self, seq: int) -> Event:
        """The event with this seq (``seq0 <= seq < seq0 + count``)."""
        entry = self.entries()[seq - self.seq0]
        return entry if entry.__class__ is Event else entry.event(seq)  # type: ignore[union-attr]

    def __repr__(self) -> str:
        return f"LazySpan(seq0={self.seq0}, count={self.count}, bytes={self.start}..{self.end})"


_LAZY: Any = LazySpan  # typed Any: a log's declared slot type (``LogEntry``) leaves spans out


class EventsView(Sequence[Event]):
    """An immutable snapshot of the first ``len`` events of a log (the log only grows).

    Slots below ``lazy_end`` may hold a packed ``ChunkRun`` (a cold-loaded row) or a
    ``LazySpan`` (a checkpointed prefix): reading one returns its event, built once and shared
    by every reader.
    """

    __slots__ = ("_lazy", "_len", "_log", "_source")

    def __init__(self, log: list[LogEntry], length: int, lazy_end: int | None = None,
                 source: object = None) -> None:
        self._log = log
        self._len = length
        self._lazy = length if lazy_end is None else min(lazy_end, length)
        self._source = source  # the Session whose log this is (restore may reuse its validation)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            if step == 1 and start >= self._lazy:
                return self._log[start:stop]  # type: ignore[return-value]
            return [self[position] for position in range(start, stop, step)]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("event index out of range")
        entry = self._log[index]
        return entry if entry.__class__ is Event else entry.event(index)  # type: ignore[union-attr]

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Event]:
        log = self._log
        lazy = self._lazy
        for index in range(lazy):
            entry = log[index]
            yield entry if entry.__class__ is Event else entry.event(index)  # type: ignore[union-attr]
        for index in range(lazy, self._len):
            yield log[index]  # type: ignore[misc]

    def entries(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, LogEntry]]:
        """``(seq, slot)`` from ``start`` to ``stop``, each packed run once and unexpanded (at the
        first of its seqs in range): for scans that skip stream chunks (the viewer). A lazy span
        is parsed and its slots are yielded instead."""
        log = self._log
        end = self._len if stop is None else min(stop, self._len)
        index = max(start, 0)
        while index < end:
            entry = log[index]
            if entry.__class__ is _LAZY:
                entry = entry.entry(index)  # type: ignore[union-attr]
            yield index, entry
            index = entry.seq0 + entry.count if isinstance(entry, ChunkRun) else index + 1

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(other) == self._len and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EventsView({self._len} events)"


class LogSlice(Sequence[Event]):
    """Events ``start`` to ``stop`` of a log (a live session's write batch; the log only grows).

    Reading an index returns its event (expanding a packed run); ``spans`` gives the storage
    codec each packed run once, unexpanded.
    """

    __slots__ = ("_log", "start", "stop")

    def __init__(self, log: Sequence[LogEntry], start: int, stop: int) -> None:
        self._log = log
        self.start = start
        self.stop = stop

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("event index out of range")
        seq = self.start + index
        entry = self._log[seq]
        return entry if entry.__class__ is Event else entry.event(seq)  # type: ignore[union-attr]

    def __len__(self) -> int:
        return self.stop - self.start

    def __iter__(self) -> Iterator[Event]:
        log = self._log
        for seq in range(self.start, self.stop):
            entry = log[seq]
            yield entry if entry.__class__ is Event else entry.event(seq)  # type: ignore[union-attr]

    def spans(self) -> Iterator[Event | tuple[ChunkRun, int, int]]:
        """Each slot in order: an ``Event`` as itself, a packed run once as ``(run, first, stop)``
        (the seqs of its members in this slice)."""
        log, seq, stop = self._log, self.start, self.stop
        while seq < stop:
            entry = log[seq]
            if isinstance(entry, ChunkRun):
                end = min(entry.seq0 + entry.count, stop)
                yield entry, seq, end
                seq = end
                continue
            yield entry
            seq += 1

    def __repr__(self) -> str:
        return f"LogSlice({self.start}..{self.stop})"


def unspanned(entries: list[LogEntry]) -> list[LogEntry]:
    """``entries`` (slots from seq 0) with every ``LazySpan`` replaced by the slot it stands for."""
    lazy = _LAZY
    if not any(entry.__class__ is lazy for entry in entries):
        return entries
    slots: list[Any] = entries
    return [entry.entry(seq) if entry.__class__ is lazy else entry for seq, entry in enumerate(slots)]


def slots_of(events: Iterable[Any]) -> Iterable[Any]:
    """``events`` slot by slot: a live batch (``LogSlice``) gives each packed run once, unexpanded
    (see ``LogSlice.spans``); any other iterable passes as it is."""
    return events.spans() if isinstance(events, LogSlice) else events


def resolve_entries(entries: Sequence[Any], first_seq: int = 0) -> list[Event]:
    """``entries`` (slots from ``first_seq`` on) with every ``ChunkRun`` or ``LazySpan`` replaced
    by its event."""
    out = list(entries)
    for offset, entry in enumerate(out):
        if entry.__class__ is not Event:
            out[offset] = entry.event(first_seq + offset)
    return out


def _expand(
    seq0: int, times: Sequence[int], turn: Any, step: Any, index: Any, kind: str,
    payload: Sequence[str], call_id: str | None, named: bool, name: Any,
) -> list[Event]:
    """The member events of a validated row (``frozen_dict`` inlined: rows hold most of a log)."""
    out: list[Event] = []
    append = out.append
    seqs = range(seq0, seq0 + len(payload))
    if kind != _TOOL_CALL_DELTA:
        for seq, time, text in zip(seqs, times, payload, strict=False):
            chunk = _new_dict(FrozenDict)
            _fill(chunk, type=kind, index=index, text=text)
            body = _new_dict(FrozenDict)
            _fill(body, turn=turn, step=step, chunk=chunk)
            append(make_event(ASSISTANT_CHUNK, seq, time, body))
        return out
    for seq, time, part in zip(seqs, times, payload, strict=False):
        chunk = _new_dict(FrozenDict)
        if named:
            _fill(chunk, type=_TOOL_CALL_DELTA, index=index, id=call_id, name=name, argumentsDelta=part)
        else:
            _fill(chunk, type=_TOOL_CALL_DELTA, index=index, id=call_id, argumentsDelta=part)
        body = _new_dict(FrozenDict)
        _fill(body, turn=turn, step=step, chunk=chunk)
        append(make_event(ASSISTANT_CHUNK, seq, time, body))
    return out
