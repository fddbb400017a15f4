"""A crafted "DSH SQLite store" is refused by its schema before a row is read, and reading a real
one is bounded in time: a view, a virtual table, a generated or missing column never runs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agentlog import Event, SessionHeader, SourceFormatError, open_store
from agentlog.io.importers import SourceFile
from agentlog.io.importers.dsh_sqlite import import_dsh_sqlite
from tests.io.importers.dsh_store import SCHEMA_17, write_dsh_store
from tests.store.jsonl.test_store import make_log

_IDENTITY = ("PRAGMA application_id = 1146308688", "PRAGMA user_version = 17")
_EVENTS = SCHEMA_17[SCHEMA_17.index("CREATE TABLE events"):]
_BOMB = """CREATE VIEW events AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)
SELECT 's1' AS session_id, n AS seq, 'turn/start' AS type, 0 AS time, zeroblob(100000) AS data,
  NULL AS source_event_seqs, NULL AS surface_op, NULL AS ignorable FROM r ORDER BY random()"""


def _crafted(path: Path, events_ddl: str) -> Path:
    """A file with DSH's identity and tables, ``events`` replaced by ``events_ddl``; one session row."""
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_17.replace(_EVENTS, "") + events_ddl + ";")
    for pragma in _IDENTITY:
        conn.execute(pragma)
    conn.execute("INSERT INTO persistence_state VALUES (1, 'x')")
    conn.execute("INSERT INTO sessions VALUES ('s1', 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, 'i', 0)")
    conn.commit()
    conn.close()
    return path


def test_a_recursive_view_as_events_is_refused_at_once_by_the_cli(tmp_path: Path) -> None:
    database = _crafted(tmp_path / "bomb.db", _BOMB)
    assert database.stat().st_size <= 16384
    url = f"jsonl://{tmp_path / 'store'}"
    command = [sys.executable, "-m", "agentlog.cli", "--store", url, "import", "dsh", str(database)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)  # before: forever
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(database) in done.stderr and '"events" is a view, not a table' in done.stderr
    with open_store(url) as store:
        assert store.list() == []


@pytest.mark.parametrize(("events_ddl", "why"), [
    ("CREATE VIRTUAL TABLE events USING fts5(session_id, seq, type, time, data, source_event_seqs, "
     "surface_op, ignorable)", '"events" is a virtual table'),
    (_EVENTS.replace("data ANY NOT NULL", "data ANY GENERATED ALWAYS AS (zeroblob(1000000000))"),
     '"events" does not have the columns of DSH schema 17'),
    (_EVENTS.replace(", source_event_seqs ANY", ""), '"events" does not have the columns of DSH schema 17'),
    (_EVENTS.replace(", PRIMARY KEY(session_id, seq)", ""), '"events" does not have the columns'),
    ("CREATE TABLE unrelated(x)", 'no "events" table'),
])
def test_an_events_table_that_is_not_schema_17s_is_refused(tmp_path: Path, events_ddl: str, why: str) -> None:
    database = _crafted(tmp_path / "odd.db", events_ddl)
    with pytest.raises(SourceFormatError, match=why) as refused:
        import_dsh_sqlite(SourceFile(str(database), database.read_bytes()))
    assert refused.value.file == str(database)


def test_a_sessions_view_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "v.db")
    conn.executescript(SCHEMA_17.replace("CREATE TABLE sessions(", "CREATE TABLE real_sessions(")
                       .replace("REFERENCES sessions(id)", "REFERENCES real_sessions(id)")
                       + "CREATE VIEW sessions AS SELECT * FROM real_sessions;")
    for pragma in _IDENTITY:
        conn.execute(pragma)
    conn.commit()
    conn.close()
    with pytest.raises(SourceFormatError, match='"sessions" is a view, not a table'):
        import_dsh_sqlite(SourceFile("v.db", (tmp_path / "v.db").read_bytes()))


def test_reading_a_store_is_bounded_in_time(tmp_path: Path) -> None:
    database = tmp_path / "dsh.db"
    events = [Event.from_wire(wire) for wire in make_log(3).events]
    write_dsh_store(database, [(SessionHeader(id=f"s{n}", cwd="/p"), events) for n in range(20)])
    source = SourceFile(str(database), database.read_bytes())
    assert len(import_dsh_sqlite(source)) == 20
    with pytest.raises(SourceFormatError, match=r"took longer than 0\.0 s") as refused:
        import_dsh_sqlite(source, time_limit=0.0)
    assert refused.value.file == str(database)
