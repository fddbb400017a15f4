"""The SQLite store's side of a scrub: a session's rows rewritten in one transaction, then the file
compacted so no freed page keeps the old bytes.

With ``secure_delete`` on, the session's event rows (its own: a fork by reference reads its
parent's) and its search rows are deleted and written again through the store's own row encoder
(``encode_rows``, ``digested_rows``, ``catch_up``: a change of the row layout carries over),
the header row updated with its digest, and the journal row added, all in one ``BEGIN IMMEDIATE``
transaction. After every session: the FTS5 index merged (``optimize``: deleted entries leave its
segments), ``VACUUM``, and ``wal_checkpoint(TRUNCATE)`` empties the WAL.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Final

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import dumps, loads
from agentlog.errors import SessionNotFoundError
from agentlog.store.scrubbing import ScrubBackend
from agentlog.store.sqlite.integrity import digested_rows, header_digest
from agentlog.store.sqlite.rows import encode_rows
from agentlog.store.sqlite.schema import (
    BUMP_REVISION,
    DELETE_ROWS_FROM,
    INSERT_ROW,
    SCRUB_SCHEMA,
    header_values,
)
from agentlog.store.sqlite.search import catch_up, unindex_from
from agentlog.store.sqlite.store import SqliteStore

__all__ = ["SqliteScrub"]

_UPDATE_HEADER: Final = (
    "UPDATE sessions SET version = ?, created_at = ?, cwd = ?, parent_session = ?, seed_length = ?, "
    "origin = ?, delegation_depth = ?, agent_preset = ?, extra = ?, digest = ? WHERE key = ?"
)
_JOURNAL: Final = "SELECT record FROM scrub_journal WHERE session = ? ORDER BY id"
_RECORD: Final = "INSERT INTO scrub_journal (session, record) VALUES (?, ?)"


class SqliteScrub(ScrubBackend):
    """Scrub rewrites for a ``SqliteStore``."""

    store: SqliteStore

    def _tables(self) -> None:
        with self.store._writing(None) as conn:
            for statement in SCRUB_SCHEMA:
                conn.execute(statement)
        self.store._schema_cookie = None  # the schema changed: check it again

    def key(self) -> bytes:
        self._tables()
        with self.store._writing(None) as conn:
            conn.execute("INSERT OR IGNORE INTO scrub_key (singleton, key) VALUES (1, ?)", (os.urandom(32),))
            row = conn.execute("SELECT key FROM scrub_key WHERE singleton = 1").fetchone()
        return bytes(row[0])

    def journal(self, session_id: str) -> list[dict[str, Any]]:
        with self.store._reading(session_id) as conn:
            if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'scrub_journal'").fetchone() is None:
                return []
            return [loads(row[0]) for row in conn.execute(_JOURNAL, (session_id,))]

    def own_start(self, session_id: str) -> int:
        with self.store._reading(session_id) as conn:
            info = self.store._info(conn, session_id)
        if info is None:
            raise SessionNotFoundError("session not found", session_id=session_id)
        return info.start

    def rewrite(self, session_id: str, header: SessionHeader, events: Sequence[Event],
                record: dict[str, Any]) -> list[str]:
        store = self.store
        fts = bool(store._fts)
        with store._writing(session_id) as conn:
            conn.execute("PRAGMA secure_delete = ON")
            info = store._info(conn, session_id)
            if info is None:
                raise SessionNotFoundError("session not found", session_id=session_id)
            own = list(events[info.start:])
            unindex_from(conn, info.key, 0, fts)
            conn.execute(DELETE_ROWS_FROM, (info.key, 0))
            if own:
                conn.executemany(INSERT_ROW, digested_rows(info.key, session_id, encode_rows(own)))
            catch_up(conn, fts, session_id)  # unindex_from lowered the watermark: index the new rows now
            values = header_values(header)
            conn.execute(_UPDATE_HEADER, (*values[1:], header_digest(values), info.key))
            conn.execute(BUMP_REVISION, (info.key,))
            conn.execute(_RECORD, (session_id, dumps(record).decode()))
        return []

    def dispose(self) -> list[str]:
        store = self.store
        if store.memory:
            return []
        with store._db_lock, store._translated(None):
            conn = store._connection()
            conn.execute("PRAGMA secure_delete = ON")
            if store._fts:
                conn.execute("INSERT INTO search_fts (search_fts) VALUES ('optimize')")
            conn.execute("VACUUM")
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            return ["the WAL could not be truncated (another connection reads the database): "
                    "run agentlog scrub again when it is idle"]
        return ["VACUUM done, the WAL checkpointed and truncated"]
