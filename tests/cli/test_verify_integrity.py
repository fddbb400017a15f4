"""``verify`` detects any flipped byte of a stored session (issue 25, item 2).

A session is recorded for real, then single bytes of its transcript are flipped (a seeded loop),
or its rows changed by real SQL UPDATEs (and, in SQLite, a byte of the file inside an event
row): every change must be reported by ``verify`` naming where, never an "ok".
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agentlog import open_store
from agentlog.cli.app import cli
from agentlog.errors import AgentlogError
from agentlog.store.jsonl.seek import SEEK_SUFFIX
from agentlog.store.sqlite import schema as sqlite_schema
from agentlog.store.sqlite import search as sqlite_search
from tests.cli.conftest import record
from tests.store.pg_worker import Schema

FLIPS = 20


def verify(url: str, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", url, "verify", "s1", *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def transcript_of(root: Path) -> Path:
    (path,) = [path for path in root.rglob("session.jsonl*") if path.name.endswith(("jsonl", "zstd"))]
    return path


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_every_flipped_byte_of_a_transcript_is_reported(tmp_path: Path, compression: str) -> None:
    pristine = tmp_path / "pristine"
    record(f"jsonl://{pristine}?compression={compression}", "s1", turns=3)
    size = transcript_of(pristine).stat().st_size
    rng = random.Random(25)
    outcomes: dict[int, int] = {}
    for flip in range(FLIPS):
        root = tmp_path / f"flip{flip}"
        shutil.copytree(pristine, root)
        path = transcript_of(root)
        data = bytearray(path.read_bytes())
        offset = rng.randrange(size)
        data[offset] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        code, output = verify(f"jsonl://{root}?compression={compression}")
        outcomes[code] = outcomes.get(code, 0) + 1
        # invalid (a digest differs, or the frame's own checksum), or a torn tail named by its bytes
        assert code in (1, 2), f"flip at byte {offset}: exit {code}\n{output}"
        assert str(path) in output.replace("\n", ""), output
        assert "byte" in output, output
    assert outcomes.get(1, 0) >= FLIPS // 2, outcomes  # most land before the last batch: invalid


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_an_intact_session_says_its_integrity_was_checked(tmp_path: Path, compression: str) -> None:
    url = f"jsonl://{tmp_path}?compression={compression}"
    record(url, "s1", turns=2)
    code, output = verify(url)
    assert code == 0, output
    assert "integrity checked" in output, output


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_transcript_without_a_sidecar_loads_and_says_it_has_no_integrity_data(
        tmp_path: Path, compression: str) -> None:
    url = f"jsonl://{tmp_path}?compression={compression}"
    record(url, "s1", turns=2)
    sidecar = transcript_of(tmp_path).with_name(transcript_of(tmp_path).name + SEEK_SUFFIX)
    sidecar.unlink()
    code, output = verify(url)
    assert code == 0, output
    assert "no integrity data" in output, output


# -- SQLite and PostgreSQL: a digest per row --------------------------------------------------------


class Database:
    """A recorded session in SQLite or PostgreSQL, and real SQL run on its tables."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        if kind == "sqlite":
            self.path = tmp_path / "db" / "sessions.db"
            self.url = f"sqlite://{self.path}"
        else:
            self.schema = Schema.new()
            self.url = self.schema.url
        record(self.url, "s1", turns=3)

    def sql(self, query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        """``query`` with ``{s}`` the events/sessions tables' schema and ``?`` placeholders."""
        if self.kind == "postgres":
            return self.schema.sql(query.replace("?", "%s"), params)
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            return conn.execute(query.replace("{s}.", ""), params).fetchall()
        finally:
            conn.close()

    def drop(self) -> None:
        if self.kind == "postgres":
            self.schema.drop()


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    found = Database(str(request.param), tmp_path)
    yield found
    found.drop()


def flip_one_character(text: str, rng: random.Random) -> str:
    """``text`` with one ASCII letter or digit changed into another (still valid JSON)."""
    spots = [index for index, char in enumerate(text) if char.isascii() and char.isalnum()]
    at = rng.choice(spots)
    return text[:at] + ("x" if text[at] != "x" else "y") + text[at + 1:]


def test_every_changed_column_of_an_event_row_is_reported(database: Database) -> None:
    rng = random.Random(25)
    rows = database.sql("SELECT seq, data FROM {s}.events WHERE data IS NOT NULL ORDER BY seq")
    (with_op,) = database.sql("SELECT min(seq) FROM {s}.events WHERE surface_op IS NOT NULL")
    code, output = verify(database.url)
    assert code == 0 and "integrity checked: the session row and" in output, output
    changes: list[tuple[int, str, tuple[object, ...]]] = [
        (seq, "UPDATE {s}.events SET data = ? WHERE seq = ?", (flip_one_character(data, rng), seq))
        for seq, data in rng.sample(rows, 5)]
    changes.append((rows[2][0], "UPDATE {s}.events SET time = time + 1 WHERE seq = ?", (rows[2][0],)))
    changes.append((with_op[0], "UPDATE {s}.events SET surface_op = NULL WHERE seq = ?", (with_op[0],)))
    for seq, query, params in changes:
        (before,) = database.sql("SELECT data, time, surface_op FROM {s}.events WHERE seq = ?", (seq,))
        database.sql(query, params)
        code, output = verify(database.url)
        assert code == 1, f"{query} {params}: {output}"
        assert f"event row seq {seq} differs from what was written" in output.replace("\n", ""), output
        database.sql("UPDATE {s}.events SET data = ?, time = ?, surface_op = ? WHERE seq = ?", (*before, seq))
        assert verify(database.url)[0] == 0


def test_a_changed_session_row_is_reported(database: Database) -> None:
    database.sql("UPDATE {s}.sessions SET cwd = ? WHERE id = ?", ("/work/elsewhere", "s1"))
    code, output = verify(database.url)
    assert code == 1 and "the session row differs from what was written" in output.replace("\n", ""), output


def test_a_flipped_byte_of_the_sqlite_file_inside_an_event_row_is_reported(tmp_path: Path) -> None:
    database = Database("sqlite", tmp_path)
    marker = b"# agentlog ..."  # the tool output: in event rows (and the search index's own copy)
    data = database.path.read_bytes()
    assert not Path(f"{database.path}-wal").exists() or Path(f"{database.path}-wal").stat().st_size == 0
    offsets = [index for index in range(len(data)) if data.startswith(marker, index)]
    before = database.sql("SELECT seq, data FROM events ORDER BY seq")
    in_rows = 0
    for offset in offsets:
        changed = bytearray(data)
        changed[offset + 2] ^= 0x01  # "a" -> "`": still valid UTF-8 and JSON
        database.path.write_bytes(bytes(changed))
        if database.sql("SELECT seq, data FROM events ORDER BY seq") == before:
            continue  # it landed in the search index, not in the log
        in_rows += 1
        code, output = verify(database.url)
        assert code == 1 and "differs from what was written" in output, output
        assert str(database.path) in output.replace("\n", ""), output
    database.path.write_bytes(data)
    assert in_rows >= 3
    assert verify(database.url)[0] == 0


def downgrade_sqlite_to_2(path: Path) -> None:
    """What an older build wrote: schema 2, no digest columns, no index watermark."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("ALTER TABLE sessions DROP COLUMN unindexed")
    fts = conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'search_fts'").fetchone() is not None
    conn.execute("DROP TABLE IF EXISTS search_fts")  # schema 2's index kind (its rows are not searched here)
    conn.execute("DROP TABLE search_rows")
    for statement in (*sqlite_search.SEARCH_SCHEMA, *(sqlite_search.FTS_SCHEMA if fts else ())):
        conn.execute(statement)
    for table in ("sessions", "events"):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN digest")
    conn.execute("PRAGMA user_version = 2")
    conn.close()


def test_a_schema_2_sqlite_file_is_read_as_is_and_a_writer_migrates_it(tmp_path: Path) -> None:
    database = Database("sqlite", tmp_path)
    downgrade_sqlite_to_2(database.path)
    code, output = verify(database.url)
    assert code == 0 and "no integrity data: the database is of schema version 2" in output, output
    assert database.sql("PRAGMA user_version") == [(2,)]
    events = len(open_store(database.url, create=False).inspect("s1").events)
    record(database.url, "s2", turns=1)  # a writer migrates the file, in one transaction
    assert database.sql("PRAGMA user_version") == [(4,)]
    code, output = verify(database.url)
    assert code == 0 and "no integrity data: the rows were written before" in output, output
    with open_store(database.url) as store, store.open("s1") as live:
        live.session.append("session/title", {"title": "after the migration"})
    added = len(open_store(database.url, create=False).inspect("s1").events) - events
    code, output = verify(database.url)
    assert code == 0, output
    unchecked = f"no digest for the session row, event rows seq 0..{events - 1}"
    assert f"integrity checked for {added} event rows; {unchecked}" in output.replace("\n", " "), output
    code, output = CliRunner().invoke(cli, ["--store", database.url, "verify", "s2"]).exit_code, ""
    assert code == 0


def test_a_failed_migration_leaves_schema_2_untouched(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    database = Database("sqlite", tmp_path)
    downgrade_sqlite_to_2(database.path)
    failing = (sqlite_schema.DIGEST_SCHEMA[0], "ALTER TABLE nope ADD x")  # the second one fails
    monkeypatch.setattr(sqlite_schema, "DIGEST_SCHEMA", failing)
    with pytest.raises(AgentlogError, match="no such table: nope"):
        record(database.url, "s2", turns=1)
    assert database.sql("PRAGMA user_version") == [(2,)]
    assert "digest" not in [row[1] for row in database.sql("SELECT * FROM pragma_table_info('sessions')")]
    monkeypatch.undo()
    record(database.url, "s2", turns=1)
    assert database.sql("PRAGMA user_version") == [(4,)]


def test_a_schema_2_postgres_store_is_migrated_by_a_writer_and_names_its_old_rows(tmp_path: Path) -> None:
    database = Database("postgres", tmp_path)
    try:
        database.sql("ALTER TABLE {s}.sessions DROP COLUMN digest")
        database.sql("ALTER TABLE {s}.events DROP COLUMN digest")
        database.sql("UPDATE {s}.meta SET schema_version = 2")
        record(database.url, "s2", turns=1)
        assert database.sql("SELECT schema_version FROM {s}.meta") == [(3,)]
        code, output = verify(database.url)
        assert code == 0 and "no integrity data: the rows were written before" in output, output
        code, output = CliRunner().invoke(cli, ["--store", database.url, "verify", "s2"]).exit_code, ""
        assert code == 0
    finally:
        database.drop()
