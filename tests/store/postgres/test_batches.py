"""The PostgreSQL append path: each batch is one statement (array parameters, expected-seq check,
insert, notify), so a batch refused midway or by a racing writer changes nothing.

Real server; each test has its own schema (see ``tests/store/pg_worker.py``).
"""

from __future__ import annotations

import pytest

from agentlog import Event, SessionHeader
from agentlog.errors import ConcurrentWriterError, StoreError
from agentlog.store.integrity import row_digest
from agentlog.store.postgres.rows import encode_columns, encode_rows
from agentlog.store.postgres.store import PostgresStore
from tests.contract.logs import LogBuilder, wire
from tests.store.pg_worker import Schema

HEADER = SessionHeader(id="s1", created_at=1000, cwd="/work/project")


def stored(schema: Schema) -> tuple[int, int, list[int]]:
    """(next seq, revision, seqs of the physical rows) of session ``s1``."""
    (cursor, revision), = schema.sql("SELECT next_seq, revision FROM {s}.sessions WHERE id = 's1'")
    seqs = [row[0] for row in schema.sql("SELECT seq FROM {s}.events WHERE session_id = 's1' ORDER BY seq")]
    return cursor, revision, seqs


def refuse_seq(schema: Schema, seq: int) -> None:
    """A server-side trigger that fails the insert of the row at ``seq`` (a failure midway)."""
    schema.sql("CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql AS "
               "$$ BEGIN RAISE EXCEPTION 'refused row %', NEW.seq; END $$")
    schema.sql(f"CREATE TRIGGER refuse BEFORE INSERT ON {{s}}.events FOR EACH ROW WHEN (NEW.seq = {seq}) "
               "EXECUTE FUNCTION {s}.refuse()")


def test_columns_transpose_the_rows_with_provenance_as_array_literals() -> None:
    log = LogBuilder()
    log.turn(1, chunks=5)
    log.tool_result(1, 1, "c1", 2)
    events = [Event.from_wire(event) for event in log.events]
    rows, columns = encode_rows(events), encode_columns("s1", events)
    assert len(rows) < len(events)  # the chunk run is one packed row
    for index, name in enumerate(("seq", "type", "time", "data", "data_zstd")):
        assert columns[name] == [row[index] for row in rows]
    assert columns["ignorable"] == [row[8] for row in rows] and False in columns["ignorable"]
    assert columns["seqs"][-1] == "{2}" and columns["seqs"][0] is None
    assert columns["digest"] == [row_digest(("s1", *row)) for row in rows]
    assert encode_columns("s1", []) == {name: [] for name in columns}


def test_a_batch_refused_midway_changes_nothing_and_is_kept_for_the_next_flush(
    store: PostgresStore, schema: Schema
) -> None:
    live = store.start(HEADER)
    live.session.append("turn/start", {"turn": 1})
    live.flush()
    before = stored(schema)
    first = live.session.seq
    refuse_seq(schema, first + 20)
    for index in range(40):
        live.session.append("session/title", {"title": f"t{index}"})
    with pytest.raises(StoreError, match="refused row") as refused:
        live.flush()
    assert refused.value.session_id == "s1"
    assert stored(schema) == before  # no row of the batch, the cursor and revision unmoved
    schema.sql("DROP TRIGGER refuse ON {s}.events")
    live.flush()  # the refused batch was kept: nothing is lost
    live.close()
    assert stored(schema)[0] == live.session.seq
    assert wire(list(store.load("s1").events))[: live.session.seq] == wire(list(live.session.events))


def test_a_racing_writer_is_refused_and_its_batch_leaves_no_row(store: PostgresStore, schema: Schema) -> None:
    log = LogBuilder()
    log.turn(1)
    store.create(HEADER)
    store.append("s1", log.events)
    later = LogBuilder(start=len(log.events), time=5000)
    later.turn(2, chunks=6)
    with schema.store() as other:
        other.append("s1", later.events)
    after_other = stored(schema)
    mine = LogBuilder(start=len(log.events), time=9000)
    mine.turn(2, chunks=9)
    with pytest.raises(ConcurrentWriterError, match=f"stored next seq is {after_other[0]}") as refused:
        store.append("s1", mine.events)
    assert refused.value.session_id == "s1" and refused.value.seq == len(log.events)
    assert stored(schema) == after_other
    assert wire(list(store.load("s1").events)) == log.events + later.events
