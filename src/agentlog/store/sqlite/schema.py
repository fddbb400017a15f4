"""The SQLite store's file and schema: identity, statements, path and schema checks, session rows.

The file carries agentlog's own identity (application id ``0x41474C47`` "AGLG", user_version 4),
checked at open and inside every write transaction; every schema object is compared with the
reference built from ``SCHEMA`` (an extra index or column is refused). Versions 1 (no search
index), 2 (no row digests) and 3 (search index written with the rows, no watermark) are migrated
by the first writer that opens them (``check-upgrade`` does it on a copy first), in one
transaction; readers read them as is. Statements are fixed text; values are always bound.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import sqlite3
import stat
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from agentlog.core.header import FORMAT_VERSION, SessionHeader
from agentlog.core.jsonvalue import dumps, loads
from agentlog.errors import (
    InvalidHeaderError,
    PersistenceIOError,
    SessionCorruptionError,
    SessionFormatUnsupportedError,
    StoreError,
)
from agentlog.store.fs import file_kind
from agentlog.store.sqlite import search as sqlite_search
from agentlog.store.sqlite.errors import SQLITE_BUSY, primary_code
from agentlog.store.sqlite.rows import CORRUPT, Row
from agentlog.store.sqlite.search import CONTENTLESS_SCHEMA, FTS_SCHEMA, SEARCH_SCHEMA, fill_index

__all__ = [
    "APPLICATION_ID",
    "CORE_SCHEMA",
    "DSH_APPLICATION_ID",
    "JOURNAL_MODES",
    "DIGEST_SCHEMA",
    "OLDER_VERSIONS",
    "WATERMARK_SCHEMA",
    "SCHEMA",
    "USER_VERSION",
    "SessionInfo",
    "check_path",
    "check_identity",
    "ensure_schema",
    "has_watermark",
    "header_values",
    "search_index",
    "is_uuid",
    "open_file",
    "session_info",
    "set_journal_mode",
]

APPLICATION_ID: Final = 0x41474C47
"""``PRAGMA application_id`` of an agentlog database ("AGLG")."""

USER_VERSION: Final = 4
"""``PRAGMA user_version``: the schema version this build writes (2 added the search index, 3 the
integrity digest of every event and session row, 4 the search index's watermark and, with FTS5,
a contentless trigram index: no second copy of the text)."""

OLDER_VERSIONS: Final = (1, 2, 3)
"""The versions before: read as is by readers, migrated by a writer when it opens the file."""

DSH_APPLICATION_ID: Final = 0x44534850
"""DSH's application id ("DSHP"): its schema-17 files are refused with a clear message."""

JOURNAL_MODES: Final = {
    "wal": "PRAGMA journal_mode = WAL",
    "delete": "PRAGMA journal_mode = DELETE",
    "truncate": "PRAGMA journal_mode = TRUNCATE",
    "persist": "PRAGMA journal_mode = PERSIST",
}
"""The supported journal modes and their fixed statements (no SQL is assembled at run time)."""

CORE_SCHEMA: Final = (
    """CREATE TABLE store_identity (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id TEXT NOT NULL
) STRICT""",
    """CREATE TABLE sessions (
  key INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  version INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  cwd TEXT,
  parent_session TEXT,
  seed_length INTEGER,
  origin TEXT,
  delegation_depth INTEGER,
  agent_preset TEXT,
  extra TEXT,
  base_key INTEGER REFERENCES sessions (key),
  base_length INTEGER,
  incarnation TEXT NOT NULL,
  revision INTEGER NOT NULL,
  CHECK ((base_key IS NULL) = (base_length IS NULL))
) STRICT""",
    """CREATE TABLE events (
  session INTEGER NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  time INTEGER NOT NULL,
  data ANY NOT NULL,
  source_event_seqs BLOB,
  surface_op TEXT,
  ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  op_first INTEGER CHECK (op_first IS NULL OR op_first = 1),
  PRIMARY KEY (session, seq)
) STRICT""",
)
"""Schema version 1, one statement each."""

