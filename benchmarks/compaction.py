"""The ``compaction`` suite: the compaction transaction and the token meter on the standard workload.

Figures: one manual compaction of a T-turn session (everything but the newest unit, an instant
summarizer, its own time subtracted) with the compactor warm as it is in a running loop, the
same on a cold compactor just after restore, and ``TokenMeter.measure()`` after each new step
at T = 100 and at T (flat when the meter is O(new events)). Baselines: ``orjson.dumps`` of the
shadowed messages, and of one event.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from agentlog.compaction.engine import Compactor
from agentlog.compaction.result import CompactionResult
from agentlog.compaction.summary import SummaryRequest, SummaryResult
from agentlog.compaction.tokens import TokenMeter
from agentlog.core.events import STEP_START, Event
from agentlog.core.jsonvalue import thaw
from agentlog.core.messages import derive_event_message
from agentlog.core.session import Session
from benchmarks.runner import Context, Figure, Stat, Suite, Target
from benchmarks.workload import record_workload, workload_events

__all__ = ["SUITE", "measure_cost_per_step", "run"]

SMALL_TURNS: Final = 100
TRANSACTION_MS: Final = Target("<=", 20.0)
MEASURE_GROWTH: Final = Target("<=", 1.5)
"""Per-step measure() cost at T over T = 100: "O(new events)", with room for noise."""


class _InstantSummarizer:
    """Answers at once with a short text block, timing itself so the suite can subtract it."""

    def __init__(self) -> None:
        self.seconds = 0.0

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        start = time.perf_counter()
        result = SummaryResult(summary=({"type": "text", "text": f"{len(request.messages)} messages."},),
                               provider="bench", model="instant")
        self.seconds += time.perf_counter() - start
        return result


def _header(session_id: str) -> dict[str, Any]:
    return {"version": 0, "id": session_id, "createdAt": 1767225600000}


async def _timed_compaction(compactor: Compactor, session: Session) -> tuple[float, CompactionResult | None]:
    start = time.perf_counter()
    result = await compactor.acompact_now(session)
    elapsed = time.perf_counter() - start
    return elapsed, result if isinstance(result, CompactionResult) else None


def _compaction_once(reference: Sequence[Event], *, warm: bool) -> dict[str, float]:
    session = Session.restore("bench-compact", reference, _header("bench-compact"))
    summarizer = _InstantSummarizer()
    compactor = Compactor(summarizer)
    if warm:  # a running loop has derived, read the header, measured, checked the lock and paired
        session.derive_messages()
        session.request_header()
        compactor.lock_state(session)
        compactor.select_range(session, 0)
    gc.collect()  # the restore's garbage is not the transaction's cost
    elapsed, result = asyncio.run(_timed_compaction(compactor, session))
    if result is None:
        raise RuntimeError("nothing was compacted")
    return {"s": elapsed - summarizer.seconds, "nodes": float(len(result.shadowed_seqs))}


def _span_dumps(reference: Sequence[Event]) -> float:
    """Seconds to serialize every message a compaction of ``reference`` shadows (all but the last)."""
    session = Session.restore("bench-span", reference, _header("bench-span"))
    messages = [thaw(message) for seq in list(session.surface.nodes)[:-1]
                if (message := derive_event_message(session.events[seq])) is not None]
    start = time.perf_counter()
    for message in messages:
        orjson.dumps(message)
    return time.perf_counter() - start


def measure_cost_per_step(turns: int) -> float:
    """Mean seconds of ``TokenMeter.measure()`` called at every ``step/start`` while recording."""
    session = Session.create("bench-measure")
    meter = TokenMeter()
    costs: list[float] = []

    def at_step(event: Event) -> None:
        if event.type == STEP_START:
            start = time.perf_counter()
            meter.measure(session)
            costs.append(time.perf_counter() - start)

    session.subscribe(at_step)
    record_workload(session, turns)
    if len(costs) != 4 * turns:
        raise RuntimeError(f"measure() ran {len(costs)} times, expected {4 * turns}")
    return sum(costs) / len(costs)


def run(ctx: Context) -> None:
    """Every compaction figure at ``ctx.options.turns`` turns."""
    turns = ctx.options.turns
    reference = ctx.attempt("workload", lambda: workload_events(turns))
    if reference is None:
        return
    ctx.note(f"T = {turns}: {len(reference):,} events; compaction shadows every surface node but the newest.")
    per_event = ctx.attempt("baseline dumps", lambda: _baseline_event_dumps(ctx, reference))
    span = ctx.attempt("baseline span", lambda: _baseline_span(ctx, reference))
    if span is not None:
        ctx.attempt("transaction", lambda: _transaction(ctx, turns, reference, span))
    if per_event is not None:
        ctx.attempt("measure", lambda: _measure(ctx, turns, per_event))


def _baseline_event_dumps(ctx: Context, reference: Sequence[Event]) -> float:
    wires = [thaw(event.to_wire()) for event in reference]

    def once() -> Mapping[str, float]:
        start = time.perf_counter()
        for wire in wires:
            orjson.dumps(wire)
        return {"s": (time.perf_counter() - start) / len(wires)}

    samples = ctx.measure("baseline: orjson.dumps of one event", once)["s"]
    ctx.add(Figure("baseline.dumps_us_per_event", "orjson.dumps of one event (plain wire dict)", "µs",
                   Stat.of([value * 1e6 for value in samples]), is_baseline=True))
    return statistics.median(samples)


def _baseline_span(ctx: Context, reference: Sequence[Event]) -> float:
    samples = ctx.measure("baseline: orjson.dumps of the shadowed messages",
                          lambda: {"s": _span_dumps(reference)})["s"]
    ctx.add(Figure("baseline.span_dumps_ms", "orjson.dumps of every shadowed message", "ms",
                   Stat.of([value * 1e3 for value in samples]), is_baseline=True))
    return statistics.median(samples)


def _transaction(ctx: Context, turns: int, reference: Sequence[Event], span_s: float) -> None:
    for warm, key, what, target in (
        (True, "transaction.ms", "compact_now, warm compactor (as in a running loop)", TRANSACTION_MS),
        (False, "transaction_cold.ms", "compact_now, cold compactor right after restore", None),
    ):
        nodes: list[float] = []

        def once(warm: bool = warm, nodes: list[float] = nodes) -> Mapping[str, float]:
            values = _compaction_once(reference, warm=warm)
            nodes.append(values["nodes"])
            return {"s": values["s"]}

        samples = ctx.measure(f"{what}, T = {turns}", once)["s"]
        stat = Stat.of([value * 1e3 for value in samples])
        ctx.add(Figure(key, f"{what}, excluding the summarizer ({nodes[-1]:,.0f} nodes)", "ms", stat,
                       baseline="dumps of the shadowed messages",
                       ratio=stat.median / max(span_s * 1e3, 1e-12), target=target))


def _measure(ctx: Context, turns: int, per_event: float) -> None:
    small = min(SMALL_TURNS, turns)
    per_step: dict[int, Stat] = {}
    for size in dict.fromkeys((small, turns)):
        def once(size: int = size) -> Mapping[str, float]:
            return {"s": measure_cost_per_step(size)}

        samples = ctx.measure(f"TokenMeter.measure() per step at T = {size}", once)["s"]
        per_step[size] = Stat.of([value * 1e6 for value in samples])
    ctx.add(Figure("measure.step_us_small", f"TokenMeter.measure() per step, T = {small}", "µs",
                   per_step[small], baseline="orjson.dumps of one event",
                   ratio=per_step[small].median / (per_event * 1e6)))
    ctx.add(Figure("measure.step_us", f"TokenMeter.measure() per step, T = {turns}", "µs", per_step[turns],
                   baseline=f"same at T = {small}", ratio_target=MEASURE_GROWTH,
                   ratio=per_step[turns].median / max(per_step[small].median, 1e-12)))


SUITE: Final = Suite("compaction", "compaction transaction and token meter on the standard workload", run)
