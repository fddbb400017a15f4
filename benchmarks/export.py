"""The ``export`` suite: each export format, and redaction, over the standard workload session.

Baseline measured in the same run: ``orjson.dumps`` of every event (writing the log out as
JSON, nothing else). An export also restores and validates the log (the request formats and
the human formats derive their messages from it); redaction scans every string with every
secret pattern. No targets: these figures say what sharing a long session costs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Final

import orjson

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import thaw
from agentlog.io.exporters import export
from benchmarks.runner import TIMES, Context, Figure, Stat, Suite
from benchmarks.workload import workload_events

__all__ = ["SUITE"]

CASES: Final = (
    ("openai-chat", "surface", False), ("anthropic", "surface", False), ("markdown", "log", False),
    ("html", "log", False), ("jsonl", None, False), ("markdown", "log", True), ("jsonl", None, True),
)
"""(format, view, redact) measured, in the order shown."""
BASELINE: Final = "orjson.dumps of every event"


def run(ctx: Context) -> None:
    """Every case at ``ctx.options.turns`` turns."""
    events = ctx.attempt("workload", lambda: workload_events(ctx.options.turns))
    if events is None:
        return
    header = SessionHeader(id="workload", created_at=events[0].time if events else 0)
    dumps_s = ctx.attempt("baseline", lambda: _baseline(ctx, events))
    if dumps_s is None:
        return
    for fmt, view, redact in CASES:
        name = f"{fmt}{' --redact' if redact else ''}{f' --{view}' if view else ''}"
        ctx.attempt(name, lambda fmt=fmt, view=view, redact=redact, name=name:  # type: ignore[misc]
                    _case(ctx, header, events, fmt, view, redact, name, dumps_s))


def _baseline(ctx: Context, events: Sequence[Event]) -> float:
    wires = [thaw(event.to_wire()) for event in events]

    def once() -> Mapping[str, float]:
        start = time.perf_counter()
        for wire in wires:
            orjson.dumps(wire)
        return {"s": time.perf_counter() - start}

    seconds = ctx.measure(f"baseline: {BASELINE}", once)["s"]
    ctx.add(Figure("baseline.dumps_ms", f"{BASELINE} ({len(events):,} events)", "ms",
                   Stat.of([value * 1e3 for value in seconds]), is_baseline=True))
    return statistics.median(seconds)


def _case(ctx: Context, header: SessionHeader, events: Sequence[Event], fmt: str, view: str | None,
          redact: bool, name: str, dumps_s: float) -> None:
    sizes: list[int] = []

    def once() -> Mapping[str, float]:
        start = time.perf_counter()
        out = export(header, events, fmt, view=view, redact=redact)  # type: ignore[arg-type]
        elapsed = time.perf_counter() - start
        sizes[:] = [len(out)]
        return {"s": elapsed}

    seconds = ctx.measure(f"export {name}", once)["s"]
    stat = Stat.of([value * 1e3 for value in seconds])
    key = name.replace(" --", ".").replace("-", "_")
    ctx.add(Figure(f"export.{key}_ms", f"export {name}", "ms", stat, baseline=BASELINE,
                   ratio=statistics.median(seconds) / max(dumps_s, 1e-12)))
    ctx.note(f"{name}: {sizes[0]:,} bytes; {statistics.median(seconds) / max(dumps_s, 1e-12):.1f}{TIMES} "
             f"{BASELINE}")


SUITE: Final = Suite("export", "export formats and --redact over the standard workload session", run)