DIGEST_SCHEMA: Final = (
    "ALTER TABLE sessions ADD COLUMN digest BLOB",
    "ALTER TABLE events ADD COLUMN digest BLOB",
)
"""Schema 3: ``store.integrity.row_digest`` of a session's header columns and of each event row
(``store.sqlite.integrity``); NULL in rows written before it. Added as columns, also in a new file,
so a migrated file's schema text is exactly a new one's."""

SCRUB_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS scrub_key (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  key BLOB NOT NULL
) STRICT""",
    """CREATE TABLE IF NOT EXISTS scrub_journal (
  id INTEGER PRIMARY KEY,
  session TEXT NOT NULL,
  record TEXT NOT NULL
) STRICT""",
)
"""The scrub journal and its key (``store.sqlite.scrub``): created by the first ``agentlog scrub``,
in any schema version; a database without them is as correct as one with them."""

WATERMARK_SCHEMA: Final = ("ALTER TABLE sessions ADD COLUMN unindexed INTEGER",)
"""Schema 4: the first seq of a session's own rows that the search index does not hold yet (NULL:
it holds them all, as every row of a schema-3 file). Appends set it, the indexer
(``search.catch_up``) clears it; the index is no longer written on the write path."""

SCHEMA: Final = (*CORE_SCHEMA, *SEARCH_SCHEMA)
"""Schema 2 (run in the transaction that stamps the identity, before ``FTS_SCHEMA`` when available
and ``DIGEST_SCHEMA``)."""
# -- statements (fixed text; values are always bound) ---------------------------------------------

SESSION_COLUMNS: Final = (
    "key, id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
    "agent_preset, extra, base_key, base_length, incarnation, revision"
)
ROW_COLUMNS: Final = "seq, type, time, data, source_event_seqs, surface_op, ignorable, op_first"

_IDENTITY: Final = (
    "SELECT (SELECT user_version FROM pragma_user_version), "
    "(SELECT application_id FROM pragma_application_id), (SELECT schema_version FROM pragma_schema_version)"
)
_OBJECTS: Final = (
    "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
    "ORDER BY type, name"
)
_STAMP: Final = ("PRAGMA application_id = 1095191623", "PRAGMA user_version = 4")
SELECT_STORE_ID: Final = "SELECT store_id FROM store_identity WHERE singleton = 1"
INSERT_STORE_ID: Final = "INSERT INTO store_identity (singleton, store_id) VALUES (1, ?)"
SELECT_SESSION: Final = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?"
SELECT_SESSION_BY_KEY: Final = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE key = ?"
LIST_SESSIONS: Final = f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY key"
SESSION_EXISTS: Final = "SELECT 1 FROM sessions WHERE id = ?"
INSERT_SESSION: Final = (
    "INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, origin, "
    "delegation_depth, agent_preset, extra, base_key, base_length, incarnation, digest, revision) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
)
BUMP_REVISION: Final = "UPDATE sessions SET revision = revision + 1 WHERE key = ?"
BUMP_UNINDEXED: Final = (
    "UPDATE sessions SET revision = revision + 1, unindexed = coalesce(unindexed, ?) WHERE key = ?"
)
"""After an append from seq ``?``: a new revision, and the rows from there on wait for the indexer."""
CLEAR_BASE: Final = "UPDATE sessions SET base_key = NULL, base_length = NULL WHERE key = ?"
DELETE_SESSION: Final = "DELETE FROM sessions WHERE key = ?"
CHILDREN: Final = (
    "SELECT child.id FROM sessions AS child JOIN sessions AS parent ON child.base_key = parent.key "
    "WHERE parent.id = ? ORDER BY child.key"
)
ROWS_FROM: Final = f"SELECT {ROW_COLUMNS} FROM events WHERE session = ? AND seq >= ? ORDER BY seq"
ROWS_RANGE: Final = (
    f"SELECT {ROW_COLUMNS} FROM events WHERE session = ? AND seq >= ? AND seq < ? ORDER BY seq"
)
PACKED_BEFORE: Final = (
    f"SELECT {ROW_COLUMNS} FROM events WHERE session = ? AND seq >= ? AND seq < ? AND ignorable = 0 "
    "ORDER BY seq"
)
TAIL: Final = f"SELECT {ROW_COLUMNS} FROM events WHERE session = ? ORDER BY seq DESC LIMIT 2"
INSERT_ROW: Final = (
    "INSERT INTO events (session, seq, type, time, data, source_event_seqs, surface_op, ignorable, "
    "op_first, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
DELETE_ROWS_FROM: Final = "DELETE FROM events WHERE session = ? AND seq >= ?"

# -- session rows (pure) ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A stored session row: header, own key, shared prefix reference and revision parts."""

    header: SessionHeader
    key: int
    base_key: int | None
    base_length: int | None
    incarnation: str
    revision: int

    @property
    def start(self) -> int:
        """The first seq of the session's own rows."""
        return self.base_length or 0


