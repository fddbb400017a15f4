"""The PostgreSQL store's side of a scrub: a session's rows rewritten in one transaction.

The session row is locked (``FOR UPDATE``), its own event rows deleted (their search text goes
with them: ``ON DELETE CASCADE``) and inserted again through the store's own insert (row encoder,
digests and search text), the header row updated with its digest and the journal row added, all
in one transaction. Then ``VACUUM`` of the tables, when the role may. PostgreSQL keeps what the
store cannot reach: dead tuples until their pages are reused (``VACUUM FULL`` rewrites the
tables), WAL segments, replicas, backups and PITR archives; the output says so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Final

import psycopg
from psycopg import sql

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import dumps, loads
from agentlog.errors import SessionNotFoundError
from agentlog.store.integrity import row_digest
from agentlog.store.postgres.errors import translate
from agentlog.store.postgres.reads import session_info
from agentlog.store.postgres.store import PostgresStore, _header_values
from agentlog.store.scrubbing import ScrubBackend

__all__ = ["CAVEATS", "PostgresScrub"]

CAVEATS: Final = (
    "PostgreSQL keeps the old row versions (dead tuples) in the table files until VACUUM reuses "
    "their space; agentlog ran VACUUM where it could, VACUUM FULL (it locks the tables) rewrites them",
    "the old values are still in the WAL segments written before, in WAL archives (PITR), on "
    "streaming or logical replicas and in base backups and dumps: the store cannot clean those",
    "file-system or volume snapshots of the database's disk are outside what the store can reach",
)

_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS {schema}.scrub_key (singleton boolean PRIMARY KEY DEFAULT true "
    "CHECK (singleton), key bytea NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {schema}.scrub_journal (id bigserial PRIMARY KEY, session_id text NOT NULL, "
    "record text NOT NULL)",
)
_STATEMENTS: Final = {
    "key_add": "INSERT INTO {schema}.scrub_key (key) VALUES (%s) ON CONFLICT DO NOTHING",
    "key": "SELECT key FROM {schema}.scrub_key",
    "journal": "SELECT record FROM {schema}.scrub_journal WHERE session_id = %s ORDER BY id",
    "has_journal": "SELECT to_regclass(%s) IS NOT NULL",
    "record": "INSERT INTO {schema}.scrub_journal (session_id, record) VALUES (%s, %s)",
    "own_rows": "DELETE FROM {schema}.events WHERE session_id = %s AND seq >= %s",
    "header": "UPDATE {schema}.sessions SET version = %s, created_at = %s, cwd = %s, parent_session = %s, "
              "seed_length = %s, origin = %s, delegation_depth = %s, agent_preset = %s, extra = %s, "
              "digest = %s, revision = revision + 1 WHERE id = %s",
}
_VACUUM: Final = ("events", "search_text", "sessions")


class PostgresScrub(ScrubBackend):
    """Scrub rewrites for a ``PostgresStore``."""

    store: PostgresStore
    caveats = CAVEATS

    def _sql(self, name: str) -> str:
        return sql.SQL(_STATEMENTS[name]).format(schema=sql.Identifier(self.store.schema)).as_string()

    def key(self) -> bytes:
        store = self.store
        store._ready()
        name = sql.Identifier(store.schema)
        with translate(None, store.where), store._pool.connection() as conn, conn.transaction():
            for statement in _TABLES:
                conn.execute(sql.SQL(statement).format(schema=name).as_string())
            conn.execute(self._sql("key_add"), (os.urandom(32),))
            row = conn.execute(self._sql("key")).fetchone()
        assert row is not None
        return bytes(row[0])

    def journal(self, session_id: str) -> list[dict[str, Any]]:
        store = self.store
        store._ready()
        with translate(session_id, store.where), store._pool.connection() as conn:
            exists = conn.execute(self._sql("has_journal"), (f'"{store.schema}".scrub_journal',)).fetchone()
            if not exists or not exists[0]:
                return []
            return [loads(row[0]) for row in conn.execute(self._sql("journal"), (session_id,))]

    def own_start(self, session_id: str) -> int:
        store = self.store
        store._ready()
        with translate(session_id, store.where), store._pool.connection() as conn:
            row = conn.execute(store._sql.session, (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError("session not found", session_id=session_id)
        return int(session_info(row).base_length)

    def rewrite(self, session_id: str, header: SessionHeader, events: Sequence[Event],
                record: dict[str, Any]) -> list[str]:
        store = self.store
        store._ready()
        with translate(session_id, store.where), store._pool.connection() as conn, conn.transaction():
            row = conn.execute(store._sql.session_for_update, (session_id,)).fetchone()
            if row is None:
                raise SessionNotFoundError("session not found", session_id=session_id)
            start = int(session_info(row).base_length)
            conn.execute(self._sql("own_rows"), (session_id, start))
            store._insert(conn, session_id, list(events[start:]))
            values = _header_values(header)
            conn.execute(self._sql("header"), (*values[1:], row_digest(values), session_id))
            conn.execute(self._sql("record"), (session_id, dumps(record).decode()))
        return []

    def dispose(self) -> list[str]:
        store = self.store
        name = sql.Identifier(store.schema)
        try:
            with psycopg.connect(store.dsn, autocommit=True) as conn:
                for table in _VACUUM:
                    conn.execute(sql.SQL("VACUUM {}.{}").format(name, sql.Identifier(table)).as_string())
        except psycopg.Error as exc:
            return [f"VACUUM failed ({str(exc).strip()}): run VACUUM on the {store.schema} tables yourself"]
        return [f"VACUUM done on {', '.join(_VACUUM)}"]
