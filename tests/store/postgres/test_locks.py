"""Writer locks of a PostgreSQL store share one lock connection: a process can keep many live
sessions without a server connection each, and exclusivity holds between them as between stores."""

from __future__ import annotations

import os
import socket

import pytest

from agentlog import SessionLockedError, UsageError
from agentlog.errors import ConcurrentWriterError
from agentlog.store.postgres.locks import application_name
from agentlog.store.postgres.store import PostgresStore
from agentlog.store.writer import LiveSession
from tests.store.pg_worker import Schema
from tests.store.postgres.test_retry import terminate, titled


def lock_connections(schema: Schema) -> int:
    """Connections of this process whose application_name marks them as lock connections."""
    name = f"agentlog pid={os.getpid()} host={socket.gethostname()}"[:63]
    rows = schema.sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,))
    return int(rows[0][0])


def test_many_live_sessions_of_one_store_hold_their_locks_on_one_connection(
    store: PostgresStore, schema: Schema
) -> None:
    before = lock_connections(schema)
    lives = [store.start(f"many-{index}") for index in range(30)]
    for live in lives:
        live.session.append("session/title", {"title": live.id})
    assert lock_connections(schema) - before == 1
    other = schema.store(pool_min=0, pool_max=1)
    try:
        with pytest.raises(SessionLockedError, match=f"process {os.getpid()}"):
            other.open("many-3")  # another store object: the server's lock refuses it
    finally:
        other.close()
    for live in lives:
        live.close()
    reopened = store.open("many-3")  # released by close: the same store takes it again
    reopened.close()


def test_a_second_writer_of_one_session_in_the_same_store_is_refused(store: PostgresStore) -> None:
    """The server's advisory lock is re-entrant on one connection: the lock table itself refuses a
    second holder in the store (the store refuses a direct append to a live session before that)."""
    live = store.start("twice")
    live.session.append("session/title", {"title": "t"})
    live.flush()
    with pytest.raises(UsageError, match="live"):
        store.append("twice", [{"type": "session/title", "seq": 1, "time": 1, "data": {"title": "u"}}])
    with pytest.raises(SessionLockedError):
        store._locks.acquire("twice")
    live.close()
    store.append("twice", [{"type": "session/title", "seq": 1, "time": 1, "data": {"title": "u"}}])
    assert [event.data["title"] for event in store.load("twice").events] == ["t", "u"]


# -- a lock connection that dies under a live session ---------------------------------------------


def lose_the_lock_connection(schema: Schema) -> None:
    """End this process's lock connections (the server drops every advisory lock on them)."""
    terminate(schema.dsn, f"application_name = '{application_name()}'")


def refused(live: LiveSession, error: type[Exception], match: str) -> str:
    """Append one event and flush: refused with ``error`` naming the session; its message."""
    live.session.append("session/title", {"title": "mine"})
    with pytest.raises(error, match=match) as info:
        live.flush()
    assert getattr(info.value, "session_id", None) == live.id
    return str(info.value)


def next_seq(schema: Schema, session_id: str) -> int:
    return int(schema.sql("SELECT next_seq FROM {s}.sessions WHERE id = %s", (session_id,))[0][0])


def test_a_live_session_whose_lock_connection_died_takes_its_lock_back_at_the_next_flush(
    store: PostgresStore, schema: Schema
) -> None:
    live, bystander = titled(store, "s1"), titled(store, "s2")
    lose_the_lock_connection(schema)
    live.session.append("session/title", {"title": "second"})
    live.flush()  # noticed the lost lock, took it back (nobody wrote meanwhile) and wrote
    assert next_seq(schema, "s1") == 2
    with schema.store(pool_min=0, pool_max=1) as other:
        with pytest.raises(SessionLockedError, match=f"process {os.getpid()}"):
            other.open("s1")  # held again
        bystander.session.append("session/title", {"title": "second"})
        bystander.flush()  # each live session of the store takes its own lock back
        with pytest.raises(SessionLockedError, match=f"process {os.getpid()}"):
            other.open("s2")
    live.close()
    bystander.close()
    with schema.store(pool_min=0, pool_max=1) as other:
        other.open("s1").close()  # released by close


@pytest.fixture
def lost(store: PostgresStore, schema: Schema) -> LiveSession:
    """A live session "s1" (one event durable) whose lock connection has just died."""
    live = titled(store, "s1")
    lose_the_lock_connection(schema)
    return live


def test_a_flush_after_the_lock_was_lost_to_another_live_writer_is_refused_naming_the_session(
    lost: LiveSession, schema: Schema
) -> None:
    live = lost
    with schema.store(pool_min=0, pool_max=1) as other:
        theirs = other.open("s1")  # the lock was free: another writer holds it now
        assert "lock was lost with its connection" in refused(live, SessionLockedError, "another writer")
        assert next_seq(schema, "s1") == 1  # nothing of this writer's batch was written
        theirs.session.append("session/title", {"title": "theirs"})
        theirs.close()
        titles = [event.data.get("title") for event in other.load("s1").events]
        assert titles == ["first", None, "theirs"]  # None: the end-seed marker of their open()
    with pytest.raises(ConcurrentWriterError, match="stored next seq is 3, batch starts at 1"):
        live.flush()  # the lock is free again, but the session moved on without this writer
    live.abandon()


def test_a_flush_after_another_writer_appended_while_the_lock_was_lost_is_refused_and_keeps_no_lock(
    lost: LiveSession, schema: Schema
) -> None:
    with schema.store(pool_min=0, pool_max=1) as other:
        other.append("s1", [{"type": "session/title", "seq": 1, "time": 5000, "data": {"title": "theirs"}}])
        refused(lost, ConcurrentWriterError,
                "lost with its connection and meanwhile another writer appended: stored next seq is 2")
        other.open("s1").close()  # the stale writer did not keep the lock it took back to check
    lost.abandon()
