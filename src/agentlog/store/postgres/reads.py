"""The PostgreSQL store's connections, setup and read path: sessions rows, fork prefixes, seek reads.

``PostgresReads`` opens the pool and creates or checks the schema once, hands out connections
(``read_snapshot``'s pinned one, or a pooled one) and reads sessions from one snapshot, a fork's
shared prefix by reference, with the last decodes cached by incarnation and revision. It is the
part of ``PostgresStore`` that does this; the writes, locks, deletion and ``tail`` are ``PostgresStore``'s.
"""

from __future__ import annotations

import builtins
import hashlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from psycopg_pool import ConnectionPool

from agentlog.core.events import Event
from agentlog.core.header import FORMAT_VERSION, SessionHeader
from agentlog.core.jsonvalue import freeze, frozen_dict, loads
from agentlog.core.search_text import Candidates
from agentlog.errors import (
    AgentlogError,
    SessionCorruptionError,
    SessionFormatUnsupportedError,
    SessionNotFoundError,
)
from agentlog.legacy.upgrade import chain_writers
from agentlog.store.group_commit import GroupCommitStore
from agentlog.store.incarnation import stored_at
from agentlog.store.integrity import Integrity, check_rows, torn_seq
from agentlog.store.postgres.errors import translate
from agentlog.store.postgres.rows import scan_rows, scan_suffix
from agentlog.store.postgres.schema import Statements, ensure_schema
from agentlog.store.postgres.search import SearchStatements, candidates, catch_up
from agentlog.store.records import Listing, Recovery, Snapshot, StoredLog, Unreadable

__all__ = ["PostgresReads", "SessionInfo", "session_info"]

_CACHE_SIZE: Final = 5
"""Decoded sessions kept per store (reused while their incarnation and revision are unchanged)."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A ``sessions`` row: the header and the bookkeeping beside it."""

    header: SessionHeader
    base: str | None
    base_length: int
    next_seq: int
    incarnation: uuid.UUID
    revision: int


@dataclass(frozen=True, slots=True)
class _Torn:
    """Where a torn tail starts, and which stored state it was read from (stale-repair guard)."""

    start: int
    incarnation: uuid.UUID
    revision: int


def session_info(row: Sequence[Any]) -> SessionInfo:
    """Decode and validate a ``sessions`` row (persistence §5.11)."""
    sid, version = row[0], row[1]
    if version != FORMAT_VERSION:
        raise SessionFormatUnsupportedError(
            f"uses log format v{version}, but this build reads only v{FORMAT_VERSION}; "
            "it was written by a newer harness — upgrade agentlog", session_id=sid,
        )
    try:
        extra = freeze(loads(row[9]), root="header") if row[9] is not None else frozen_dict(())
        header = SessionHeader(id=sid, created_at=row[2], cwd=row[3], parent_session=row[4],
                               seed_length=row[5], origin=row[6], delegation_depth=row[7],
                               agent_preset=row[8], extra=extra)
    except (AgentlogError, ValueError) as exc:
        raise SessionCorruptionError(f"invalid stored session metadata: {exc}", session_id=sid) from None
    return SessionInfo(header, row[10], row[11], row[12], row[13], row[14])



