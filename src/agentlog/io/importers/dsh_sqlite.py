"""DeepSeek Harness SQLite stores (schema 17, application id "DSHP"): every session they hold.

The database is opened from its bytes in memory (the file is never touched, not even by
SQLite's journal) and its rows are decoded by the row codec agentlog's SQLite store shares with
schema 17 (packed chunk rows, zstd row data, varint provenance); a torn tail after the last
committed ``turn/end`` is counted and left out, as a load would. The file is untrusted: only the
``sessions`` and ``events`` tables are read, after a check that they are real tables with schema
17's columns (a view or a generated column never runs), and the reads are bounded in time.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Final

from agentlog.core.header import SessionHeader
from agentlog.errors import AgentlogError
from agentlog.io.importers.builder import Imported
from agentlog.io.importers.source import SourceFile
from agentlog.store.sqlite.rows import scan_rows
from agentlog.store.sqlite.schema import DSH_APPLICATION_ID

__all__ = ["DEFAULT_TIME_LIMIT", "SQLITE_MAGIC", "import_dsh_sqlite"]

SQLITE_MAGIC: Final = b"SQLite format 3\x00"
DSH_SCHEMA: Final = 17
DEFAULT_TIME_LIMIT: Final = 300.0
"""Seconds an import may spend reading one DSH store before it is refused as too slow to read."""

_TABLES: Final = {
    "sessions": "CREATE TABLE sessions(id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
                "created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT, seed_length INTEGER, "
                "origin TEXT, delegation_depth INTEGER, agent_preset TEXT, incarnation TEXT NOT NULL, "
                "revision INTEGER NOT NULL) STRICT",
    "events": "CREATE TABLE events(session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, "
              "seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data ANY NOT NULL, "
              "source_event_seqs ANY, surface_op TEXT, ignorable INTEGER CHECK(ignorable IS NULL OR "
              "ignorable IN (0,1)), PRIMARY KEY(session_id, seq)) STRICT",
}
"""The two tables read, as schema 17 declares them (spec persistence §5.4)."""

_OBJECT: Final = "SELECT type, rootpage FROM sqlite_schema WHERE name = ? COLLATE NOCASE"
_COLUMNS: Final = "SELECT name, upper(type), \"notnull\", pk, hidden FROM pragma_table_xinfo(?) ORDER BY cid"
_SESSIONS: Final = ("SELECT id, version, created_at, cwd, parent_session, seed_length, origin, "
                    "delegation_depth, agent_preset FROM sessions ORDER BY rowid")
_ROWS: Final = ("SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable, NULL FROM events "
                "WHERE session_id = ? ORDER BY seq")
_WIRE: Final = ("id", "version", "createdAt", "cwd", "parentSession", "seedLength", "origin",
                "delegationDepth", "agentPreset")
_PROGRESS_STEPS: Final = 1000


def _expected_columns() -> dict[str, list[tuple[Any, ...]]]:
    reference = sqlite3.connect(":memory:")
    try:
        for ddl in _TABLES.values():
            reference.execute(ddl)
        return {name: reference.execute(_COLUMNS, (name,)).fetchall() for name in _TABLES}
    finally:
        reference.close()


def _check_tables(conn: sqlite3.Connection, source: SourceFile) -> None:
    """Refuse the file unless ``sessions`` and ``events`` are ordinary tables with schema 17's columns."""
    expected = _expected_columns()
    for name in _TABLES:
        found = conn.execute(_OBJECT, (name,)).fetchone()
        if found is None:
            raise source.error(f'the DSH store has no "{name}" table')
        kind, rootpage = found
        if kind != "table":
            raise source.error(f'"{name}" is a {kind}, not a table: not a DSH store (only tables are read)')
        if not rootpage:
            raise source.error(f'"{name}" is a virtual table, not an ordinary one: not a DSH store')
        if conn.execute(_COLUMNS, (name,)).fetchall() != expected[name]:
            raise source.error(f'"{name}" does not have the columns of DSH schema 17 (names, types, '
                               "constraints, no generated columns): not a DSH store")


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


def import_dsh_sqlite(source: SourceFile, *, time_limit: float = DEFAULT_TIME_LIMIT) -> list[Imported]:
    """The sessions of one DSH SQLite database, in creation order; refused past ``time_limit`` seconds."""
    deadline = time.monotonic() + time_limit
    conn = sqlite3.connect(":memory:")
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_STEPS)
    slow = source.error(f"reading the DSH store took longer than {time_limit} s: refused as unreadable "
                        "(a store this slow to read is not one DSH wrote)")
    try:
        try:
            conn.execute("PRAGMA trusted_schema = OFF")
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
            _check_tables(conn, source)
            imported = []
            for row in conn.execute(_SESSIONS).fetchall():
                if time.monotonic() > deadline:
                    raise slow
                imported.append(_session(conn, source, row))
            return imported
        except sqlite3.OperationalError as exc:
            if time.monotonic() > deadline:
                raise slow from None
            raise source.error(f"the DSH store cannot be read ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise source.error(f"the DSH store cannot be read ({exc})") from None
    finally:
        conn.close()
