"""The ``store`` suite: the standard workload persisted, loaded cold, forked, and sized per backend.

Baselines measured in the same run: ``orjson.dumps``/``orjson.loads`` of the same events,
``zstandard`` compression of the same bytes, and writing the same bytes with one fsync per
turn. Cold loads run in fresh subprocesses so that their peak RSS is their own.
"""

from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson
import zstandard

from agentlog.bench.runner import (
    Context,
    Figure,
    Stat,
    Suite,
    Target,
    current_rss,
    directory_bytes,
    peak_rss,
    run_child,
)
from agentlog.bench.workload import record_workload
from agentlog.errors import AgentlogError
from agentlog.events import TURN_END, Event
from agentlog.header import SessionHeader
from agentlog.jsonvalue import thaw
from agentlog.session import Session
from agentlog.store.base import Store
from agentlog.store.fs import FileSystem
from agentlog.store.urls import open_store

__all__ = ["BACKENDS", "SUITE", "Backend", "TimedFileSystem", "child", "run"]

SESSION_ID: Final = "bench-workload"
CWD: Final = "/bench/workload"
ZSTD_LEVEL: Final = 3
"""The level agentlog's JSONL store (and Node's zstd) uses."""

PERSIST_RATE: Final = Target(">=", 100_000)
LOAD_SECONDS: Final = Target("<=", 1.0)
LOAD_RATIO: Final = Target("<=", 3.0)
FORK_MS: Final = Target("<=", 5.0)
FORK_BYTES: Final = Target("<=", 4096)

DSH_BYTES: Final = {("zstd", True): "5.2 MB", ("zstd", False): "6.4 MB",
                    ("raw", True): "16.0 MB", ("raw", False): "36.9 MB"}
"""DSH's own sizes at T = 1000 (WORKLOAD.md), quoted beside ours; not measured here."""


@dataclass(frozen=True, slots=True)
class Backend:
    """A store configuration the suite can measure; sqlite and postgres add entries later."""

    name: str
    encoding: str
    url: Callable[[Path, bool], str]
    open: Opener
    """``open(root, pack_chunks, fs)``; ``fs`` routes every write and fsync (for timing)."""


Opener = Callable[[Path, bool, FileSystem | None], Store]


def _jsonl(compression: str) -> tuple[Callable[[Path, bool], str], Opener]:
    def url(root: Path, pack: bool) -> str:
        return f"jsonl://{root}?compression={compression}&pack_chunks={'true' if pack else 'false'}"

    def open_(root: Path, pack: bool, fs: FileSystem | None) -> Store:
        from agentlog.store.jsonl import JsonlStore

        return JsonlStore(root, compression="zstd" if compression == "zstd" else "none",
                          pack_chunks=pack, fs=fs)

    return url, open_


BACKENDS: Final = {
    backend.name: backend for backend in (
        Backend("jsonl-zstd", "zstd", *_jsonl("zstd")),
        Backend("jsonl-raw", "raw", *_jsonl("none")),
    )
}


class TimedFileSystem(FileSystem):
    """A ``FileSystem`` that adds up the time spent in fsync (files and directories)."""

    def __init__(self) -> None:
        self.fsync_seconds = 0.0
        self.fsyncs = 0
        self._guard = threading.Lock()

    def _count(self, start: float) -> None:
        elapsed = time.perf_counter() - start
        with self._guard:
            self.fsync_seconds += elapsed
            self.fsyncs += 1

    def fsync(self, fd: int) -> None:
        start = time.perf_counter()
        try:
            super().fsync(fd)
        finally:
            self._count(start)

    def fsync_dir(self, path: str) -> None:
        start = time.perf_counter()
        try:
            super().fsync_dir(path)
        finally:
            self._count(start)


@dataclass(slots=True)
class _Persisted:
    """The last record + persist run: where it is, what it logged, and how long runs took."""

    root: Path
    header: SessionHeader
    events: Sequence[Event]
    samples: dict[str, list[float]]


@dataclass(slots=True)
class _Floor:
    """Seconds of the physical baselines of one backend (per measured run)."""

    dumps: list[float]
    compress: list[float] | None
    write: list[float]

    def total(self) -> list[float]:
        parts = [self.dumps, self.write] + ([self.compress] if self.compress is not None else [])
        return [sum(values) for values in zip(*parts, strict=True)]


