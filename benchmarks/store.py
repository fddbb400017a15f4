"""The ``store`` suite: the standard workload persisted, loaded cold, read back, forked and sized per backend.

Baselines measured in the same run: ``orjson.dumps``/``orjson.loads`` of the same events,
``zstandard`` compression of the same bytes, writing the same bytes with one fsync per turn,
and each backend's floors (read the last lines, one small durable write). Cold loads run in
fresh subprocesses so that their peak RSS is their own. The last table puts every backend
side by side.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

import orjson

from agentlog.core.events import TURN_END, Event
from agentlog.core.header import SessionHeader
from agentlog.core.session import Session
from agentlog.store.base import Store
from agentlog.store.fs import FileSystem
from benchmarks.core import measure_generation
from benchmarks.runner import (
    Context,
    Figure,
    Stat,
    Suite,
    Target,
    current_rss,
    peak_rss,
    run_child,
)
from benchmarks.store_backends import Backend, Floors, JsonlBackend, PostgresBackend, SqliteBackend
from benchmarks.store_floor import (
    Floor,
    TimedFileSystem,
    compressor,
    json_lines,
    measure_floor,
    plain_content,
)
from benchmarks.store_table import READ_TAIL, side_by_side
from benchmarks.workload import record_workload

__all__ = [
    "BACKENDS",
    "READ_TAIL",
    "SUITE",
    "Backend",
    "TimedFileSystem",
    "child",
    "fork_boundary",
    "resolve_backends",
    "run",
]

SESSION_ID: Final = "bench-workload"
CWD: Final = "/bench/workload"
READ_CALLS: Final = 25
"""Measured ``read_from`` calls per figure (at least; more when ``--runs`` asks for more)."""

PERSIST_RATE: Final = Target(">=", 100_000)
LOAD_SECONDS: Final = Target("<=", 1.0)
LOAD_RATIO: Final = Target("<=", 3.0)
READ_MS: Final = Target("<=", 5.0)
"""``read_from`` of the last events: a seek read on a database, through the seek index on JSONL."""
FORK_MS: Final = Target("<=", 5.0)
COLD_FORK_MS: Final = Target("<=", 20.0)
"""Issue 15 target 6: a fork from a store object that never read the parent."""
FORK_BYTES: Final = Target("<=", 4096)
"""Bytes of a file-backed fork; a database commit writes whole pages, so no byte target there."""

DSH_BYTES: Final = {("zstd", True): "5.2 MB", ("zstd", False): "6.4 MB",
                    ("raw", True): "16.0 MB", ("raw", False): "36.9 MB"}
"""DSH's own JSONL sizes at T = 1000 (WORKLOAD.md), quoted beside ours; not measured here."""

BACKENDS: Final[dict[str, Backend]] = {
    backend.name: backend for backend in (
        JsonlBackend("zstd"), JsonlBackend("none"), SqliteBackend(), PostgresBackend(),
    )
}
"""Every backend, in report order; ``--backends`` picks some, the default is those that can run."""



@dataclass(slots=True)
class _Persisted:
    """The last record + persist run: where it is, what it logged, and how long runs took."""

    place: str
    header: SessionHeader
    events: Sequence[Event]
    samples: dict[str, list[float]]


def resolve_backends(requested: Sequence[str]) -> tuple[list[Backend], dict[str, str]]:
    """The backends to run and, by name, why the others cannot run here.

    ``requested`` empty (or every backend, as the CLI passes by default) means "every backend
    that can run here".
    """
    names = tuple(requested) or tuple(BACKENDS)
    unknown = [name for name in names if name not in BACKENDS]
    if unknown:
        raise ValueError(f"unknown backend(s) {', '.join(unknown)} (known: {', '.join(BACKENDS)})")
    runnable: list[Backend] = []
    skipped: dict[str, str] = {}
    for name in dict.fromkeys(names):
        problem = BACKENDS[name].available()
        if problem is None:
            runnable.append(BACKENDS[name])
        else:
            skipped[name] = problem
    return runnable, skipped


