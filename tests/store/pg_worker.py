"""PostgreSQL test helpers: the test server, throwaway schemas, and worker processes.

Usage: python -m tests.store.pg_worker COMMAND DSN SCHEMA ARGS...

Commands (each talks on stdout, one line per message):
  record PREFIX COUNT TURNS   record COUNT sessions of the standard workload, durable per turn
  follow SID COUNT            tail SID from seq 0 until COUNT events; print them as JSON
  hold SID [open-turn]        open SID for writing (and start a turn), print READY, wait for stdin, close
  race-open SID TURNS         wait for GO; open SID and record TURNS turns (WON) or print LOST <error>
  race-append SID TAG         load SID, build one turn, wait for GO; append it (WON) or LOST <error>
  crash SID TURNS             record the workload printing ACK <durable seq> at every checkpoint
  bench TURNS                 measure persist, cold load, read_from, fork and bytes; print JSON
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


# -- the test server and its schemas ---------------------------------------------------------------


def postgres_dsn() -> str:
    """``$AGENTLOG_TEST_POSTGRES`` or the local test server."""
    return os.environ.get("AGENTLOG_TEST_POSTGRES") or DEFAULT_DSN


@functools.cache
def _probe(dsn: str) -> str | None:
    """None when a connection works, else why not."""
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".strip()
    return None


def require_postgres() -> str:
    """The test DSN; skip when PostgreSQL is unreachable, but fail under CI where it must run."""
    import pytest

    dsn = postgres_dsn()
    problem = _probe(dsn)
    if problem is not None:
        message = f"PostgreSQL not reachable at {dsn} (set AGENTLOG_TEST_POSTGRES): {problem}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return dsn


@dataclass(frozen=True)
class Schema:
    """A throwaway schema on the test server (created by the store on first use)."""

    dsn: str
    name: str

    @classmethod
    def new(cls) -> Schema:
        return cls(require_postgres(), f"agentlog_test_{uuid.uuid4().hex[:12]}")

    @property
    def url(self) -> str:
        return f"{self.dsn}?schema={self.name}"

    def store(self, **options: Any) -> Any:
        from agentlog.store.postgres.store import PostgresStore

        return PostgresStore(self.dsn, schema=self.name, **options)

    def sql(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement (``{s}`` = the quoted schema) and return its rows."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cursor = conn.execute(query.replace("{s}", f'"{self.name}"'), params)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def drop(self) -> None:
        self.sql('DROP SCHEMA IF EXISTS {s} CASCADE')


@contextlib.contextmanager
def throwaway_url() -> Iterator[str]:
    """The URL of a fresh schema on the test server, dropped on exit."""
    schema = Schema.new()
    try:
        yield schema.url
    finally:
        schema.drop()


def spawn(*args: str) -> subprocess.Popen[bytes]:
    """Start ``python -m tests.store.pg_worker ARGS`` with pipes on stdin and stdout."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.pg_worker", *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def finish(process: subprocess.Popen[bytes]) -> None:
    """Kill the worker if it still runs, reap it and close its pipes."""
    if process.poll() is None:
        process.kill()
    process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()


def event_digest(event: Any) -> str:
    return hashlib.sha1(event.to_json()).hexdigest()


# -- worker commands --------------------------------------------------------------------------------


def _say(*parts: object) -> None:
    sys.stdout.write(" ".join(str(part) for part in parts) + "\n")
    sys.stdout.flush()


def _store(dsn: str, schema: str, **options: Any) -> Any:
    from agentlog.store.postgres.store import PostgresStore

    return PostgresStore(dsn, schema=schema, pool_min=0, pool_max=2, **options)


def record(dsn: str, schema: str, prefix: str, count: str, turns: str) -> None:
    from benchmarks.workload import record_workload

    from agentlog.core.header import SessionHeader

    with _store(dsn, schema, write_delay_ms=5) as store:
        for index in range(int(count)):
            with store.start(SessionHeader(id=f"{prefix}-{index}", cwd="/work/load")) as live:
                record_workload(live.session, int(turns), seed=index, flush=live.flush)
    _say("DONE", count)


def follow(dsn: str, schema: str, session_id: str, count: str) -> None:
    seen: list[tuple[int, str]] = []
    with _store(dsn, schema) as store:
        for event in store.tail(session_id, 0, idle_timeout=60, poll_interval=30):
            if not seen:
                _say("READY")
            seen.append((event.seq, event_digest(event)))
            if len(seen) >= int(count):
                break
    _say("EVENTS", json.dumps(seen))


def hold(dsn: str, schema: str, session_id: str, mode: str = "") -> None:
    with _store(dsn, schema) as store, store.open(session_id) as live:
        if mode == "open-turn":
            turn = sum(event.type == "turn/start" for event in live.session.events) + 1
            live.session.append("turn/start", {"turn": turn})
            live.flush()
        _say("READY", os.getpid())
        sys.stdin.readline()
    _say("CLOSED")