def run(ctx: Context) -> None:
    """Every store figure for each backend of ``ctx.options.backends`` (default: all)."""
    names = ctx.options.backends or tuple(BACKENDS)
    unknown = [name for name in names if name not in BACKENDS]
    if unknown:
        raise ValueError(f"unknown backend(s) {', '.join(unknown)} (known: {', '.join(BACKENDS)})")
    for name in names:
        _run_backend(ctx, BACKENDS[name])
    ctx.note("Persist: store.start(header), the workload recorded with live.flush() after every "
             "turn/end (returns after fsync), live.close(). Physical floor = orjson.dumps of the events "
             "+ zstandard compression per turn (zstd) + writing the same bytes with one fsync per turn.")
    ctx.note("Cold load = store.load(id), then Session.restore(id, events, header), then "
             "derive_messages(), in a fresh process (imports done first; OS page cache warm).")
    ctx.note("Fork: store.fork(id, boundary=turn/end of turn T/2, child_id) then close(); cold = a new "
             "store object per fork, warm = one store object that already read the parent.")
    ctx.note("Sizes and fork bytes are file bytes under the store root (transcript, lock and fork-marker "
             "files); DSH sizes are quoted from WORKLOAD.md (T = 1000), not measured here.")


def _run_backend(ctx: Context, backend: Backend) -> None:
    workdir = ctx.workdir / backend.name
    workdir.mkdir()
    try:
        persisted = ctx.attempt(f"{backend.name} persist", lambda: _persist(ctx, backend, workdir))
        if persisted is None:
            return
        plain = ctx.attempt(f"{backend.name} raw content", lambda: _plain_content(backend, persisted))
        floor = None
        if plain is not None:
            floor = ctx.attempt(f"{backend.name} baselines",
                                lambda: _floor(ctx, backend, workdir, persisted, plain))
        _persist_figures(ctx, backend, persisted, floor)
        ctx.attempt(f"{backend.name} sizes", lambda: _sizes(ctx, backend, workdir, persisted, plain))
        if plain is not None:
            ctx.attempt(f"{backend.name} load", lambda: _load(ctx, backend, workdir, persisted, plain))
        ctx.attempt(f"{backend.name} fork", lambda: _fork(ctx, backend, workdir, persisted))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# -- record + persist --------------------------------------------------------------------------


def persist_once(backend: Backend, root: Path, turns: int, *, pack: bool = True,
                 fs: FileSystem | None = None) -> tuple[float, Session, SessionHeader]:
    """Seconds to record ``turns`` turns into a new live session, durable at every ``turn/end``."""
    store = backend.open(root, pack, fs)
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


def _persist(ctx: Context, backend: Backend, workdir: Path) -> _Persisted:
    kept: list[_Persisted] = []

    def once() -> Mapping[str, float]:
        if kept:
            shutil.rmtree(kept[-1].root)
        root = workdir / f"persist-{len(kept)}"
        fs = TimedFileSystem()
        elapsed, session, header = persist_once(backend, root, ctx.options.turns, fs=fs)
        kept[:] = [_Persisted(root, header, session.events, {})]
        return {"s": elapsed, "events": session.seq, "fsync_s": fs.fsync_seconds, "fsyncs": fs.fsyncs}

    samples = ctx.measure(f"{backend.name}: record + persist, flush at every turn/end", once)
    kept[-1].samples = samples
    return kept[-1]


def _persist_figures(ctx: Context, backend: Backend, persisted: _Persisted, floor: _Floor | None) -> None:
    samples = persisted.samples
    count = samples["events"][-1]
    rate = Stat.of([count / seconds for seconds in samples["s"]])
    total = None if floor is None else statistics.median(floor.total())
    ctx.add(Figure("persist.events_per_s", "record + persist, durable per turn", "events/s", rate,
                   group=backend.name, baseline="physical floor",
                   ratio=None if total is None else statistics.median(samples["s"]) / total,
                   target=PERSIST_RATE))
    share = Stat.of([100 * f / s for f, s in zip(samples["fsync_s"], samples["s"], strict=True)])
    write = None if floor is None else statistics.median(floor.write)
    ctx.add(Figure("persist.fsync_share", f"share of time in fsync ({samples['fsyncs'][-1]:.0f} fsyncs)",
                   "%", share, group=backend.name, baseline="write + fsync floor",
                   ratio=None if write is None else statistics.median(samples["fsync_s"]) / write))


# -- physical baselines ------------------------------------------------------------------------


def _plain_content(backend: Backend, persisted: _Persisted) -> bytes:
    """The stored log as uncompressed JSONL (the raw artifact, or the events as JSON lines)."""
    store = backend.open(persisted.root, True, None)
    try:
        artifact = store.read_raw(SESSION_ID)
    except AgentlogError:
        artifact = None
    finally:
        store.close()
    if artifact is not None:
        return artifact.content.encode("utf-8", "surrogatepass")
    return b"".join(orjson.dumps(thaw(event.to_wire())) + b"\n" for event in persisted.events)


def split_turns(plain: bytes) -> list[bytes]:
    """JSONL content cut after every ``turn/end`` line: the durable batch of each turn."""
    batches: list[bytes] = []
    start = 0
    for line in plain.splitlines(keepends=True):
        if line.startswith(b'{"type":"' + TURN_END.encode() + b'"'):
            end = plain.index(line, start) + len(line)
            batches.append(plain[start:end])
            start = end
    if start < len(plain):
        batches.append(plain[start:])
    return batches


