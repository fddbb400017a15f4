"""The SQLite store's connection: opening and checking the file, its transactions, closing it.

One connection per store (``check_same_thread=False``), serialized by ``_db_lock``; opened on
first use with the hardening pragmas, schema identity and journal mode of spec §5.3. Reads run
in a deferred transaction, writes in ``BEGIN IMMEDIATE`` with the identity re-checked, and
every ``sqlite3`` error is mapped to an agentlog error. ``SqliteConnection`` is the part of
``SqliteStore`` that does this; the rows, reads and writes are ``SqliteStore``'s.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from urllib.parse import quote

from agentlog.errors import AgentlogError, InvalidHeaderError, PersistenceIOError, StoreError
from agentlog.store.group_commit import GroupCommitStore
from agentlog.store.records import StoredLog
from agentlog.store.sqlite.errors import translate_error
from agentlog.store.sqlite.rows import why
from agentlog.store.sqlite.schema import (
    SELECT_STORE_ID,
    SessionInfo,
    check_identity,
    ensure_schema,
    is_uuid,
    open_file,
    search_index,
    set_journal_mode,
)

__all__ = ["SqliteConnection", "database_uri"]


def database_uri(path: str, *, write: bool) -> str:
    """The URI to open the database at ``path`` with; a reader's changes no byte beside it.

    A writer opens ``mode=rw``. A reader whose database has a ``-wal`` and ``-shm`` (a live
    writer's, or a killed one's) reads them with ``mode=ro&readonly_shm=1``: it sees every commit
    in the WAL and neither folds the WAL into the database at close nor writes its read marks into
    the ``-shm``. A reader of a directory it cannot write (a read-only mount: SQLite could not
    create the ``-shm`` WAL mode needs) and no WAL reads ``immutable=1``: nobody can write there.
    A ``-wal`` without its ``-shm`` (the store copied without it): see ``_wal_without_shm``. Any
    other reader opens ``mode=rw``: SQLite's ``-wal``/``-shm`` exist only while it reads.
    """
    base = f"file:{quote(os.fsencode(path))}"  # bytes: any file name
    if write:
        return f"{base}?mode=rw"
    if os.path.exists(f"{path}-wal") and os.path.exists(f"{path}-shm"):
        return f"{base}?mode=ro&readonly_shm=1"
    if os.path.exists(f"{path}-wal"):
        return _wal_without_shm(path, base)
    if not os.path.exists(f"{path}-wal") and not os.access(os.path.dirname(path) or ".", os.W_OK):
        return f"{base}?mode=ro&immutable=1"
    return f"{base}?mode=rw"


def _wal_without_shm(path: str, base: str) -> str:
    """A reader's URI for a database whose ``-wal`` has no ``-shm``; no WAL writer is live then (one
    needs the ``-shm``). Opened ``mode=rw``, SQLite would rebuild the ``-shm`` and fold the WAL into
    the database at close, ``mode=ro`` would write a new ``-shm``, ``immutable=1`` miss the WAL's
    commits: an empty WAL holds none (read ``immutable=1``), any other is refused, named."""
    wal = f"{path}-wal"
    try:
        size = os.path.getsize(wal)
    except FileNotFoundError:  # a writer's close folded it in meanwhile
        return f"{base}?mode=rw"
    if size == 0:
        return f"{base}?mode=ro&immutable=1"
    raise StoreError(f"{os.path.basename(wal)} lies beside the database without "
                     f"{os.path.basename(path)}-shm (copied without it?): reading its commits would "
                     "rebuild the -shm and fold the WAL into the database, changing the store; copy "
                     "the -shm with it, or open the store once for writing (e.g. `agentlog repair "
                     "SESSION_ID`), which folds the WAL in", file=path)


class SqliteConnection(GroupCommitStore):
    """The connection, transactions and error mapping of ``SqliteStore`` (which sets these up)."""

    memory: bool
    path: str
    busy_timeout_ms: int
    journal_mode: str
    may_create: bool
    _db_lock: threading.RLock
    _conn: sqlite3.Connection | None
    _schema_cookie: int | None
    _fts: bool | None
    _revision_prefix: str
    _cache: OrderedDict[str, tuple[str, StoredLog]]

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
            raise translate_error(exc, session_id=session_id, file=self._file,
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
            self._revision_prefix = open_file(self.path, create=self.may_create)
            target, uri = database_uri(self.path, write=self.may_create), True
        conn = sqlite3.connect(target, timeout=self.busy_timeout_ms / 1000, isolation_level=None,
                               check_same_thread=False, uri=uri)
        try:
            self._configure(conn, started)
        except BaseException:
            conn.close()
            raise
        return conn

    def _configure(self, conn: sqlite3.Connection, started: float) -> None:
        """Spec §5.3, in order: hardening pragmas, schema identity, journal mode, synchronous, store id."""
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("PRAGMA mmap_size = 0")
        if conn.execute("PRAGMA trusted_schema").fetchone()[0] != 0 or (
            not self.memory and conn.execute("PRAGMA mmap_size").fetchone()[0] != 0
        ):
            raise StoreError("SQLite refused trusted_schema=OFF or mmap_size=0", file=self._file)
        conn.execute("PRAGMA foreign_keys = ON")
        self._schema_cookie = ensure_schema(conn, file=self._file, create=self.may_create)
        self._fts = search_index(conn)
        if self.may_create:  # a reader keeps the file's journal mode (switching it writes the file)
            set_journal_mode(conn, self.journal_mode, expected="memory" if self.memory else self.journal_mode,
                             deadline=started + self.busy_timeout_ms / 1000, file=self._file)
        conn.execute("PRAGMA synchronous = FULL")
        if conn.execute("PRAGMA synchronous").fetchone()[0] != 2:
            raise StoreError("SQLite refused synchronous=FULL", file=self._file)
        row = conn.execute(SELECT_STORE_ID).fetchone()
        if row is None or type(row[0]) is not str or not is_uuid(row[0]):
            raise StoreError("the database has no valid store identity", file=self._file)
        if self.memory:
            self._revision_prefix = "memory:"
        self._revision_prefix += f"store:{row[0]}:"

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
                self._schema_cookie = check_identity(conn, checked_cookie=self._schema_cookie,
                                                     file=self._file, mutation=True)
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
            detail = why(cause) if isinstance(cause, AgentlogError) else str(cause)
            raise PersistenceIOError(f"{detail}; rolling back also failed: {failure}", session_id=session_id,
                                     file=self._file) from cause

    def _revision(self, info: SessionInfo) -> str:
        return f"{self._revision_prefix}incarnation:{info.incarnation}:revision:{info.revision}"

    def _close_backend(self) -> None:
        with self._db_lock:
            conn, self._conn = self._conn, None
            self._cache.clear()
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
