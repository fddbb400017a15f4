"""The SQLite store's integrity data: a digest per event row and per session row (schema 3).

Computed on write from exactly the values inserted (``store.integrity.row_digest``, the session
id first, so a row moved to another session differs too) and checked by ``verify``. Rows stored
before schema 3 have none: they are named as unchecked, never made up.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from agentlog.errors import SessionNotFoundError
from agentlog.store.integrity import Integrity, check_rows, row_digest

__all__ = ["check_session", "digested_rows", "header_digest"]

_HEADER: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
    "agent_preset, extra, digest, key FROM sessions WHERE id = ?"
)
_ROWS: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable, op_first, digest "
    "FROM events WHERE session = ? ORDER BY seq"
)


def header_digest(values: Sequence[Any]) -> bytes:
    """The digest of a session row's header columns (``schema.header_values`` order)."""
    return row_digest(values)


def digested_rows(key: int, session_id: str, rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """``INSERT_ROW`` parameters of encoded rows: the session key, the row, its digest."""
    return [(key, *row, row_digest((session_id, *row))) for row in rows]


def check_session(conn: sqlite3.Connection, session_id: str, file: str, torn_from: int | None) -> Integrity:
    """Check a session's rows (below the torn tail at seq ``torn_from``) against their digests,
    inside a read transaction."""
    version = conn.execute("SELECT user_version FROM pragma_user_version").fetchone()[0]
    if version < 3:
        return Integrity("none", f"no integrity data: the database is of schema version {version}, "
                                 "before row digests (a writer migrates it)")
    header = conn.execute(_HEADER, (session_id,)).fetchone()
    if header is None:
        raise SessionNotFoundError("session not found", session_id=session_id)
    return check_rows(session_id, header[:-1], conn.execute(_ROWS, (header[-1],)), torn_from, where=file,
                      file=file)
