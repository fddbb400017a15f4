"""The ``scrub`` suite: seconds per MB that ``agentlog scrub`` takes on each backend.

One standard-workload session (``--turns`` turns) with a key planted in
one message of every turn is scrubbed (a literal, as ``--text-file`` gives it); each run scrubs
a fresh copy. MB is the session's events as compact JSON (what a JSONL transcript holds before
compression). The baseline measured in the same run is a full validated read of the same session
(``inspect(trust_checkpoint=False)``), so the ratio says how many full reads a scrub costs. The
SQLite and PostgreSQL figures include ``VACUUM`` of the whole (small) store. No targets.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Final

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import freeze, thaw
from agentlog.ops.scrub import scrub
from agentlog.ops.scrub_text import Secrets
from agentlog.store.base import Store
from agentlog.store.urls import open_store
from benchmarks.runner import TIMES, Context, Figure, Stat, Suite
from benchmarks.store_backends import postgres_dsn
from benchmarks.workload import workload_events

__all__ = ["SUITE"]

MIN_TURNS: Final = 1
SECRET: Final = "sk-proj-Zq8Wm3Xv9Tn2Lp7Rk4Yb6Hc1Jd5Fg0A"


@contextmanager
def _jsonl(tmp: Path, compression: str) -> Iterator[Store]:
    with open_store(f"jsonl://{tmp / 'root'}?compression={compression}") as store:
        yield store


@contextmanager
def _sqlite(tmp: Path) -> Iterator[Store]:
    (tmp / "db").mkdir(mode=0o700)
    with open_store(f"sqlite://{tmp / 'db' / 'scrub.db'}") as store:
        yield store


@contextmanager
def _postgres(tmp: Path) -> Iterator[Store]:
    import psycopg

    schema = f"agentlog_bench_scrub_{uuid.uuid4().hex[:12]}"
    try:
        with open_store(f"{postgres_dsn()}?schema={schema}") as store:
            yield store
    finally:
        with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


BACKENDS: Final[dict[str, Callable[[Path], AbstractContextManager[Store]]]] = {
    "jsonl-raw": lambda tmp: _jsonl(tmp, "none"), "jsonl-zstd": lambda tmp: _jsonl(tmp, "zstd"),
    "sqlite": _sqlite, "postgres": _postgres,
}


def run(ctx: Context) -> None:
    """Each backend of ``--backends`` (default: all four): scrub and read, s/MB and their ratio."""
    names = [name for name in BACKENDS if not ctx.options.backends or name in ctx.options.backends
             or name.split("-")[0] in ctx.options.backends]
    turns = max(MIN_TURNS, ctx.options.turns)
    for name in names:
        ctx.attempt(name, lambda name=name: _backend(ctx, name, turns))  # type: ignore[misc]


def _planted(turns: int) -> list[Event]:
    """The workload's events with the key in the text of every user message."""
    out: list[Event] = []
    for event in workload_events(turns, seed=7):
        if event.type == "user/message":
            wire = event.to_wire()
            data = thaw(event.data)
            data["content"] = [*data.get("content", []), {"type": "text", "text": f"key {SECRET}"}]
            wire["data"] = freeze(data)
            event = Event.from_wire(wire)
        out.append(event)
    return out


def _backend(ctx: Context, name: str, turns: int) -> None:
    events = _planted(turns)
    megabytes = sum(len(event.to_json()) for event in events) / 1e6
    with tempfile.TemporaryDirectory(dir=ctx.options.tmp_dir) as tmp, BACKENDS[name](Path(tmp)) as store:
        counter = iter(range(10**6))

        def fresh() -> str:
            sid = f"scrub-{next(counter)}"
            store.create(SessionHeader(id=sid, created_at=events[0].time))
            store.append(sid, events)
            return sid

        def scrubbed() -> Mapping[str, float]:
            sid = fresh()
            start = time.perf_counter()
            report = scrub(store, [sid], Secrets.of([(SECRET, "key")]))
            elapsed = time.perf_counter() - start
            assert report.sessions[0].seqs, "nothing was scrubbed"
            return {"s": elapsed}

        def read() -> Mapping[str, float]:
            sid = fresh()
            start = time.perf_counter()
            store.inspect(sid, trust_checkpoint=False)
            return {"s": time.perf_counter() - start}

        read_s = ctx.measure(f"{name} read", read)["s"]
        scrub_s = ctx.measure(f"{name} scrub", scrubbed)["s"]
    ctx.note(f"{name}: {len(events):,} events, {megabytes:.2f} MB of event JSON ({turns} turns)")
    baseline = f"{name} read"
    ctx.add(Figure(f"scrub.{name}.read_s_per_mb", f"{name} full read", "s/MB",
                   Stat.of([value / megabytes for value in read_s]), is_baseline=True))
    ratio = statistics.median(scrub_s) / max(statistics.median(read_s), 1e-12)
    ctx.add(Figure(f"scrub.{name}.scrub_s_per_mb", f"{name} scrub", "s/MB",
                   Stat.of([value / megabytes for value in scrub_s]), baseline=baseline, ratio=ratio))
    per_mb = statistics.median(scrub_s) / megabytes
    ctx.note(f"{name}: scrub {per_mb:.3f} s/MB, {ratio:.1f}{TIMES} a full read")


SUITE: Final = Suite("scrub", "agentlog scrub: seconds per MB on each backend", run)