def _bad_metadata(session_id: object, why: str) -> NoReturn:
    """Refuse a ``sessions`` row that is not what this build writes."""
    sid = session_id if type(session_id) is str else None
    raise SessionCorruptionError(f"{CORRUPT}: invalid stored metadata row: {why}", session_id=sid)


def _optional(value: object, kind: type, session_id: object, name: str) -> None:
    if value is not None and type(value) is not kind:
        _bad_metadata(session_id, f"{name} must be NULL or {kind.__name__}")


def session_info(row: Row) -> SessionInfo:
    """Validate a ``sessions`` row (§5.11) and build its header."""
    (key, sid, version, created_at, cwd, parent, seed_length, origin, depth, preset, extra,
     base_key, base_length, incarnation, revision) = row
    if type(sid) is not str or not sid:
        _bad_metadata(None, "id must be a non-empty string")
    if type(key) is not int:
        _bad_metadata(sid, "key must be an integer")
    if type(version) is not int:
        _bad_metadata(sid, "version must be an integer")
    if version != FORMAT_VERSION:
        newer = version > FORMAT_VERSION
        raise SessionFormatUnsupportedError(
            f"uses log format v{version}, but this build reads only v{FORMAT_VERSION}; "
            + ("it was written by a newer agentlog or DSH — upgrade agentlog" if newer else
               "it is older than the supported v0, and this build ships no upgrade path"),
            session_id=sid,
        )
    for value, kind, name in ((created_at, int, "created_at"), (cwd, str, "cwd"),
                              (parent, str, "parent_session"), (seed_length, int, "seed_length"),
                              (origin, str, "origin"),
                              (depth, int, "delegation_depth"), (preset, str, "agent_preset"),
                              (extra, str, "extra"), (base_key, int, "base_key"),
                              (base_length, int, "base_length")):
        _optional(value, kind, sid, name)
    if created_at is None:
        _bad_metadata(sid, "created_at must be an integer")
    if base_length is not None and (base_length < 0 or base_key is None):
        _bad_metadata(sid, "base_length must be non-negative and come with base_key")
    if type(incarnation) is not str or not is_uuid(incarnation):
        _bad_metadata(sid, "incarnation must be a UUID")
    if type(revision) is not int or revision < 0:
        _bad_metadata(sid, "revision must be a non-negative integer")
    extras: Any = {}
    if extra is not None:
        try:
            extras = loads(extra)
        except ValueError:
            _bad_metadata(sid, "extra is not JSON")
        if type(extras) is not dict:
            _bad_metadata(sid, "extra must be a JSON object")
    try:
        header = SessionHeader(id=sid, created_at=created_at, cwd=cwd, parent_session=parent,
                               seed_length=seed_length, origin=origin, delegation_depth=depth,
                               agent_preset=preset, extra=extras)
    except InvalidHeaderError as exc:
        _bad_metadata(sid, exc.detail)
    return SessionInfo(header, key, base_key, base_length, incarnation, revision)


