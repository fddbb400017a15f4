"""agentlog's side of the ``peers`` suite: the store suite's record + persist, load and fork.

The same measurements as the store suite (``benchmarks/store.py``), run in the peers' child
protocol so that agentlog and every peer are timed the same way in one run.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from agentlog.core.events import TURN_END
from agentlog.core.header import SessionHeader
from agentlog.core.session import Session
from agentlog.store.urls import open_store
from benchmarks.peer_common import SESSION_ID, PeerSystem
from benchmarks.runner import current_rss, directory_bytes, peak_rss
from benchmarks.store import CWD, fork_boundary
from benchmarks.store_floor import physical_floor
from benchmarks.workload import generation_seconds, record_workload

__all__ = ["SYSTEMS", "fork", "load", "record"]

URLS: Final = {
    "jsonl-zstd": "jsonl://{root}?compression=zstd",
    "sqlite": "sqlite://{root}/agentlog.db",
}


def _url(system: PeerSystem, root: Path) -> str:
    return URLS[system.variant].format(root=root)


def _persist(url: str, turns: int) -> tuple[float, Session]:
    """Seconds to record ``turns`` turns durably at every ``turn/end``, and the session recorded."""
    store = open_store(url)
    try:
        start = time.perf_counter()
        live = store.start(SessionHeader(id=SESSION_ID, cwd=CWD))
        record_workload(live.session, turns, flush=live.flush)
        live.close()
        elapsed = time.perf_counter() - start
    finally:
        store.close()
    return elapsed, live.session


def record(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Record + persist ``turns`` turns into ``workdir/store`` (after a T = 1 warm-up elsewhere);
    for JSONL zstd, then the physical floor of the same events (``floor_*``: orjson.dumps, zstd
    per turn, the same bytes written with one fsync per turn)."""
    if options.get("warmup"):
        scratch = workdir / "warmup"
        scratch.mkdir()
        _persist(_url(system, scratch), 1)
        shutil.rmtree(scratch)
    root = workdir / "store"
    root.mkdir()
    seconds, session = _persist(_url(system, root), turns)
    result = {"s": seconds, "bytes": directory_bytes(root), "items": session.seq,
              "generation_s": generation_seconds(turns)}
    if system.variant == "jsonl-zstd":  # the physical floor of the same stream, in the same process
        result.update({f"floor_{key}": value
                       for key, value in physical_floor(session.events, workdir / "floor.bin").items()})
    return result


def _load(url: str) -> tuple[float, Session]:
    store = open_store(url)
    try:
        start = time.perf_counter()
        inspection = store.load(SESSION_ID)
        session = Session.restore(SESSION_ID, inspection.events, inspection.header)
        session.derive_messages()
        elapsed = time.perf_counter() - start
    finally:
        store.close()
    return elapsed, session


def _warm(system: PeerSystem, workdir: Path, fork: bool) -> None:
    """Run the phase's code once on a scratch T = 2 store (imports and lazy set-up), discarded."""
    scratch = workdir / "warmup-child"
    scratch.mkdir()
    url = _url(system, scratch)
    _persist(url, 2)
    _seconds, session = _load(url)
    if fork:
        store = open_store(url)
        try:
            store.fork(SESSION_ID, fork_boundary(session.events, 2), "warmup-fork").close()
        finally:
            store.close()
    shutil.rmtree(scratch)


def load(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Cold load + ``Session.restore`` + ``derive_messages()`` of the recorded session."""
    if options.get("warmup"):
        _warm(system, workdir, fork=False)
    before = current_rss()
    seconds, session = _load(_url(system, workdir / "store"))
    return {"load_s": seconds, "rss_before": before, "peak_rss": peak_rss(), "items": len(session.events)}


def fork(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Fork the recorded session at the ``turn/end`` of turn T/2 with a new store object."""
    if options.get("warmup"):
        _warm(system, workdir, fork=True)
    root = workdir / "store"
    _seconds, session = _load(_url(system, root))
    boundary = fork_boundary(session.events, turns)
    size = directory_bytes(root)
    store = open_store(_url(system, root))
    try:
        start = time.perf_counter()
        live = store.fork(SESSION_ID, boundary, f"fork-{options.get('run', 0)}")
        live.close()
        seconds = time.perf_counter() - start
    finally:
        store.close()
    seeded = live.session.events
    if len(seeded) <= boundary or seeded[boundary].type != TURN_END:
        raise RuntimeError(f"the fork does not hold the prefix [0, {boundary}]")
    return {"fork_s": seconds, "fork_bytes": directory_bytes(root) - size, "fork_items": boundary + 1}


def _system(variant: str, label: str) -> PeerSystem:
    return PeerSystem(
        name=f"agentlog-{variant}", label=label, variant=variant, is_agentlog=True,
        stores="every event: messages, tool calls and results, 40 stream chunks a step (packed), "
               "the request header, turn and step markers",
        fork_kind="shared prefix", requires=(), record=record, load=load, fork=fork,
    )


SYSTEMS: Final = {
    system.name: system for system in (
        _system("jsonl-zstd", "agentlog, JSONL store, zstd frames"),
        _system("sqlite", "agentlog, SQLite store"),
    )
}
