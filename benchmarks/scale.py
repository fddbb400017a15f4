"""The ``scale`` suite: many live sessions on one store, many processes on PostgreSQL, and the
peak RSS of resumed long sessions (issue 15, targets 3 and 5).

Many sessions: 1,000 live sessions in one process, each recording a few turns of the standard
workload with a ``flush()`` after every ``turn/end`` (durable per turn), driven by a pool of
worker threads (a worker records one turn of one of its sessions, flushes it, moves to the
next); beside it, a single session alone on the same kind of store. Flushes of concurrent
sessions share commits (``store/group_commit.py``) on SQLite and PostgreSQL. PostgreSQL also
runs 8 processes at once on one store. Resumed RSS: ``store.open()`` + ``derive_messages()``
of a T = 1000 and a T = 10,000 session, recorded durable per turn, in fresh processes that
import agentlog and nothing of the harness (``bench.resume_rss``; peak = VmHWM); the generated
logs are cached under the system temp directory and reused by later runs.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

from agentlog.core.header import SessionHeader
from agentlog.store.group_commit import GroupCommitStore
from agentlog.store.writer import LiveSession
from benchmarks.runner import Context, Figure, Stat, Suite, Target, child_env, run_child
from benchmarks.store import BACKENDS, CWD, resolve_backends
from benchmarks.store_backends import Backend, PostgresBackend
from benchmarks.store_floor import json_lines, split_turns
from benchmarks.workload import record_workload, workload_events

__all__ = ["SUITE", "child", "run"]

SESSIONS: Final = 1000
"""Live sessions in one process (fewer when ``--turns`` is below it: as many as turns)."""
WORKERS: Final = 50
"""Threads that drive them (each owns every 50th session)."""
TURNS_EACH: Final = 3
"""Turns each of the many sessions records."""
SINGLE_TURNS: Final = 60
"""Turns the lone session records (about as long a run as one of the many-session runs' share)."""
PROCESSES: Final = 8
"""Processes on one PostgreSQL store; each drives ``SESSIONS // PROCESSES`` sessions."""
RSS_SCALES: Final = (1, 10)
"""Resumed sessions of T and 10 T turns (T = ``--turns``: 1000 and 10,000 by default)."""
RSS_BACKENDS: Final = ("jsonl-zstd", "jsonl-raw")
AGGREGATE_COST: Final = Target("<=", 0.5)
"""The aggregate rate at least 2x one session's: each event costs at most half of its time there."""
RSS_MB: Final = Target("<=", 50.0)
TOP_ALLOCATIONS: Final = 8
CACHE: Final = Path(os.environ.get("AGENTLOG_BENCH_CACHE")
                    or Path(tempfile.gettempdir()) / "agentlog-bench-cache")
"""Generated long sessions, reused across runs (delete it to regenerate; $AGENTLOG_BENCH_CACHE moves it)."""
SESSION_ID: Final = "bench-resume"


def run(ctx: Context) -> None:
    """Many sessions per backend, 8 processes on PostgreSQL, then the resumed-RSS figures."""
    backends, skipped = resolve_backends(ctx.options.backends)
    sessions = min(SESSIONS, max(PROCESSES, ctx.options.turns))
    for name, problem in skipped.items():
        ctx.say(f"[yellow]{name} skipped: {problem}[/]")
        ctx.note(f"{name} skipped: {problem}")
    for backend in backends:
        try:
            ctx.attempt(f"{backend.name} many sessions", partial(_many, ctx, backend, sessions))
            if backend.name == "postgres":
                ctx.attempt("postgres processes", partial(_processes, ctx, backend, sessions))
        finally:
            ctx.attempt(f"{backend.name} cleanup", backend.close)
    for name in RSS_BACKENDS:
        if name in {backend.name for backend in backends}:
            for turns in (scale * ctx.options.turns for scale in RSS_SCALES):
                ctx.attempt(f"{name} resumed RSS T={turns}", partial(_rss, ctx, name, turns))
    _notes(ctx, sessions)


def _notes(ctx: Context, sessions: int) -> None:
    ctx.note(f"Many sessions: {sessions:,} live sessions started in one fresh process (untimed), then "
             f"{min(WORKERS, sessions)} threads each record {TURNS_EACH} turns of the standard workload in "
             f"each of its sessions, one turn at a time, with live.flush() after each turn/end; aggregate = "
             f"every event recorded / wall time, flush latency = each flush() call. Single = one session "
             f"recording {SINGLE_TURNS} turns alone in a fresh process on a new store of the same kind. "
             "Group commit: SQLite and PostgreSQL write the batches that queue while a commit runs as "
             "one transaction; JSONL shares nothing (each session is its own file and fsync).")
    ctx.note(f"PostgreSQL processes: {PROCESSES} fresh processes on one store, each driving "
             f"{sessions // PROCESSES} sessions, started together once every process has started its "
             "sessions; "
             "aggregate = all their events / (last end - first start).")
    ctx.note(f"Resumed RSS: store.open(id) + derive_messages() of a T-turn session, recorded durable per "
             f"turn, in a fresh `python -c` process that imports agentlog and nothing of the bench "
             f"(benchmarks/resume_rss.py); peak RSS is VmHWM, idle is the RSS after `import agentlog`, "
             f"'per 1,000 events' divides the peak above it. Logs cached in {CACHE}.")


# -- many sessions in one process ----------------------------------------------------------------


def _many(ctx: Context, backend: Backend, sessions: int) -> None:
    workdir = ctx.workdir / backend.name
    workdir.mkdir(exist_ok=True)
    runs = 0

    def once(sessions: int, workers: int, turns: int, grouping: bool = True) -> Mapping[str, float]:
        nonlocal runs
        place = backend.place(workdir / f"scale-{runs}")
        runs += 1
        try:
            result = run_child({"suite": "scale", "kind": "many", "backend": backend.name, "place": place,
                                "sessions": sessions, "workers": workers, "turns": turns,
                                "grouping": grouping}, timeout=1800)
        finally:
            backend.remove(place)
        return {key: float(value) for key, value in result.items()}

    lone_turns = min(SINGLE_TURNS, ctx.options.turns)
    workers = min(WORKERS, sessions)
    single = ctx.measure(f"{backend.name}: one session, {lone_turns} turns, flush per turn",
                         lambda: once(1, 1, lone_turns))
    many = ctx.measure(f"{backend.name}: {sessions:,} sessions x {TURNS_EACH} turns, {workers} threads",
                       lambda: once(sessions, workers, TURNS_EACH))
    floor = None
    if isinstance(backend, PostgresBackend):
        floor = ctx.measure(f"postgres baseline: one INSERT per turn of {lone_turns} turns, commit each",
                            lambda: _commit_floor(backend, workdir, lone_turns))
    alone = None
    if _groups(backend, workdir):
        alone = ctx.measure(f"{backend.name}: the same, each flush committed alone (group commit off)",
                            lambda: once(sessions, workers, TURNS_EACH, grouping=False))
    shutil.rmtree(workdir, ignore_errors=True)
    group = backend.name
    lone = Stat.of(single["events_per_s"])
    note = ""
    if floor is not None:
        floor_rate = Stat.of(floor["events_per_s"])
        ctx.add(Figure("scale.commit_floor_events_per_s", "commit floor: each turn's JSON lines as one bytea "
                       "row, one INSERT + synchronous commit per turn", "events/s", floor_rate, group=group,
                       is_baseline=True))
        note = f"{floor_rate.median / lone.median:.2f}x the commit floor's time"
    ctx.add(Figure("scale.single_events_per_s", "one session alone, durable per turn", "events/s", lone,
                   group=group, is_baseline=True, note=note))
    ctx.add(Figure("scale.single_flush_p50_ms", "… its flush() p50", "ms", Stat.of(single["p50_ms"]),
                   group=group, is_baseline=True))
    aggregate = Stat.of(many["events_per_s"])
    ratio = aggregate.median / lone.median
    grouped = ""
    if "groups" in many:
        sizes = [b / max(g, 1) for b, g in zip(many["batches"], many["groups"], strict=True)]
        grouped = f"; {statistics.median(sizes):.1f} batches per group commit"
    ctx.add(Figure("scale.many_events_per_s", f"{sessions:,} live sessions, aggregate durable events/s",
                   "events/s", aggregate, group=group, baseline="one session", ratio=1 / ratio,
                   ratio_target=AGGREGATE_COST, note=f"{ratio:.2f}x one session's rate{grouped}"))
    lone_p50 = statistics.median(single["p50_ms"])
    for key, what in (("p50_ms", "p50"), ("p99_ms", "p99")):
        stat = Stat.of(many[key])
        ctx.add(Figure(f"scale.many_flush_{key}", f"… flush() latency {what}", "ms", stat, group=group,
                       baseline="one session's p50", ratio=stat.median / lone_p50))
    if alone is not None:
        stat = Stat.of(alone["events_per_s"])
        ctx.add(Figure("scale.ungrouped_events_per_s", "… the same with each flush committed alone",
                       "events/s", stat, group=group, is_baseline=True,
                       note=f"{stat.median / lone.median:.2f}x one session's rate"))
        ctx.add(Figure("scale.ungrouped_flush_p99_ms", "… its flush() latency p99", "ms",
                       Stat.of(alone["p99_ms"]), group=group, is_baseline=True))


def _commit_floor(backend: PostgresBackend, workdir: Path, turns: int) -> Mapping[str, float]:
    """Events/s of committing the workload's turns as one row each (the server's durable floor)."""
    import psycopg
    from psycopg import sql

    events = workload_events(turns)
    batches = split_turns(b"".join(line + b"\n" for line in json_lines(events)))
    place = backend.place(workdir / "floor")
    name = sql.Identifier(place)
    try:
        with psycopg.connect(backend.dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(name))
            conn.execute(sql.SQL("CREATE TABLE {}.turns (n integer PRIMARY KEY, b bytea NOT NULL)")
                         .format(name))
            insert = sql.SQL("INSERT INTO {}.turns (n, b) VALUES (%s, %s)").format(name)
            start = time.perf_counter()
            for number, batch in enumerate(batches):
                conn.execute(insert, (number, batch))
            elapsed = time.perf_counter() - start
    finally:
        backend.remove(place)
    return {"events_per_s": len(events) / elapsed}


def _groups(backend: Backend, workdir: Path) -> bool:
    """Whether the backend's store commits concurrent flushes in groups."""
    place = backend.place(workdir / "probe")
    store = backend.open(place)
    store.close()
    backend.remove(place)
    return isinstance(store, GroupCommitStore)


def _drive(live_sessions: Sequence[LiveSession], workers: int, turns: int,
           seed: int) -> tuple[float, list[float]]:
    """Record ``turns`` turns in every session from ``workers`` threads; (seconds, flush latencies)."""
    latencies: list[list[float]] = [[] for _ in range(workers)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(workers + 1)

    def work(index: int) -> None:
        mine = live_sessions[index::workers]
        timings = latencies[index]
        barrier.wait()
        try:
            for turn in range(turns):
                for number, live in enumerate(mine):
                    record_workload(live.session, 1, seed=seed + turn * 7919 + number * workers + index)
                    start = time.perf_counter()
                    live.flush()
                    timings.append(time.perf_counter() - start)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(workers)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return elapsed, [value for values in latencies for value in values]


def _child_many(backend: Backend, place: str, sessions: int, workers: int, turns: int, *, seed: int = 0,
                grouping: bool = True, gate: str | None = None) -> dict[str, Any]:
    """Start ``sessions`` live sessions (untimed), wait for ``gate`` (a file another process creates,
    so that several processes start together), then drive them."""
    store = backend.open(place)
    if isinstance(store, GroupCommitStore):
        store.grouping = grouping
    try:
        lives = [store.start(SessionHeader(id=f"scale-{seed}-{index}", cwd=CWD)) for index in range(sessions)]
        if gate is not None:
            Path(f"{gate}.{seed}").touch()
            while not os.path.exists(gate):
                time.sleep(0.005)
        elapsed, latencies = _drive(lives, workers, turns, seed)
        events = sum(live.session.seq for live in lives)
        started_at = time.time() - elapsed
        for live in lives:
            live.close()
    finally:
        store.close()
    latencies.sort()
    result: dict[str, Any] = {
        "s": elapsed, "events": events, "events_per_s": events / elapsed, "start": started_at,
        "end": started_at + elapsed,
        "p50_ms": 1e3 * latencies[len(latencies) // 2],
        "p99_ms": 1e3 * latencies[min(len(latencies) - 1, (len(latencies) * 99) // 100)],
    }
    if isinstance(store, GroupCommitStore) and grouping:
        result |= {"groups": store.group_commit.groups, "batches": store.group_commit.batches}
    return result


# -- many processes on one PostgreSQL store ------------------------------------------------------


def _processes(ctx: Context, backend: Backend, total: int) -> None:
    sessions = total // PROCESSES
    workers = min(sessions, max(1, WORKERS // PROCESSES))

    def once() -> Mapping[str, float]:
        place = backend.place(ctx.workdir / "processes")
        gate = ctx.workdir / f"go-{place}"
        try:
            store = backend.open(place)
            backend.connect(store)  # creates the schema once, before the processes race for it
            store.close()
            specs = [{"suite": "scale", "kind": "many", "backend": backend.name, "place": place,
                      "sessions": sessions, "workers": workers, "turns": TURNS_EACH, "seed": 1 + index,
                      "gate": str(gate)} for index in range(PROCESSES)]
            results = _run_together(specs, gate)
        finally:
            backend.remove(place)
        events = sum(result["events"] for result in results)
        span = max(result["end"] for result in results) - min(result["start"] for result in results)
        return {"events_per_s": events / span,
                "p50_ms": statistics.median(result["p50_ms"] for result in results),
                "p99_ms": max(result["p99_ms"] for result in results)}

    samples = ctx.measure(f"postgres: {PROCESSES} processes x {sessions} sessions", once)
    found = {figure.key: figure.stat.median for figure in ctx.result.figures if figure.group == "postgres"}
    single, single_p50 = found.get("scale.single_events_per_s"), found.get("scale.single_flush_p50_ms")
    if single is None or single_p50 is None:
        raise RuntimeError("the processes figures need the lone session's, which did not run")
    stat = Stat.of(samples["events_per_s"])
    ctx.add(Figure("scale.processes_events_per_s", f"{PROCESSES} processes on one store, aggregate durable "
                   "events/s", "events/s", stat, group="postgres", baseline="one session",
                   ratio=single / stat.median, ratio_target=AGGREGATE_COST,
                   note=f"{stat.median / single:.2f}x one session's rate"))
    for key, what in (("p50_ms", "p50 (median of the processes)"), ("p99_ms", "p99 (worst process)")):
        latency = Stat.of(samples[key])
        ctx.add(Figure(f"scale.processes_flush_{key}", f"… flush() latency {what}", "ms", latency,
                       group="postgres", baseline="one session's p50", ratio=latency.median / single_p50))


def _run_together(specs: Sequence[Mapping[str, Any]], gate: Path) -> list[dict[str, Any]]:
    """One child process per spec; once every one is ready (``<gate>.<seed>`` exists), create
    ``gate`` so that they start together; their JSON results."""
    processes = [subprocess.Popen([sys.executable, "-m", "benchmarks", "--child", json.dumps(spec)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=child_env())
                 for spec in specs]
    deadline = time.monotonic() + 600
    while not all(os.path.exists(f"{gate}.{spec['seed']}") for spec in specs):
        if time.monotonic() > deadline or any(process.poll() is not None for process in processes):
            break  # a child failed (its error is reported below) or never got ready
        time.sleep(0.01)
    gate.touch()
    results = []
    for process in processes:
        out, err = process.communicate(timeout=1800)
        if process.returncode != 0:
            raise RuntimeError(f"scale child exited {process.returncode}: {err.strip()[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


# -- resumed RSS -----------------------------------------------------------------------------------


def _cached_session(name: str, turns: int) -> str:
    """A store location holding one T-turn session, generated once and kept in ``CACHE``."""
    backend = BACKENDS[name]
    root = CACHE / f"{name}-T{turns}-per-turn"
    done = root / "complete"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        place = backend.place(root / "store")
        store = backend.open(place)
        try:
            live = store.start(SessionHeader(id=SESSION_ID, cwd=CWD))
            record_workload(live.session, turns, flush=live.flush)  # durable per turn (WORKLOAD.md)
            live.close()
        finally:
            store.close()
        done.write_text(place)
    return done.read_text()


def _rss(ctx: Context, name: str, turns: int) -> None:
    ctx.say(f"{name}: the T = {turns:,} session (generated once, cached in {CACHE})")
    place = _cached_session(name, turns)
    minimal = {"place": place, "session": SESSION_ID,
               "compression": "zstd" if name == "jsonl-zstd" else "none"}
    samples = ctx.measure(f"{name}: resume T = {turns:,} in a fresh process importing agentlog only",
                          lambda: _run_resume(minimal), runs=min(ctx.options.runs, 3))
    events = samples["events"][-1]
    peak = Stat.of([value / 1e6 for value in samples["peak_rss"]])
    idle = statistics.median(samples["rss_before"]) / 1e6
    group = f"{name} T={turns}"
    label = f"peak RSS of a resumed T = {turns:,} session ({events:,.0f} events)"
    ctx.add(Figure("rss.resumed_peak_mb", label, "MB", peak, group=group, baseline="idle process",
                   ratio=peak.median / idle, target=RSS_MB if turns == 1000 else None))
    per_1000 = Stat.of([(value / 1e6 - idle) * 1000 / events for value in samples["peak_rss"]])
    disk = BACKENDS[name].size(place) / 1e6 * 1000 / events
    ctx.add(Figure("rss.per_1000_events_mb", "… above the idle process, per 1,000 events", "MB", per_1000,
                   group=group, baseline="bytes on disk per 1,000 events", ratio=per_1000.median / disk))
    ctx.add(Figure("rss.idle_mb", "RSS of the process before opening (`import agentlog` done)", "MB",
                   Stat.of([value / 1e6 for value in samples["rss_before"]]), group=group, is_baseline=True))
    ctx.add(Figure("rss.interpreter_mb", "RSS of the interpreter before `import agentlog`", "MB",
                   Stat.of([value / 1e6 for value in samples["interpreter_rss"]]), group=group,
                   is_baseline=True))
    if turns == ctx.options.turns:
        traced = run_child({"suite": "scale", "kind": "trace", "backend": name, "place": place}, 1800)
        ctx.note(f"{name} T = {turns:,}, tracemalloc of the resume, top {TOP_ALLOCATIONS} lines by size "
                 f"(traced peak {traced['traced_peak'] / 1e6:.1f} MB): " + "; ".join(traced["top"]))


def _run_resume(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``bench.resume_rss`` in a fresh interpreter: a user's process, without the harness's imports."""
    script = Path(__file__).with_name("resume_rss.py").read_text(encoding="utf-8")
    command = [sys.executable, "-c", script, json.dumps(spec)]  # -c: the package is not imported first
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"resume_rss exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _child_trace(backend: Backend, place: str) -> dict[str, Any]:
    """The resume under tracemalloc: its traced peak and top allocations by line."""
    store = backend.open(place)
    backend.connect(store)
    tracemalloc.start()
    live = store.open(SESSION_ID)
    live.session.derive_messages()
    snapshot = tracemalloc.take_snapshot()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    top = [f"{_short(stat.traceback[0].filename)}:{stat.traceback[0].lineno} "
           f"{stat.size / 1e6:.1f} MB ({stat.count:,} blocks)"
           for stat in snapshot.statistics("lineno")[:TOP_ALLOCATIONS]]
    live.close()
    store.close()
    return {"traced_peak": peak, "top": top}


def _short(filename: str) -> str:
    marker = f"{os.sep}agentlog{os.sep}"
    return filename.split(marker, 1)[1] if marker in filename else os.path.basename(filename)


def child(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Measurements in a fresh process: ``many`` (sessions on one store) and ``trace`` (a resume's
    allocations; its RSS is measured by ``bench.resume_rss``, which imports no harness)."""
    backend = BACKENDS[str(spec["backend"])]
    if spec["kind"] == "many":
        gate = spec.get("gate")
        return _child_many(backend, str(spec["place"]), int(spec["sessions"]), int(spec["workers"]),
                           int(spec["turns"]), seed=int(spec.get("seed", 0)),
                           grouping=bool(spec.get("grouping", True)),
                           gate=None if gate is None else str(gate))
    if spec["kind"] == "trace":
        return _child_trace(backend, str(spec["place"]))
    raise ValueError(f"unknown scale child measurement {spec['kind']!r}")


SUITE: Final = Suite("scale", "1,000 live sessions per store, 8 PostgreSQL processes (group commit), and "
                     "the peak RSS of resumed T = 1000 / 10,000 sessions", run, child)