class PostgresReads(GroupCommitStore):
    """Connections, setup and reads of ``PostgresStore`` (which sets these up)."""

    dsn: str
    schema: str
    may_create: bool
    where: str
    _sql: Statements
    _search_sql: SearchStatements
    _connect_kwargs: dict[str, Any]
    _pool: ConnectionPool[psycopg.Connection[Any]]
    _setup: threading.Lock
    _store_id: str | None
    _aux: threading.Lock
    _incarnations: dict[str, uuid.UUID]
    _cache: OrderedDict[str, tuple[tuple[uuid.UUID, int], StoredLog]]
    _prefixes: OrderedDict[str, tuple[tuple[uuid.UUID, int, int], StoredLog]]
    _snapshot: ContextVar[psycopg.Connection[Any] | None]

    # -- connections and setup ----------------------------------------------------------------

    def _ready(self) -> str:
        """Open the pool and create or check the schema, once; return the store uuid."""
        store_id = self._store_id
        if store_id is not None:
            return store_id
        with self._setup:
            if self._store_id is None:
                self._check_open()
                with translate(where=self.where), self._connect() as conn:
                    store_id = ensure_schema(conn, self.schema, self._sql, create=self.may_create)
                with translate(where=self.where):
                    self._pool.open(wait=False)
                self._store_id = store_id
            return self._store_id

    def _connect(self, **extra: Any) -> psycopg.Connection[Any]:
        """A new dedicated connection (the lock connection, tail)."""
        with translate(where=self.where):
            return psycopg.connect(self.dsn, **self._connect_kwargs, **extra)

    def _async_connect_args(self) -> tuple[str, dict[str, Any]]:
        return self.dsn, dict(self._connect_kwargs)

    def channel(self, session_id: str) -> str:
        """The ``LISTEN``/``NOTIFY`` channel that announces the session's commits."""
        digest = hashlib.blake2b(f"{self.schema}\0{session_id}".encode("utf-8", "surrogatepass"),
                                 digest_size=16).hexdigest()
        return f"agentlog_{digest}"

    def _revision(self, info: SessionInfo) -> str:
        return f"postgres:store:{self._store_id}:incarnation:{info.incarnation}:revision:{info.revision}"

    # -- reading -------------------------------------------------------------------------------

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """Run the block's reads (``listing``, ``inspect``, ``read_from``) in one REPEATABLE READ,
        READ ONLY transaction: one consistent view that cannot write and blocks no writer
        (``check-upgrade``'s form of "on a copy"). Writes in the block use their own connections."""
        self._ready()
        with translate(where=self.where), self._pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            token = self._snapshot.set(conn)
            try:
                yield
            finally:
                self._snapshot.reset(token)

    @contextmanager
    def _reading(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one read: ``read_snapshot``'s (under a savepoint, so a failed
        statement spares the snapshot), else a pooled one."""
        pinned = self._snapshot.get()
        if pinned is None:
            with self._pool.connection() as conn:
                yield conn
        else:
            with pinned.transaction():
                yield pinned

    @contextmanager
    def _read_view(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection in a REPEATABLE READ, READ ONLY transaction, for reads that span statements."""
        if self._snapshot.get() is not None:
            with self._reading() as conn:
                yield conn
            return
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

    def _check_integrity(self, session_id: str, torn: Recovery | None) -> Integrity:
        """The session's row and event rows against their digests (schema 3), in one snapshot."""
        self._ready()
        with translate(session_id, self.where), self._read_view() as conn:
            header = conn.execute(self._sql.header_digest, (session_id,)).fetchone()
            if header is None:
                raise SessionNotFoundError("session not found", session_id=session_id)
            return check_rows(session_id, header, conn.execute(self._sql.row_digests, (session_id,)),
                              torn_seq(torn), where=self.where)

    def _segments(self, conn: psycopg.Connection[Any], info: SessionInfo) -> list[tuple[str, int, int]]:
        """The referenced prefix of a fork as (session id, first seq, end seq) ranges, oldest first."""
        segments: list[tuple[str, int, int]] = []
        child, parent, end = info.header.id, info.base, info.base_length
        seen = {child}
        while parent is not None and end > 0:
            if parent in seen:
                raise SessionCorruptionError(f"fork reference cycle through {parent!r}", session_id=child)
            seen.add(parent)
            row = conn.execute(self._sql.session, (parent,)).fetchone()
            if row is None:
                raise SessionCorruptionError(f"fork parent {parent!r} is missing", session_id=child)
            up = session_info(row)
            if up.next_seq < end:
                raise SessionCorruptionError(
                    f"fork parent {parent!r} no longer holds the {end} events this fork shares",
                    session_id=child,
                )
            start = min(up.base_length, end)
            if start < end:
                segments.append((parent, start, end))
            child, parent, end = parent, up.base, start
        segments.reverse()
        return segments

    @contextmanager
    def _viewing(self, session_id: str) -> Iterator[tuple[psycopg.Connection[Any], SessionInfo | None]]:
        """One session's read view: its connection and decoded ``sessions`` row (None: absent)."""
        self._ready()
        with translate(session_id, self.where), self._read_view() as conn:
            row = conn.execute(self._sql.session, (session_id,)).fetchone()
            yield conn, None if row is None else session_info(row)

    def _load_stored(self, session_id: str) -> StoredLog | None:
        """The session as stored, from one snapshot; a cached decode is reused while its revision holds."""
        with self._viewing(session_id) as (conn, info):
            if info is None:
                return None
            with self._aux:
                cached = self._cache.get(session_id)
                if cached is not None and cached[0] == (info.incarnation, info.revision):
                    self._cache.move_to_end(session_id)
                    self._incarnations[session_id] = info.incarnation
                    stored = cached[1]
                    return StoredLog(stored.header, stored.events, stored.revision, stored.torn,
                                     writers=list(stored.writers))  # events: an immutable tuple, shared
            parts = [(sid, start, end, conn.execute(self._sql.rows, (sid, start, end)).fetchall())
                     for sid, start, end in self._segments(conn, info)]
            own = conn.execute(self._sql.rows, (session_id, info.base_length, info.next_seq)).fetchall()
        shared = [(start, sid) for sid, start, _end, _rows in parts]
        writers = chain_writers(shared, info.base_length, session_id)
        events: list[Event] = []
        for sid, start, end, rows in parts:
            try:
                events.extend(scan_rows(rows, start, end, tolerate_torn=False).events)
            except SessionCorruptionError as exc:
                raise exc.locate(session_id=sid) from None
        try:
            scan = scan_rows(own, info.base_length, info.next_seq, tolerate_torn=True)
        except SessionCorruptionError as exc:
            raise exc.locate(session_id=session_id) from None
        events.extend(scan.events)
        torn = None if scan.torn is None else _Torn(scan.torn, info.incarnation, info.revision)
        stored = StoredLog(info.header, tuple(events), self._revision(info), torn, writers=writers)
        with self._aux:
            self._incarnations[session_id] = info.incarnation
            self._cache[session_id] = ((info.incarnation, info.revision), stored)
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return StoredLog(info.header, stored.events, stored.revision, torn, writers=list(stored.writers))

    def _load_stored_until(self, session_id: str, until_seq: int) -> StoredLog | None:
        """A fork's prefix: only the rows holding seqs below ``until_seq`` are read and decoded
        (the whole log when that is all of it, or when a row in the prefix does not decode: a
        torn tail's, which only the whole read can tell from corruption)."""
        with self._viewing(session_id) as (conn, info):
            if info is None:
                return None
            with self._aux:
                known = self._prefixes.get(session_id)
                if known is not None and known[0][:2] == (info.incarnation, info.revision) \
                        and known[0][2] >= until_seq:
                    self._prefixes.move_to_end(session_id)
                    return StoredLog(known[1].header, known[1].events, known[1].revision,
                                     writers=list(known[1].writers))  # events: an immutable tuple, shared
            whole = until_seq >= info.next_seq or session_id in self._cache
            ranges = [] if whole else [(sid, start, min(end, until_seq))
                                       for sid, start, end in self._segments(conn, info) if start < until_seq]
            if not whole and until_seq > info.base_length:
                ranges.append((session_id, info.base_length, until_seq))
            parts = [(sid, start, end, conn.execute(self._sql.rows, (sid, start, end)).fetchall())
                     for sid, start, end in ranges]
        if whole:
            return self._load_stored(session_id)
        writers = chain_writers([(start, sid) for sid, start, _end, _rows in parts if sid != session_id],
                                info.base_length, session_id)
        events: list[Event] = []
        try:
            for _sid, start, end, rows in parts:
                events.extend(scan_rows(rows, start, end, tolerate_torn=False).events)
        except SessionCorruptionError:
            return self._load_stored(session_id)
        stored = StoredLog(info.header, tuple(events), self._revision(info), writers=writers)
        with self._aux:  # a warm fork at or before this boundary reads nothing again
            self._prefixes[session_id] = ((info.incarnation, info.revision, until_seq), stored)
            while len(self._prefixes) > _CACHE_SIZE:
                self._prefixes.popitem(last=False)
        return StoredLog(info.header, stored.events, stored.revision, writers=list(writers))

    def _load_stored_from(self, session_id: str, from_seq: int) -> StoredLog | None:
        """A seek read: only rows from the one covering ``from_seq`` onward are fetched."""
        self._ready()
        with translate(session_id, self.where), self._reading() as conn:
            row = conn.execute(self._sql.session, (session_id,)).fetchone()
            if row is None:
                return None
            info = session_info(row)
            parts = []
            shared: list[tuple[int, str]] = []
            if from_seq < info.base_length:
                for sid, start, end in self._segments(conn, info):
                    if end > from_seq:
                        first = max(start, from_seq)
                        rows = conn.execute(self._sql.rows_from, {"id": sid, "from": first, "end": end})
                        parts.append((first, end, rows.fetchall()))
                        shared.append((start, sid))
            writers = chain_writers(shared, info.base_length, session_id)
            first = max(info.base_length, from_seq)
            rows = conn.execute(self._sql.rows_from, {"id": session_id, "from": first, "end": info.next_seq})
            parts.append((first, info.next_seq, rows.fetchall()))
        events: list[Event] = []
        for start, end, part in parts:
            found = scan_suffix(part, start, end)
            events.extend(found)
            if len(found) != end - start:
                break
        return StoredLog(info.header, events, self._revision(info), writers=writers)

    def _stored_exists(self, session_id: str) -> bool:
        self._ready()
        with translate(session_id, self.where), self._reading() as conn:
            return conn.execute(self._sql.exists, (session_id,)).fetchone() is not None

    def _listing(self) -> Listing:
        self._ready()
        with translate(where=self.where), self._reading() as conn:
            rows = conn.execute(self._sql.sessions).fetchall()
        listing = Listing([])
        for row in rows:
            try:
                info = session_info(row)
            except AgentlogError as exc:
                where = f"{self.where} schema {self.schema}: sessions row {row[0]!r}"
                listing.unreadable.append(Unreadable(row[0], where, exc))
                continue
            listing.snapshots.append(Snapshot(info.header, self._revision(info), stored_at(info.incarnation)))
        return listing

    def _children_of(self, session_id: str) -> builtins.list[str]:
        self._ready()
        with translate(session_id, self.where), self._reading() as conn:
            return [row[0] for row in conn.execute(self._sql.children, (session_id,))]

    def search_candidates(self, folded: str, session_ids: Sequence[str]) -> Candidates | None:
        """Per session, the events the search index points at (None: scan it), from one snapshot."""
        self._ready()
        with translate(None, self.where), self._pool.connection() as conn:
            catch_up(conn, self._search_sql, session_ids)
        with translate(None, self.where), self._pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return candidates(conn, self._search_sql, folded, session_ids, self._chain, list(self._live))

    def _chain(self, conn: psycopg.Connection[Any],
               row: Sequence[Any]) -> builtins.list[tuple[str, int, int]] | None:
        """The row ranges of a ``sessions`` row, own rows first (None: damaged, the scan says why)."""
        try:
            info = session_info(row)
            shared = self._segments(conn, info)
        except AgentlogError:
            return None
        return [(info.header.id, info.base_length, info.next_seq), *reversed(shared)]
