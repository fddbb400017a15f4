"""Seed validation: the checks restore runs on every stored event before taking a log.

Spec session-core C3-C9: envelope, lossless data, markers, message and header shapes,
contiguous seqs and the surface fold. Packed chunk rows were checked by the codec and are
taken whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain, islice
from typing import Any, Final, Protocol

from agentlog.core.events import (
    REQUEST_HEADER,
    SURFACE_TYPES,
    Event,
    check_envelope,
    make_event,
    parse_markers,
    wire_op_first,
)
from agentlog.core.jsonvalue import freeze
from agentlog.core.messages import check_message_shape
from agentlog.core.packed import ChunkRun, EventsView, LogEntry, unspanned
from agentlog.core.request_header import check_request_header_shape
from agentlog.core.surface import SurfaceManager
from agentlog.errors import AgentlogError, InvalidEventError, SurfaceError

__all__ = ["SHAPED_TYPES", "SeedTarget", "check_shapes", "validate_seed"]


class SeedTarget(Protocol):
    """What ``validate_seed`` reads and extends of a ``Session``: its log, surface and marks."""

    @property
    def id(self) -> str: ...
    _log: list[LogEntry]
    _manager: SurfaceManager
    _validated: int
    _lazy_end: int
    _first_live_seq: int


def validate_seed(session: SeedTarget, seed: Iterable[Any]) -> None:
    """Check each seed entry in order (envelope, shapes, seq, surface) and append it to
    ``session``'s log; the first failure raises, located at its index."""
    sid = session.id
    log = session._log
    manager = session._manager
    contiguous = session._validated == len(log)
    if isinstance(seed, EventsView):  # another session's (or a store's) log: keep packed runs packed
        seed = unspanned(seed._log[: seed._len])  # a checkpointed prefix: validate its events
    entries: Iterator[Any] = iter(seed)
    index = len(log) - 1
    while (entry := next(entries, _END)) is not _END:
        index += 1
        if entry.__class__ is Event and entry[4] is None and entry[1] == index and (
            entry[0] not in SHAPED_TYPES
        ):  # the bulk of a log (chunks, steps): nothing to check but its place
            manager.next_seq = index + 1
            log.append(entry)
            continue
        if entry.__class__ is ChunkRun:  # a validated packed row: log-only chunk events
            if not entry.seq0 <= index < entry.seq0 + entry.count:
                raise InvalidEventError(
                    f"seed event at index {index} is member {index - entry.seq0} of a packed row of "
                    f"{entry.count} from seq {entry.seq0}; seed must be contiguous from 0",
                    session_id=sid, seq=index, event_type=entry.type,
                )
            log.append(entry)
            if index == entry.seq0:  # take the row's other slots at once when they follow it
                rest = list(islice(entries, entry.count - 1))
                if rest.count(entry) == len(rest):
                    log.extend(rest)
                    index += len(rest)
                else:
                    entries = chain(rest, entries)
            manager.next_seq = index + 1
            session._lazy_end = index + 1
            continue
        try:
            event = entry if type(entry) is Event else _event_from_seed(entry, index)
            _check_seed_shapes(event, index)
            if event.seq != index:
                raise InvalidEventError(
                    f"seed event at index {index} has seq {event.seq} (expected {index}); "
                    "seed must be contiguous from 0"
                )
            try:
                if event.surface_op is None:
                    manager.skip(event)
                else:
                    manager.apply(event)
            except AgentlogError as exc:
                raise _seed_error(exc, index) from None
            except Exception as exc:
                raise SurfaceError(
                    f"invalid seed event at index {index}: invalid surface metadata ({exc})"
                ) from exc
        except AgentlogError as exc:
            raise exc.locate(session_id=sid, seq=index, event_type=_entry_type(entry)) from None
        log.append(event)
    if contiguous:
        session._validated = len(log)
    session._first_live_seq = len(log)


def _event_from_seed(entry: Any, index: int) -> Event:
    """Spec C3, C4 and the static marker rules for one wire seed entry."""
    where = f"seed event at index {index}"
    check_envelope(entry, where)
    data = freeze(entry["data"], root="data", what=f"{where} is not losslessly JSON-serializable")
    has_op, has_seqs = "surfaceOp" in entry, "sourceEventSeqs" in entry
    if has_op or has_seqs or entry["type"] in SURFACE_TYPES:
        try:
            op, seqs = parse_markers(
                entry["type"], entry["seq"], entry.get("surfaceOp"), entry.get("sourceEventSeqs"),
                has_op=has_op, has_seqs=has_seqs, range_first=True,
            )
        except AgentlogError as exc:
            raise _seed_error(exc, index) from None
    else:
        op, seqs = None, None
    return make_event(entry["type"], entry["seq"], entry["time"], data, op, seqs,
                      entry.get("ignorable", False), wire_op_first(entry))


def _seed_error(exc: AgentlogError, index: int) -> InvalidEventError:
    """Spec C9: a seed's surface failure, re-raised as "invalid seed event at index i: ..."."""
    kind = SurfaceError if isinstance(exc, SurfaceError) else InvalidEventError
    return kind(f"invalid seed event at index {index}: {exc.detail}", path=exc.path)


def _entry_type(entry: Any) -> str | None:
    """The type of a seed entry (Event or wire object) when it is a string."""
    kind = entry.type if type(entry) is Event else (
        entry.get("type") if isinstance(entry, dict) else None
    )
    return kind if type(kind) is str else None


_END: Final = object()
"""End of a seed (``validate_seed`` walks it with ``next``, to take packed rows whole)."""

SHAPED_TYPES: Final = SURFACE_TYPES | {REQUEST_HEADER}
"""Types whose stored data ``check_shapes`` checks (all other log-only events pass as they are)."""


def _check_seed_shapes(event: Event, index: int) -> None:
    if event.type in SHAPED_TYPES:
        check_shapes(event, f"seed {event.type} at index {index}")


def check_shapes(event: Event, subject: str) -> None:
    """Spec C5-C7: the header and message shapes a stored event must have; restore and every
    append check them (``subject`` names the event in errors)."""
    kind = event.type
    if kind in SURFACE_TYPES:
        check_message_shape(kind, event.data, subject)
    elif kind == REQUEST_HEADER:
        check_request_header_shape(event.data, subject)
