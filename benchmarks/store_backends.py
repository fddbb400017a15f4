"""The backends the ``store`` suite measures: where each keeps a session and how its bytes are counted.

JSONL stores live in a directory (sizes: the files under it). SQLite lives in one database
file (sizes: db + WAL after a checkpoint; bytes written: the WAL frames a commit appends).
PostgreSQL lives in a throwaway schema per store location on the test server (sizes:
``pg_total_relation_size`` of the schema's tables; bytes written: the server's WAL advance);
``close()`` drops every schema a run created. Each backend also brings its physical floors:
the cheapest read of the last events and the cheapest durable write on the same medium.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from agentlog.store.base import Store
from agentlog.store.fs import FileSystem
from benchmarks.runner import directory_bytes

__all__ = [
    "POSTGRES_DSN",
    "POSTGRES_ENV",
    "Backend",
    "Floors",
    "JsonlBackend",
    "PostgresBackend",
    "SqliteBackend",
    "postgres_dsn",
    "postgres_where",
]

POSTGRES_DSN: Final = "postgresql://postgres@127.0.0.1:5432/test"
"""The local test server (trust auth on loopback)."""
POSTGRES_ENV: Final = "AGENTLOG_TEST_POSTGRES"
"""Overrides ``POSTGRES_DSN`` (a libpq URL or ``key=value`` string)."""
SCHEMA_PREFIX: Final = "agentlog_bench_"
MARK_BYTES: Final = 200
"""Payload of the one-row commit floor of the databases (about a fork's ``sessions`` row)."""


def postgres_dsn() -> str:
    """``$AGENTLOG_TEST_POSTGRES`` or the local test server."""
    return os.environ.get(POSTGRES_ENV) or POSTGRES_DSN


def postgres_where(dsn: str) -> str:
    """``host:port/db`` of a DSN, for messages (never its password)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(dsn)
    except Exception:
        return "(unparsable DSN)"
    return f"{params.get('host', 'localhost')}:{params.get('port', 5432)}/{params.get('dbname', '')}"


class Floors(ABC):
    """The physical floors of one backend: read the last lines, write one small record durably."""

    read_label: str
    commit_label: str
    commit_name: str
    """Short name of the commit floor, as the fork figures' baseline."""

    @abstractmethod
    def read_tail(self, count: int) -> int:
        """Fetch and parse the last ``count`` JSON lines; return how many were parsed."""

    @abstractmethod
    def commit(self, size: int) -> None:
        """The cheapest durable write of a record about ``size`` bytes long (a fork's)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the floors hold."""


class Backend(ABC):
    """A store configuration the suite measures, with its probes for bytes and its floors."""

    name: str
    encoding: str
    """``zstd`` when the store compresses what it writes (its persist floor compresses too)."""
    database: bool
    """The database syncs by itself (no fsync share) and always packs chunks (no unpacked variant)."""
    size_label: str
    written_label: str
    written_note: str = ""
    """Why a database's bytes written have no byte target (they are not the bytes of a record)."""

    def available(self) -> str | None:
        """None when the backend can run on this machine, else why not."""
        return None

    def describe(self) -> str:
        """One sentence on where the store lives (for the report's notes); empty if obvious."""
        return ""

    @abstractmethod
    def place(self, root: Path) -> str:
        """A new, empty store location tied to the private directory ``root``."""

    @abstractmethod
    def open(self, place: str, *, pack: bool = True, fs: FileSystem | None = None) -> Store:
        """A store object on ``place``; ``fs`` (JSONL only) routes every write and fsync."""

    def connect(self, store: Store) -> None:
        """Open the store's database connection ahead of a timed call (no-op for files)."""
        if self.database:
            store.list()

    @abstractmethod
    def remove(self, place: str) -> None:
        """Delete everything stored at ``place``."""

    @abstractmethod
    def size(self, place: str) -> int:
        """Bytes ``place`` takes on disk (see ``size_label``)."""

    @abstractmethod
    def mark(self, place: str) -> Any:
        """Start counting bytes written to ``place``; ``written(place, mark)`` tells how many."""

    @abstractmethod
    def written(self, place: str, mark: Any) -> int:
        """Bytes written since ``mark`` (see ``written_label``)."""

    @abstractmethod
    def floors(self, root: Path, lines: Sequence[bytes]) -> Floors:
        """The backend's floors, on the events' JSON ``lines`` (one event each), under ``root``."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Remove whatever this run left outside its temp directory (PostgreSQL schemas)."""


# -- JSONL -----------------------------------------------------------------------------------------


class _FileFloors(Floors):
    """A plain file of the lines read from a known offset; a new file written and fsynced."""

    read_label = "pread the last lines of a plain JSONL file at a known offset + orjson.loads"
    commit_label = "new directory + file of the fork's bytes, fsync both"
    commit_name = "create-file floor"

    def __init__(self, root: Path, lines: Sequence[bytes]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._root = root
        self._path = root / "lines.jsonl"
        self._path.write_bytes(b"".join(line + b"\n" for line in lines))
        self._ends = [0]
        for line in lines:
            self._ends.append(self._ends[-1] + len(line) + 1)

    def read_tail(self, count: int) -> int:
        offset = self._ends[max(0, len(self._ends) - 1 - count)]
        fd = os.open(self._path, os.O_RDONLY)
        try:
            data = os.pread(fd, self._ends[-1] - offset, offset)
        finally:
            os.close(fd)
        return len([orjson.loads(line) for line in data.splitlines()])

    def commit(self, size: int) -> None:
        directory = self._root / "fork-floor"
        directory.mkdir()
        fd = os.open(directory / "child", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"x" * size)
            os.fsync(fd)
        finally:
            os.close(fd)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        shutil.rmtree(directory)


class JsonlBackend(Backend):
    """``JsonlStore`` in a directory, zstd frames or raw lines."""

    database = False
    size_label = "file bytes under the store root"
    written_label = "growth of the store directory"

    def __init__(self, compression: str) -> None:
        self.compression = compression
        self.encoding = "zstd" if compression == "zstd" else "raw"
        self.name = f"jsonl-{self.encoding}"

    def place(self, root: Path) -> str:
        return str(root)

    def open(self, place: str, *, pack: bool = True, fs: FileSystem | None = None) -> Store:
        from agentlog.store.jsonl.store import JsonlStore

        return JsonlStore(place, compression="zstd" if self.compression == "zstd" else "none",
                          pack_chunks=pack, fs=fs)

    def remove(self, place: str) -> None:
        shutil.rmtree(place, ignore_errors=True)

    def size(self, place: str) -> int:
        return directory_bytes(place)

    def mark(self, place: str) -> int:
        return directory_bytes(place)

    def written(self, place: str, mark: Any) -> int:
        return directory_bytes(place) - int(mark)

    def floors(self, root: Path, lines: Sequence[bytes]) -> Floors:
        return _FileFloors(root, lines)


# -- SQLite ----------------------------------------------------------------------------------------


def _sqlite_connect(path: str | Path) -> sqlite3.Connection:
    return sqlite3.connect(os.fspath(path), isolation_level=None, timeout=30.0)


class _SqliteFloors(Floors):
    """A scratch database with one row per event, WAL and ``synchronous=FULL`` like the store."""

    read_label = "SELECT the last lines (one row each, primary-key range) from a scratch SQLite db + loads"
    commit_label = f"one-row INSERT of {MARK_BYTES} bytes + commit (WAL, synchronous=FULL)"
    commit_name = "one-row commit floor"

    def __init__(self, root: Path, lines: Sequence[bytes]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._conn = _sqlite_connect(root / "floor.db")
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = FULL")
        self._conn.execute("CREATE TABLE lines (seq INTEGER PRIMARY KEY, json TEXT NOT NULL) STRICT")
        self._conn.execute("CREATE TABLE marks (id INTEGER PRIMARY KEY, payload BLOB NOT NULL) STRICT")
        self._conn.execute("BEGIN")
        rows = ((seq, line.decode("utf-8", "surrogatepass")) for seq, line in enumerate(lines))
        self._conn.executemany("INSERT INTO lines VALUES (?, ?)", rows)
        self._conn.execute("COMMIT")
        self._count = len(lines)

    def read_tail(self, count: int) -> int:
        rows = self._conn.execute("SELECT json FROM lines WHERE seq >= ? ORDER BY seq",
                                  (self._count - count,)).fetchall()
        return len([orjson.loads(row[0]) for row in rows])

    def commit(self, size: int) -> None:
        self._conn.execute("INSERT INTO marks (payload) VALUES (?)", (b"x" * MARK_BYTES,))

    def close(self) -> None:
        self._conn.close()


class SqliteBackend(Backend):
    """``SqliteStore`` in one database file (WAL, ``synchronous=FULL``)."""

    name = "sqlite"
    encoding = "raw"
    database = True
    size_label = "db + WAL after a checkpoint"
    written_label = "WAL frames of its commit"
    written_note = "whole 4 KiB pages: no byte target"

    def place(self, root: Path) -> str:
        return str(root / "sessions.db")

    def open(self, place: str, *, pack: bool = True, fs: FileSystem | None = None) -> Store:
        from agentlog.store.sqlite.store import SqliteStore

        return SqliteStore(place)

    def remove(self, place: str) -> None:
        shutil.rmtree(os.path.dirname(place), ignore_errors=True)

    def _checkpoint(self, place: str) -> None:
        """Copy the WAL into the db and truncate it (the store's own connection is idle)."""
        conn = _sqlite_connect(place)
        try:
            busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()
        if busy:
            raise RuntimeError(f"SQLite checkpoint of {place} was blocked by a reader or writer")

    @staticmethod
    def _wal_bytes(place: str) -> int:
        try:
            return os.path.getsize(place + "-wal")
        except FileNotFoundError:
            return 0

    def size(self, place: str) -> int:
        self._checkpoint(place)
        return os.path.getsize(place) + self._wal_bytes(place)

    def mark(self, place: str) -> int:
        self._checkpoint(place)
        return self._wal_bytes(place)

    def written(self, place: str, mark: Any) -> int:
        return self._wal_bytes(place) - int(mark)

    def floors(self, root: Path, lines: Sequence[bytes]) -> Floors:
        return _SqliteFloors(root, lines)


# -- PostgreSQL ------------------------------------------------------------------------------------


class _PostgresFloors(Floors):
    """A scratch schema with one row per event, read and written on one warm connection."""

    read_label = "SELECT the last lines (one row each, primary-key range) from a scratch table + loads"
    commit_label = f"one-row INSERT of {MARK_BYTES} bytes + commit (autocommit)"
    commit_name = "one-row commit floor"

    def __init__(self, backend: PostgresBackend, root: Path, lines: Sequence[bytes]) -> None:
        import psycopg
        from psycopg import sql

        self._backend = backend
        self._schema = backend.place(root)
        self._conn = psycopg.connect(backend.dsn, autocommit=True, connect_timeout=10)
        name = sql.Identifier(self._schema)
        try:
            self._conn.execute(sql.SQL("CREATE SCHEMA {}").format(name))
            for table in ("lines (seq integer PRIMARY KEY, json text NOT NULL)",
                          "marks (id bigserial PRIMARY KEY, payload bytea NOT NULL)"):
                self._conn.execute(sql.SQL("CREATE TABLE {}." + table).format(name))
            with self._conn.cursor() as cursor, cursor.copy(
                    sql.SQL("COPY {}.lines (seq, json) FROM STDIN").format(name)) as copy:
                for seq, line in enumerate(lines):
                    copy.write_row((seq, line.decode("utf-8", "surrogatepass")))
            self._conn.execute(sql.SQL("ANALYZE {}.lines").format(name))
        except BaseException:
            self.close()
            raise
        self._read = sql.SQL("SELECT json FROM {}.lines WHERE seq >= %s ORDER BY seq").format(name)
        self._insert = sql.SQL("INSERT INTO {}.marks (payload) VALUES (%s)").format(name)
        self._count = len(lines)

    def read_tail(self, count: int) -> int:
        rows = self._conn.execute(self._read, (self._count - count,)).fetchall()
        return len([orjson.loads(row[0]) for row in rows])

    def commit(self, size: int) -> None:
        self._conn.execute(self._insert, (b"x" * MARK_BYTES,))

    def close(self) -> None:
        self._conn.close()
        self._backend.remove(self._schema)


class PostgresBackend(Backend):
    """``PostgresStore`` on the test server, in a new schema per store location."""

    name = "postgres"
    encoding = "raw"
    database = True
    size_label = "pg_total_relation_size of the schema's tables"
    written_label = "server WAL advance"
    written_note = "WAL records, full-page images after a checkpoint: no byte target"

    def __init__(self, dsn: str | None = None) -> None:
        self._dsn = dsn
        self._token = uuid.uuid4().hex[:10]
        self._schemas: dict[str, str] = {}
        self._guard = threading.Lock()
        self._admin: Any = None

    @property
    def dsn(self) -> str:
        return self._dsn if self._dsn is not None else postgres_dsn()

    def available(self) -> str | None:
        try:
            import psycopg
            import psycopg_pool  # noqa: F401 - the store needs it
        except ImportError as exc:
            return f"psycopg is not installed ({exc}): pip install 'agentlog[postgres]'"
        try:
            with psycopg.connect(self.dsn, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
        except Exception as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            return f"PostgreSQL not reachable at {postgres_where(self.dsn)} (set {POSTGRES_ENV}): {detail}"
        return None

    def describe(self) -> str:
        settings = self._query("SELECT current_setting('server_version'), "
                               "current_setting('synchronous_commit'), current_setting('fsync'), "
                               "current_setting('full_page_writes')")
        version, synchronous, fsync, full_pages = settings[0]
        return (f"postgres: PostgreSQL {version} at {postgres_where(self.dsn)} "
                f"(synchronous_commit={synchronous}, fsync={fsync}, full_page_writes={full_pages}); "
                f"a new schema {SCHEMA_PREFIX}{self._token}_N per store location, all dropped at the end")

    def _connection(self) -> Any:
        import psycopg

        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)
        return self._admin

    def _query(self, query: Any, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with self._guard:
            cursor = self._connection().execute(query, params)
            return cursor.fetchall() if cursor.description else []

    def place(self, root: Path) -> str:
        with self._guard:
            schema = f"{SCHEMA_PREFIX}{self._token}_{len(self._schemas)}"
            self._schemas[schema] = str(root)
        return schema

    def open(self, place: str, *, pack: bool = True, fs: FileSystem | None = None) -> Store:
        from agentlog.store.postgres.store import PostgresStore

        return PostgresStore(self.dsn, schema=place)

    def remove(self, place: str) -> None:
        from psycopg import sql

        self._query(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(place)))
        with self._guard:
            self._schemas.pop(place, None)

    def size(self, place: str) -> int:
        rows = self._query(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
            (place,))
        return int(rows[0][0])

    def mark(self, place: str) -> str:
        return str(self._query("SELECT pg_current_wal_insert_lsn()::text")[0][0])

    def written(self, place: str, mark: Any) -> int:
        rows = self._query("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s::pg_lsn)::bigint", (mark,))
        return int(rows[0][0])

    def floors(self, root: Path, lines: Sequence[bytes]) -> Floors:
        return _PostgresFloors(self, root, lines)

    def close(self) -> None:
        """Drop every schema of this run (also any a failed phase left), then disconnect."""
        from psycopg import sql

        try:
            if self._schemas or self._admin is not None:
                leftover = self._query("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)",
                                       (f"{SCHEMA_PREFIX}{self._token}_",))
                for schema in {*self._schemas, *(row[0] for row in leftover)}:
                    self._query(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
                self._schemas.clear()
        finally:
            if self._admin is not None:
                self._admin.close()
                self._admin = None
