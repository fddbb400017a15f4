"""The store contract and the orchestration every backend shares (spec persistence §1-§2, §6).

A backend implements a few storage hooks (read a stored log, append a durable batch, commit
a repair, list, lock, delete: ``agentlog.store.hooks``); ``Store`` turns them into the public
contract: lazy creation, contiguous appends, cold load with committed crash repair, read-only
inspection, live sessions with write-behind, forks and deletion.
"""

from __future__ import annotations

import builtins
import contextlib
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from agentlog.core.aio import in_thread
from agentlog.core.bulk import gc_paused
from agentlog.core.events import Event, is_safe_int
from agentlog.core.header import SessionHeader
from agentlog.core.packed import LogEntry, resolve_entries
from agentlog.core.session import EventsView, Session
from agentlog.core.storable import first_legacy, refuse_retired
from agentlog.errors import (
    AgentlogError,
    ConcurrentWriterError,
    ForkError,
    InvalidEventError,
    SessionExistsError,
    SessionNotFoundError,
    UsageError,
)
from agentlog.legacy.upgrade import needs_prefix, upgrade_legacy_chain
from agentlog.store.hooks import DEFAULT_WRITE_DELAY_MS, StoreHooks, _State
from agentlog.store.integrity import Integrity
from agentlog.store.records import Inspection, Listing, RawArtifact, Recovery, Snapshot, StoredLog
from agentlog.store.validate import validate_appended, validate_stored
from agentlog.store.writer import LiveSession

__all__ = ["DEFAULT_WRITE_DELAY_MS", "Store"]