def run(ctx: Context) -> None:
    """Every store figure for each backend of ``ctx.options.backends`` (default: all that can run)."""
    requested = ctx.options.backends
    explicit = bool(requested) and tuple(requested) != tuple(BACKENDS)
    backends, skipped = resolve_backends(requested)
    for name, problem in skipped.items():
        if explicit:
            ctx.attempt(f"{name} backend", partial(_refuse, problem))
        else:
            ctx.say(f"[yellow]{name} skipped: {problem}[/]")
            ctx.note(f"{name} skipped: {problem}")
    generation = 0.0
    if backends:
        generation = measure_generation(ctx, ctx.options.turns, "baseline.store_generation_s",
                                        "store baseline: workload text generation")
    for backend in backends:
        try:
            described = ctx.attempt(f"{backend.name} setup", backend.describe)
            if described:
                ctx.note(described)
            _run_backend(ctx, backend, generation)
        finally:
            ctx.attempt(f"{backend.name} cleanup", backend.close)
    _notes(ctx)
    if backends:
        ctx.compare(side_by_side(ctx, [backend for backend in backends]))


def _refuse(problem: str) -> None:
    raise RuntimeError(problem)


def _notes(ctx: Context) -> None:
    ctx.note("Persist (each run in a fresh process, into a new store): store.start(header), the workload "
             "recorded with live.flush() after every turn/end (returns once durable: fsync for JSONL, a "
             "synchronous commit for the databases), live.close(); the rate is net of the workload's "
             "text generation (measured in the same run, as the core suite does), the gross rate is "
             "shown beside it. Physical floor = orjson.dumps of the events + zstandard compression per "
             "turn (zstd) + writing the same bytes with one fsync per turn.")
    ctx.note("Cold load = store.load(id), then Session.restore(id, events, header), then "
             "derive_messages(), in a fresh process (imports done and a database connection opened first).")
    ctx.note(f"read_from = store.read_from(id, events - {READ_TAIL}), median of at least {READ_CALLS} calls; "
             "warm = one store object that already made the same call, new = a new store object per call "
             "(its database connection opened first, untimed). JSONL seeks through its sidecar index "
             "(a stale or missing index means a full scan); SQLite and PostgreSQL seek.")
    ctx.note("Fork: store.fork(id, boundary=turn/end of turn T/2, child_id) then close(); warm = one store "
             "object that already read the parent (as DSH's fork, which takes the live parent Session: the "
             "5 ms target is this one), cold = a new store object per fork (its database connection opened "
             "first, untimed), which first reads and validates the parent's prefix up to the boundary.")
    ctx.note("Sizes and fork bytes: JSONL = file bytes under the store root (transcript, lock and "
             "fork-marker files); SQLite = db + WAL after a checkpoint, and the WAL frames a fork's commit "
             "appends (4 KiB pages); PostgreSQL = pg_total_relation_size of the schema's tables, and the "
             "server's WAL insert-LSN advance across the fork (server-wide: other clients' writes count). "
             "DSH sizes are quoted from WORKLOAD.md (T = 1000), not measured here.")


def _run_backend(ctx: Context, backend: Backend, generation: float) -> None:
    workdir = ctx.workdir / backend.name
    workdir.mkdir()
    kept: list[_Persisted] = []
    try:
        persisted = ctx.attempt(f"{backend.name} persist", lambda: _persist(ctx, backend, workdir, kept))
        if persisted is None:
            return
        content = partial(plain_content, backend, persisted.place, persisted.events, SESSION_ID)
        plain = ctx.attempt(f"{backend.name} raw content", content)
        floor = None
        if plain is not None:
            floor = ctx.attempt(f"{backend.name} baselines",
                                lambda: measure_floor(ctx, backend, workdir, persisted.events, plain))
        _persist_figures(ctx, backend, persisted, floor, generation)
        ctx.attempt(f"{backend.name} sizes", lambda: _sizes(ctx, backend, workdir, persisted, plain))
        if plain is not None:
            ctx.attempt(f"{backend.name} load", lambda: _load(ctx, backend, workdir, persisted, plain))
        floors = ctx.attempt(f"{backend.name} floors", lambda: _floors(backend, workdir, persisted))
        if floors is not None:
            try:
                ctx.attempt(f"{backend.name} read_from", lambda: _read_from(ctx, backend, persisted, floors))
                ctx.attempt(f"{backend.name} fork", lambda: _fork(ctx, backend, persisted, floors))
            finally:
                floors.close()
    finally:
        for item in kept:
            backend.remove(item.place)
        shutil.rmtree(workdir, ignore_errors=True)


# -- record + persist --------------------------------------------------------------------------


