"""The PostgreSQL search index: kept up to a watermark off the write path, deleted with the rows, migrated."""

from __future__ import annotations

from typing import Any

import pytest

from agentlog import Recorder
from agentlog.core.search_text import indexed_texts
from agentlog.ops.search import Hit
from agentlog.store.postgres.rows import decode_physical_row
from agentlog.store.postgres.schema import SCHEMA_VERSION
from agentlog.store.postgres.store import PostgresStore
from tests.search_sessions import assert_index_equals_scan, hits, record
from tests.store.pg_worker import Schema


def assert_index_matches_rows(schema: Schema) -> None:
    """``search_text`` is exactly the folded text of every stored message row."""
    expected = set()
    for session, *row in schema.sql("SELECT session_id, seq, type, time, data, data_zstd, source_event_seqs, "
                                     "surface_op, op_first, ignorable FROM {s}.events"):
        expected.update((session, seq, text) for seq, text in indexed_texts(decode_physical_row(row)))
    assert set(schema.sql("SELECT session_id, seq, folded FROM {s}.search_text")) == expected


def test_the_index_follows_appends_forks_repairs_and_deletes(schema: Schema, store: PostgresStore) -> None:
    long_text = "needle " + "x" * 9000  # stored as data_zstd: the index holds the text
    record(store, "parent", ["shared needle", long_text, "", "", "100% done_ok"])
    boundary = len(store.inspect("parent").events) - 1
    with store.fork("parent", boundary, "child") as child, Recorder(child).turn() as turn:
        turn.user_message("child needle")
    record(store, "open", ["open needle"], ended=False)
    assert schema.sql("SELECT count(*) FROM {s}.events WHERE data_zstd IS NOT NULL")[0][0] > 0
    found = assert_index_equals_scan(store, "NEEDLE")
    assert_index_matches_rows(schema)
    assert [(hit.session_id, hit.seq) for hit in found if hit.session_id == "child"] == [
        ("child", 2), ("child", 6), ("child", 12), ("child", boundary + 3)]
    for text in ("%", "_", "\\", "done_", '"'):
        assert_index_equals_scan(store, text)
    store.materialize("child")
    store.delete("parent")
    assert_index_matches_rows(schema)
    assert [hit.session_id for hit in assert_index_equals_scan(store, "shared")] == ["child"]


