"""Build a DeepSeek Harness SQLite store (schema 17, spec persistence §5.4) for the importer tests.

The DDL is the spec's; rows are encoded with the row codec schema 17 and agentlog share (the
``op_first`` column is agentlog's only addition and is always NULL for these logs).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from pathlib import Path

from agentlog import Event, SessionHeader
from agentlog.store.sqlite.rows import encode_rows

SCHEMA_17 = """
CREATE TABLE persistence_state(singleton INTEGER PRIMARY KEY CHECK(singleton=1),
  store_id TEXT NOT NULL) STRICT;
CREATE TABLE sessions(id TEXT PRIMARY KEY, version INTEGER NOT NULL, created_at INTEGER NOT NULL, cwd TEXT,
  parent_session TEXT, seed_length INTEGER, origin TEXT, delegation_depth INTEGER, agent_preset TEXT,
  incarnation TEXT NOT NULL, revision INTEGER NOT NULL) STRICT;
CREATE TABLE events(session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, seq INTEGER NOT NULL,
  type TEXT NOT NULL, time INTEGER NOT NULL, data ANY NOT NULL, source_event_seqs ANY, surface_op TEXT,
  ignorable INTEGER CHECK(ignorable IS NULL OR ignorable IN (0,1)), PRIMARY KEY(session_id, seq)) STRICT;
"""


def write_dsh_store(path: Path, sessions: Sequence[tuple[SessionHeader, Sequence[Event]]]) -> None:
    """A schema-17 database holding ``sessions`` (each written as one append batch)."""
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_17)
    conn.execute("PRAGMA application_id = 1146308688")
    conn.execute("PRAGMA user_version = 17")
    conn.execute("INSERT INTO persistence_state VALUES (1, ?)", (str(uuid.uuid4()),))
    for header, events in sessions:
        conn.execute("INSERT INTO sessions VALUES (?, 0, ?, ?, ?, ?, ?, ?, ?, ?, 0)", (
            header.id, header.created_at, header.cwd, header.parent_session, header.seed_length,
            header.origin, header.delegation_depth, header.agent_preset, str(uuid.uuid4())))
        for row in encode_rows(events):
            assert row[7] is None
            conn.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (header.id, *row[:7]))
    conn.commit()
    conn.close()
