"""Physical baselines of the ``store`` suite: what persisting the same bytes costs without agentlog.

``orjson.dumps`` of the events, ``zstandard`` per turn, writing the same bytes with one fsync
per turn, and a ``FileSystem`` that times the store's own fsyncs. Measured in the same run as
the phases of ``benchmarks/store.py`` so that their ratios mean something.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson
import zstandard

from agentlog.core.events import TURN_END, Event
from agentlog.core.jsonvalue import thaw
from agentlog.errors import AgentlogError
from agentlog.store.fs import FileSystem
from benchmarks.runner import Context, Figure, Stat
from benchmarks.store_backends import Backend

__all__ = ["ZSTD_LEVEL", "Floor", "TimedFileSystem", "compressor", "json_lines", "measure_floor",
           "physical_floor", "plain_content", "split_turns", "time_compress", "time_dumps", "time_write"]

ZSTD_LEVEL: Final = 3
"""The level agentlog's JSONL store (and Node's zstd) uses."""


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
class Floor:
    """Seconds of the physical baselines of one backend (per measured run)."""

    dumps: list[float]
    compress: list[float] | None
    write: list[float]

    def total(self) -> list[float]:
        parts = [self.dumps, self.write] + ([self.compress] if self.compress is not None else [])
        return [sum(values) for values in zip(*parts, strict=True)]


def plain_content(backend: Backend, place: str, events: Sequence[Event], session_id: str) -> bytes:
    """The stored log as uncompressed JSONL (the raw artifact, or the events as JSON lines)."""
    store = backend.open(place)
    try:
        artifact = store.read_raw(session_id)
    except AgentlogError:
        artifact = None
    finally:
        store.close()
    if artifact is not None:
        return artifact.content.encode("utf-8", "surrogatepass")
    return b"".join(line + b"\n" for line in json_lines(events))


def json_lines(events: Sequence[Event]) -> list[bytes]:
    return [orjson.dumps(thaw(event.to_wire())) for event in events]


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


def compressor() -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True, write_content_size=False)


def time_dumps(wires: Sequence[object]) -> float:
    """Seconds of ``orjson.dumps`` of every wire event."""
    start = time.perf_counter()
    for wire in wires:
        orjson.dumps(wire)
    return time.perf_counter() - start


def time_compress(batches: Sequence[bytes], zstd: zstandard.ZstdCompressor) -> float:
    """Seconds of zstd (one frame) of each turn's bytes."""
    start = time.perf_counter()
    for batch in batches:
        zstd.compress(batch)
    return time.perf_counter() - start


def time_write(chunks: Sequence[bytes], target: Path) -> float:
    """Seconds to append ``chunks`` to a new file at ``target``, one fsync after each (then removed)."""
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
    return elapsed


def physical_floor(events: Sequence[Event], target: Path) -> dict[str, float]:
    """One run of the JSONL zstd floor of ``events``: ``dumps_s``, ``compress_s``, ``write_s`` and
    their sum ``floor_s`` (the peers suite measures it in its record child, beside agentlog)."""
    wires = [thaw(event.to_wire()) for event in events]
    plain = b"".join(orjson.dumps(wire) + b"\n" for wire in wires)
    batches = split_turns(plain)
    zstd = compressor()
    chunks = [zstd.compress(batch) for batch in batches]
    parts = {"dumps_s": time_dumps(wires), "compress_s": time_compress(batches, zstd),
             "write_s": time_write(chunks, target)}
    return {**parts, "floor_s": sum(parts.values())}


def measure_floor(ctx: Context, backend: Backend, workdir: Path, events: Sequence[Event],
                  plain: bytes) -> Floor:
    """Measure and report the physical floor of persisting ``events`` (``plain``: their JSONL)."""
    wires = [thaw(event.to_wire()) for event in events]
    batches = split_turns(plain)
    floor = Floor(ctx.measure(f"{backend.name} baseline: orjson.dumps of every event",
                              lambda: {"s": time_dumps(wires)})["s"], None, [])
    chunks = batches
    if backend.encoding == "zstd":
        zstd = compressor()
        floor.compress = ctx.measure(f"{backend.name} baseline: zstandard per turn",
                                     lambda: {"s": time_compress(batches, zstd)})["s"]
        chunks = [zstd.compress(batch) for batch in batches]
    target = workdir / "floor.bin"
    floor.write = ctx.measure(f"{backend.name} baseline: write the same bytes, fsync per turn",
                              lambda: {"s": time_write(chunks, target)})["s"]
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