def test_the_index_is_what_search_reads(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    record(store, "a", ["needle in a haystack"])

    def no_scan(session_id: str) -> None:
        raise AssertionError(f"{session_id} was scanned")

    monkeypatch.setattr(store, "inspect", no_scan)
    assert [(hit.session_id, hit.seq) for hit in hits(store, "NEEDLE", scan=False)] == [("a", 2)]


def as_older_schema(schema: Schema, store: PostgresStore, version: int, *undo: str) -> tuple[list[Hit], Any]:
    """Record session "a", turn the schema back into ``version`` (``undo`` statements first), and
    open a writer on it: the hits of "needle" before, and the writer."""
    record(store, "a", ["old needle", "", "", "", "old result"])
    expected = assert_index_equals_scan(store, "needle")
    store.close()
    for statement in (*undo, "ALTER TABLE {s}.sessions DROP COLUMN indexed_to"):
        schema.sql(statement)
    schema.sql("UPDATE {s}.meta SET schema_version = %s", (version,))
    return expected, schema.store(write_delay_ms=5, pool_min=0, pool_max=2)


def test_a_schema_1_store_is_migrated_by_a_writer(schema: Schema, store: PostgresStore) -> None:
    expected, writer = as_older_schema(schema, store, 1, "DROP TABLE {s}.search_text",
                                       "ALTER TABLE {s}.sessions DROP COLUMN digest",
                                       "ALTER TABLE {s}.events DROP COLUMN digest")
    try:
        assert hits(writer, "needle", scan=False) == expected
        assert schema.sql("SELECT schema_version FROM {s}.meta") == [(SCHEMA_VERSION,)]
        assert_index_matches_rows(schema)
        record(writer, "b", ["new needle"])
        assert [hit.session_id for hit in assert_index_equals_scan(writer, "needle")] == ["a", "b"]
    finally:
        writer.close()


def watermarks(schema: Schema) -> dict[str, tuple[int | None, int]]:
    """Each session's (indexed_to, next_seq)."""
    rows = schema.sql("SELECT id, indexed_to, next_seq FROM {s}.sessions")
    return {sid: (mark, end) for sid, mark, end in rows}


def test_an_append_writes_no_index_and_the_first_search_catches_it_up(schema: Schema,
                                                                      store: PostgresStore) -> None:
    record(store, "a", ["needle one", "", "", "", "needle result"])
    record(store, "b", ["other text"])
    assert schema.sql("SELECT count(*) FROM {s}.search_text") == [(0,)]
    assert {sid: mark for sid, (mark, _end) in watermarks(schema).items()} == {"a": 0, "b": 0}
    found = assert_index_equals_scan(store, "needle")
    assert [hit.session_id for hit in found] == ["a", "a"]
    assert_index_matches_rows(schema)
    assert all(mark == end for mark, end in watermarks(schema).values())
    with store.open("a") as live, Recorder(live).turn() as turn:
        turn.user_message("needle two")
    [(mark, end)] = [value for sid, value in watermarks(schema).items() if sid == "a"]
    assert mark is not None and mark < end
    assert len(assert_index_equals_scan(store, "needle")) == 3
    assert_index_matches_rows(schema)


def test_a_store_that_cannot_write_the_index_scans_the_lagging_sessions(schema: Schema,
                                                                        store: PostgresStore) -> None:
    record(store, "a", ["needle one"])
    expected = hits(store, "needle", scan=True)
    assert schema.sql("SELECT count(*) FROM {s}.search_text") == [(0,)]
    read_only = PostgresStore(f"{schema.dsn}?options=-c%20default_transaction_read_only%3Don",
                              schema=schema.name, create=False, pool_min=0, pool_max=2)
    try:
        assert hits(read_only, "needle", scan=False) == expected
    finally:
        read_only.close()
    assert schema.sql("SELECT count(*) FROM {s}.search_text") == [(0,)]


def test_a_repair_lowers_the_watermark_to_its_cut(schema: Schema, store: PostgresStore) -> None:
    record(store, "open", ["open needle"], ended=False)
    assert_index_equals_scan(store, "needle")
    store.close()
    schema.sql("UPDATE {s}.events SET data = 'torn' WHERE session_id = 'open' AND seq = "
               "(SELECT max(seq) FROM {s}.events WHERE session_id = 'open')")
    with schema.store() as fresh:
        fresh.load("open")  # repairs the torn tail: truncates it, appends the closers
        (mark, end), = watermarks(schema).values()
        assert mark is not None and mark < end
        assert [hit.seq for hit in assert_index_equals_scan(fresh, "needle")] == [2]
        assert_index_matches_rows(schema)


def test_a_schema_3_store_is_migrated_with_its_index_trusted(schema: Schema, store: PostgresStore) -> None:
    expected, writer = as_older_schema(schema, store, 3)
    try:
        assert hits(writer, "needle", scan=False) == expected
        assert schema.sql("SELECT schema_version FROM {s}.meta") == [(SCHEMA_VERSION,)]
        assert {sid: mark for sid, (mark, _end) in watermarks(schema).items()} == {"a": None}
        (_mark, old_end), = watermarks(schema).values()
        with writer.open("a") as live, Recorder(live).turn() as turn:
            turn.user_message("new needle")
        assert watermarks(schema)["a"][0] == old_end
        assert len(assert_index_equals_scan(writer, "needle")) == len(expected) + 1
        assert_index_matches_rows(schema)
    finally:
        writer.close()
