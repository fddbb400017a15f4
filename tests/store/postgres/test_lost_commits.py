"""A PostgreSQL fork or crash repair whose commit reply is lost: the connection dies with the
reply in flight, and the store must neither report a false "exists"/"stale" for its own
committed write nor take another writer's change for its own.

Real server, no mocks: the store's pool hands out connections of a ``psycopg.Connection``
subclass that ends its own backend with ``pg_terminate_backend`` (from another connection)
right after a writing transaction committed, or just before its first write is sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from agentlog import SessionHeader
from agentlog.errors import ConcurrentWriterError, ForkError, PersistenceIOError, SessionExistsError
from agentlog.store.postgres.locks import application_name
from agentlog.store.postgres.store import PostgresStore
from tests.contract.logs import LogBuilder, wire
from tests.store.pg_worker import Schema
from tests.store.postgres.test_retry import terminate

_WRITES = re.compile(r"\s*(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)


@dataclass
class Arm:
    """How many writing transactions lose their connection next, and when."""

    dsn: str
    lose: int = 0
    before: bool = False
    meanwhile: Callable[[], None] = field(default=lambda: None)
    """Run after the backend was ended and before the client sees it (another writer's turn)."""


def losing_connection(arm: Arm) -> type[psycopg.Connection[Any]]:
    class Losing(psycopg.Connection[Any]):
        wrote = False

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:  # type: ignore[override]
            if isinstance(query, str) and _WRITES.match(query):
                if arm.lose and arm.before:  # this write never reaches the server
                    arm.lose -= 1
                    terminate(arm.dsn, f"pid = {self.info.backend_pid}")
                    arm.meanwhile()
                self.wrote = True
            return super().execute(query, params, **kwargs)

        @contextmanager
        def transaction(self, *args: Any, **kwargs: Any) -> Iterator[Any]:  # type: ignore[override]
            self.wrote = False
            with super().transaction(*args, **kwargs) as tx:
                yield tx
            if self.wrote and arm.lose and not arm.before:  # committed; the reply is lost
                arm.lose -= 1
                terminate(arm.dsn, f"pid = {self.info.backend_pid}")
                arm.meanwhile()
                self.execute("SELECT 1")
                raise AssertionError("the terminated connection answered")

    return Losing


@dataclass
class Losing:
    store: PostgresStore
    arm: Arm


@pytest.fixture
def losing(schema: Schema) -> Iterator[Losing]:
    arm = Arm(schema.dsn)
    store = schema.store(write_delay_ms=10_000, pool_min=0, pool_max=4)
    store._pool = ConnectionPool(schema.dsn, min_size=0, max_size=4, open=False,
                                 kwargs={"autocommit": True}, connection_class=losing_connection(arm))
    yield Losing(store, arm)
    store.close()


def parent(store: PostgresStore) -> LogBuilder:
    log = LogBuilder()
    log.turn(1)
    log.turn(2)
    store.create(SessionHeader(id="p", created_at=1000, cwd="/work"))
    store.append("p", log.events)
    return log


def sessions(schema: Schema) -> list[tuple[Any, ...]]:
    return schema.sql("SELECT id, base_session, base_length, next_seq FROM {s}.sessions ORDER BY id")


# -- fork ----------------------------------------------------------------------------------------


def test_a_fork_whose_commit_reply_was_lost_recognises_its_child_and_succeeds(
    losing: Losing, schema: Schema
) -> None:
    log = parent(losing.store)
    losing.arm.lose = 1
    child = losing.store.fork("p", child_id="c")  # the child row committed, its reply did not come
    assert losing.arm.lose == 0
    child.session.append("session/title", {"title": "child"})
    child.close()
    end = len(log.events)
    assert sessions(schema) == [("c", "p", end, end + 2), ("p", None, 0, end)]
    loaded = losing.store.load("c").events
    assert wire(list(loaded))[: len(log.events)] == log.events
    assert loaded[-1].data["title"] == "child"


def test_a_fork_retry_finding_a_child_someone_else_created_is_still_refused(
    losing: Losing, schema: Schema
) -> None:
    """The insert never reached the server and another writer created a session with the child's id."""
    parent(losing.store)

    def other_creates_the_child() -> None:
        terminate(schema.dsn, f"application_name = '{application_name()}'")  # our lock connection
        with schema.store() as other:
            other.create(SessionHeader(id="c", created_at=2000))
            other.append("c", [{"type": "session/title", "seq": 0, "time": 5000, "data": {"title": "other"}}])

    losing.arm.lose, losing.arm.before, losing.arm.meanwhile = 1, True, other_creates_the_child
    with pytest.raises((SessionExistsError, ForkError), match="already"):
        losing.store.fork("p", child_id="c")
    assert losing.arm.lose == 0
    assert [row[:3] for row in sessions(schema)] == [("c", None, 0), ("p", None, 0)]
    assert losing.store.load("c").events[0].data["title"] == "other"


def test_a_fork_whose_insert_never_reached_the_server_is_written_by_its_retry(
    losing: Losing, schema: Schema
) -> None:
    log = parent(losing.store)
    losing.arm.lose, losing.arm.before = 1, True
    losing.store.fork("p", child_id="c").close()
    assert sessions(schema)[0] == ("c", "p", len(log.events), len(log.events) + 1)


def test_a_fork_losing_its_connection_twice_says_whether_the_child_exists_is_unknown(
    losing: Losing, schema: Schema
) -> None:
    parent(losing.store)
    losing.arm.lose, losing.arm.before = 2, True
    with pytest.raises(PersistenceIOError, match="whether fork child 'c' was created is unknown") as info:
        losing.store.fork("p", child_id="c")
    assert info.value.session_id == "c" and losing.arm.lose == 0
    assert [row[0] for row in sessions(schema)] == ["p"]
    losing.store.fork("p", child_id="c").close()  # the id is free: nothing of the fork was kept


# -- crash repair ----------------------------------------------------------------------------------


def open_turn(store: PostgresStore, *, torn: bool, schema: Schema) -> LogBuilder:
    """A stored session whose last turn is open (and, if ``torn``, whose last row is defective)."""
    log = LogBuilder()
    log.turn(1)
    log.add("turn/start", {"turn": 2})
    log.add("step/start", {"turn": 2, "step": 1})
    log.add("session/title", {"title": "mid-turn"})
    store.create(SessionHeader(id="s1", created_at=1000))
    store.append("s1", log.events)
    if torn:
        schema.sql("UPDATE {s}.events SET data = '{\"turn\":' WHERE session_id = 's1' AND seq = %s",
                   (len(log.events) - 1,))
    return log


def stored(schema: Schema) -> tuple[int, int, list[str]]:
    (cursor, revision), = schema.sql("SELECT next_seq, revision FROM {s}.sessions WHERE id = 's1'")
    types = [row[0] for row in schema.sql("SELECT type FROM {s}.events WHERE session_id = 's1' ORDER BY seq")]
    return cursor, revision, types


@pytest.mark.parametrize("torn", [False, True], ids=["closers", "torn-tail"])
def test_a_repair_whose_commit_reply_was_lost_recognises_its_own_repair_and_succeeds(
    losing: Losing, schema: Schema, torn: bool
) -> None:
    log = open_turn(losing.store, torn=torn, schema=schema)
    reference = losing.store.inspect("s1").events
    _cursor, revision, _types = stored(schema)
    losing.arm.lose = 1
    loaded = losing.store.load("s1")  # the repair committed, its reply did not come
    assert losing.arm.lose == 0
    assert loaded.events == reference
    cursor, after, types = stored(schema)
    assert (cursor, after) == (len(reference), revision + 1)  # repaired once
    assert types[-2:] == ["step/end", "turn/end"]
    assert types.count("turn/end") == 2 and len(log.events) < len(reference)


@pytest.mark.parametrize("torn", [False, True], ids=["closers", "torn-tail"])
def test_a_repair_retry_finding_another_writers_change_is_still_refused_as_stale(
    losing: Losing, schema: Schema, torn: bool
) -> None:
    """The repair never reached the server and another writer (whose lock died with its
    connection) changed the session meanwhile: the retry must not repair over it."""
    log = open_turn(losing.store, torn=torn, schema=schema)
    end = len(log.events) - (1 if torn else 0)
    theirs: list[tuple[int, int, list[str]]] = []

    def other_writes() -> None:
        schema.sql("DELETE FROM {s}.events WHERE session_id = 's1' AND seq >= %s", (end,))
        schema.sql("INSERT INTO {s}.events (session_id, seq, type, time, data) "
                   "VALUES ('s1', %s, 'session/title', 9000, '{\"title\":\"other\"}')", (end,))
        schema.sql("UPDATE {s}.sessions SET next_seq = %s, revision = revision + 1 WHERE id = 's1'",
                   (end + 1,))
        theirs.append(stored(schema))

    losing.arm.lose, losing.arm.before, losing.arm.meanwhile = 1, True, other_writes
    with pytest.raises(ConcurrentWriterError, match="repair is stale"):
        losing.store.load("s1")
    assert losing.arm.lose == 0
    assert [stored(schema)] == theirs
    assert theirs[0][0] == end + 1 and theirs[0][2][-1] == "session/title"
