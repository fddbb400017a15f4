"""The PostgreSQL search index: written by the append statement, deleted with the rows, migrated."""

from __future__ import annotations

import pytest

from agentlog import Recorder
from agentlog.core.search_text import indexed_texts
from agentlog.store.postgres.rows import decode_physical_row
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
    assert_index_matches_rows(schema)
    assert schema.sql("SELECT count(*) FROM {s}.events WHERE data_zstd IS NOT NULL")[0][0] > 0
    found = assert_index_equals_scan(store, "NEEDLE")
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


def test_a_schema_1_store_is_migrated_by_a_writer(schema: Schema, store: PostgresStore) -> None:
    record(store, "a", ["old needle", "", "", "", "old result"])
    expected = assert_index_equals_scan(store, "needle")
    store.close()
    schema.sql("DROP TABLE {s}.search_text")
    schema.sql("ALTER TABLE {s}.sessions DROP COLUMN digest")
    schema.sql("ALTER TABLE {s}.events DROP COLUMN digest")
    schema.sql("UPDATE {s}.meta SET schema_version = 1")
    writer = schema.store(write_delay_ms=5, pool_min=0, pool_max=2)
    try:
        assert hits(writer, "needle", scan=False) == expected
        assert schema.sql("SELECT schema_version FROM {s}.meta") == [(3,)]
        assert_index_matches_rows(schema)
        record(writer, "b", ["new needle"])
        assert [hit.session_id for hit in assert_index_equals_scan(writer, "needle")] == ["a", "b"]
    finally:
        writer.close()
