"""Per-session writer exclusivity across hosts: PostgreSQL advisory locks on dedicated connections.

A live session holds ``pg_try_advisory_lock(key)`` on a connection of its own for its whole
lifetime; the server releases it when that connection dies, so a killed writer never wedges a
session. Cold writes (direct appends, repairs) take the same lock for their one write
(``Store._writer_locked``). The holder is named from
``pg_locks``/``pg_stat_activity``: lock connections carry ``application_name``
``agentlog pid=<pid> host=<host>``.
"""

from __future__ import annotations

import os
import select
import socket
import threading
from collections.abc import Callable
from typing import Any, Final

import psycopg

from agentlog.errors import SessionLockedError
from agentlog.store.postgres.errors import translate
from agentlog.store.postgres.schema import advisory_key
from agentlog.store.records import WriterLock

__all__ = ["AdvisoryLocks", "SessionLock", "locked_error"]

_HOLDER: Final = (
    "SELECT a.pid, a.application_name, host(a.client_addr), a.client_hostname "
    "FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()) "
    "AND l.classid = %s::oid AND l.objid = %s::oid LIMIT 1"
)


def application_name(suffix: str = "") -> str:
    """``agentlog pid=<pid> host=<host>``: how a lock holder is recognized (63 bytes at most)."""
    return f"agentlog pid={os.getpid()} host={socket.gethostname()}{suffix}"[:63]