def _compressor() -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True, write_content_size=False)


def _floor(ctx: Context, backend: Backend, workdir: Path, persisted: _Persisted, plain: bytes) -> _Floor:
    wires = [thaw(event.to_wire()) for event in persisted.events]
    batches = split_turns(plain)

    def dumps() -> Mapping[str, float]:
        start = time.perf_counter()
        for wire in wires:
            orjson.dumps(wire)
        return {"s": time.perf_counter() - start}

    floor = _Floor(ctx.measure(f"{backend.name} baseline: orjson.dumps of every event", dumps)["s"], None, [])
    chunks = batches
    if backend.encoding == "zstd":
        compressor = _compressor()

        def compress() -> Mapping[str, float]:
            start = time.perf_counter()
            for batch in batches:
                compressor.compress(batch)
            return {"s": time.perf_counter() - start}

        floor.compress = ctx.measure(f"{backend.name} baseline: zstandard per turn", compress)["s"]
        chunks = [compressor.compress(batch) for batch in batches]
    target = workdir / "floor.bin"

    def write() -> Mapping[str, float]:
        start = time.perf_counter()
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        try:
            for chunk in chunks:
                os.write(fd, chunk)
                os.fsync(fd)
        finally:
            os.close(fd)
        elapsed = time.perf_counter() - start
        os.unlink(target)
        return {"s": elapsed}

    floor.write = ctx.measure(f"{backend.name} baseline: write the same bytes, fsync per turn", write)["s"]
    group = backend.name
    ctx.add(Figure("baseline.dumps_s", "orjson.dumps of every event", "s", Stat.of(floor.dumps),
                   group=group, is_baseline=True))
    if floor.compress is not None:
        ctx.add(Figure("baseline.compress_s", f"zstandard (level {ZSTD_LEVEL}) of each turn's bytes", "s",
                       Stat.of(floor.compress), group=group, is_baseline=True))
    ctx.add(Figure("baseline.write_fsync_s", f"write the same {sum(map(len, chunks)):,} bytes, one fsync "
                   f"per turn ({len(chunks)} fsyncs)", "s", Stat.of(floor.write), group=group,
                   is_baseline=True))
    ctx.add(Figure("baseline.physical_s", "physical floor (sum of the above)", "s", Stat.of(floor.total()),
                   group=group, is_baseline=True))
    return floor


# -- sizes -------------------------------------------------------------------------------------


def _sizes(ctx: Context, backend: Backend, workdir: Path, persisted: _Persisted, plain: bytes | None) -> None:
    json_bytes = sum(len(orjson.dumps(thaw(event.to_wire()))) + 1 for event in persisted.events)
    group = backend.name
    ctx.add(Figure("baseline.json_lines_bytes", "the events as compact JSON lines", "bytes",
                   Stat.of([json_bytes]), group=group, is_baseline=True))
    if backend.encoding == "zstd" and plain is not None:
        ctx.add(Figure("baseline.zstd_one_frame_bytes", "the packed content as one zstd frame", "bytes",
                       Stat.of([len(_compressor().compress(plain))]), group=group, is_baseline=True))
    unpacked_root = workdir / "unpacked"
    ctx.say(f"{backend.name}: record + persist once more, unpacked chunks (for its size)")
    persist_once(backend, unpacked_root, ctx.options.turns, pack=False)
    for key, packed, root in (("size.packed_bytes", True, persisted.root),
                              ("size.unpacked_bytes", False, unpacked_root)):
        size = directory_bytes(root)
        dsh = DSH_BYTES[(backend.encoding, packed)] if ctx.options.turns == 1000 else ""
        ctx.add(Figure(key, f"bytes on disk, {backend.encoding} {'packed' if packed else 'unpacked'}",
                       "bytes", Stat.of([size]), group=group, baseline="JSON lines",
                       ratio=size / json_bytes, note=f"DSH {dsh}" if dsh else ""))
    shutil.rmtree(unpacked_root, ignore_errors=True)


# -- cold load (in fresh subprocesses) -----------------------------------------------------------


def _load(ctx: Context, backend: Backend, workdir: Path, persisted: _Persisted, plain: bytes) -> None:
    raw_path = workdir / "raw.jsonl"
    raw_path.write_bytes(plain)
    url = backend.url(persisted.root, True)
    load_spec = {"suite": "store", "kind": "load", "url": url, "session": SESSION_ID}
    loads_spec = {"suite": "store", "kind": "loads", "path": str(raw_path)}
    load = ctx.measure(f"{backend.name}: cold load + derive_messages() in a fresh process",
                       lambda: run_child(load_spec))
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
    """Measurements that need a fresh process: ``load`` (a cold store load) and ``loads``."""
    if spec["kind"] == "load":
        return _child_load(str(spec["url"]), str(spec["session"]))
    if spec["kind"] == "loads":
        return _child_loads(Path(spec["path"]))
    raise ValueError(f"unknown store child measurement {spec['kind']!r}")


