"""DeepSeek Harness SQLite stores (schema 17, application id "DSHP"): every session they hold.

The database is opened from its bytes in memory (the file is never touched, not even by
SQLite's journal) and its rows are decoded by the row codec agentlog's SQLite store shares with
schema 17 (packed chunk rows, zstd row data, varint provenance); a torn tail after the last
committed ``turn/end`` is counted and left out, as a load would.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from agentlog.core.header import SessionHeader
from agentlog.errors import AgentlogError
from agentlog.io.importers.builder import Imported
from agentlog.io.importers.source import SourceFile
from agentlog.store.sqlite.rows import scan_rows
from agentlog.store.sqlite.schema import DSH_APPLICATION_ID

__all__ = ["SQLITE_MAGIC", "import_dsh_sqlite"]

SQLITE_MAGIC: Final = b"SQLite format 3\x00"
DSH_SCHEMA: Final = 17
_SESSIONS: Final = ("SELECT id, version, created_at, cwd, parent_session, seed_length, origin, "
                    "delegation_depth, agent_preset FROM sessions ORDER BY rowid")
_ROWS: Final = ("SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable, NULL FROM events "
                "WHERE session_id = ? ORDER BY seq")
_WIRE: Final = ("id", "version", "createdAt", "cwd", "parentSession", "seedLength", "origin",
                "delegationDepth", "agentPreset")


def _session(conn: sqlite3.Connection, source: SourceFile, row: tuple[Any, ...]) -> Imported:
    wire = {key: value for key, value in zip(_WIRE, row, strict=True) if value is not None}
    session_id = str(row[0])
    try:
        header = SessionHeader.from_wire(wire)
        scan = scan_rows(conn.execute(_ROWS, (session_id,)).fetchall(), 0)
    except AgentlogError as exc:
        raise source.error(f'session "{session_id}": {exc.detail}') from None
    unmapped = {}
    if scan.torn is not None:
        unmapped[f"rows of a torn tail from seq {scan.torn} (ignored, as a load ignores them)"] = 1
    return Imported(header, tuple(scan.events), unmapped)


def import_dsh_sqlite(source: SourceFile) -> list[Imported]:
    """The sessions of one DSH SQLite database, in creation order."""
    conn = sqlite3.connect(":memory:")
    try:
        try:
            conn.deserialize(source.data)
            user_version, application_id = conn.execute(
                "SELECT (SELECT user_version FROM pragma_user_version), "
                "(SELECT application_id FROM pragma_application_id)").fetchone()
        except sqlite3.DatabaseError as exc:
            raise source.error(f"not a readable SQLite database ({exc})") from None
        if application_id != DSH_APPLICATION_ID or user_version != DSH_SCHEMA:
            raise source.error(f"a SQLite database with application id {application_id} and schema version "
                               f"{user_version}; expected a DSH store (application id {DSH_APPLICATION_ID}, "
                               f"schema {DSH_SCHEMA})")
        try:
            sessions = conn.execute(_SESSIONS).fetchall()
            return [_session(conn, source, row) for row in sessions]
        except sqlite3.DatabaseError as exc:
            raise source.error(f"the DSH store cannot be read ({exc})") from None
    finally:
        conn.close()