def race_open(dsn: str, schema: str, session_id: str, turns: str) -> None:
    from benchmarks.workload import record_workload

    from agentlog.errors import AgentlogError

    with _store(dsn, schema, write_delay_ms=5) as store:
        _say("READY")
        sys.stdin.readline()
        try:
            live = store.open(session_id)
        except AgentlogError as exc:
            _say("LOST", type(exc).__name__)
            return
        with live:
            record_workload(live.session, int(turns), seed=os.getpid(), flush=live.flush)
            _say("WON", live.durable_seq)
            sys.stdin.readline()


def race_append(dsn: str, schema: str, session_id: str, tag: str) -> None:
    from agentlog.core.session import Session
    from agentlog.errors import AgentlogError

    with _store(dsn, schema) as store:
        loaded = store.load(session_id)
        session = Session.restore(session_id, loaded.events, loaded.header)
        turn = sum(event.type == "turn/start" for event in loaded.events) + 1
        session.append("turn/start", {"turn": turn, "tag": tag})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        batch = list(session.events[len(loaded.events):])
        _say("READY")
        sys.stdin.readline()
        try:
            store.append(session_id, batch)
        except AgentlogError as exc:
            _say("LOST", type(exc).__name__)
            return
        _say("WON", batch[-1].seq + 1)


def crash_app(session_id: str) -> str:
    """The ``application_name`` of a crash worker's pooled connections."""
    return f"agentlog-test crash {session_id}"


def crash(dsn: str, schema: str, session_id: str, turns: str) -> None:
    from benchmarks.workload import record_workload

    from agentlog.core.header import SessionHeader

    os.environ["PGAPPNAME"] = crash_app(session_id)  # pool connections: the test waits for them to end
    store = _store(dsn, schema, write_delay_ms=1)
    live = store.start(SessionHeader(id=session_id, created_at=1, cwd="/work/crash"))

    def checkpoint() -> None:
        live.flush()
        _say("ACK", live.durable_seq)

    _say("START")
    record_workload(live.session, int(turns), seed=7, flush=checkpoint, checkpoint=checkpoint)
    live.close()
    store.close()
    _say("DONE")


def bench(dsn: str, schema: str, turns: str) -> None:
    """The store figures at T turns: persist, cold load, read_from tail, fork, bytes (JSON on stdout)."""
    import statistics
    import time

    from benchmarks.workload import record_workload

    from agentlog.core.header import SessionHeader
    from agentlog.core.session import Session

    figures: dict[str, Any] = {"turns": int(turns)}
    store = _store(dsn, schema)
    started = time.perf_counter()
    live = store.start(SessionHeader(id="bench", cwd="/bench"))
    record_workload(live.session, int(turns), flush=live.flush)
    live.close()
    figures["persist_s"] = time.perf_counter() - started
    store.close()
    started = time.perf_counter()
    plain = Session.create("plain")
    record_workload(plain, int(turns))
    figures["record_only_s"] = time.perf_counter() - started

    cold = _store(dsn, schema)
    started = time.perf_counter()
    loaded = cold.load("bench")
    figures["load_s"] = time.perf_counter() - started
    session = Session.restore("bench", loaded.events, loaded.header)
    session.derive_messages()
    figures["load_restore_derive_s"] = time.perf_counter() - started
    figures["events"] = count = len(loaded.events)
    samples = []
    for _ in range(300):
        started = time.perf_counter()
        suffix = cold.read_from("bench", count - 50)
        samples.append((time.perf_counter() - started) * 1000)
        assert len(suffix.events) == 50
    samples.sort()
    figures["read_from_last50_ms"] = {"p50": statistics.median(samples),
                                      "p95": samples[int(len(samples) * 0.95)], "min": samples[0]}
    boundary = max(e.seq for e in loaded.events if e.type == "turn/end" and e.data["turn"] <= int(turns) // 2)
    fork_ms = []
    for index in range(7):
        started = time.perf_counter()
        cold.fork("bench", boundary, f"fork-{index}").close()
        fork_ms.append((time.perf_counter() - started) * 1000)
    figures["fork_ms"] = {"p50": statistics.median(fork_ms), "min": min(fork_ms)}
    cold.close()
    with __import__("psycopg").connect(dsn) as conn:
        sizes = conn.execute(
            "SELECT pg_total_relation_size(format('%%I.events', %s::text)), "
            "pg_relation_size(format('%%I.events', %s::text)), "
            "pg_indexes_size(format('%%I.events', %s::text)), "
            "pg_total_relation_size(format('%%I.sessions', %s::text))", (schema,) * 4).fetchone()
        figures["events_total_bytes"], figures["events_heap_bytes"], figures["events_index_bytes"], \
            figures["sessions_total_bytes"] = sizes
        figures["rows"] = conn.execute(f'SELECT count(*) FROM "{schema}".events WHERE session_id = %s',
                                       ("bench",)).fetchone()[0]
        figures["fork_row_bytes"] = conn.execute(
            f'SELECT sum(pg_column_size(e.*)) FROM "{schema}".events e WHERE session_id = %s',
            ("fork-0",)).fetchone()[0]
    _say(json.dumps(figures))


COMMANDS = {"record": record, "follow": follow, "hold": hold, "race-open": race_open,
            "race-append": race_append, "crash": crash, "bench": bench}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
