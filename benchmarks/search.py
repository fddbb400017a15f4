"""The ``search`` suite: ``search_store`` through each store's index against the scan of every session.

Sessions of the standard workload (``SESSIONS`` sessions sharing ``--turns`` turns, at least
``MIN_TURNS`` each) plus one session holding a rare phrase. Baseline measured in the same run:
the scan (``search_store(..., scan=True)``: every session read, restored and matched). Three
queries: a rare phrase (one hit), a common vocabulary word (many hits), absent text (none).
Ratios are index time / scan time, so below 1 is faster. No targets.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from agentlog.core.header import SessionHeader
from agentlog.ops.search import search_store
from agentlog.recording.recorder import Recorder
from agentlog.store.base import Store
from benchmarks.runner import TIMES, Context, Figure, Stat, Suite
from benchmarks.store_backends import postgres_dsn
from benchmarks.workload import workload_events

__all__ = ["SUITE"]

SESSIONS: Final = 40
MIN_TURNS: Final = 5
RARE: Final = "quartz zebra 4242"
QUERIES: Final = (("rare", RARE.upper()), ("common", "the"), ("absent", "no such text anywhere"))
"""(name, text) searched, in the order shown."""


@contextmanager
def _sqlite(tmp: Path) -> Iterator[Store]:
    from agentlog.store.sqlite.store import SqliteStore

    store = SqliteStore(tmp / "db" / "search.db", write_delay_ms=1)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _postgres(tmp: Path) -> Iterator[Store]:
    import uuid

    import psycopg

    from agentlog.store.postgres.store import PostgresStore

    schema = f"agentlog_bench_search_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(postgres_dsn(), schema=schema, write_delay_ms=1, pool_min=0, pool_max=2)
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


BACKENDS: Final = {"sqlite": _sqlite, "postgres": _postgres}


def run(ctx: Context) -> None:
    """Each query on each backend of ``--backends`` (default: sqlite and postgres), index vs scan."""
    names = [name for name in BACKENDS if not ctx.options.backends or name in ctx.options.backends]
    turns = max(MIN_TURNS, ctx.options.turns // SESSIONS)
    if not names:
        ctx.note("no sqlite or postgres among --backends: no index to time")
    for name in names:
        ctx.attempt(name, lambda name=name: _backend(ctx, name, turns))  # type: ignore[misc]


def _fill(store: Store, turns: int) -> int:
    """Store the sessions; returns how many events they hold."""
    total = 0
    for number in range(SESSIONS):
        events = workload_events(turns, seed=number)
        store.create(SessionHeader(id=f"workload-{number:03d}", created_at=events[0].time))
        store.append(f"workload-{number:03d}", events)
        total += len(events)
    with store.start(SessionHeader(id="rare")) as live, Recorder(live).turn() as turn:
        turn.user_message(f"the one message with {RARE} in it")
    return total + len(store.inspect("rare").events)


def _backend(ctx: Context, name: str, turns: int) -> None:
    with tempfile.TemporaryDirectory(dir=ctx.options.tmp_dir) as tmp, BACKENDS[name](Path(tmp)) as store:
        events = _fill(store, turns)
        ctx.note(f"{name}: {SESSIONS + 1} sessions, {events:,} events ({turns} turns each)")
        for query, text in QUERIES:
            _query(ctx, store, name, query, text)


def _query(ctx: Context, store: Store, backend: str, query: str, text: str) -> None:
    found: dict[bool, int] = {}

    def timed(scan: bool) -> Mapping[str, float]:
        start = time.perf_counter()
        result = search_store(store, text, scan=scan)
        elapsed = time.perf_counter() - start
        found[scan] = len(result.hits)
        return {"s": elapsed}

    scan_s = ctx.measure(f"{backend} scan {query}", lambda: timed(True))["s"]
    index_s = ctx.measure(f"{backend} index {query}", lambda: timed(False))["s"]
    if found[True] != found[False]:
        raise AssertionError(f"{backend} {query}: the index found {found[False]} hits, "
                             f"the scan {found[True]}")
    baseline = f"{backend} scan"
    ctx.add(Figure(f"search.{backend}.{query}.scan_ms", f"{backend} scan, {query} ({found[True]:,} hits)",
                   "ms", Stat.of([value * 1e3 for value in scan_s]), is_baseline=True))
    ratio = statistics.median(index_s) / max(statistics.median(scan_s), 1e-12)
    ctx.add(Figure(f"search.{backend}.{query}.index_ms", f"{backend} index, {query}", "ms",
                   Stat.of([value * 1e3 for value in index_s]), baseline=baseline, ratio=ratio))
    ctx.note(f"{backend} {query}: index {ratio:.3f}{TIMES} the scan "
             f"({1 / max(ratio, 1e-12):.0f} times faster)")


SUITE: Final = Suite("search", "search_store through each store's index against the scan", run)
