"""The PostgreSQL store's schema: numbered append-only migrations, statements, first-use setup.

Every statement is a fixed template; only the schema name (quoted as an identifier) is
substituted, once per store. Values are always bound parameters.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from psycopg import sql

from agentlog.errors import SessionFormatUnsupportedError, StoreError
from agentlog.store.postgres.rows import ROW_COLUMNS
from agentlog.store.postgres.search import SEARCH_INSERT, SEARCH_TABLE, fill_index

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SESSION_COLUMNS", "Migration", "Statements", "advisory_key",
           "ensure_schema"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema's history; ``statements``, then ``fill(conn, schema)``, in one transaction."""

    version: int
    title: str
    statements: tuple[str, ...]
    fill: Callable[[psycopg.Connection[Any], str], None] | None = None


MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(1, "meta, sessions and events", (
        """CREATE TABLE {schema}.meta (
            singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            schema_version integer NOT NULL,
            store_id uuid NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now())""",
        """CREATE TABLE {schema}.sessions (
            id text PRIMARY KEY CHECK (id <> ''),
            version integer NOT NULL,
            created_at bigint NOT NULL CHECK (created_at >= 0),
            cwd text,
            parent_session text,
            seed_length bigint CHECK (seed_length >= 0),
            origin text,
            delegation_depth bigint CHECK (delegation_depth >= 0),
            agent_preset text,
            extra text,
            base_session text REFERENCES {schema}.sessions (id),
            base_length bigint NOT NULL DEFAULT 0 CHECK (base_length >= 0),
            next_seq bigint NOT NULL CHECK (next_seq >= base_length),
            incarnation uuid NOT NULL,
            revision bigint NOT NULL CHECK (revision >= 0),
            CHECK ((base_session IS NULL) = (base_length = 0)))""",
        """CREATE INDEX sessions_base_session ON {schema}.sessions (base_session)
            WHERE base_session IS NOT NULL""",
        """CREATE TABLE {schema}.events (
            session_id text NOT NULL REFERENCES {schema}.sessions (id) ON DELETE CASCADE,
            seq bigint NOT NULL CHECK (seq >= 0),
            type text NOT NULL,
            time bigint NOT NULL,
            data text,
            data_zstd bytea,
            source_event_seqs bigint[],
            surface_op text,
            op_first boolean,
            ignorable boolean,
            PRIMARY KEY (session_id, seq),
            CHECK ((data IS NULL) <> (data_zstd IS NULL)))""",
        "INSERT INTO {schema}.meta (schema_version, store_id) VALUES (0, %(store_id)s)",
    )),
    Migration(2, "search text of every message", (SEARCH_TABLE,), fill_index),
    Migration(3, "an integrity digest per session and event row (NULL in rows stored before)", (
        "ALTER TABLE {schema}.sessions ADD COLUMN digest bytea",
        "ALTER TABLE {schema}.events ADD COLUMN digest bytea",
    )),
    Migration(4, "the search index off the write path: a watermark per session (NULL: all rows indexed)", (
        "ALTER TABLE {schema}.sessions ADD COLUMN indexed_to bigint CHECK (indexed_to >= 0)",
    )),
)
"""The schema's history. Append new migrations; never edit or reorder a released one."""

SCHEMA_VERSION: Final = MIGRATIONS[-1].version
"""The schema version this build writes and reads."""

SESSION_COLUMNS: Final = (
    "id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset, "
    "extra, base_session, base_length, next_seq, incarnation, revision"
)
"""The ``sessions`` columns every session read selects, in ``_info``'s order."""
_SESSION_COLUMNS: Final = SESSION_COLUMNS
_ROW_COLUMNS: Final = ", ".join(ROW_COLUMNS)

_UNNEST: Final = (
    "SELECT %(id)s, u.seq, u.type, u.time, u.data, u.data_zstd, u.seqs::bigint[], u.surface_op, u.op_first, "
    "u.ignorable, u.digest FROM unnest(%(seq)b::bigint[], %(type)b::text[], %(time)b::bigint[], "
    "%(data)b::text[], %(data_zstd)b::bytea[], %(seqs)b::text[], %(surface_op)b::text[], "
    "%(op_first)b::boolean[], %(ignorable)b::boolean[], %(digest)b::bytea[]) "
    "AS u(seq, type, time, data, data_zstd, seqs, surface_op, op_first, ignorable, digest)"
)
"""A batch of rows as one array parameter per column (binary): one statement whatever its size."""

