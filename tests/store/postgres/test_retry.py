"""A PostgreSQL append whose commit outcome is unknown: the connection dies with the reply in
flight, the writer keeps the batch, and its retry must recognise the batch it already committed
(success, stored once), but never take another writer's rows at those seqs for its own.

Real server; the injection points are the store's own ``_send_appends``/``_send_create`` in a
subclass: the statement runs (and commits) or is never sent, then the writer's backend is
terminated with ``pg_terminate_backend`` from another connection, so the client sees its
connection die.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
import pytest

from agentlog import Event, SessionHeader
from agentlog.errors import ConcurrentWriterError, PersistenceIOError, SessionExistsError
from agentlog.store.postgres.locks import application_name
from agentlog.store.postgres.rows import ROW_COLUMNS, same_rows
from agentlog.store.postgres.store import PostgresStore
from agentlog.store.writer import LiveSession
from tests.contract.logs import LogBuilder, wire
from tests.store.pg_worker import Schema
from tests.store.test_group_commit import flush_as_one_group

T = TypeVar("T")

BIG = "a long and repetitive title " * 200
"""A title over the compression threshold: its row is stored as zstd bytes."""


def terminate(dsn: str, where: str) -> None:
    """End the backends ``where`` selects (from ``pg_stat_activity``) and wait until they are gone."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        ended = conn.execute(f"SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE {where}"
                             ).fetchall()
    assert ended and all(row[0] for row in ended)


class LosesReplies(PostgresStore):
    """The next ``lose`` appends (or first batches) die with their connection: after committing,
    or (``before``) before the statement reaches the server."""

    lose = 0
    before = False

    def _lost(self, conn: psycopg.Connection[Any], send: Callable[[], T]) -> T:
        if not self.lose:
            return send()
        self.lose -= 1
        pid = conn.info.backend_pid
        if self.before:
            terminate(self.dsn, f"pid = {pid}")
            return send()
        send()  # committed
        terminate(self.dsn, f"pid = {pid}")
        conn.execute("SELECT 1")  # the reply that never came: the connection is gone
        raise AssertionError("the terminated connection answered")

    def _send_appends(self, conn: psycopg.Connection[Any], batches: Sequence[dict[str, Any]]) -> list[bool]:
        return self._lost(conn, lambda: super(LosesReplies, self)._send_appends(conn, batches))

    def _send_create(self, conn: psycopg.Connection[Any], header: SessionHeader,
                     params: dict[str, Any]) -> None:
        self._lost(conn, lambda: super(LosesReplies, self)._send_create(conn, header, params))


@pytest.fixture
def losing(schema: Schema) -> Iterator[LosesReplies]:
    opened = LosesReplies(schema.dsn, schema=schema.name, write_delay_ms=10_000, pool_min=0, pool_max=4)
    yield opened
    opened.close()


def titled(store: PostgresStore, session_id: str) -> LiveSession:
    live = store.start(session_id)
    live.session.append("session/title", {"title": "first"})
    live.flush()
    return live


def add_titles(live: LiveSession, count: int) -> None:
    live.session.append("session/title", {"title": BIG})
    for index in range(count - 1):
        live.session.append("session/title", {"title": f"{live.id} t{index}"})


def lose_the_reply(store: LosesReplies, live: LiveSession, *, before: bool = False) -> None:
    """Flush ``live`` with its connection dying after the commit (or before the send): it fails."""
    store.before = before
    store.lose = 1
    with pytest.raises(PersistenceIOError, match="connection"):
        live.flush()


def stored(schema: Schema, session_id: str) -> tuple[int, int, int]:
    """(next seq, rows, distinct seqs) of one session."""
    (cursor,), = schema.sql("SELECT next_seq FROM {s}.sessions WHERE id = %s", (session_id,))
    (rows, seqs), = schema.sql("SELECT count(*), count(DISTINCT seq) FROM {s}.events WHERE session_id = %s",
                               (session_id,))
    return cursor, rows, seqs


def test_rows_read_back_are_the_same_rows_as_their_batch_and_no_other(store: PostgresStore,
                                                                     schema: Schema) -> None:
    """Packed chunk runs, provenance arrays, surface markers and zstd bodies compare equal as read."""
    log = LogBuilder()
    log.turn(1, chunks=5)
    log.tool_result(1, 1, "c1", 2)
    log.events[-1]["data"]["message"]["content"][0]["content"][0]["text"] = BIG
    store.create(SessionHeader(id="s1", created_at=1000))
    store.append("s1", log.events)
    columns = ", ".join(ROW_COLUMNS)
    rows = schema.sql(f"SELECT {columns} FROM {{s}}.events WHERE session_id = 's1' ORDER BY seq")
    assert any(row[4] is not None for row in rows) and any(row[8] is False for row in rows)
    events = [Event.from_wire(event) for event in log.events]
    assert same_rows(rows, events)
    changed = [*log.events[:-1], {**log.events[-1], "time": log.events[-1]["time"] + 1}]
    assert not same_rows(rows, [Event.from_wire(event) for event in changed])
    assert not same_rows(rows[:-1], events)


