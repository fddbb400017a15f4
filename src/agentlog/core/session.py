"""Session: an append-only log of immutable events with a live surface (spec session-core §4-§8).

``append`` is the in-memory commit point: it validates, freezes, numbers and folds the
event into the surface, then tells observers. It never waits on I/O; durability is the
store's ``flush()``.
"""

from __future__ import annotations

import inspect
import logging
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from agentlog.core.aio import running_loop
from agentlog.core.bulk import gc_paused
from agentlog.core.events import (
    ASSISTANT_CHUNK,
    END_SEED,
    KNOWN_EVENT_TYPES,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    SURFACE_TYPES,
    Event,
    Replace,
    SurfaceOp,
    parse_markers,
)
from agentlog.core.header import SessionHeader, now_ms
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER, FrozenDict, freeze, is_safe_int_tuple, valid_text
from agentlog.core.messages import Message, derive_event_message
from agentlog.core.packed import ChunkRun, EventsView, LazySpan, LogEntry
from agentlog.core.request_header import canonical_header, event_header
from agentlog.core.seed import validate_seed
from agentlog.core.storable import APPEND_PLAIN_TYPES, check_appendable
from agentlog.core.surface import Surface, SurfaceManager
from agentlog.errors import (
    AgentlogError,
    InvalidEventError,
    InvalidHeaderError,
    UsageError,
)

__all__ = ["EventsView", "Observer", "Session", "Validator"]

logger = logging.getLogger("agentlog")

_new_tuple = tuple.__new__
_new_dict = dict.__new__
_fill = dict.update
_LAZY: Any = LazySpan  # a checkpointed prefix's slot (typed Any: ``LogEntry`` leaves spans out)

Observer = Callable[[Event], object]
"""Called after each committed append with the logged event; failures are contained."""

Validator = Callable[[Event], None]
"""Called with each candidate event before it commits; raising vetoes the append."""

ChunkCheck = Callable[[int, int, int], bool]
"""A validator's form for a packed stream delta ``(seq, turn, step)``: True accepts it as the
validator would accept the event; False sends the delta through ``append`` as an ``Event``."""

_PackedHooks = tuple[tuple[ChunkCheck, ...], tuple[Callable[[int], object], ...]]

