"""Writer locks of a PostgreSQL store share one lock connection: a process can keep many live
sessions without a server connection each, and exclusivity holds between them as between stores."""

from __future__ import annotations

import os
import socket

import pytest

from agentlog import SessionLockedError, UsageError
from agentlog.store.postgres import PostgresStore
from tests.store.pg_worker import Schema


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