def _child_load(url: str, session_id: str) -> dict[str, Any]:
    store = open_store(url)
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


# -- fork --------------------------------------------------------------------------------------


def fork_boundary(events: Sequence[Event], turns: int) -> int:
    """The seq of the ``turn/end`` of turn ``max(1, turns // 2)``."""
    wanted = max(1, turns // 2)
    for event in events:
        if event.type == TURN_END and event.data.get("turn") == wanted:
            return event.seq
    raise ValueError(f"no turn/end of turn {wanted} in the persisted session")


def _fork_once(store: Store, root: Path, boundary: int, child_id: str) -> dict[str, float]:
    before = directory_bytes(root)
    start = time.perf_counter()
    live = store.fork(SESSION_ID, boundary, child_id)
    live.close()
    elapsed = time.perf_counter() - start
    return {"ms": elapsed * 1e3, "bytes": directory_bytes(root) - before}


def _fork(ctx: Context, backend: Backend, workdir: Path, persisted: _Persisted) -> None:
    root, group = persisted.root, backend.name
    boundary = fork_boundary(persisted.events, ctx.options.turns)
    children: list[str] = []

    def cold() -> Mapping[str, float]:
        store = backend.open(root, True, None)
        children.append(f"fork-cold-{len(children)}")
        try:
            return _fork_once(store, root, boundary, children[-1])
        finally:
            store.close()

    cold_samples = ctx.measure(f"{backend.name}: fork at seq {boundary}, new store object", cold)
    warm_store = backend.open(root, True, None)

    def warm() -> Mapping[str, float]:
        children.append(f"fork-warm-{len(children)}")
        return _fork_once(warm_store, root, boundary, children[-1])

    try:
        warm_samples = ctx.measure(f"{backend.name}: fork at seq {boundary}, warm store", warm)
    finally:
        warm_store.close()
    written = int(statistics.median(cold_samples["bytes"]))
    floor_dir = workdir / "fork-floor"

    def floor() -> Mapping[str, float]:
        start = time.perf_counter()
        floor_dir.mkdir()
        fd = os.open(floor_dir / "child", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"x" * written)
            os.fsync(fd)
        finally:
            os.close(fd)
        dir_fd = os.open(floor_dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        elapsed = time.perf_counter() - start
        shutil.rmtree(floor_dir)
        return {"ms": elapsed * 1e3}

    floor_ms = Stat.of(ctx.measure(f"{backend.name} baseline: create a file of {written} bytes durably",
                                   floor)["ms"])
    ctx.add(Figure("baseline.fork_write_ms", f"new directory + file of {written:,} bytes, fsync both", "ms",
                   floor_ms, group=group, is_baseline=True))
    full_copy = _full_copy_bytes(ctx, backend, root, children[0])
    for key, what, samples in (("fork.ms", "fork at turn T/2 + persist (new store object)", cold_samples),
                               ("fork.warm_ms", "fork at turn T/2 + persist (store that read the parent)",
                                warm_samples)):
        stat = Stat.of(samples["ms"])
        ctx.add(Figure(key, what, "ms", stat, group=group, baseline="create-file floor",
                       ratio=stat.median / max(floor_ms.median, 1e-9), target=FORK_MS))
    size = Stat.of(cold_samples["bytes"])
    ctx.add(Figure("fork.bytes", "fork: bytes written (growth of the store directory)", "bytes", size,
                   group=group, baseline="full copy", target=FORK_BYTES,
                   ratio=None if not full_copy else size.median / full_copy))


def _full_copy_bytes(ctx: Context, backend: Backend, root: Path, child_id: str) -> int | None:
    """Bytes a DSH-compatible full copy of the fork's prefix takes (``materialize``), measured once."""
    store = backend.open(root, True, None)
    materialize = getattr(store, "materialize", None)
    try:
        if materialize is None:
            return None
        start = time.perf_counter()
        materialize(child_id)
        elapsed = time.perf_counter() - start
        path = store.locate(SessionHeader(id=child_id, cwd=CWD))
        if path is None:
            return None
        copy = os.path.getsize(path)
    finally:
        store.close()
    ctx.add(Figure("baseline.full_copy_bytes", "a fork's transcript as a full copy (materialize, once)",
                   "bytes", Stat.of([copy]), group=backend.name, is_baseline=True,
                   note=f"took {elapsed * 1e3:,.0f} ms"))
    return copy


SUITE: Final = Suite("store", "record + persist, cold load, fork and bytes on disk per backend", run, child)