def persist_once(backend: Backend, place: str, turns: int, *, pack: bool = True,
                 fs: FileSystem | None = None) -> tuple[float, Session, SessionHeader]:
    """Seconds to record ``turns`` turns into a new live session, durable at every ``turn/end``."""
    store = backend.open(place, pack=pack, fs=fs)
    header = SessionHeader(id=SESSION_ID, cwd=CWD)
    try:
        start = time.perf_counter()
        live = store.start(header)
        record_workload(live.session, turns, flush=live.flush)
        live.close()
        elapsed = time.perf_counter() - start
    finally:
        store.close()
    return elapsed, live.session, header


def _persist(ctx: Context, backend: Backend, workdir: Path, kept: list[_Persisted]) -> _Persisted:
    """Each run records into a new store in a fresh process, so no other suite's heap (or the
    previous run's) weighs on the collector; the last run's store is kept for the later phases."""
    runs = 0

    def once() -> Mapping[str, float]:
        nonlocal runs
        while kept:
            backend.remove(kept.pop().place)
        place = backend.place(workdir / f"persist-{runs}")
        runs += 1
        kept.append(_Persisted(place, SessionHeader(id=SESSION_ID, cwd=CWD), (), {}))
        return run_child({"suite": "store", "kind": "persist", "backend": backend.name, "place": place,
                          "turns": ctx.options.turns})

    samples = ctx.measure(f"{backend.name}: record + persist, flush at every turn/end (fresh process)", once)
    store = backend.open(kept[-1].place)
    try:
        backend.connect(store)
        events = list(store.load(SESSION_ID).events)  # untimed: what the later phases compare with
    finally:
        store.close()
    kept[-1].events = events
    kept[-1].samples = samples
    return kept[-1]


def _child_persist(backend: Backend, place: str, turns: int) -> dict[str, Any]:
    fs = TimedFileSystem()
    elapsed, session, _header = persist_once(backend, place, turns, fs=fs)
    return {"s": elapsed, "events": session.seq, "fsync_s": fs.fsync_seconds, "fsyncs": fs.fsyncs}


def _persist_figures(ctx: Context, backend: Backend, persisted: _Persisted, floor: Floor | None,
                     generation: float) -> None:
    samples = persisted.samples
    count = samples["events"][-1]
    total = None if floor is None else statistics.median(floor.total())
    net = Stat.of([count / max(seconds - generation, 1e-9) for seconds in samples["s"]])
    ctx.add(Figure("persist.events_per_s", "record + persist, durable per turn (net of text generation)",
                   "events/s", net, group=backend.name, baseline="physical floor",
                   ratio=None if total is None else (statistics.median(samples["s"]) - generation) / total,
                   target=PERSIST_RATE))
    gross = Stat.of([count / seconds for seconds in samples["s"]])
    ctx.add(Figure("persist.gross_events_per_s", "record + persist, gross (incl. text generation)",
                   "events/s", gross, group=backend.name, baseline="physical floor",
                   ratio=None if total is None else statistics.median(samples["s"]) / total))
    if backend.database:
        return  # the database syncs on its own: no fsync of ours to time
    share = Stat.of([100 * f / s for f, s in zip(samples["fsync_s"], samples["s"], strict=True)])
    write = None if floor is None else statistics.median(floor.write)
    ctx.add(Figure("persist.fsync_share", f"share of time in fsync ({samples['fsyncs'][-1]:.0f} fsyncs)",
                   "%", share, group=backend.name, baseline="write + fsync floor",
                   ratio=None if write is None else statistics.median(samples["fsync_s"]) / write))


# -- sizes -------------------------------------------------------------------------------------


