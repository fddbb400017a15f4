"""``viewer`` suite: how fast ``agentlog serve`` shows a large session and a large store.

First screen = one HTTP GET of the session page through the real app (in-process ASGI client),
from a store object that has never read the session: read, validate, index and render the
first turns and surface messages. Target: <= 1 s for the T = 1000 session (181,001 events).
Baseline: ``orjson.loads`` of the session's JSON lines, in the same fresh process (each run of
the session pages is one). Also: the same page
once cached, a scroll (the next turns), an event-inspector page in the middle, and the
sessions page of a store of many small sessions (cold, then once every summary is read).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from agentlog.core.header import SessionHeader
from agentlog.store.urls import open_store
from benchmarks.runner import TIMES, Context, Figure, Stat, Suite, Target, run_child
from benchmarks.workload import record_workload

__all__ = ["SUITE"]

FIRST_SCREEN: Final = Target("<=", 1.0)
SESSION_ID: Final = "viewer-bench"


def _client(store: Any) -> Any:
    from starlette.testclient import TestClient

    from agentlog.web import create_app

    return TestClient(create_app(store, index_in_background=False), base_url="http://127.0.0.1")


def _get(client: Any, url: str) -> float:
    started = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise RuntimeError(f"GET {url}: {response.status_code} {response.text[:300]}")
    return elapsed


def _build(root: Path, turns: int) -> str:
    url = f"jsonl://{root}"
    with open_store(url) as store, store.start(SessionHeader(id=SESSION_ID, cwd="/bench")) as live:
        record_workload(live.session, turns)
        live.flush()
    return url


def _small_store(root: Path, sessions: int) -> str:
    url = f"sqlite://{root / 'many.db'}"
    with open_store(url) as store:
        for number in range(sessions):
            with store.start(SessionHeader(id=f"s{number:05d}", cwd="/bench",
                                           created_at=1_700_000_000_000 + number),
                             check_invariants=False) as live:
                live.session.append("user/message", {"id": f"m{number}", "role": "user",
                                                     "source": {"kind": "user"},
                                                     "content": [{"type": "text", "text": f"task {number}"}]},
                                    surface_op="append")
    return url


def _page_times(url: str) -> dict[str, float]:
    """One run in a fresh process: the lines parsed (the baseline), the store's cold read, then the
    pages from another fresh store object, first screen first."""
    with open_store(url, create=False) as store:
        raw = store.read_raw(SESSION_ID)
    lines = raw.content.encode().splitlines() if raw is not None else []
    started = time.perf_counter()
    for line in lines:
        orjson.loads(line)
    loads = time.perf_counter() - started
    del lines, raw
    with open_store(url, create=False) as store:
        started = time.perf_counter()
        store.inspect(SESSION_ID)
        inspect = time.perf_counter() - started
    with open_store(url, create=False) as store, _client(store) as client:
        first = _get(client, f"/s/{SESSION_ID}")
        cached = _get(client, f"/s/{SESSION_ID}")
        scroll = _get(client, f"/s/{SESSION_ID}?fragment=transcript&turn=500")
        events = _get(client, f"/events/{SESSION_ID}?from=90000")
    return {"loads": loads, "inspect": inspect, "first": first, "cached": cached, "scroll": scroll,
            "events": events}


def child(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``--child`` entry: the session pages, timed in this fresh process."""
    return _page_times(str(spec["url"]))


def _session_pages(ctx: Context, url: str) -> None:
    def once() -> dict[str, float]:
        return {key: float(value) for key, value in run_child({"suite": "viewer", "url": url}).items()}

    samples = ctx.measure("session page of the workload session (each run a fresh process)", once)
    lines_s = Stat.of(samples["loads"])
    first = Stat.of(samples["first"])
    floor = max(lines_s.median, 1e-9)
    ctx.add(Figure("loads_s", "orjson.loads of the session's JSON lines", "s", lines_s, group="baseline",
                   is_baseline=True))
    ctx.add(Figure("first_screen_s", f"session page, first screen (T = {ctx.options.turns}), fresh store",
                   "s", first, group="session", baseline="orjson.loads of the lines",
                   ratio=first.median / floor, target=FIRST_SCREEN if ctx.options.turns >= 1000 else None))
    for key, label in (("inspect", "of which the store's cold read (store.inspect, fresh store)"),
                       ("cached", "the same page again (session cached, unchanged)"),
                       ("scroll", "scrolling: the next ten turns (a fragment)"),
                       ("events", "event inspector page in the middle of the log")):
        stat = Stat.of(samples[key])
        ctx.add(Figure(f"{key}_s", label, "s", stat, group="session", baseline="orjson.loads of the lines",
                       ratio=stat.median / floor))
    ctx.note(f"first screen / orjson.loads of the lines = {first.median / floor:.2f}{TIMES}")


def _sessions_page(ctx: Context, url: str, sessions: int) -> None:
    def once() -> dict[str, float]:
        with open_store(url, create=False) as store:
            started = time.perf_counter()
            store.listing()
            listing = time.perf_counter() - started
        with open_store(url, create=False) as store, _client(store) as client:
            cold = _get(client, "/")
            viewer = client.app.app.state.viewer
            started = time.perf_counter()
            for snap in viewer.listing().snapshots:
                viewer.summarize_one(snap.header, snap.revision)
            read_all = time.perf_counter() - started
            sorted_page = _get(client, "/?sort=title&order=asc&q=task%201")
        return {"listing": listing, "cold": cold, "read_all": read_all, "sorted": sorted_page}

    samples = ctx.measure(f"sessions page of {sessions:,} sessions", once)
    listing = Stat.of(samples["listing"])
    floor = max(listing.median, 1e-9)
    ctx.add(Figure("listing_s", f"store.listing() of {sessions:,} sessions (headers only)", "s", listing,
                   group="baseline", is_baseline=True))
    for key, label in (("cold", f"sessions page, first page of {sessions:,} (fresh store)"),
                       ("read_all", f"reading every summary (the background indexer's work), {sessions:,}"),
                       ("sorted", "filter + sort by title over all of them, once read")):
        stat = Stat.of(samples[key])
        ctx.add(Figure(f"{key}_s", label, "s", stat, group="sessions", baseline="store.listing()",
                       ratio=stat.median / floor))


def run(ctx: Context) -> None:
    """Build the workload session (JSONL zstd) and a store of small sessions; time the pages."""
    try:
        import starlette  # noqa: F401
    except ImportError:
        ctx.note("the web extra is not installed: pip install 'agentlog[web]'")
        return
    turns = ctx.options.turns
    root = ctx.workdir / "viewer"
    root.mkdir(parents=True, exist_ok=True)
    ctx.say(f"recording the T = {turns} workload session")
    url = _build(root / "jsonl", turns)
    ctx.attempt("session", lambda: _session_pages(ctx, url))
    sessions = 10_000 if turns >= 100 else 50
    ctx.say(f"writing {sessions:,} small sessions (SQLite)")
    small = ctx.attempt("build", lambda: _small_store(root, sessions))
    if small is not None:
        ctx.attempt("sessions", lambda: _sessions_page(ctx, small, sessions))


SUITE: Final = Suite("viewer", "agentlog serve: first screen of the T-turn session, scrolling, many sessions",
                     run, child)
