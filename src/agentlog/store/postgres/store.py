"""PostgresStore: sessions in PostgreSQL, shared by many worker processes on many hosts.

Pointing agentlog at PostgreSQL: install the extra (``pip install 'agentlog[postgres]'``), then

    from agentlog import open_store
    store = open_store("postgresql://agent@db.internal:5432/agents?schema=agentlog")
    # or: PostgresStore("postgresql://agent@db.internal/agents", schema="agentlog", pool_max=8)

and for the command line, ``export AGENTLOG_STORE=postgresql://agent@db.internal:5432/agents``.
The DSN is a libpq URL or ``key=value`` string; libpq's environment variables (``PGHOST``,
``PGPASSWORD``, ``PGSSLMODE``...) and ``~/.pgpass`` apply, so secrets can stay out of the URL.
On first use the store creates its schema (default ``agentlog``: tables ``meta``, ``sessions``
and ``events``); that first run (and one that migrates) needs a role allowed to create it,
later runs only read and write its tables. The schema is versioned (``meta.schema_version``
beside the store's uuid) and a build refuses a schema newer than it knows. Deployments can
share a database with a schema each. Behind PgBouncer, use session pooling: writer locks and
``LISTEN`` belong to a connection's session.

Guarantees: each append is one transaction that checks the stored next seq, so a racing
writer gets ``ConcurrentWriterError`` and logs never interleave; a live session holds a
PostgreSQL advisory lock (on the store's one lock connection) for its lifetime, so a second writer on
any host gets ``SessionLockedError`` naming the holder's process (a cold append or repair
takes the same lock for its one write), and the lock is released when the holder's
connection dies (a live session notices at its next flush: it takes the lock back only if the
session is still where it left it). A fork or repair whose commit reply is lost retries once
and recognises its own commit. ``tail()``/``atail()`` follow a live session from
another host (``LISTEN``/``NOTIFY``, re-reading by index seek). Forks reference their
parent's prefix (O(1)); ``materialize()`` turns one into a full copy.

Past one server: Postgres-compatible distributed SQL services are the path to more write
throughput and availability than one PostgreSQL server gives. Point the DSN at the service;
the store needs its advisory-lock functions (writer exclusivity; the expected-seq check
alone still prevents interleaving) and ``LISTEN``/``NOTIFY`` (``tail``): check the
service's compatibility notes for both.
"""

from __future__ import annotations

import builtins
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from agentlog.core.events import Event, is_safe_int
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import dumps
from agentlog.core.packed import resolve_entries
from agentlog.errors import (
    AgentlogError,
    ConcurrentWriterError,
    InvalidEventError,
    PersistenceIOError,
    SessionCorruptionError,
    SessionExistsError,
    SessionNotFoundError,
    UsageError,
)
from agentlog.store.base import DEFAULT_WRITE_DELAY_MS
from agentlog.store.group_commit import Pending, fail_all
from agentlog.store.hooks import _State
from agentlog.store.incarnation import new_incarnation
from agentlog.store.integrity import row_digest
from agentlog.store.postgres.errors import translate
from agentlog.store.postgres.follow import afollow, follow
from agentlog.store.postgres.locks import AdvisoryLocks, SessionLock, application_name
from agentlog.store.postgres.reads import PostgresReads, session_info
from agentlog.store.postgres.rows import encode_columns, same_rows
from agentlog.store.postgres.schema import SESSION_COLUMNS, Statements
from agentlog.store.postgres.search import SearchStatements, search_columns
from agentlog.store.records import StoredLog, WriterLock
from agentlog.store.validate import current_log

__all__ = ["PostgresStore"]

_POOL_TIMEOUT: Final = 30.0
"""Seconds an operation waits for a pooled connection before ``PersistenceIOError``."""
_NOTIFY: Final = "SELECT pg_notify(%s, %s)"
_NO_SEQ: Final = 2**63 - 1
"""Past every stored seq: the end of a range read that wants every row from its start."""


def _header_values(header: SessionHeader) -> tuple[Any, ...]:
    extra = dumps(header.extra).decode("utf-8") if header.extra else None
    return (header.id, header.version, header.created_at, header.cwd, header.parent_session,
            header.seed_length, header.origin, header.delegation_depth, header.agent_preset, extra)


