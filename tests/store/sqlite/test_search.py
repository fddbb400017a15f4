"""The SQLite search index: written with the rows, migrated from schema 1, same hits as the scan."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlog import Recorder
from agentlog.core.header import SessionHeader
from agentlog.core.search_text import indexed_texts
from agentlog.errors import StoreError
from agentlog.store.sqlite import schema as sqlite_schema
from agentlog.store.sqlite import search as sqlite_search
from agentlog.store.sqlite.rows import decode_physical_row
from agentlog.store.sqlite.store import SqliteStore
from tests.search_sessions import assert_index_equals_scan, hits, record


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "db" / "sessions.db"


@pytest.fixture(params=[True, False], ids=["fts5", "no-fts5"])
def fts(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[bool]:
    """Both index kinds: FTS5 trigrams, and ``instr`` over ``search_rows`` (FTS5 forced absent)."""
    if not request.param:
        monkeypatch.setattr(sqlite_search, "fts5_available", lambda: False)
    yield bool(request.param)


def query(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def change(db: Path, *statements: str) -> None:
    """Run statements in one committed transaction (what another program could do to the file)."""
    conn = sqlite3.connect(db)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def assert_index_matches_rows(db: Path) -> None:
    """``search_rows`` is exactly the folded text of every stored message row below its session's
    watermark (all of them where it is NULL), and FTS5 agrees with it."""
    expected = set()
    for session, *row in query(db, "SELECT session, seq, type, time, data, source_event_seqs, surface_op, "
                                   "ignorable, op_first FROM events JOIN sessions ON sessions.key = session "
                                   "WHERE unindexed IS NULL OR seq < unindexed"):
        expected.update((session, seq, text) for seq, text in indexed_texts(decode_physical_row(tuple(row))))
    if not query(db, "SELECT 1 FROM sqlite_schema WHERE name = 'search_fts'"):
        assert set(query(db, "SELECT session, seq, folded FROM search_rows")) == expected
        return
    # Contentless FTS5 (schema 4): search_rows maps rowids to (session, seq), each text's trigrams its row.
    rows = query(db, "SELECT id, session, seq FROM search_rows")
    ids = {(session, seq): rowid for rowid, session, seq in rows}
    assert set(ids) == {(session, seq) for session, seq, _text in expected}
    conn = sqlite3.connect(db)
    try:
        conn.execute("INSERT INTO search_fts (search_fts) VALUES ('integrity-check')")
        for session, seq, text in expected:
            if len(text) >= sqlite_search.TRIGRAM:
                found = conn.execute("SELECT rowid FROM search_fts WHERE search_fts MATCH ?",
                                     (sqlite_search._fts_query(text),)).fetchall()
                assert (ids[session, seq],) in found, (session, seq, text)
    finally:
        conn.close()


def downgrade(db: Path) -> None:
    """Turn a schema-4 file into what an older build wrote: no digests, no search tables, user_version 1."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("ALTER TABLE sessions DROP COLUMN unindexed")
    for table in ("sessions", "events"):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN digest")
    for table in ("search_fts", "search_rows"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute("PRAGMA user_version = 1")
    conn.close()


def test_the_index_follows_appends_and_finds_what_the_scan_finds(db: Path, fts: bool) -> None:
    store = SqliteStore(db, write_delay_ms=5)
    record(store, "a", ["Hello \u0130stanbul", "\u017ftra\u00dfe", "why", 'say "NEAR" * -x', "100% done_ok"])
    record(store, "b", ["hello again", "", "", "", "nothing"])
    assert bool(query(db, "SELECT 1 FROM sqlite_schema WHERE name = 'search_fts'")) is fts
    assert_index_matches_rows(db)
    assert [hit.session_id for hit in assert_index_equals_scan(store, "HELLO")] == ["a", "b"]
    assert [hit.seq for hit in assert_index_equals_scan(store, "STRA\u00dfE")] == [6, 12]
    for text in ('"NEAR"', "*", "-x", "%", "_", "ok", "i", "\u0131", '"'):
        assert_index_equals_scan(store, text)
    store.close()


def test_the_index_is_what_search_reads(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteStore(db, write_delay_ms=5)
    record(store, "a", ["needle in a haystack"])

    def no_scan(session_id: str) -> None:
        raise AssertionError(f"{session_id} was scanned")

    monkeypatch.setattr(store, "inspect", no_scan)
    assert [(hit.session_id, hit.seq) for hit in hits(store, "NEEDLE", scan=False)] == [("a", 2)]
    store.close()


def test_forks_find_their_parents_text_once_before_and_after_materialize(db: Path, fts: bool) -> None:
    store = SqliteStore(db, write_delay_ms=5)
    record(store, "parent", ["shared needle", "", "", "", "parent only"])
    boundary = len(store.inspect("parent").events) - 1
    with store.fork("parent", boundary, "child") as child, Recorder(child).turn() as turn:
        turn.user_message("child needle")
    with store.fork("child", boundary, "grandchild"):
        pass
    found = assert_index_equals_scan(store, "needle")
    assert [(hit.session_id, hit.seq) for hit in found] == [
        ("child", 2), ("child", boundary + 3), ("grandchild", 2), ("parent", 2)]
    assert query(db, "SELECT count(*) FROM search_rows WHERE seq = 2") == [(1,)]  # the parent's row, once
    store.materialize("child")
    assert_index_matches_rows(db)
    assert assert_index_equals_scan(store, "needle") == found
    store.materialize("grandchild")
    store.delete("parent")
    assert_index_matches_rows(db)
    assert [(hit.session_id, hit.seq) for hit in assert_index_equals_scan(store, "needle")] == [
        ("child", 2), ("child", boundary + 3), ("grandchild", 2)]
    store.close()


def test_a_repaired_torn_tail_leaves_the_index(db: Path, fts: bool) -> None:
    store = SqliteStore(db, write_delay_ms=5)
    record(store, "s", ["first", "", "", "", ""], ended=False)
    last = query(db, "SELECT max(seq) FROM events")[0][0]
    assert query(db, f"SELECT count(*) FROM search_rows WHERE seq = {last}") == [(1,)]
    assert_index_matches_rows(db)  # with the folded text "first again" (schema 4's FTS5: its trigrams)
    store.close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE events SET data = 'not json' WHERE seq = ?", (last,))
    conn.close()
    store = SqliteStore(db, write_delay_ms=5)
    assert assert_index_equals_scan(store, "again") == []
    store.load("s")
    assert_index_matches_rows(db)
    assert query(db, f"SELECT count(*) FROM search_rows WHERE seq = {last}") == [(0,)]
    store.close()


def test_a_schema_1_database_is_read_as_is_and_migrated_by_a_writer(db: Path, fts: bool) -> None:
    store = SqliteStore(db, write_delay_ms=5)
    record(store, "a", ["old needle", "", "", "", "old result"])
    with store.fork("a", len(store.inspect("a").events) - 1, "b") as child, Recorder(child).turn() as turn:
        turn.user_message("new needle")
    expected = assert_index_equals_scan(store, "needle")
    store.close()
    downgrade(db)
    reader = SqliteStore(db, create=False)
    assert hits(reader, "needle", scan=False) == expected
    reader.close()
    assert query(db, "PRAGMA user_version") == [(1,)]
    writer = SqliteStore(db, write_delay_ms=5)
    assert assert_index_equals_scan(writer, "needle") == expected
    assert query(db, "PRAGMA user_version") == [(4,)]
    assert_index_matches_rows(db)
    record(writer, "c", ["newest needle"])
    assert_index_matches_rows(db)
    writer.close()


def test_a_failed_migration_leaves_schema_1_untouched(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteStore(db, write_delay_ms=5)
    record(store, "a", ["needle"])
    store.close()
    downgrade(db)

    def fail(conn: sqlite3.Connection, fts: bool) -> None:
        conn.execute("INSERT INTO search_rows (session, seq) VALUES (1, 2)")  # half done
        raise OSError("disk full")

    monkeypatch.setattr(sqlite_schema, "fill_index", fail)
    with pytest.raises(OSError, match="disk full"):
        SqliteStore(db).list()
    assert query(db, "PRAGMA user_version") == [(1,)]
    assert query(db, "SELECT name FROM sqlite_schema WHERE name LIKE 'search%'") == []
    monkeypatch.undo()
    store = SqliteStore(db)
    assert [hit.seq for hit in assert_index_equals_scan(store, "needle")] == [2]
    store.close()


def test_a_database_with_fts5_is_refused_clearly_by_a_sqlite_without_it(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not sqlite_search.fts5_available():
        pytest.skip("this sqlite3 module has no FTS5")
    store = SqliteStore(db)
    store.list()
    store.close()
    monkeypatch.setattr(sqlite_search, "fts5_available", lambda: False)
    with pytest.raises(StoreError, match="lacks FTS5"):
        SqliteStore(db).list()


def test_a_database_made_without_fts5_keeps_its_index_kind(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patched:
        patched.setattr(sqlite_search, "fts5_available", lambda: False)
        store = SqliteStore(db, write_delay_ms=5)
        record(store, "a", ["needle"])
        store.close()
    store = SqliteStore(db, write_delay_ms=5)
    record(store, "b", ["needle two"])
    assert [hit.session_id for hit in assert_index_equals_scan(store, "needle")] == ["a", "b"]
    assert_index_matches_rows(db)
    store.close()


def test_a_writer_killed_mid_append_leaves_index_and_rows_together(db: Path) -> None:
    from tests.store.test_crash import _kill_at_random

    rng = random.Random(13)
    SqliteStore(db).list()
    for number in range(3):
        _kill_at_random(f"sqlite://{db}", f"killed-{number}", rng)
        assert_index_matches_rows(db)
    store = SqliteStore(db, write_delay_ms=5)
    assert assert_index_equals_scan(store, "the")
    assert query(db, "SELECT count(*) FROM sessions WHERE unindexed IS NOT NULL") == [(0,)]
    assert_index_matches_rows(db)
    store.close()


def test_appends_leave_the_index_behind_a_watermark_and_searches_still_find_what_the_scan_finds(
        db: Path, fts: bool) -> None:
    writer = SqliteStore(db, write_delay_ms=5)
    live = writer.start(SessionHeader(id="a"))
    with Recorder(live).turn() as turn:
        turn.user_message("first needle")
    live.flush()
    assert query(db, "SELECT unindexed FROM sessions") == [(0,)]  # written, not indexed yet
    assert query(db, "SELECT count(*) FROM search_rows") == [(0,)]
    reader = SqliteStore(db, create=False)
    live.close()  # closing indexes what the session wrote, off its write path
    assert query(db, "SELECT unindexed FROM sessions") == [(None,)]
    assert_index_matches_rows(db)
    with writer.open("a") as again, Recorder(again).turn() as turn:
        turn.user_message("second needle")
    change(db, "UPDATE sessions SET unindexed = 0", "DELETE FROM search_rows",  # as if never indexed
           *(["INSERT INTO search_fts (search_fts) VALUES ('delete-all')"] if fts else []))
    expected = assert_index_equals_scan(writer, "needle")  # the writer's search catches up first
    assert [hit.seq for hit in expected] == [1, 5]
    assert query(db, "SELECT unindexed FROM sessions") == [(None,)]
    assert_index_matches_rows(db)
    change(db, "UPDATE sessions SET unindexed = 3")  # behind from seq 3: the reader scans the session
    assert hits(reader, "needle", scan=False) == expected
    assert query(db, "SELECT unindexed FROM sessions") == [(3,)]  # a reader never writes the file
    reader.close()
    writer.close()


def as_schema_3(source: Path, target: Path, fts: bool) -> None:
    """What the previous build wrote for the sessions of ``source``: schema 3's statements, every
    row the same, the folded text in ``search_rows`` and an external-content FTS5 table over it."""
    target.parent.mkdir(mode=0o700, exist_ok=True)
    conn = sqlite3.connect(target, isolation_level=None)
    conn.execute("BEGIN")
    for statement in sqlite_schema._schema(3, fts):
        conn.execute(statement)
    conn.execute(f"ATTACH DATABASE '{source}' AS source")
    conn.execute("INSERT INTO store_identity SELECT * FROM source.store_identity")
    columns = [row[1] for row in conn.execute("SELECT * FROM pragma_table_info('sessions')")]
    names = ", ".join(columns)
    conn.execute(f"INSERT INTO sessions ({names}) SELECT {names} FROM source.sessions")
    conn.execute("INSERT INTO events SELECT * FROM source.events")
    rows = conn.execute("SELECT session, seq, type, time, data, source_event_seqs, surface_op, ignorable, "
                        "op_first FROM events").fetchall()
    for session, *row in rows:
        for seq, text in indexed_texts(decode_physical_row(tuple(row))):
            conn.execute("INSERT INTO search_rows (session, seq, folded) VALUES (?, ?, ?)",
                         (session, seq, text))
    if fts:
        conn.execute("INSERT INTO search_fts (search_fts) VALUES ('rebuild')")
    conn.execute("COMMIT")
    conn.execute("DETACH DATABASE source")
    conn.execute("PRAGMA application_id = 1095191623")
    conn.execute("PRAGMA user_version = 3")
    conn.close()
    target.chmod(0o600)


def test_a_schema_3_database_is_searched_as_is_and_a_writer_migrates_its_index(
        tmp_path: Path, db: Path, fts: bool) -> None:
    store = SqliteStore(db, write_delay_ms=5)
    record(store, "a", ["old needle", "", "", "", "old result needle"])
    with store.fork("a", len(store.inspect("a").events) - 1, "b") as child, Recorder(child).turn() as turn:
        turn.user_message("new needle")
    expected = assert_index_equals_scan(store, "needle")
    store.close()
    old = tmp_path / "old" / "sessions.db"
    as_schema_3(db, old, fts)
    reader = SqliteStore(old, create=False)
    assert hits(reader, "needle", scan=False) == expected == hits(reader, "needle", scan=True)
    reader.close()
    assert query(old, "PRAGMA user_version") == [(3,)]
    writer = SqliteStore(old, write_delay_ms=5)
    assert assert_index_equals_scan(writer, "needle") == expected
    assert query(old, "PRAGMA user_version") == [(4,)]
    assert query(old, "SELECT count(*) FROM sessions WHERE unindexed IS NOT NULL") == [(0,)]
    assert_index_matches_rows(old)
    record(writer, "c", ["newest needle"])
    assert assert_index_equals_scan(writer, "needle")[:-1] == expected
    assert_index_matches_rows(old)
    writer.close()