def _sizes(ctx: Context, backend: Backend, workdir: Path, persisted: _Persisted, plain: bytes | None) -> None:
    json_bytes = sum(len(line) + 1 for line in json_lines(persisted.events))
    group = backend.name
    ctx.add(Figure("baseline.json_lines_bytes", "the events as compact JSON lines", "bytes",
                   Stat.of([json_bytes]), group=group, is_baseline=True))
    if backend.encoding == "zstd" and plain is not None:
        ctx.add(Figure("baseline.zstd_one_frame_bytes", "the packed content as one zstd frame", "bytes",
                       Stat.of([len(compressor().compress(plain))]), group=group, is_baseline=True))
    if backend.database:
        size = backend.size(persisted.place)
        ctx.add(Figure("size.packed_bytes", f"bytes on disk ({backend.size_label})", "bytes", Stat.of([size]),
                       group=group, baseline="JSON lines", ratio=size / json_bytes))
        return
    unpacked = backend.place(workdir / "unpacked")
    ctx.say(f"{backend.name}: record + persist once more, unpacked chunks (for its size)")
    try:
        persist_once(backend, unpacked, ctx.options.turns, pack=False)
        for key, packed, place in (("size.packed_bytes", True, persisted.place),
                                   ("size.unpacked_bytes", False, unpacked)):
            size = backend.size(place)
            dsh = DSH_BYTES[(backend.encoding, packed)] if ctx.options.turns == 1000 else ""
            ctx.add(Figure(key, f"bytes on disk, {backend.encoding} {'packed' if packed else 'unpacked'}",
                           "bytes", Stat.of([size]), group=group, baseline="JSON lines",
                           ratio=size / json_bytes, note=f"DSH {dsh}" if dsh else ""))
    finally:
        backend.remove(unpacked)


# -- cold load (in fresh subprocesses) -----------------------------------------------------------


def _load(ctx: Context, backend: Backend, workdir: Path, persisted: _Persisted, plain: bytes) -> None:
    raw_path = workdir / "raw.jsonl"
    raw_path.write_bytes(plain)
    load_spec = {"suite": "store", "kind": "load", "backend": backend.name, "place": persisted.place,
                 "session": SESSION_ID}
    loads_spec = {"suite": "store", "kind": "loads", "path": str(raw_path)}
    load = ctx.measure(f"{backend.name}: cold load + derive_messages() in a fresh process",
                       lambda: run_child(load_spec))
    full = None if backend.database else ctx.measure(  # JSONL resumes from its checkpoint: also without
        f"{backend.name}: the same, checkpoint ignored",
        lambda: run_child({**load_spec, "checkpoint": False}))
    floor = ctx.measure(f"{backend.name} baseline: orjson.loads of every line, fresh process",
                        lambda: run_child(loads_spec))
    raw_path.unlink()
    group = backend.name
    loads_s = statistics.median(floor["s"])
    loads_rss = statistics.median(floor["peak_rss"]) / 1e6
    lines = int(floor["lines"][-1])
    ctx.add(Figure("baseline.loads_s", f"orjson.loads of every line of the raw file ({lines:,} lines)", "s",
                   Stat.of(floor["s"]), group=group, is_baseline=True))
    ctx.add(Figure("baseline.loads_peak_rss_mb", "peak RSS of that process (keeps the parsed lines)", "MB",
                   Stat.of([value / 1e6 for value in floor["peak_rss"]]), group=group, is_baseline=True))
    ctx.add(Figure("baseline.idle_rss_mb", "RSS of the load process before loading (imports done)", "MB",
                   Stat.of([value / 1e6 for value in load["rss_before"]]), group=group, is_baseline=True))
    total = Stat.of(load["s"])
    ctx.add(Figure("load.s", "cold load + derive_messages()", "s", total, group=group,
                   baseline="orjson.loads", ratio=total.median / loads_s, target=LOAD_SECONDS,
                   ratio_target=LOAD_RATIO))
    if full is not None:
        stat = Stat.of(full["s"])
        ctx.add(Figure("load.full_s", "… with the checkpoint ignored (full read and validation)", "s", stat,
                       group=group, baseline="orjson.loads", ratio=stat.median / loads_s))
    for key, what in (("read_s", "… store.load (read, decode, validate, repair check)"),
                      ("restore_s", "… Session.restore of the loaded events"),
                      ("derive_s", "… derive_messages()")):
        stat = Stat.of(load[key])
        ctx.add(Figure(f"load.{key}", what, "s", stat, group=group, baseline="orjson.loads",
                       ratio=stat.median / loads_s))
    rss = Stat.of([value / 1e6 for value in load["peak_rss"]])
    ctx.add(Figure("load.peak_rss_mb", "peak RSS of the cold load", "MB", rss, group=group,
                   baseline="orjson.loads process", ratio=rss.median / loads_rss))