class Session:
    """An append-only, validated event log with a live surface and derived messages."""

    def __init__(self, header: SessionHeader, clock: Callable[[], int] | None = None) -> None:
        """Build an empty session; use ``Session.create`` or ``Session.restore`` instead."""
        self._header = header
        self._clock = clock or now_ms
        self._log: list[LogEntry] = []  # slots below _lazy_end may hold packed ChunkRuns
        self._lazy_end = 0
        self._validated = 0  # leading events that passed restore's (seed) validation
        self._snapshot: EventsView | None = None
        self._manager = SurfaceManager(self._event_at)
        self._surface = Surface(self._manager)
        self._first_live_seq = 0
        # Tuples, replaced on (un)subscribe, so publishing iterates them without a copy.
        self._observers: tuple[Observer, ...] = ()
        self._validators: tuple[Validator, ...] = ()
        # The packed forms of hooks that accept a stream delta without its Event (the invariant
        # checker, a live session's writer); None while any hook lacks one.
        self._packed_forms: dict[object, Callable[..., Any]] = {}
        self._packed_hooks: _PackedHooks | None = ((), ())
        self._open_run: ChunkRun | None = None  # the packed run the next stream delta may extend
        self._publishing = False
        self._stored = False  # a store's session: also refuse what a cold read refuses (LiveSession)
        self._derived: list[Message] = []
        self._derived_nodes = 0
        self._derived_generation = 0
        self._header_scan = 0
        self._header_event: Event | None = None
        self._request_header: Any = None
        self._context_scan = 0
        self._request_context: Any = None

    # -- construction ------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        session_id: str,
        *,
        seed: Iterable[Any] | None = None,
        header: SessionHeader | dict[str, Any] | None = None,
        clock: Callable[[], int] | None = None,
    ) -> Session:
        """A new session; with ``seed`` (even empty) it resumes those events and marks the seam.

        Seed entries (wire dicts or ``Event`` objects) are validated as in ``restore``.
        """
        resolved = _resolve_header(session_id, header)
        session = cls(resolved, clock)
        if seed is not None:
            session._load_seed(seed)
            session._mark_end_seed()
        return session

    @classmethod
    def restore(
        cls,
        session_id: str,
        events: Iterable[Any],
        header: SessionHeader | dict[str, Any],
        *,
        clock: Callable[[], int] | None = None,
    ) -> Session:
        """Rebuild a session from stored events, validating every one before taking the log.

        The header is checked first, then each event in order (envelope, shapes, seq,
        surface); the first failure raises and nothing is kept. A ``session/end-seed``
        marker is appended unless the log already ends with one.
        """
        if header is None:
            raise InvalidHeaderError("session header is not a plain JSON record: got None",
                                     session_id=session_id if isinstance(session_id, str) else None)
        session = cls._unsealed(session_id, events, header, clock)
        session._seal()
        return session

    @classmethod
    def _unsealed(cls, session_id: str, events: Iterable[Any], header: SessionHeader | dict[str, Any],
                  clock: Callable[[], int] | None = None) -> Session:
        """``restore`` without the end-seed marker, for stores that add repair closers first."""
        resolved = _resolve_header(session_id, header)
        if isinstance(events, EventsView) and isinstance(events._source, Session) and (
            len(events) <= events._source._validated
        ):  # a snapshot of events another restore validated: immutable, so still valid; reuse
            session = cls._fork_of(events._source, len(events), resolved, seal=False)
            session._clock = clock or now_ms
            return session
        session = cls(resolved, clock)
        session._load_seed(events)
        return session

    @classmethod
    def _fork_of(cls, source: Session, length: int, header: SessionHeader, *, seal: bool = True) -> Session:
        """A session seeded with ``source``'s first ``length`` (already validated) events.

        Only the prefix's surface events are re-folded, found through the source's surface
        index, so the cost follows the surface size rather than the log length.
        """
        session = cls(header, source._clock)
        session._log = log = source._log[:length]
        session._lazy_end = min(source._lazy_end, length)
        session._validated = min(source._validated, length)
        manager, surface = session._manager, source._manager.surface_seqs
        stop = bisect_left(surface, length)
        first_replace = source._manager.first_replace_seq
        appended = stop if first_replace is None else min(stop, bisect_left(surface, first_replace))
        manager.nodes.extend(surface[:appended])  # before any replacement, the surface only grew
        manager.surface_seqs.extend(surface[:appended])
        for seq in surface[appended:stop]:
            event = session._event_at(seq)
            manager.next_seq = seq
            if event[4] == "append" and event[4].__class__ is str:
                manager.nodes.append(seq)
                manager.surface_seqs.append(seq)
            else:
                manager.apply(event)
        manager.next_seq = len(log)
        session._first_live_seq = len(log)
        session._adopt_scans(source, length)
        if seal:
            session._mark_end_seed()
        return session

    def _adopt_scans(self, source: Session, length: int) -> None:
        """Carry ``source``'s derived messages and request scans over to this copy of its first
        ``length`` events where they hold for it, so a copy (a load, a resume) never re-reads
        events it shares (a checkpointed prefix stays unparsed)."""
        if length == len(source._log) and source._derived_generation == self._manager.replace_generation:
            self._derived = list(source._derived)
            self._derived_nodes, self._derived_generation = source._derived_nodes, source._derived_generation
        header, context = source._header_event, source._request_context
        if source._header_scan >= length and (header is None or header[1] < length):
            self._header_scan, self._header_event = length, header
        if source._context_scan >= length and (length == len(source._log) or context is None):
            self._context_scan, self._request_context = length, context

    def _seal(self) -> None:
        """Finish a restore: everything so far is seed; mark the seam with ``session/end-seed``."""
        self._first_live_seq = len(self._log)
        self._mark_end_seed()

    def _load_seed(self, seed: Iterable[Any]) -> None:
        with gc_paused():
            validate_seed(self, seed)

    def _mark_end_seed(self) -> None:
        last = self._log[-1] if self._log else None
        if last.__class__ is _LAZY:
            last = last.event(len(self._log) - 1)  # type: ignore[union-attr]
        if last is None or last.type != END_SEED:
            validated = self._validated == len(self._log)
            self.append(END_SEED, {})
            if validated:  # the marker is a valid seed event by construction
                self._validated = len(self._log)

    # -- reading -----------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._header.id

    @property
    def header(self) -> SessionHeader:
        return self._header

    @property
    def first_live_seq(self) -> int:
        """Number of seed events; events from here on were appended by this instance."""
        return self._first_live_seq

    @property
    def events(self) -> EventsView:
        """An immutable snapshot of the log; the same object until the next append."""
        snapshot = self._snapshot
        if snapshot is None or len(snapshot) != len(self._log):
            snapshot = self._snapshot = EventsView(self._log, len(self._log), self._lazy_end, self)
        return snapshot

    def _event_at(self, seq: int) -> Event:
        """The logged event with this seq (expanding its packed run if it has one)."""
        entry = self._log[seq]
        return entry if isinstance(entry, Event) else entry.event(seq)

    def _resolved_log(self) -> list[Event]:
        """The log itself with every packed slot expanded in place: for readers that index it
        directly and need chunk payloads (token metering). Later calls cost nothing."""
        log = self._log
        if self._lazy_end:
            for index in range(self._lazy_end):
                entry = log[index]
                if entry.__class__ is not Event:
                    log[index] = entry.event(index)  # type: ignore[union-attr]
            self._lazy_end = 0
        return log  # type: ignore[return-value]  # no packed slot is left

    @property
    def seq(self) -> int:
        """The seq the next appended event will get (== number of events)."""
        return len(self._log)

    @property
    def surface(self) -> Surface:
        """The live surface (one stable object): ``nodes`` and ``replace_generation``."""
        return self._surface

    def derive_messages(self) -> list[Message]:
        """The model history: messages of the surface nodes, projected incrementally (spec D3)."""
        manager = self._manager
        if manager.replace_generation != self._derived_generation:
            self._derived = []
            self._derived_nodes = 0
            self._derived_generation = manager.replace_generation
        nodes = manager.nodes
        if self._derived_nodes < len(nodes):
            derived = self._derived
            event_at = self._event_at
            for seq in nodes[self._derived_nodes :]:
                message = derive_event_message(event_at(seq))
                if message is not None:
                    derived.append(message)
            self._derived_nodes = len(nodes)
        return list(self._derived)

    def request_header(self) -> Any:
        """The canonical latest ``request/header`` (frozen), or None before the first."""
        log = self._log
        for index in range(self._header_scan, len(log)):
            entry = log[index]
            if entry.__class__ is _LAZY:
                entry = entry.entry(index)  # type: ignore[union-attr]
            if entry.type == REQUEST_HEADER and isinstance(entry, Event) and event_header(entry) is not None:
                self._header_event = entry
        self._header_scan = len(log)
        event = self._header_event
        if event is None:
            return None
        if self._request_header is None or self._request_header[0] is not event:
            self._request_header = (event, canonical_header(event_header(event)))
        return self._request_header[1]

    def request_context(self) -> Any:
        """The latest ``request/context`` data (frozen), or None before any."""
        log = self._log
        for index in range(self._context_scan, len(log)):
            entry = log[index]
            if entry.__class__ is _LAZY:
                entry = entry.entry(index)  # type: ignore[union-attr]
            if entry.type == REQUEST_CONTEXT and isinstance(entry, Event):
                self._request_context = entry.data
        self._context_scan = len(log)
        return self._request_context

    # -- hooks -------------------------------------------------------------------------

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Call ``observer(event)`` after every committed append; returns an unsubscribe."""
        return self._subscribe(observer, None)

    def add_validator(self, validator: Validator) -> Callable[[], None]:
        """Call ``validator(candidate)`` before each commit; raising vetoes the append."""
        return self._add_validator(validator, None)

    def _subscribe(self, observer: Observer, packed: Callable[[int], object] | None) -> Callable[[], None]:
        """``subscribe``; ``packed(seq)``, if given, is told of a packed stream delta instead."""
        self._observers = (*self._observers, observer)
        self._set_packed_form(observer, packed)

        def unsubscribe() -> None:
            self._observers = _without(self._observers, observer)
            self._set_packed_form(observer, None)

        return unsubscribe

    def _add_validator(self, validator: Validator, packed: ChunkCheck | None) -> Callable[[], None]:
        """``add_validator``; ``packed(seq, turn, step)``, if given, checks a packed stream delta."""
        self._validators = (*self._validators, validator)
        self._set_packed_form(validator, packed)

        def remove() -> None:
            self._validators = _without(self._validators, validator)
            self._set_packed_form(validator, None)

        return remove

    def _set_packed_form(self, hook: object, packed: Callable[..., Any] | None) -> None:
        """Record (or forget) a hook's packed form; deltas stay packed only while every hook has one."""
        forms = self._packed_forms
        if packed is not None:
            forms[hook] = packed
        elif hook not in self._validators and hook not in self._observers:
            forms.pop(hook, None)
        checks = [forms.get(validator) for validator in self._validators]
        notes = [forms.get(observer) for observer in self._observers]
        if None in checks or None in notes:
            self._packed_hooks = None
        else:
            self._packed_hooks = (tuple(checks), tuple(notes))  # type: ignore[arg-type]

    # -- appending ---------------------------------------------------------------------

    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | dict[str, Any] | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> Event:
        """Validate, freeze and log one event; return the logged (frozen) event.

        ``ignorable=True`` marks a plugin event that readers which do not know its type may skip
        (spec E3); only types outside the known vocabulary take it. A refused append raises a
        subclass of ``AgentlogError`` and leaves the log as it was.
        """
        log = self._log
        seq = len(log)
        if data.__class__ is FrozenDict and surface_op is None and source_event_seqs is None and (
            type in APPEND_PLAIN_TYPES and type.__class__ is str and not self._publishing and not ignorable
        ):  # the bulk of a recording (stream chunks, steps): a known type, frozen data, no markers
            time = self._clock()
            if time.__class__ is int and -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER:
                event: Event = _new_tuple(Event, (type, seq, time, data, None, None, False, False))
                if self._validators or self._observers:
                    return self._publish(event)
                self._manager.next_seq = seq + 1
                log.append(event)
                return event
        try:
            event = self._candidate(type, data, surface_op, source_event_seqs, seq, ignorable)
            if self._publishing:
                raise UsageError(
                    "session append cannot reenter while another append is being published"
                )
            if event[4] is not None:
                self._manager.validate_next(event)
        except AgentlogError as exc:
            named = type if isinstance(type, str) and valid_text(type) else None
            raise exc.locate(session_id=self.id, seq=seq, event_type=named) from None
        if self._validators or self._observers:
            return self._publish(event)
        if event[4] is None:  # log-only: _candidate already refused markerless surface types
            self._manager.next_seq = seq + 1
        else:
            self._manager.commit(event)
        log.append(event)
        return event

    def _append_delta(self, turn: int, step: int, kind: str, index: int, text: str,
                      call_id: str | None = None, name: str | None = None) -> int:
        """Log a stream delta of the open step (the Recorder's hot path); return its seq.

        ``kind`` is ``text-delta``, ``reasoning-delta`` or ``tool-call-delta`` (then ``text`` is
        the arguments delta, ``call_id`` the call's id and ``name`` its tool name, if this delta
        carries it). The delta joins the open packed run at the end of the log (``ChunkRun``):
        no ``Event`` is built until someone reads it. The caller passes validated values (ints,
        valid text). When a hook needs the ``Event`` (any observer or validator without a packed
        form) or a validator's packed form declines, the same event goes through ``append``.
        """
        hooks = self._packed_hooks
        log = self._log
        seq = len(log)
        if hooks is None or self._publishing:
            return self._append_delta_event(turn, step, kind, index, text, call_id, name)
        checks, notes = hooks
        for check in checks:
            if not check(seq, turn, step):
                return self._append_delta_event(turn, step, kind, index, text, call_id, name)
        time = self._clock()
        if time.__class__ is not int or not -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER:
            raise UsageError(f"session clock returned {time!r}; expected epoch milliseconds",
                             session_id=self.id, seq=seq, event_type=ASSISTANT_CHUNK)
        run = self._open_run
        if run is None or log[-1] is not run or not run.extend(turn, step, index, kind, call_id, name, time,
                                                               text):
            run = self._open_run = ChunkRun.opened(seq, turn, step, index, kind, call_id, name)
            run.add(time, text)
        self._manager.next_seq = seq + 1
        log.append(run)
        self._lazy_end = seq + 1
        if notes:
            self._publishing = True
            try:
                for note in notes:
                    try:
                        note(seq)
                    except Exception as exc:
                        logger.warning('session "%s": session/event listener threw: %s', self.id,
                                       _describe(exc))
            finally:
                self._publishing = False
        return seq

    def _append_delta_event(self, turn: int, step: int, kind: str, index: int, text: str,
                            call_id: str | None, name: str | None) -> int:
        """``_append_delta`` through ``append``: the event every hook sees today."""
        chunk = _new_dict(FrozenDict)  # frozen_dict, inlined; keys in DSH's order
        if call_id is None:
            _fill(chunk, type=kind, index=index, text=text)
        elif name is None:
            _fill(chunk, type=kind, index=index, id=call_id, argumentsDelta=text)
        else:
            _fill(chunk, type=kind, index=index, id=call_id, name=name, argumentsDelta=text)
        data = _new_dict(FrozenDict)
        _fill(data, turn=turn, step=step, chunk=chunk)
        return self.append(ASSISTANT_CHUNK, data).seq

    def _candidate(
        self, event_type: Any, data: Any, surface_op: Any, source_seqs: Any, seq: int, ignorable: bool = False
    ) -> Event:
        if event_type.__class__ is not str or not event_type:
            raise InvalidEventError(f"event type must be a non-empty string, got {event_type!r}")
        if ignorable is not False and (ignorable is not True or event_type in KNOWN_EVENT_TYPES):
            raise InvalidEventError(
                f"event type {event_type!r} cannot be marked ignorable: only an event type outside the "
                "known vocabulary can (a plugin's), and ignorable must be True or False"
            )
        if not valid_text(event_type):  # it could never be written (UTF-8)
            raise InvalidEventError(
                f"event type {event_type!r} is not valid Unicode: it contains a lone surrogate"
            )
        frozen = data if data.__class__ is FrozenDict else freeze(
            data, root="data", what="non-JSON-serializable data"
        )
        if surface_op is not None and not isinstance(surface_op, (str, Replace)):
            freeze(surface_op, root="surfaceOp", what="non-JSON-serializable surface metadata")
        if source_seqs is not None and not is_safe_int_tuple(source_seqs):  # a recorder's 40 chunk seqs
            source_seqs = freeze(source_seqs, root="sourceEventSeqs",
                                 what="non-JSON-serializable surface metadata")
        if event_type in SURFACE_TYPES or surface_op is not None or source_seqs is not None:
            op, seqs = parse_markers(
                event_type, seq, surface_op, source_seqs,
                has_op=surface_op is not None, has_seqs=source_seqs is not None, range_first=True,
            )
        else:
            op, seqs = None, None
        time = self._clock()
        if time.__class__ is not int or not -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER:
            raise UsageError(f"session clock returned {time!r}; expected epoch milliseconds")
        event: Event = _new_tuple(Event, (event_type, seq, time, frozen, op, seqs, ignorable, False))
        check_appendable(event, self.id, stored=self._stored)  # what restore (and a store) would refuse
        return event

    def _publish(self, event: Event) -> Event:
        self._publishing = True
        try:
            if self._validators:
                for validator in self._validators:
                    try:
                        validator(event)
                    except AgentlogError as exc:
                        raise exc.locate(session_id=self.id, seq=event.seq,
                                         event_type=event.type) from None
            if event[4] is None:  # log-only: _candidate already refused markerless surface types
                self._manager.next_seq = event[1] + 1
            else:
                self._manager.commit(event)
            self._log.append(event)
            for observer in self._observers:
                try:
                    result = observer(event)
                except Exception as exc:
                    logger.warning('session "%s": session/event listener threw: %s', self.id,
                                   _describe(exc))
                    continue
                if result is not None and inspect.isawaitable(result):
                    _contain_async(self.id, result)
        finally:
            self._publishing = False
        return event

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, events={len(self._log)})"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _contain_async(session_id: str, awaitable: Any) -> None:
    """Run an async observer's result in the background and log its failure."""
    loop = running_loop()
    if loop is None:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        logger.warning('session "%s": async session/event listener needs a running event loop',
                       session_id)
        return
    import asyncio

    task = asyncio.ensure_future(awaitable, loop=loop)

    def done(finished: asyncio.Future[Any]) -> None:
        if not finished.cancelled() and finished.exception() is not None:
            logger.warning('session "%s": session/event listener rejected: %s', session_id,
                           _describe(finished.exception()))  # type: ignore[arg-type]

    task.add_done_callback(done)


def _without(items: tuple[Any, ...], item: Any) -> tuple[Any, ...]:
    """``items`` without the first entry that is ``item`` (unchanged if there is none)."""
    for index, current in enumerate(items):
        if current is item:
            return items[:index] + items[index + 1 :]
    return items


def _resolve_header(session_id: str, header: SessionHeader | dict[str, Any] | None) -> SessionHeader:
    if type(session_id) is not str or not session_id:
        raise InvalidHeaderError(f"session id must be a non-empty string, got {session_id!r}")
    if header is None:
        return SessionHeader(id=session_id)
    if isinstance(header, SessionHeader):
        resolved = header
    else:
        resolved = SessionHeader.from_wire(header, session_id=session_id)
    if resolved.id != session_id:
        raise InvalidHeaderError(
            f"header id {resolved.id!r} does not match session id {session_id!r}",
            session_id=session_id,
        )
    return resolved