_TEMPLATES: Final = {
    "meta": "SELECT schema_version, store_id FROM {schema}.meta",
    "session": f"SELECT {_SESSION_COLUMNS} FROM {{schema}}.sessions WHERE id = %s",
    "sessions": f"SELECT {_SESSION_COLUMNS} FROM {{schema}}.sessions ORDER BY id",
    "exists": "SELECT 1 FROM {schema}.sessions WHERE id = %s",
    "insert_session": f"INSERT INTO {{schema}}.sessions ({_SESSION_COLUMNS}, digest, indexed_to) "
                      "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
    "insert_rows": f"WITH inserted AS (INSERT INTO {{schema}}.events (session_id, {_ROW_COLUMNS}, digest) "
                   f"{_UNNEST}) {SEARCH_INSERT}",
    "insert_unindexed": f"INSERT INTO {{schema}}.events (session_id, {_ROW_COLUMNS}, digest) {_UNNEST}",
    "append": "WITH advanced AS (UPDATE {schema}.sessions SET next_seq = %(end)s, revision = revision + 1, "
              "indexed_to = COALESCE(indexed_to, %(first)s) "
              "WHERE id = %(id)s AND next_seq = %(first)s AND incarnation = %(incarnation)s RETURNING 1), "
              f"inserted AS (INSERT INTO {{schema}}.events (session_id, {_ROW_COLUMNS}, digest) {_UNNEST} "
              "WHERE EXISTS (SELECT FROM advanced)) "
              "SELECT pg_notify(%(channel)s, %(end)s::text) FROM advanced",
    "rows": f"SELECT {_ROW_COLUMNS} FROM {{schema}}.events "
            "WHERE session_id = %s AND seq >= %s AND seq < %s ORDER BY seq",
    "rows_from": f"SELECT {_ROW_COLUMNS} FROM {{schema}}.events "
                 "WHERE session_id = %(id)s AND seq >= COALESCE((SELECT max(seq) FROM {schema}.events "
                 "WHERE session_id = %(id)s AND seq <= %(from)s), %(from)s) AND seq < %(end)s ORDER BY seq",
    "session_for_update": f"SELECT {_SESSION_COLUMNS} FROM {{schema}}.sessions WHERE id = %s FOR UPDATE",
    "cursor": "SELECT next_seq, revision, incarnation FROM {schema}.sessions WHERE id = %s",
    "lock_session": "SELECT next_seq, revision, incarnation FROM {schema}.sessions WHERE id = %s FOR UPDATE",
    "share_session": "SELECT next_seq FROM {schema}.sessions WHERE id = %s FOR KEY SHARE",
    "truncate": "DELETE FROM {schema}.events WHERE session_id = %s AND seq >= %s",
    "set_cursor": "UPDATE {schema}.sessions SET next_seq = %s, revision = revision + 1, "
                  "indexed_to = LEAST(COALESCE(indexed_to, next_seq), %s) WHERE id = %s",
    "detach": "UPDATE {schema}.sessions SET base_session = NULL, base_length = 0, revision = revision + 1 "
              "WHERE id = %s",
    "children": "SELECT id FROM {schema}.sessions WHERE base_session = %s ORDER BY id",
    "delete": "DELETE FROM {schema}.sessions WHERE id = %s",
    "header_digest": "SELECT id, version, created_at, cwd, parent_session, seed_length, origin, "
                     "delegation_depth, agent_preset, extra, digest FROM {schema}.sessions WHERE id = %s",
    "row_digests": f"SELECT {_ROW_COLUMNS}, digest FROM {{schema}}.events WHERE session_id = %s ORDER BY seq",
}