def test_a_lone_flush_retried_after_its_commit_reply_was_lost_succeeds_and_stores_the_batch_once(
    losing: LosesReplies, schema: Schema
) -> None:
    live = titled(losing, "s1")
    add_titles(live, 30)
    lose_the_reply(losing, live)
    assert stored(schema, "s1") == (31, 31, 31)  # the first attempt did commit
    live.flush()  # the retry recognises its own batch
    live.session.append("session/title", {"title": "after"})
    live.flush()  # and the writer carries on from there
    live.close()
    assert stored(schema, "s1") == (32, 32, 32)
    assert wire(list(losing.load("s1").events)) == wire(list(live.session.events))


def test_a_first_batch_retried_after_its_commit_reply_was_lost_succeeds_and_stores_it_once(
    losing: LosesReplies, schema: Schema
) -> None:
    """The first batch creates the session's row: its retry finds that row (not a SessionExistsError)."""
    live = losing.start("s1")
    add_titles(live, 4)
    lose_the_reply(losing, live)
    assert stored(schema, "s1") == (4, 4, 4)
    live.flush()
    live.session.append("session/title", {"title": "after"})
    live.close()
    assert stored(schema, "s1") == (5, 5, 5)
    assert wire(list(losing.load("s1").events)) == wire(list(live.session.events))


def test_a_first_batch_retry_finding_another_writers_session_is_still_refused(
    losing: LosesReplies, schema: Schema
) -> None:
    """The first batch never committed and another writer created the session meanwhile."""
    live = losing.start("s1")
    add_titles(live, 2)
    lose_the_reply(losing, live, before=True)
    terminate(schema.dsn, f"application_name = '{application_name()}'")  # the lock connection
    with schema.store() as other:
        other.create(SessionHeader(id="s1", created_at=1000))
        other.append("s1", [{"type": "session/title", "seq": 0, "time": 5000, "data": {"title": "other"}}])
        with pytest.raises(SessionExistsError):
            live.flush()
        assert stored(schema, "s1") == (1, 1, 1)
    live.abandon()


def test_a_group_retried_after_its_commit_reply_was_lost_succeeds_and_stores_each_batch_once(
    losing: LosesReplies, schema: Schema
) -> None:
    lives = [titled(losing, f"s{index}") for index in range(3)]
    for live in lives:
        add_titles(live, 5)
    losing.lose = 1
    failed = flush_as_one_group(losing, lives)
    assert all(isinstance(failed[live.id], PersistenceIOError) for live in lives), failed
    before = losing.group_commit.groups
    assert flush_as_one_group(losing, lives) == {live.id: None for live in lives}
    assert losing.group_commit.groups == before + 1  # the retry was one group, each batch refused in it
    for live in lives:
        live.close()
        assert stored(schema, live.id) == (6, 6, 6)
        assert wire(list(losing.load(live.id).events)) == wire(list(live.session.events))


def test_a_retry_finding_another_writers_rows_at_its_seqs_is_still_refused(
    losing: LosesReplies, schema: Schema
) -> None:
    """The batch never committed and the writer lock died with its connection: another writer
    stored as many events at the same seqs (same incarnation, same next seq), so only the rows
    tell them apart."""
    live = titled(losing, "s1")
    add_titles(live, 3)
    lose_the_reply(losing, live, before=True)
    assert stored(schema, "s1") == (1, 1, 1)  # nothing of the batch committed
    terminate(schema.dsn, f"application_name = '{application_name()}'")  # the lock connection
    theirs = [{"type": "session/title", "seq": seq, "time": 5000, "data": {"title": f"other {seq}"}}
              for seq in range(1, 4)]
    with schema.store() as other:
        other.append("s1", theirs)
        with pytest.raises(ConcurrentWriterError, match="stored next seq is 4, batch starts at 1"):
            live.flush()
        assert wire(list(other.load("s1").events))[1:] == theirs
    live.abandon()


def test_a_retry_finding_its_batch_followed_by_another_writers_events_is_still_refused(
    losing: LosesReplies, schema: Schema
) -> None:
    """The batch did commit, but the writer lock died with its connection and another writer
    appended after it: the session no longer ends where this writer left it, so it is refused."""
    live = titled(losing, "s1")
    add_titles(live, 3)
    lose_the_reply(losing, live)
    terminate(schema.dsn, f"application_name = '{application_name()}'")  # the lock connection
    with schema.store() as other:
        other.append("s1", [{"type": "session/title", "seq": 4, "time": 5000, "data": {"title": "other"}}])
        with pytest.raises(ConcurrentWriterError, match="stored next seq is 5, batch starts at 1"):
            live.flush()
        assert stored(schema, "s1") == (5, 5, 5)
    live.abandon()