def child(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Measurements that need a fresh process: ``persist``, ``load`` (a cold store load), ``loads``."""
    if spec["kind"] == "persist":
        return _child_persist(BACKENDS[str(spec["backend"])], str(spec["place"]), int(spec["turns"]))
    if spec["kind"] == "load":
        return _child_load(BACKENDS[str(spec["backend"])], str(spec["place"]), str(spec["session"]),
                           checkpoint=bool(spec.get("checkpoint", True)))
    if spec["kind"] == "loads":
        return _child_loads(Path(spec["path"]))
    raise ValueError(f"unknown store child measurement {spec['kind']!r}")


def _child_load(backend: Backend, place: str, session_id: str, *, checkpoint: bool = True) -> dict[str, Any]:
    store = backend.open(place)
    if not checkpoint:
        store.checkpoint_bytes = None  # type: ignore[attr-defined]  # JsonlStore: read everything
    backend.connect(store)
    before = current_rss()
    start = time.perf_counter()
    inspection = store.load(session_id)
    loaded = time.perf_counter()
    session = Session.restore(session_id, inspection.events, inspection.header)
    restored = time.perf_counter()
    messages = session.derive_messages()
    end = time.perf_counter()
    peak = peak_rss()
    store.close()
    return {"s": end - start, "read_s": loaded - start, "restore_s": restored - loaded,
            "derive_s": end - restored, "peak_rss": peak, "rss_before": before,
            "events": session.seq, "messages": len(messages)}


def _child_loads(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    start = time.perf_counter()
    parsed = [orjson.loads(line) for line in data.splitlines()]
    elapsed = time.perf_counter() - start
    return {"s": elapsed, "peak_rss": peak_rss(), "lines": len(parsed)}


# -- read_from: the last events ----------------------------------------------------------------


def _floors(backend: Backend, workdir: Path, persisted: _Persisted) -> Floors:
    return backend.floors(workdir / "floors", json_lines(persisted.events))


def _read_once(store: Store, first: int, count: int) -> float:
    """Milliseconds of one ``read_from(first)``; checks that it returned the ``count`` last events."""
    start = time.perf_counter()
    events = store.read_from(SESSION_ID, first).events
    elapsed = time.perf_counter() - start
    if len(events) != count or (events and events[0].seq != first):
        raise RuntimeError(f"read_from({first}) returned {len(events)} events, expected {count}")
    return elapsed * 1e3


def _read_from(ctx: Context, backend: Backend, persisted: _Persisted, floors: Floors) -> None:
    place, group = persisted.place, backend.name
    count = min(READ_TAIL, len(persisted.events))
    first = len(persisted.events) - count
    calls = max(READ_CALLS, ctx.options.runs)

    def floor() -> Mapping[str, float]:
        start = time.perf_counter()
        parsed = floors.read_tail(count)
        elapsed = time.perf_counter() - start
        if parsed != count:
            raise RuntimeError(f"the read floor parsed {parsed} lines, expected {count}")
        return {"ms": elapsed * 1e3}

    floor_ms = Stat.of(ctx.measure(f"{group} baseline: read the last {count} lines", floor, runs=calls)["ms"])
    warm_store = backend.open(place)
    try:
        backend.connect(warm_store)
        warm = ctx.measure(f"{group}: read_from(last {count}), warm store",
                           lambda: {"ms": _read_once(warm_store, first, count)}, runs=calls)
    finally:
        warm_store.close()

    def cold() -> Mapping[str, float]:
        store = backend.open(place)
        try:
            backend.connect(store)
            return {"ms": _read_once(store, first, count)}
        finally:
            store.close()

    fresh = ctx.measure(f"{group}: read_from(last {count}), new store object", cold, runs=calls)
    ctx.add(Figure("baseline.read_tail_ms", f"{floors.read_label} ({count} lines)", "ms", floor_ms,
                   group=group, is_baseline=True))
    target = READ_MS
    how = "" if backend.database else "seeks through the sidecar index (store/jsonl_seek.py)"
    for key, what, samples in (("read_from.warm_ms", "warm store", warm),
                               ("read_from.ms", "new store object", fresh)):
        stat = Stat.of(samples["ms"])
        label = f"read_from(last {count} of {len(persisted.events):,} events), {what}"
        ctx.add(Figure(key, label, "ms", stat, group=group, baseline="read floor",
                       ratio=stat.median / max(floor_ms.median, 1e-9), target=target, note=how))


# -- fork --------------------------------------------------------------------------------------


def fork_boundary(events: Sequence[Event], turns: int) -> int:
    """The seq of the ``turn/end`` of turn ``max(1, turns // 2)``."""
    wanted = max(1, turns // 2)
    for event in events:
        if event.type == TURN_END and event.data.get("turn") == wanted:
            return event.seq
    raise ValueError(f"no turn/end of turn {wanted} in the persisted session")


def _fork_once(backend: Backend, store: Store, place: str, boundary: int, child_id: str) -> dict[str, float]:
    mark = backend.mark(place)
    start = time.perf_counter()
    live = store.fork(SESSION_ID, boundary, child_id)
    live.close()
    elapsed = time.perf_counter() - start
    return {"ms": elapsed * 1e3, "bytes": backend.written(place, mark)}


def _fork(ctx: Context, backend: Backend, persisted: _Persisted, floors: Floors) -> None:
    place, group = persisted.place, backend.name
    boundary = fork_boundary(persisted.events, ctx.options.turns)
    children: list[str] = []

    def cold() -> Mapping[str, float]:
        store = backend.open(place)
        children.append(f"fork-cold-{len(children)}")
        try:
            backend.connect(store)
            return _fork_once(backend, store, place, boundary, children[-1])
        finally:
            store.close()

    cold_samples = ctx.measure(f"{group}: fork at seq {boundary}, new store object", cold)
    warm_store = backend.open(place)

    def warm() -> Mapping[str, float]:
        children.append(f"fork-warm-{len(children)}")
        return _fork_once(backend, warm_store, place, boundary, children[-1])

    try:
        backend.connect(warm_store)
        warm_samples = ctx.measure(f"{group}: fork at seq {boundary}, warm store", warm)
    finally:
        warm_store.close()
    written = int(statistics.median(cold_samples["bytes"]))

    def floor() -> Mapping[str, float]:
        start = time.perf_counter()
        floors.commit(written)
        return {"ms": (time.perf_counter() - start) * 1e3}

    floor_ms = Stat.of(ctx.measure(f"{group} baseline: {floors.commit_label}", floor)["ms"])
    label = floors.commit_label.replace("the fork's bytes", f"{written:,} bytes")
    ctx.add(Figure("baseline.fork_write_ms", label, "ms", floor_ms, group=group, is_baseline=True))
    full_copy = _full_copy_bytes(ctx, backend, place, children[0])
    for key, what, samples, target in (
        ("fork.ms", "fork at turn T/2 + persist (new store object: JSONL resumes the parent from its "
         "checkpoint, databases validate the prefix)", cold_samples, COLD_FORK_MS),
        ("fork.warm_ms", "fork at turn T/2 + persist (store that read the parent)", warm_samples, FORK_MS),
    ):
        stat = Stat.of(samples["ms"])
        ctx.add(Figure(key, what, "ms", stat, group=group, baseline=floors.commit_name,
                       ratio=stat.median / max(floor_ms.median, 1e-9), target=target))
    size = Stat.of(cold_samples["bytes"])
    ctx.add(Figure("fork.bytes", f"fork: bytes written ({backend.written_label})", "bytes", size,
                   group=group, baseline="full copy", target=None if backend.database else FORK_BYTES,
                   ratio=None if not full_copy else size.median / full_copy,
                   note=backend.written_note))


def _full_copy_bytes(ctx: Context, backend: Backend, place: str, child_id: str) -> int | None:
    """Bytes a full copy of the fork's prefix takes (``materialize``), measured once."""
    store = backend.open(place)
    try:
        backend.connect(store)
        mark = backend.mark(place)
        start = time.perf_counter()
        store.materialize(child_id)
        elapsed = time.perf_counter() - start
        path = store.locate(SessionHeader(id=child_id, cwd=CWD))
        copy = os.path.getsize(path) if path is not None else backend.written(place, mark)
    finally:
        store.close()
    what = ("a fork's transcript as a full copy" if path is not None
            else f"a fork's prefix copied into its own rows ({backend.written_label})")
    ctx.add(Figure("baseline.full_copy_bytes", f"{what} (materialize, once)",
                   "bytes", Stat.of([copy]), group=backend.name, is_baseline=True,
                   note=f"took {elapsed * 1e3:,.0f} ms"))
    return copy


SUITE: Final = Suite("store", "record + persist, cold load, read_from, fork and bytes on disk per backend",
                     run, child)