class Statements:
    """The store's SQL with the schema name filled in (rendered once)."""

    def __init__(self, schema: str) -> None:
        name = sql.Identifier(schema)
        rendered = {key: sql.SQL(text).format(schema=name).as_string() for key, text in _TEMPLATES.items()}
        self.meta = rendered["meta"]
        self.session = rendered["session"]
        self.sessions = rendered["sessions"]
        self.exists = rendered["exists"]
        self.insert_session = rendered["insert_session"]
        self.insert_rows = rendered["insert_rows"]
        self.insert_unindexed = rendered["insert_unindexed"]
        self.append = rendered["append"]
        self.rows = rendered["rows"]
        self.rows_from = rendered["rows_from"]
        self.session_for_update = rendered["session_for_update"]
        self.cursor = rendered["cursor"]
        self.lock_session = rendered["lock_session"]
        self.share_session = rendered["share_session"]
        self.truncate = rendered["truncate"]
        self.set_cursor = rendered["set_cursor"]
        self.detach = rendered["detach"]
        self.children = rendered["children"]
        self.delete = rendered["delete"]
        self.header_digest = rendered["header_digest"]
        self.row_digests = rendered["row_digests"]
        self.migrations = tuple(
            (migration, tuple(sql.SQL(text).format(schema=name).as_string()
                              for text in migration.statements))
            for migration in MIGRATIONS
        )
        self.create_schema = sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name).as_string()
        self.set_version = sql.SQL("UPDATE {}.meta SET schema_version = %s").format(name).as_string()
        self.lock_meta = sql.SQL("SELECT schema_version, store_id FROM {}.meta FOR UPDATE").format(
            name).as_string()


def advisory_key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key for ``parts`` (stable across hosts and versions)."""
    digest = hashlib.blake2b("\0".join(parts).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _unsupported(schema: str, version: object) -> SessionFormatUnsupportedError:
    if isinstance(version, int) and version > SCHEMA_VERSION:
        return SessionFormatUnsupportedError(
            f'PostgreSQL schema "{schema}" is at agentlog schema version {version}, newer than this build '
            f"reads ({SCHEMA_VERSION}); it was written by a newer agentlog: upgrade agentlog"
        )
    return SessionFormatUnsupportedError(
        f'PostgreSQL schema "{schema}" has unknown agentlog schema version {version!r} '
        f"(this build reads 1..{SCHEMA_VERSION})"
    )


def _identity(schema: str, rows: list[tuple[object, object]]) -> tuple[int, str]:
    """The (version, store uuid) of a meta table's rows, or a refusal."""
    if len(rows) != 1 or not isinstance(rows[0][1], uuid.UUID):
        raise StoreError(f'PostgreSQL schema "{schema}" has no valid store identity in its meta table')
    version, store_id = rows[0]
    if type(version) is not int or not 1 <= version <= SCHEMA_VERSION:
        raise _unsupported(schema, version)
    return version, str(store_id)


def ensure_schema(conn: psycopg.Connection[Any], schema: str, statements: Statements, *,
                  create: bool = True) -> str:
    """Create or migrate the store's schema on first use; return the store uuid.

    Without ``create`` (readers) a missing or older schema is refused, never created or migrated.

    Refuses a schema written by a newer build (``SessionFormatUnsupportedError``) and a
    schema that holds tables but no agentlog ``meta`` table. Concurrent first uses from
    many processes serialize on a transaction-scoped advisory lock.
    """
    encoding = conn.execute("SHOW server_encoding").fetchone()
    if encoding is None or str(encoding[0]).upper() not in ("UTF8", "UTF-8"):
        used = encoding and encoding[0]
        raise StoreError(f"the PostgreSQL database must use UTF8 encoding (it uses {used})")
    try:
        with conn.transaction():
            version, store_id = _identity(schema, conn.execute(statements.meta).fetchall())
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        version, store_id = 0, ""
    if version == SCHEMA_VERSION:
        return store_id
    if not create:
        raise StoreError(f'no store in PostgreSQL schema "{schema}" (nothing to read: a writer creates it)'
                         if version == 0 else
                         f'PostgreSQL schema "{schema}" holds store schema version {version}, which a '
                         f"writer of this build migrates to {SCHEMA_VERSION} (a reader does not)")
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("agentlog-setup", schema),))
        conn.execute(statements.create_schema)
        present = conn.execute("SELECT to_regclass(format('%%I.meta', %s::text))", (schema,)).fetchone()
        if present is not None and present[0] is not None:
            version, store_id = _identity(schema, conn.execute(statements.lock_meta).fetchall())
        else:
            tables = conn.execute("SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = %s",
                                  (schema,)).fetchone()
            if tables is not None and tables[0]:
                raise StoreError(f'PostgreSQL schema "{schema}" holds tables but no agentlog meta table; '
                                 "point agentlog at an empty or agentlog-owned schema")
            version, store_id = 0, str(uuid.uuid4())
        for migration, texts in statements.migrations[version:]:
            for text in texts:
                conn.execute(text, {"store_id": store_id} if "%(store_id)s" in text else None)
            if migration.fill is not None:
                migration.fill(conn, schema)
            conn.execute(statements.set_version, (migration.version,))
    return store_id