def _holder(conn: psycopg.Connection[Any], key: int) -> tuple[int, int | None, str | None] | None:
    """Who holds ``key``: (backend pid, client pid, host) from ``pg_locks``, None when nobody does."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    row = conn.execute(_HOLDER, (unsigned >> 32, unsigned & 0xFFFF_FFFF)).fetchone()
    if row is None:
        return None
    backend, app, address, hostname = row
    pid = host = None
    for part in str(app or "").split():
        name, _, value = part.partition("=")
        if name == "pid" and value.isdigit():
            pid = int(value)
        elif name == "host":
            host = value
    return int(backend), pid, host or hostname or address


def locked_error(conn: psycopg.Connection[Any], key: int, session_id: str, what: str) -> SessionLockedError:
    """``SessionLockedError`` naming the holder of ``key`` (client pid and host, backend pid)."""
    holder = _holder(conn, key)
    if holder is None:
        return SessionLockedError(f"{what}: another writer holds its lock", session_id=session_id)
    backend, pid, where = holder
    who = f"process {pid}" if pid is not None else "another client"
    detail = f"{what}: it is open for writing by {who}" + (f" on {where}" if where else "")
    return SessionLockedError(f"{detail} (PostgreSQL backend {backend})", session_id=session_id, pid=pid)


def _alive(conn: psycopg.Connection[Any]) -> bool:
    """Whether a lock connection is still up, without a round trip when it is idle and quiet.

    A server that ends a connection (``pg_terminate_backend``, a restart, a crash) sends an
    error and closes it, so an idle lock connection with bytes waiting has been told something
    unasked: only then does a ``SELECT 1`` decide. A peer cut off without a word (a network
    partition) is not seen here; the server keeps its locks until its TCP keepalive ends it.
    """
    if conn.closed or conn.broken:
        return False
    try:
        fd = conn.fileno()
    except psycopg.Error:
        return False
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        waiting = bool(poller.poll(0))
    else:  # pragma: no cover - Windows
        waiting = bool(select.select([fd], [], [], 0)[0])
    if not waiting:
        return True
    try:
        conn.execute("SELECT 1")
    except psycopg.Error:
        conn.close()
        return False
    return True


class SessionLock(WriterLock):
    """One session's advisory lock, held on the store's lock connection until ``release()``."""

    def __init__(self, owner: AdvisoryLocks, session_id: str, key: int,
                 conn: psycopg.Connection[Any]) -> None:
        self._owner = owner
        self.session_id = session_id
        self.key = key
        self.conn: psycopg.Connection[Any] | None = conn
        self.lost = False
        """True while the server does not hold it for us (given back after it was lost)."""

    def release(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            self._owner._release(self, conn)


class AdvisoryLocks:
    """The writer locks one store holds, all on one lock connection of the store.

    Sharing it is what lets one process keep a thousand live sessions without a thousand
    server connections (``max_connections`` is 100 by default). An advisory lock is
    re-entrant within a PostgreSQL session, so exclusivity between this store's own sessions
    is checked here, before the server is asked. If the connection dies, the server releases
    every lock on it, as it would for each of them on connections of their own.
    """

    def __init__(self, connect: Callable[..., psycopg.Connection[Any]], schema: str, where: str) -> None:
        self._connect = connect
        self._schema = schema
        self._where = where
        self._guard = threading.Lock()
        self._held: dict[str, SessionLock] = {}
        self._taking: set[str] = set()
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False

    def key(self, session_id: str) -> int:
        return advisory_key("agentlog-writer", self._schema, session_id)

    def acquire(self, session_id: str) -> SessionLock:
        """Take the session's lock or raise ``SessionLockedError`` naming the holder."""
        key = self.key(session_id)
        with self._guard:
            if session_id in self._held or session_id in self._taking:
                raise SessionLockedError(f"session is already open for writing by process {os.getpid()}",
                                         session_id=session_id, pid=os.getpid())
            self._taking.add(session_id)
        try:
            with translate(session_id, self._where):
                conn = self._connection()
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                if row is None or not row[0]:
                    raise locked_error(conn, key, session_id, "session is already open for writing")
            lock = SessionLock(self, session_id, key, conn)
            with self._guard:
                self._held[session_id] = lock
            return lock
        finally:
            with self._guard:
                self._taking.discard(session_id)

    def holds(self, lock: SessionLock) -> bool:
        """Whether the server still holds ``lock`` for us: its connection is alive (``_alive``)."""
        conn = lock.conn
        return conn is not None and not lock.lost and _alive(conn)

    def retake(self, lock: SessionLock) -> None:
        """Take a lock lost with its connection again, on the (re-opened) lock connection;
        ``SessionLockedError`` naming the holder when another writer has taken it meanwhile."""
        with translate(lock.session_id, self._where):
            conn = self._connection()
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock.key,)).fetchone()
            if row is None or not row[0]:
                raise locked_error(conn, lock.key, lock.session_id,
                                   "cannot write: the session's writer lock was lost with its "
                                   "connection and another writer holds it now")
        lock.conn, lock.lost = conn, False

    def give_back(self, lock: SessionLock) -> None:
        """Unlock a retaken lock whose session moved on without us; ``lock`` stays registered
        (``holds`` is False) until its ``release()``."""
        conn = lock.conn
        lock.lost = True
        if conn is not None:
            try:
                conn.execute("SELECT pg_advisory_unlock(%s)", (lock.key,))
            except psycopg.Error:
                conn.close()  # a dead connection has released its locks already

    def holder_pid(self, session_id: str) -> int | None:
        """The client pid holding the session's lock (its backend pid if it did not name itself),
        None when nobody holds it; reads ``pg_locks`` only, never tries the lock."""
        with translate(session_id, self._where):
            holder = _holder(self._connection(), self.key(session_id))
        return None if holder is None else holder[1] if holder[1] is not None else holder[0]

    def _connection(self) -> psycopg.Connection[Any]:
        """The store's lock connection, (re)opened when missing or dead."""
        with self._guard:
            conn = self._conn
        if conn is not None and _alive(conn):
            return conn
        with self._guard:
            if self._conn is conn:
                self._conn = None
        fresh = self._connect(application_name=application_name())
        with self._guard:
            if self._conn is None and not self._closed:
                self._conn = fresh
                return fresh
            winner = self._conn
        fresh.close()  # another thread opened one first (or the store closed)
        if winner is None:
            raise psycopg.OperationalError("the store's lock connection is closed")
        return winner

    def _release(self, lock: SessionLock, conn: psycopg.Connection[Any]) -> None:
        with self._guard:
            if self._held.get(lock.session_id) is lock:
                del self._held[lock.session_id]
        if lock.lost:
            return  # unlocked already (``give_back``)
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock.key,))
        except psycopg.Error:
            conn.close()  # a dead connection has released its locks already

    def close(self) -> None:
        """Close the lock connection (held locks are released with it)."""
        with self._guard:
            self._closed = True
            connections = {id(conn): conn for conn in
                           [self._conn, *(lock.conn for lock in self._held.values())] if conn is not None}
            self._conn = None
            self._held.clear()
        for conn in connections.values():
            conn.close()