class Store(StoreHooks):
    """A place where sessions live durably. Backends implement the ``_hooks`` of ``StoreHooks``.

    Blocking methods have ``a``-prefixed async twins that run them off the event loop.
    """

    # -- the public contract ---------------------------------------------------------------

    def locate(self, header: SessionHeader) -> str | None:
        """Where the session's artifact lives (a path hint), or None for database backends."""
        return None

    def create(self, header: SessionHeader) -> None:
        """Record a new session; nothing is written until its first append (lazy)."""
        self._check_open()
        sid = header.id
        self._check_new_id(sid)
        with self._serialized(sid):
            if sid in self._states or sid in self._live:
                raise SessionExistsError("session already exists in this store", session_id=sid)
            if self._stored_exists(sid):
                raise SessionExistsError("session already has a persisted log", session_id=sid)
            self._states[sid] = _State(header)

    def append(self, session_id: str, events: Iterable[Event | dict[str, Any]]) -> None:
        """Durably append a contiguous batch that continues the stored log.

        A refused first append forgets the lazy creation: the id is free again and nothing of
        it is stored (so ``create`` or ``start`` with it works), as if it had never been created.
        """
        self._check_open()
        try:
            self._append(session_id, events)
        except AgentlogError as exc:
            exc.locate(session_id=session_id)
            self._forget_unwritten(session_id)
            raise
        except BaseException:
            self._forget_unwritten(session_id)
            raise

    def _append(self, session_id: str, events: Iterable[Event | dict[str, Any]]) -> None:
        batch = [event if type(event) is Event else Event.from_wire(event) for event in events]
        for event in batch:
            refuse_retired(event, session_id)
        if not batch:
            return
        for index, event in enumerate(batch[1:], 1):
            if event.seq != batch[0].seq + index:
                raise InvalidEventError(
                    f"append seq mismatch: batch is not contiguous at seq {event.seq}",
                    session_id=session_id, seq=event.seq,
                )
        with self._serialized(session_id):
            if session_id in self._live:
                raise UsageError("cannot append directly while the session is live", session_id=session_id)
            with self._writer_locked(session_id, "append"):  # never between a live writer's batches
                state, base = self._append_base(session_id)
                if batch[0].seq == state.cursor:  # else _write refuses it as a concurrent write
                    base = validate_appended(session_id, base, batch)
                try:
                    self._write(state, batch)
                except ConcurrentWriterError:
                    with self._guard:
                        self._appending.pop(session_id, None)
                    if state.materialized:  # our cursor may be stale: re-read the log next time
                        self._states.pop(session_id, None)
                    raise
                self._remember(self._appending, session_id, base)

    def _forget_unwritten(self, session_id: str) -> None:
        """Drop a created session that has no stored log (its first append failed), and the
        lock file a failed append may have left; a live or written session is kept."""
        with self._serialized(session_id):
            state = self._states.get(session_id)
            if (state is not None and state.materialized) or session_id in self._live:
                return
            self._states.pop(session_id, None)
            with self._guard:
                self._appending.pop(session_id, None)
            with contextlib.suppress(AgentlogError):  # tidying only: the refusal is what is raised
                if not self._stored_exists(session_id):
                    self._discard_lock_file(session_id)

    def _write(self, state: _State, batch: Sequence[Event]) -> None:
        """Append ``batch`` at ``state.cursor``; the cursor moves only after a durable write."""
        if batch[0].seq != state.cursor:
            raise ConcurrentWriterError(
                f"append seq mismatch: stored next seq is {state.cursor}, batch starts at {batch[0].seq}",
                session_id=state.header.id, seq=batch[0].seq,
            )
        self._append_batch(state.header, batch, materialize=not state.materialized)
        state.materialized = True
        state.cursor += len(batch)

    def _append_base(self, session_id: str) -> tuple[_State, Session]:
        """The state and validated log a cold append continues (writer lock held); a stored log
        is loaded first, committing its repair, unless the last append here left it validated."""
        state = self._states.get(session_id)
        with self._guard:
            base = self._appending.get(session_id)
        if state is not None and base is not None and base.seq == state.cursor:
            return state, base
        if state is None or state.materialized:
            base = self._load_committed(session_id)
            return self._states[session_id], base
        return state, Session._unsealed(session_id, [], state.header)  # created, nothing stored yet

    def load(self, session_id: str) -> Inspection:
        """The balanced stored log; an interrupted turn is closed durably (once) first.

        Writing that repair takes the writer lock: refused while another writer holds it.
        """
        self._check_open()
        live = self._live.get(session_id)
        if live is not None:
            return live.durable_view()
        with self._serialized(session_id):
            ready = self._prepare(session_id)
            if ready[0].torn is None and not ready[2]:  # nothing to write: no lock
                session = self._load_committed(session_id, ready)
            else:
                action = "repair its interrupted turn" if ready[2] else "truncate its torn tail"
                with self._writer_locked(session_id, action):
                    session = self._load_committed(session_id)  # re-read: it may have changed meanwhile
        return Inspection(session.header, session.events)  # a private copy: its view never grows

    def _load_committed(self, session_id: str,
                        ready: tuple[StoredLog, Session, list[Event]] | None = None) -> Session:
        """Validate a cold session, durably close an interrupted turn; return it unsealed (a copy).

        The caller holds the writer lock, unless ``ready`` (a fresh ``_prepare``) needs no repair.
        """
        stored, prepared, closers = ready or self._prepare(session_id)
        if stored.torn is not None or closers:
            self._commit_repair(stored.header, stored.torn, [*stored.recovered, *closers])
            with self._guard:
                self._prepared.pop(session_id, None)
        session = Session._fork_of(prepared, prepared.seq, stored.header, seal=False)
        session._load_seed(closers)
        state = self._states.get(session_id)
        if state is None:
            self._states[session_id] = _State(stored.header, session.seq, True)
        else:
            state.cursor, state.materialized = session.seq, True
        return session

    def inspect(self, session_id: str, *, trust_checkpoint: bool = True) -> Inspection:
        """Like ``load`` but never writes: closers of an interrupted turn exist only in the result,
        and ``recovery`` says what ``load`` would repair (torn tail, closers).

        ``trust_checkpoint=False`` validates every stored event even where a validated-state
        checkpoint vouches for a prefix (JSONL keeps them; elsewhere it changes nothing): what
        ``verify`` and ``check-upgrade`` use, so bytes a checkpoint wrongly vouches for are found.
        """
        self._check_open()
        live = self._live.get(session_id)
        if live is not None:
            return Inspection(live.session.header, live.session.events)
        with self._serialized(session_id):
            stored, session, closers = self._prepare(session_id, trust_checkpoint=trust_checkpoint)
        log = [*session._log, *closers]
        return Inspection(stored.header, EventsView(log, len(log), session._lazy_end),
                          Recovery.found(stored, closers))

    def check_integrity(self, session_id: str, *, recovery: Recovery | None = None) -> Integrity:
        """Check a session's stored bytes or rows against the digests written with them (``verify``);
        raises ``SessionCorruptionError`` naming where they differ. ``recovery``: what ``inspect``
        found; the torn tail it names is left to that report (a crash leaves one so)."""
        self._check_open()
        with self._serialized(session_id):
            return self._check_integrity(session_id, recovery if recovery is not None and recovery.torn
                                         else None)

    def _check_integrity(self, session_id: str, torn: Recovery | None) -> Integrity:
        """The backend's integrity check (a store that keeps no digests: none)."""
        return Integrity("none", "no integrity data: this store keeps none")

    def _prepare(self, session_id: str, *, trust_checkpoint: bool = True
                 ) -> tuple[StoredLog, Session, list[Event]]:
        """Read and validate a cold session and compute its repair closers.

        The validated session (unsealed) is cached per revision, like DSH's prepared-session
        cache: callers must treat it as read-only (``Session._fork_of`` copies it). Here every
        event is validated: ``trust_checkpoint`` matters to backends that keep checkpoints.
        """
        with gc_paused():
            stored = self._load_stored(session_id)
            if stored is None:
                raise SessionNotFoundError("session not found", session_id=session_id)
            with self._guard:
                cached = self._prepared.get(session_id)
                if cached is not None and cached[0].revision == stored.revision:
                    self._prepared.move_to_end(session_id)
                    return cached
            prepared = self._validate(session_id, stored)
            self._remember(self._prepared, session_id, prepared)
            return prepared

    def _validate(self, session_id: str, stored: StoredLog) -> tuple[StoredLog, Session, list[Event]]:
        return stored, *validate_stored(session_id, stored)

    def read_from(self, session_id: str, from_seq: int) -> Inspection:
        """Stored events with ``seq >= from_seq`` (no repair, no closers); [] past the end."""
        self._check_open()
        if not is_safe_int(from_seq) or from_seq < 0:
            raise InvalidEventError(f"from_seq must be a non-negative safe integer, got {from_seq!r}",
                                    session_id=session_id)
        stored = self._load_stored_from(session_id, from_seq)
        if stored is None:
            raise SessionNotFoundError("session not found", session_id=session_id)
        events: Sequence[LogEntry] = resolve_entries(stored.events, from_seq)
        if first_legacy(events) is not None:  # legacy data: only then the upgrade runs
            writers = stored.writers
            if from_seq and needs_prefix(events):  # a legacy replacement inherits an earlier message's id
                whole = self._load_stored(session_id)
                if whole is not None:
                    upgraded_whole = upgrade_legacy_chain(session_id, whole.events, whole.writers)
                    events, writers = resolve_entries(upgraded_whole[from_seq:], from_seq), []
            events = upgrade_legacy_chain(session_id, events, writers, from_seq)
        upgraded = list(events)  # no packed slot
        return Inspection(stored.header, EventsView(upgraded, len(upgraded), 0))

    def list(self) -> list[SessionHeader]:
        """Headers of every materialized session (no event is read); raises like ``list_snapshots``."""
        return [snapshot.header for snapshot in self.list_snapshots()]

    def list_snapshots(self) -> builtins.list[Snapshot]:
        """Every materialized session with its revision token (strict: see ``Listing.listed``)."""
        return self.listing().listed()

    def listing(self) -> Listing:
        """Every readable session and each unreadable one with its error (one never hides the rest)."""
        self._check_open()
        return self._listing()

    def kept_tail(self, session_id: str) -> str | None:
        """The side file where this store's last repair of the session kept the bytes it cut
        (file backends: ``<transcript>.torn-at-<offset>``), or None."""
        return None

    def read_raw(self, session_id: str) -> RawArtifact | None:
        """The durable artifact as written, for backends that keep one (JSONL)."""
        self._check_open()
        return self._read_raw(session_id)

    # -- live sessions ---------------------------------------------------------------------

    def start(self, header: SessionHeader | str, *, check_invariants: bool = True) -> LiveSession:
        """A new live session; its first flushed batch materializes it.

        ``check_invariants=False`` (here, in ``open`` and ``fork``) skips the live turn/step checks,
        e.g. for a bulk import of foreign logs.
        """

        resolved = SessionHeader(id=header) if isinstance(header, str) else header
        self.create(resolved)
        try:
            lock = self._acquire_writer_lock(resolved.id)
        except BaseException:
            self._states.pop(resolved.id, None)
            raise
        session = Session.create(resolved.id, header=resolved)
        return LiveSession(self, session, self._states[resolved.id], lock, check_invariants=check_invariants)

    def open(self, session_id: str, *, check_invariants: bool = True) -> LiveSession:
        """Resume a stored session for writing: lock, load (committing repair), restore."""

        self._check_open()
        lock = self._take_writer_lock(session_id, "open for writing")
        try:
            with self._serialized(session_id):
                session = self._load_committed(session_id)
                session._seal()
                return LiveSession(self, session, self._states[session_id], lock,
                                   check_invariants=check_invariants)
        except BaseException:
            lock.release()
            raise

    def fork(self, session_id: str, boundary: int | None = None, child_id: str | None = None, *,
             check_invariants: bool = True) -> LiveSession:
        """A live child seeded with the stable prefix ``[0, boundary]`` of a stored session."""
        from agentlog.core.fork import check_fork_boundary

        self._check_open()
        live = self._live.get(session_id)
        if live is not None:
            live.flush()
            source, durable = live.session, live.durable_seq
        else:
            with self._serialized(session_id):
                source, durable = self._fork_source(session_id, boundary)
        length = check_fork_boundary(EventsView(source._log, durable), boundary, session_id)
        prefix = EventsView(source._log, length)
        header = SessionHeader(
            id=child_id if child_id is not None else f"{session_id}-fork-{uuid.uuid4().hex[:12]}",
            cwd=source.header.cwd, parent_session=session_id, seed_length=length,
        )
        try:
            self.create(header)
        except SessionExistsError as exc:
            raise ForkError(str(exc.detail), session_id=header.id, code="SESSION_ALREADY_EXISTS") from None
        try:
            lock = self._acquire_writer_lock(header.id)
        except BaseException:
            self._states.pop(header.id, None)
            raise
        try:
            session = Session._fork_of(source, length, header)
            state = self._states[header.id]
            self._write_fork_prefix(header, prefix, state, session.events[length:])
            return LiveSession(self, session, state, lock, check_invariants=check_invariants)
        except BaseException:
            lock.release()
            self._states.pop(header.id, None)
            raise

    def _fork_source(self, session_id: str, boundary: int | None) -> tuple[Session, int]:
        """A validated cold source for ``fork`` and how many of its events are durable.

        A fork needs only the prefix up to its boundary: unless the whole log is cached (or
        wanted, or the boundary lies past its end), only that prefix is read and validated, so
        the cost follows the boundary. The validated prefix is cached per revision.
        """
        with self._guard:
            whole_known = session_id in self._prepared
        if boundary is not None and is_safe_int(boundary) and boundary >= 0 and not whole_known:
            with gc_paused():
                read = self._load_stored_until(session_id, boundary + 1)
                if read is None:
                    raise SessionNotFoundError("session not found", session_id=session_id)
                if len(read.events) > boundary:
                    return self._fork_prefix(session_id, read, boundary + 1)
        stored, source, _closers = self._prepare(session_id)
        # Only stored events: a torn tail's recovered records are durable after repair only.
        return source, len(stored.events)

    def _fork_prefix(self, session_id: str, read: StoredLog, end: int) -> tuple[Session, int]:
        """The first ``end`` events of ``read`` validated (or a cached validation that covers them)."""
        with self._guard:
            known = self._fork_sources.get(session_id)
            if known is not None and known[0] == read.revision and known[2] >= end:
                self._fork_sources.move_to_end(session_id)
                return known[1], known[2]
        # A packed row may straddle ``end``: sessions hold partial rows.
        prefix = StoredLog(read.header, read.events[:end], read.revision, writers=read.writers)
        _stored, source, _closers = self._validate(session_id, prefix)
        self._remember(self._fork_sources, session_id, (read.revision, source, end))
        return source, end

    def _write_fork_prefix(self, header: SessionHeader, prefix: Sequence[Event], state: _State,
                           suffix: Sequence[Event] = ()) -> None:
        """Persist a fork child's seed; backends that share prefixes override this (O(1)).

        ``suffix`` (the child's own first events: its end-seed marker) may be written in the
        same step, advancing ``state.cursor`` past it; otherwise write-behind writes it.
        Each is its own batch, as a by-reference fork's file holds them.
        """
        if prefix:
            self._write(state, prefix)
            if suffix:
                self._write(state, suffix)

    def materialize(self, session_id: str) -> None:
        """Turn a fork that references its parent's prefix into a full copy (no-op if it is one)."""
        self._check_open()

    def delete(self, session_id: str) -> None:
        """Remove a stored session; refused while it is live or while fork children reference it."""
        self._check_open()
        with self._serialized(session_id):
            if session_id in self._live:
                raise UsageError("cannot delete a live session; close it first", session_id=session_id)
            if not self._stored_exists(session_id) and session_id not in self._states:
                raise SessionNotFoundError("session not found", session_id=session_id)
            children = self._children_of(session_id)
            if children:
                names = ", ".join(sorted(children))
                raise UsageError(f"cannot delete: fork children reference this session ({names}); "
                                 "materialize them first (agentlog materialize ID), or delete them",
                                 session_id=session_id)
            with self._writer_locked(session_id, "delete"):
                self._delete_stored(session_id)
                self._states.pop(session_id, None)
                with self._guard:  # release what was read of it
                    self._prepared.pop(session_id, None)
                    self._fork_sources.pop(session_id, None)
                    self._appending.pop(session_id, None)

    def close(self) -> None:
        """Drain and close every live session, then release the backend (idempotent)."""
        if self._closed:
            return
        errors: builtins.list[Exception] = []
        for live in list(self._live.values()):
            try:
                live.close()
            except Exception as exc:
                errors.append(exc)
        self._closed = True
        self._close_backend()
        if errors:
            raise ExceptionGroup(f"{self.name} store close failed", errors)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _persist(self, state: _State, batch: Sequence[Event]) -> None:
        """A live session's durable write (``GroupCommitStore`` shares one commit among several)."""
        self._write(state, batch)

    # -- async twins -------------------------------------------------------------------------

    async def acreate(self, header: SessionHeader) -> None:
        await in_thread(self.create, header)

    async def aappend(self, session_id: str, events: Iterable[Event | dict[str, Any]]) -> None:
        await in_thread(self.append, session_id, list(events))

    async def aload(self, session_id: str) -> Inspection:
        return await in_thread(self.load, session_id)

    async def ainspect(self, session_id: str, *, trust_checkpoint: bool = True) -> Inspection:
        return await in_thread(self.inspect, session_id, trust_checkpoint=trust_checkpoint)

    async def acheck_integrity(self, session_id: str, *, recovery: Recovery | None = None) -> Integrity:
        return await in_thread(self.check_integrity, session_id, recovery=recovery)

    async def aread_from(self, session_id: str, from_seq: int) -> Inspection:
        return await in_thread(self.read_from, session_id, from_seq)

    async def alist(self) -> builtins.list[SessionHeader]:
        return await in_thread(self.list)

    async def alist_snapshots(self) -> builtins.list[Snapshot]:
        return await in_thread(self.list_snapshots)

    async def aread_raw(self, session_id: str) -> RawArtifact | None:
        return await in_thread(self.read_raw, session_id)

    async def astart(self, header: SessionHeader | str) -> LiveSession:
        return await in_thread(self.start, header)

    async def aopen(self, session_id: str) -> LiveSession:
        return await in_thread(self.open, session_id)

    async def afork(self, session_id: str, boundary: int | None = None,
                    child_id: str | None = None) -> LiveSession:
        return await in_thread(self.fork, session_id, boundary, child_id)

    async def amaterialize(self, session_id: str) -> None:
        await in_thread(self.materialize, session_id)

    async def adelete(self, session_id: str) -> None:
        await in_thread(self.delete, session_id)

    async def aclose(self) -> None:
        await in_thread(self.close)