def header_values(header: SessionHeader) -> tuple[Any, ...]:
    """The ``sessions`` column values of a header, in ``INSERT_SESSION`` order."""
    extra = dumps(header.extra).decode("utf-8") if header.extra else None
    return (header.id, header.version, header.created_at, header.cwd, header.parent_session,
            header.seed_length, header.origin, header.delegation_depth, header.agent_preset, extra)


def is_uuid(text: str) -> bool:
    """Whether ``text`` is a UUID in canonical form."""
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def _normalized(sql: object) -> object:
    return re.sub(r"\s+", " ", sql).strip() if type(sql) is str else sql


# -- path and schema checks --------------------------------------------------------------------------

_JOURNAL_RETRY_S: Final = 0.010


def check_path(path: str, *, create: bool) -> None:
    """Spec §5.2, when the store is opened: a private, real parent directory (made if ``create``),
    and an existing database file a private regular file. Without ``create`` the file must exist."""
    parent = os.path.dirname(path)
    if create:
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise PersistenceIOError(f"cannot create the database directory: {exc}", file=path) from exc
    try:
        info = os.lstat(parent)
    except FileNotFoundError:
        raise StoreError(f"no store at {path} (nothing to read: a writer creates it)", file=path) from None
    except OSError as exc:
        raise PersistenceIOError(f"cannot inspect the database directory: {exc}", file=path) from exc
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"the database directory {parent} is not a real directory (symlink or file)",
                         file=path)
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise StoreError(f"the database directory {parent} must be owned by the current user and not "
                         f"group- or world-writable: {_private_dir_advice(path, parent, info)}", file=path)
    if _file_info(path) is None and not create:
        raise StoreError(f"no store at {path} (nothing to read: a writer creates it)", file=path)


def _private_dir_advice(path: str, parent: str, info: os.stat_result) -> str:
    """What to do about a directory others can write: never chmod a shared one such as /tmp."""
    shared = bool(info.st_mode & stat.S_ISVTX) or os.path.realpath(parent) == os.path.realpath(
        tempfile.gettempdir())
    if shared or info.st_uid != os.geteuid():
        private = os.path.join(parent, f"agentlog-{os.geteuid()}")
        return (f"{parent} is shared with other users; put the database in a private directory instead "
                f"(mkdir -m 700 {private}, then sqlite://{os.path.join(private, os.path.basename(path))})")
    return f"chmod go-w {parent} (or chmod 700 {parent})"


def open_file(path: str, *, create: bool) -> str:
    """Spec §5.3, at first use: create the file exclusively (0600) if ``create`` and missing, then
    check it again; returns its revision prefix (device and inode)."""
    if create:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            os.close(fd)
        except FileExistsError:
            pass
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EISDIR):
                raise PersistenceIOError(f"cannot create the database file: {exc}", file=path) from exc
    info = _file_info(path)
    if info is None:
        raise StoreError(f"no store at {path} (it was removed)", file=path)
    try:  # SQLite's own refusal says only "unable to open database file"
        os.close(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC))
    except OSError as exc:
        raise PersistenceIOError(f"cannot read the database file: {exc.strerror or exc} (mode "
                                 f"{stat.S_IMODE(info.st_mode):04o})", file=path) from exc
    return f"sqlite:{info.st_dev}:{info.st_ino}:"