class PostgresStore(PostgresReads):
    """Sessions in one PostgreSQL schema; safe for many processes on many hosts."""

    name = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "agentlog",
        write_delay_ms: int = DEFAULT_WRITE_DELAY_MS,
        pool_min: int = 1,
        pool_max: int = 8,
        create: bool = True,
    ) -> None:
        super().__init__(write_delay_ms=write_delay_ms, group_writers=pool_max)
        if type(schema) is not str or not schema or "\0" in schema or len(schema.encode()) > 63:
            raise ValueError(f"schema must be a PostgreSQL identifier of 1..63 bytes, got {schema!r}")
        if not (is_safe_int(pool_min) and is_safe_int(pool_max) and 0 <= pool_min <= pool_max >= 1):
            raise ValueError(f"need 0 <= pool_min <= pool_max and pool_max >= 1, got {pool_min}, {pool_max}")
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            raise UsageError(f"invalid PostgreSQL DSN: {exc}") from None
        self.dsn = dsn
        self.schema = schema
        self.may_create = create
        """False: a reader's store, which never creates or migrates the schema."""
        host = params.get("host") or os.environ.get("PGHOST") or "localhost"
        port = params.get("port") or os.environ.get("PGPORT") or 5432
        self.where = f"{host}:{port}/{params.get('dbname', '')}"
        self._sql = Statements(schema)
        self._search_sql = SearchStatements(schema, SESSION_COLUMNS)
        self._connect_kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params and "PGCONNECT_TIMEOUT" not in os.environ:
            self._connect_kwargs["connect_timeout"] = 10
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            dsn, min_size=pool_min, max_size=pool_max, open=False, kwargs=dict(self._connect_kwargs),
            name=f"agentlog-{schema}", timeout=_POOL_TIMEOUT,
        )
        self._setup = threading.Lock()
        self._store_id: str | None = None
        self._aux = threading.Lock()
        self._locks = AdvisoryLocks(self._connect, schema, self.where)
        self._incarnations: dict[str, uuid.UUID] = {}
        self._creating: dict[str, uuid.UUID] = {}
        """The incarnation of a session's first batch until it is known committed (a retry reuses it)."""
        self._cache: OrderedDict[str, tuple[tuple[uuid.UUID, int], StoredLog]] = OrderedDict()
        self._prefixes: OrderedDict[str, tuple[tuple[uuid.UUID, int, int], StoredLog]] = OrderedDict()
        """A fork's prefix reads (``_load_stored_until``), reused while the parent's revision holds."""
        self._snapshot: ContextVar[psycopg.Connection[Any] | None] = ContextVar(
            f"agentlog-snapshot-{id(self)}", default=None)

    # -- writing -------------------------------------------------------------------------------

    def _insert(self, conn: psycopg.Connection[Any], session_id: str, events: Sequence[Event]) -> None:
        if events:
            conn.execute(self._sql.insert_rows, {"id": session_id, **encode_columns(session_id, events),
                                                 **search_columns(events)})

    def _append_batch(self, header: SessionHeader, events: Sequence[Event], *, materialize: bool) -> None:
        """One statement, one round trip (writer lock held): advance the stored next seq, insert, notify.

        The insert runs only when the expected-seq check matched, so a refused or failed batch
        changes nothing. A new session's first batch creates its row in the same transaction.
        A batch refused because its own earlier attempt committed unseen counts as written (``_holds``).
        """
        self._ready()
        sid = header.id
        incarnation = (self._creating.setdefault(sid, new_incarnation()) if materialize
                       else self._incarnations.get(sid))
        params = self._append_params(sid, events, incarnation)
        with translate(sid, self.where), self._pool.connection() as conn:
            try:
                if materialize:
                    self._send_create(conn, header, params)
                elif not self._send_appends(conn, [params])[0]:
                    raise _Mismatch()
            except (_Mismatch, psycopg.errors.UniqueViolation):
                if materialize:  # the row exists: this batch's own unseen commit, or another's
                    if not self._holds(conn, sid, events, incarnation)[1]:
                        raise
                else:
                    refusal = self._refusal(conn, sid, events, incarnation)
                    if refusal is not None:
                        raise refusal from None
        if incarnation is not None:
            self._incarnations[sid] = incarnation
            self._creating.pop(sid, None)

    def _append_params(self, sid: str, events: Sequence[Event],
                       incarnation: uuid.UUID | None) -> dict[str, Any]:
        return {"id": sid, **encode_columns(sid, events),
                "first": events[0].seq, "end": events[-1].seq + 1,
                "channel": self.channel(sid), "incarnation": incarnation}

    def _append_group(self, group: Sequence[Pending]) -> None:
        """The batches of several live sessions in one transaction sent as one pipeline (one
        commit, one WAL flush). A batch whose expected seq no longer matches inserts nothing and
        gets its own error; a statement error aborts the transaction, so then each batch is
        written alone and only the bad one fails. A new session's first batch is written alone."""
        self._ready()
        ready: list[tuple[Pending, dict[str, Any]]] = []
        for item in group:
            try:
                if item.materialize or len(group) == 1:
                    self._append_batch(item.header, item.events, materialize=item.materialize)
                else:
                    ready.append((item, self._append_params(item.header.id, item.events,
                                                            self._incarnations.get(item.header.id))))
            except Exception as exc:
                item.error = exc
        if not ready:
            return
        try:
            with translate(None, self.where), self._pool.connection() as conn:
                try:
                    applied = self._send_appends(conn, [params for _item, params in ready])
                    refused = [(item, params) for (item, params), done in zip(ready, applied, strict=True)
                               if not done]
                except psycopg.DatabaseError as exc:
                    if isinstance(exc, psycopg.OperationalError) or conn.broken:
                        raise
                    refused = ready  # rolled back whole: write each alone, so only the bad one fails
                    retry = True
                else:
                    retry = False
        except AgentlogError as exc:  # the connection failed: whether the group committed is unknown
            fail_all([item for item, _params in ready], exc)
            return
        for item, params in refused:
            try:
                if retry:
                    self._append_batch(item.header, item.events, materialize=False)
                else:
                    with translate(item.header.id, self.where), self._pool.connection() as conn:
                        item.error = self._refusal(conn, item.header.id, item.events, params["incarnation"])
            except Exception as exc:
                item.error = exc

    def _send_create(self, conn: psycopg.Connection[Any], header: SessionHeader,
                     params: dict[str, Any]) -> None:
        """Create the session's row with its first batch and notify, in one pipelined transaction."""
        with conn.pipeline(), conn.transaction():
            conn.execute(self._sql.insert_session,
                         (*_header_values(header), None, 0, params["end"], params["incarnation"], 1,
                          row_digest(_header_values(header)), 0))
            conn.execute(self._sql.insert_unindexed, params)
            conn.execute(_NOTIFY, (params["channel"], str(params["end"])))

    def _send_appends(self, conn: psycopg.Connection[Any], batches: Sequence[dict[str, Any]]) -> list[bool]:
        """Run the one-statement appends (one alone, several in one pipelined transaction) and
        commit; for each batch, whether its expected seq matched and its rows went in."""
        if len(batches) == 1:
            return [conn.execute(self._sql.append, batches[0]).fetchone() is not None]
        with conn.pipeline(), conn.transaction():
            cursors = [conn.execute(self._sql.append, params) for params in batches]
        return [cursor.fetchone() is not None for cursor in cursors]

    def _holds(self, conn: psycopg.Connection[Any], sid: str, events: Sequence[Event],
               incarnation: uuid.UUID | None) -> tuple[tuple[Any, ...] | None, bool]:
        """The session's (next seq, revision, incarnation) row, and whether the session provably
        holds ``events`` as its last batch, written by this writer.

        A retry after a commit whose outcome was unknown (the connection died with the reply in
        flight) finds its own batch committed: that is success only when the session is the same
        incarnation, ends exactly at the batch's end, and holds exactly the rows this batch
        encodes to (the writer lock may have died with its connection, so another writer could
        have stored these seqs). The session row is locked while reading, so no append moves it
        between the two reads.
        """
        first, end = events[0].seq, events[-1].seq + 1
        with conn.transaction():
            row = conn.execute(self._sql.lock_session, (sid,)).fetchone()
            held = (row is not None and incarnation is not None and (row[0], row[2]) == (end, incarnation)
                    and same_rows(conn.execute(self._sql.rows, (sid, first, end)).fetchall(), events))
        return row, held

    def _refusal(self, conn: psycopg.Connection[Any], sid: str, events: Sequence[Event],
                 incarnation: uuid.UUID | None) -> AgentlogError | None:
        """The error for a refused append, or None when the batch is its own unseen commit
        (``_holds``); an error forgets this process's stale cursor."""
        first = events[0].seq
        row, held = self._holds(conn, sid, events, incarnation)
        if held:
            return None
        if sid not in self._live:
            self._states.pop(sid, None)
        if row is None:
            return SessionNotFoundError("session was deleted by another writer", session_id=sid, seq=first)
        if row[2] != incarnation:
            return ConcurrentWriterError("session was deleted and re-created by another writer",
                                         session_id=sid, seq=first)
        return ConcurrentWriterError(
            f"append seq mismatch: stored next seq is {row[0]}, batch starts at {first}",
            session_id=sid, seq=first,
        )

    def _once_more_if_lost(self, sid: str, write: Callable[[psycopg.Connection[Any], bool], None]) -> None:
        """Run ``write`` in a pooled connection; if that connection died (so whether its commit
        landed is unknown), run it once more in a fresh one, told it is a retry so it can
        recognise its own commit. A fork or repair keeps no queue to retry from later."""
        with translate(sid, self.where):
            conn: psycopg.Connection[Any] | None = None
            try:
                with self._pool.connection() as conn:
                    write(conn, False)
                return
            except (psycopg.OperationalError, psycopg.InterfaceError):
                if conn is None or not (conn.closed or conn.broken):
                    raise
            with self._pool.connection() as conn:
                write(conn, True)

    def _commit_repair(self, header: SessionHeader, torn: Any, events: Sequence[Event]) -> None:
        """Truncate a torn tail and append closers in one transaction, refusing a stale repair.

        A retry after a lost reply recognises its own committed repair (``_repaired``)."""
        self._ready()
        sid = header.id
        seen: list[tuple[Any, ...]] = []  # the session row the first attempt locked, once read

        def write(conn: psycopg.Connection[Any], retry: bool) -> None:
            with conn.transaction():
                row = conn.execute(self._sql.lock_session, (sid,)).fetchone()
                if row is None:
                    raise SessionNotFoundError("cannot repair: the metadata row is missing", session_id=sid)
                if retry and seen and self._repaired(conn, sid, seen[0], torn, events, row):
                    return
                seen.append(row)
                self._send_repair(conn, sid, row, torn, events)

        self._once_more_if_lost(sid, write)

    def _send_repair(self, conn: psycopg.Connection[Any], sid: str, row: tuple[Any, ...], torn: Any,
                     events: Sequence[Event]) -> None:
        """The repair's writes, in the caller's transaction, checked against the locked row."""
        cursor, revision, incarnation = row
        if torn is not None:
            if (incarnation, revision) != (torn.incarnation, torn.revision):
                raise ConcurrentWriterError("repair is stale: the session changed since it was read",
                                            session_id=sid)
            conn.execute(self._sql.truncate, (sid, torn.start))
            cursor = torn.start
        if events and events[0].seq != cursor:
            raise ConcurrentWriterError(
                f"repair is stale: closer starts at seq {events[0].seq} but stored next seq is {cursor}",
                session_id=sid, seq=events[0].seq,
            )
        self._insert(conn, sid, events)
        conn.execute(self._sql.set_cursor, (cursor + len(events), cursor, sid))
        conn.execute(_NOTIFY, (self.channel(sid), str(cursor + len(events))))

    def _repaired(self, conn: psycopg.Connection[Any], sid: str, before: tuple[Any, ...], torn: Any,
                  events: Sequence[Event], row: tuple[Any, ...]) -> bool:
        """Whether the locked ``row`` is this repair's own commit over ``before``: one revision
        later, same incarnation, next seq at the repair's end and the rows from its cut on exactly
        the rows ``events`` encode to (a different change since is refused as stale)."""
        cut = torn.start if torn is not None else before[0]
        if (row[0], row[1], row[2]) != (cut + len(events), before[1] + 1, before[2]):
            return False
        return same_rows(conn.execute(self._sql.rows, (sid, cut, _NO_SEQ)).fetchall(), events)

    def _write_fork_prefix(self, header: SessionHeader, prefix: Sequence[Event], state: _State,
                           suffix: Sequence[Event] = ()) -> None:
        """Materialize the child as a reference to its parent's first ``len(prefix)`` events: O(1).

        A retry after a lost reply finds its own child (the incarnation it generated, same
        parent, length and header) and succeeds; a child someone else created is refused."""
        if not prefix:
            return
        self._ready()
        sid, parent, length = header.id, header.parent_session, len(prefix)
        incarnation = new_incarnation()

        def write(conn: psycopg.Connection[Any], retry: bool) -> None:
            with conn.transaction():
                if retry and self._own_child(conn, header, length, incarnation):
                    return
                row = conn.execute(self._sql.share_session, (parent,)).fetchone()
                if row is None or row[0] < length:
                    raise SessionCorruptionError(f"fork parent {parent!r} no longer holds {length} events",
                                                 session_id=sid)
                conn.execute(self._sql.insert_session,
                             (*_header_values(header), parent, length, length, incarnation, 1,
                              row_digest(_header_values(header)), length))

        try:
            self._once_more_if_lost(sid, write)
        except PersistenceIOError as exc:  # twice lost: the child may exist (as ours) or not
            exc.detail = (f"{exc.detail}; whether fork child {sid!r} was created is unknown: "
                          "inspect it before forking again")
            exc.args = (exc.detail,)
            raise
        self._incarnations[sid] = incarnation
        state.materialized = True
        state.cursor = length

    def _own_child(self, conn: psycopg.Connection[Any], header: SessionHeader, length: int,
                   incarnation: uuid.UUID) -> bool:
        """Whether the stored row of ``header.id`` is the fork child this attempt's first try
        committed: its incarnation, parent, prefix length, untouched cursor and header."""
        row = conn.execute(self._sql.session, (header.id,)).fetchone()
        if row is None:
            return False
        info = session_info(row)
        return (info.incarnation, info.base, info.base_length, info.next_seq, info.revision) == (
            incarnation, header.parent_session, length, length, 1) and info.header == header

    def materialize(self, session_id: str) -> None:
        """Copy a by-reference fork's shared prefix into its own rows, so its parent can be deleted."""
        self._check_open()
        with self._serialized(session_id):
            if session_id in self._live:
                raise UsageError("cannot materialize a live session; close it first", session_id=session_id)
            stored = self._load_stored(session_id)
            if stored is None:
                raise SessionNotFoundError("session not found", session_id=session_id)
            with translate(session_id, self.where), self._pool.connection() as conn, conn.transaction():
                row = conn.execute(self._sql.session_for_update, (session_id,)).fetchone()
                if row is None:
                    raise SessionNotFoundError("session not found", session_id=session_id)
                info = session_info(row)
                if info.base is None:
                    return
                if info.incarnation != self._incarnations.get(session_id):
                    raise ConcurrentWriterError("session changed during materialize", session_id=session_id)
                # The copy holds the prefix as its writers' sessions read it (legacy ids named after them).
                prefix = current_log(session_id, stored.events[: info.base_length], stored.writers)
                self._insert(conn, session_id, resolve_entries(prefix))
                conn.execute(self._sql.detach, (session_id,))

    # -- locks and deletion -------------------------------------------------------------------------

    def _acquire_writer_lock(self, session_id: str) -> WriterLock:
        self._ready()
        return self._locks.acquire(session_id)

    def _check_writer_lock(self, lock: WriterLock, state: _State, batch: Sequence[Event]) -> None:
        """Before a live session writes: if its lock connection died (the server dropped the
        lock), take the lock back, then keep it only when the session is still where this
        writer left it (or holds ``batch`` as its own unseen commit); else give it back and
        raise ``ConcurrentWriterError`` (``SessionLockedError`` while another writer holds it)."""
        if not isinstance(lock, SessionLock) or self._locks.holds(lock):
            return
        sid = state.header.id
        self._locks.retake(lock)
        incarnation = self._incarnations.get(sid) if state.materialized else self._creating.get(sid)
        try:
            with translate(sid, self.where), self._pool.connection() as conn:
                row, own = self._holds(conn, sid, batch, incarnation)
        except BaseException:
            self._locks.give_back(lock)
            raise
        if own or (row is None and not state.materialized) or (
                row is not None and state.materialized and (row[0], row[2]) == (state.cursor, incarnation)):
            return
        self._locks.give_back(lock)
        first = batch[0].seq
        lost = "the writer lock was lost with its connection and meanwhile"
        if row is None:
            raise SessionNotFoundError(f"{lost} another writer deleted the session",
                                       session_id=sid, seq=first)
        if not state.materialized:
            raise SessionExistsError(f"{lost} another writer created the session", session_id=sid, seq=first)
        if row[2] != incarnation:
            raise ConcurrentWriterError(f"{lost} another writer re-created the session",
                                        session_id=sid, seq=first)
        raise ConcurrentWriterError(f"{lost} another writer appended: stored next seq is {row[0]}, "
                                    f"batch starts at {first}", session_id=sid, seq=first)

    def _writer_pid(self, session_id: str) -> int | None:
        self._ready()
        return self._locks.holder_pid(session_id)

    def _delete_stored(self, session_id: str) -> None:
        self._ready()
        with translate(session_id, self.where), self._pool.connection() as conn, conn.transaction():
            conn.execute(self._sql.delete, (session_id,))
            conn.execute(_NOTIFY, (self.channel(session_id), "deleted"))
        self._incarnations.pop(session_id, None)
        self._creating.pop(session_id, None)

    def _close_backend(self) -> None:
        self._locks.close()
        self._pool.close()

    # -- following a live session ------------------------------------------------------------------

    def _read_suffix(self, session_id: str, from_seq: int) -> builtins.list[Event]:
        self._check_open()
        stored = self._load_stored_from(session_id, from_seq)
        if stored is None:
            raise SessionNotFoundError("session not found", session_id=session_id)
        return resolve_entries(stored.events, from_seq)

    def _check_from(self, session_id: str, from_seq: int) -> None:
        self._check_open()
        if not is_safe_int(from_seq) or from_seq < 0:
            raise InvalidEventError(f"from_seq must be a non-negative safe integer, got {from_seq!r}",
                                    session_id=session_id)

    def tail(self, session_id: str, from_seq: int = 0, *, idle_timeout: float | None = None,
             poll_interval: float = 5.0) -> Iterator[Event]:
        """Yield the session's events with ``seq >= from_seq`` as they commit: in order, each once.

        Follows commits from any host (``LISTEN``/``NOTIFY``; each wake-up re-reads by seek from
        the next unseen seq, so coalesced notifications lose nothing). Ends after
        ``idle_timeout`` seconds without a new event (``None``: never); also re-reads every
        ``poll_interval`` seconds. Raises ``SessionNotFoundError`` if the session is (or
        becomes) absent.
        """
        self._check_from(session_id, from_seq)
        self._ready()
        return follow(lambda seq: self._read_suffix(session_id, seq),
                      lambda: self._connect(application_name=application_name(" tail")),
                      self.channel(session_id), from_seq, idle_timeout=idle_timeout,
                      poll_interval=poll_interval, where=self.where)

    def atail(self, session_id: str, from_seq: int = 0, *, idle_timeout: float | None = None,
              poll_interval: float = 5.0) -> AsyncIterator[Event]:
        """``tail()`` as an async iterator that never blocks the event loop."""
        self._check_from(session_id, from_seq)
        def connect_args() -> tuple[str, dict[str, Any]]:
            self._ready()
            return self._async_connect_args()

        return afollow(lambda seq: self._read_suffix(session_id, seq), connect_args, self.channel(session_id),
                       from_seq, idle_timeout=idle_timeout, poll_interval=poll_interval, where=self.where)


class _Mismatch(Exception):  # noqa: N818 - internal control flow, never escapes
    """The stored next seq did not match the batch (turned into ``ConcurrentWriterError``)."""