def _file_info(path: str) -> os.stat_result | None:
    """``lstat`` of an existing database file, refused unless a private regular file; None if absent."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PersistenceIOError(f"cannot inspect the database file: {exc}", file=path) from exc
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"the database path is {file_kind(info.st_mode)}, not a regular file", file=path)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise StoreError("the database file must be owned by the current user with no group or other "
                         "permissions (chmod 600)", file=path)
    return info


def _schema(user_version: int, fts: bool) -> tuple[str, ...]:
    """The statements of a schema version, with or without the FTS5 index (each version's are a
    prefix of the next one's: a migration runs the difference)."""
    if user_version == 1:
        return CORE_SCHEMA
    version_2 = (*SCHEMA, *FTS_SCHEMA) if fts else SCHEMA
    if user_version == 2:
        return version_2
    version_3 = (*version_2, *DIGEST_SCHEMA)
    if user_version == 3:
        return version_3
    return (*version_3, *CONTENTLESS_SCHEMA, *WATERMARK_SCHEMA) if fts else (*version_3, *WATERMARK_SCHEMA)


@functools.cache
def _reference_objects(user_version: int, fts: bool) -> list[tuple[Any, ...]]:
    """The schema objects a correct database holds, built from ``_schema`` in a throwaway database."""
    scratch = sqlite3.connect(":memory:")
    try:
        for statement in _schema(user_version, fts):
            scratch.execute(statement)
        rows = scratch.execute(_OBJECTS).fetchall()
    finally:
        scratch.close()
    return [tuple(_normalized(part) for part in row) for row in rows]


def search_index(conn: sqlite3.Connection) -> bool | None:
    """The database's search index: None (schema 1, none), False (``search_rows`` only) or True (FTS5)."""
    if conn.execute("SELECT user_version FROM pragma_user_version").fetchone()[0] == 1:
        return None
    return conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'search_fts'").fetchone() is not None


def has_watermark(conn: sqlite3.Connection) -> bool:
    """Whether the database has the search index's watermark (schema 4): else its index is in step."""
    return bool(conn.execute("SELECT user_version FROM pragma_user_version").fetchone()[0] >= 4)


def _objects_match(conn: sqlite3.Connection, user_version: int, file: str | None) -> bool:
    objects = [tuple(_normalized(part) for part in row) for row in conn.execute(_OBJECTS)]
    fts = any(row[1] == "search_fts" for row in objects)
    if fts and not sqlite_search.fts5_available():
        raise StoreError("the database has a full-text search index (FTS5), but this Python's sqlite3 "
                         "module lacks FTS5: use a Python whose SQLite has FTS5", file=file)
    scrubbing = _scrub_objects()
    if all(row in objects for row in scrubbing):
        objects = [row for row in objects if row not in scrubbing]
    return objects == _reference_objects(user_version, fts)


@functools.cache
def _scrub_objects() -> list[tuple[Any, ...]]:
    """The schema objects ``SCRUB_SCHEMA`` makes (tolerated together, never one without the other)."""
    scratch = sqlite3.connect(":memory:")
    try:
        for statement in SCRUB_SCHEMA:
            scratch.execute(statement)
        rows = scratch.execute(_OBJECTS).fetchall()
    finally:
        scratch.close()
    return [tuple(_normalized(part) for part in row) for row in rows]


def check_identity(conn: sqlite3.Connection, *, checked_cookie: int | None, file: str | None,
                   mutation: bool) -> int:
    """Refuse a foreign or changed database (application id, schema version, schema objects).

    The schema objects are compared only when the schema cookie differs from ``checked_cookie``;
    returns the cookie now checked.
    """
    user_version, application_id, cookie = conn.execute(_IDENTITY).fetchone()
    when = " (changed before mutation)" if mutation else ""
    if application_id == DSH_APPLICATION_ID:
        raise SessionFormatUnsupportedError(
            f"the database is a DeepSeek Harness store (application id {application_id}, schema version "
            f"{user_version}){when}; agentlog's SQLite store has its own schema: use a separate file, and "
            "bring its sessions over with `agentlog import dsh FILE`",
            file=file)
    if application_id != APPLICATION_ID:
        raise StoreError(f"the database has application id {application_id}, not agentlog's "
                         f"{APPLICATION_ID}{when}: it belongs to another application", file=file)
    if user_version != USER_VERSION and (mutation or user_version not in OLDER_VERSIONS):
        raise SessionFormatUnsupportedError(
            f"the database uses agentlog SQLite schema version {user_version}, which is incompatible "
            f"with this build ({USER_VERSION}){when}; "
            + ("it was written by a newer agentlog — upgrade agentlog" if user_version > USER_VERSION
               else "this build migrates it when a writer opens it" if user_version in OLDER_VERSIONS
               else "this build ships no migration"), file=file)
    if cookie != checked_cookie and not _objects_match(conn, user_version, file):
        raise StoreError(f"the database lacks the required schema objects or has extra ones{when} "
                         "(its tables, columns, indexes, triggers and views must match agentlog's)",
                         file=file)
    return int(cookie)


def ensure_schema(conn: sqlite3.Connection, *, file: str | None, create: bool = True) -> int:
    """Create the schema in a pristine database (one transaction), then check the identity.

    Without ``create`` a pristine (empty) database is refused, untouched. Returns the schema
    cookie checked.
    """
    conn.execute("BEGIN")
    try:
        user_version, application_id, _ = conn.execute(_IDENTITY).fetchone()
        objects = conn.execute(_OBJECTS).fetchall()
    finally:
        conn.execute("COMMIT")
    if user_version == 0 and application_id == 0 and not objects and not create:
        raise StoreError(f"no agentlog store in {file}: the database is empty (a writer initialises it)",
                         file=file)
    if user_version == 0 and application_id == 0 and not objects:
        conn.execute("BEGIN IMMEDIATE")
        try:
            user_version, application_id, _ = conn.execute(_IDENTITY).fetchone()
            objects = conn.execute(_OBJECTS).fetchall()
            if user_version == 0 and application_id == 0 and not objects:
                for statement in _schema(USER_VERSION, sqlite_search.fts5_available()):
                    conn.execute(statement)
                conn.execute(INSERT_STORE_ID, (str(uuid.uuid4()),))
                for statement in _STAMP:
                    conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        user_version, application_id, _ = conn.execute(_IDENTITY).fetchone()
        objects = conn.execute(_OBJECTS).fetchall()
    if user_version == 0 and (application_id != 0 or objects):
        raise StoreError(
            f"the database has an unversioned schema or application identity (application id "
            f"{application_id}, {len(objects)} schema objects): not an agentlog database",
            file=file)
    if user_version in OLDER_VERSIONS and application_id == APPLICATION_ID and create:
        _migrate(conn, file)
    return check_identity(conn, checked_cookie=None, file=file, mutation=False)


def _migrate(conn: sqlite3.Connection, file: str | None) -> None:
    """Schema 1, 2 or 3 to 4 in one transaction: (from 1) the search tables, filled from every stored
    message row; (from 1 or 2) the digest columns, NULL in the rows already stored (no digest is made
    up for bytes this build did not write: ``verify`` names them unchecked); the index watermark,
    NULL (the index holds every row stored so far)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        user_version, _, _ = conn.execute(_IDENTITY).fetchone()
        if user_version in OLDER_VERSIONS:  # another writer may have migrated it meanwhile
            check_identity(conn, checked_cookie=None, file=file, mutation=False)
            fts = sqlite_search.fts5_available() if user_version == 1 else bool(search_index(conn))
            for statement in _schema(USER_VERSION, fts)[len(_schema(user_version, fts)):]:
                conn.execute(statement)
            if user_version == 1:
                fill_index(conn, fts)
            conn.execute(_STAMP[1])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def set_journal_mode(conn: sqlite3.Connection, journal_mode: str, *, expected: str, deadline: float,
                     file: str | None) -> None:
    """Switch the journal mode, retrying SQLITE_BUSY every 10 ms until ``deadline`` (monotonic)."""
    while True:
        try:
            mode = conn.execute(JOURNAL_MODES[journal_mode]).fetchone()[0]
            break
        except sqlite3.OperationalError as exc:
            if primary_code(exc) != SQLITE_BUSY or time.monotonic() + _JOURNAL_RETRY_S > deadline:
                raise
            time.sleep(_JOURNAL_RETRY_S)
    if str(mode).lower() != expected:
        raise StoreError(f"SQLite kept journal mode {mode!r} instead of {expected!r}", file=file)
