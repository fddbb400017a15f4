"""The ``core`` suite: the standard workload recorded, derived and restored in memory.

Baselines measured in the same run: ``orjson.dumps`` and ``orjson.loads`` of the same
events, and the workload's own text generation (subtracted from recording, which it is not).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from agentlog.core.events import STEP_START, Event
from agentlog.core.jsonvalue import thaw
from agentlog.core.session import Session
from benchmarks.runner import Context, Figure, Stat, Suite, Target
from benchmarks.workload import generation_seconds, record_workload, workload_events

__all__ = ["SMALL_TURNS", "SUITE", "derive_cost_per_step", "measure_generation", "record_once", "run"]

SMALL_TURNS: Final = 100
"""The smaller session size at which ``derive_messages()`` per step is compared (constant in T)."""

RECORD_RATE: Final = Target(">=", 200_000)
RECORD_COST_RATIO: Final = Target("<=", 6.0)
RESTORE_SECONDS: Final = Target("<=", 1.0)
DERIVE_GROWTH: Final = Target("<=", 1.5)
"""Per-step derive cost at T over T = 100: "constant in T", with room for noise."""

DUMPS: Final = "orjson.dumps"
LOADS: Final = "orjson.loads"


def run(ctx: Context) -> None:
    """Every core figure at ``ctx.options.turns`` turns."""
    turns = ctx.options.turns
    reference = ctx.attempt("workload", lambda: workload_events(turns))
    if reference is None:
        return
    wires = [thaw(event.to_wire()) for event in reference]
    lines = [orjson.dumps(wire) for wire in wires]
    count = len(reference)
    ctx.note(f"T = {turns}: {count:,} events, {sum(map(len, lines)) + count:,} bytes as JSON lines.")

    dumps_s = ctx.attempt("baseline dumps", lambda: _baseline_dumps(ctx, wires))
    loads_s = ctx.attempt("baseline loads", lambda: _baseline_loads(ctx, lines))
    generation = ctx.attempt("workload generation", lambda: measure_generation(ctx, turns))
    if generation is None:
        ctx.note("Text generation could not be timed: record figures below are gross, not net.")
        generation = 0.0
    if dumps_s is None:
        return
    per_event_dumps = dumps_s / count
    ctx.attempt("record", lambda: _record(ctx, turns, per_event_dumps, generation))
    ctx.attempt("derive", lambda: _derive(ctx, turns, reference, per_event_dumps))
    if loads_s is not None:
        ctx.attempt("restore", lambda: _restore(ctx, reference, lines, loads_s))


def _baseline_dumps(ctx: Context, wires: Sequence[Any]) -> float:
    def once() -> Mapping[str, float]:
        start = time.perf_counter()
        for wire in wires:
            orjson.dumps(wire)
        return {"s": time.perf_counter() - start}

    seconds = ctx.measure("baseline: orjson.dumps of every event", once)["s"]
    per_event = [value / len(wires) * 1e6 for value in seconds]
    ctx.add(Figure("baseline.dumps_us_per_event", f"{DUMPS} of one event (plain wire dict)", "µs",
                   Stat.of(per_event), is_baseline=True))
    return statistics.median(seconds)


def _baseline_loads(ctx: Context, lines: Sequence[bytes]) -> float:
    def once() -> Mapping[str, float]:
        start = time.perf_counter()
        parsed = [orjson.loads(line) for line in lines]
        elapsed = time.perf_counter() - start
        del parsed
        return {"s": elapsed}

    seconds = ctx.measure("baseline: orjson.loads of every event", once)["s"]
    ctx.add(Figure("baseline.loads_s", f"{LOADS} of every event line", "s", Stat.of(seconds),
                   is_baseline=True))
    return statistics.median(seconds)


def measure_generation(ctx: Context, turns: int, key: str = "baseline.generation_s",
                       label: str = "baseline: workload text generation") -> float:
    """Seconds the workload spends drawing its text, which every record figure subtracts."""
    seconds = ctx.measure(label, lambda: {"s": generation_seconds(turns)})["s"]
    ctx.add(Figure(key, "workload text generation (not recording)", "s", Stat.of(seconds), is_baseline=True))
    return statistics.median(seconds)


def record_once(turns: int, *, invariants: bool) -> tuple[float, int]:
    """Seconds to record ``turns`` turns into a fresh Session, and its event count."""
    session = Session.create("bench-record")
    start = time.perf_counter()  # the Recorder attaches the checker (its default) inside the timing
    record_workload(session, turns, check_invariants=invariants)
    return time.perf_counter() - start, session.seq


def _record(ctx: Context, turns: int, per_event_dumps: float, generation: float) -> None:
    for invariants, key, what in (
        (True, "record", "session checks + invariant checker"),
        (False, "record_session_only", "session checks, no invariant checker"),
    ):
        counts: list[int] = []

        def once(invariants: bool = invariants, counts: list[int] = counts) -> Mapping[str, float]:
            seconds, count = record_once(turns, invariants=invariants)
            counts.append(count)
            return {"s": seconds}

        gross = ctx.measure(f"record ({what})", once)["s"]
        count = counts[-1]
        net = [count / max(seconds - generation, 1e-9) for seconds in gross]
        net_stat = Stat.of(net)
        ctx.add(Figure(
            f"{key}.events_per_s", f"record, {what} (net of text generation)", "events/s", net_stat,
            baseline=DUMPS, ratio=(1 / net_stat.median) / per_event_dumps,
            target=RECORD_RATE if invariants else None,
            ratio_target=RECORD_COST_RATIO if invariants else None,
        ))
        if invariants:
            gross_stat = Stat.of([count / seconds for seconds in gross])
            ctx.add(Figure(
                f"{key}.gross_events_per_s", f"record, {what} (gross, incl. text generation)",
                "events/s", gross_stat, baseline=DUMPS,
                ratio=(1 / gross_stat.median) / per_event_dumps,
            ))


def derive_cost_per_step(turns: int) -> float:
    """Mean seconds of ``derive_messages()`` called at every ``step/start`` while recording."""
    session = Session.create("bench-derive")
    costs: list[float] = []

    def at_step(event: Event) -> None:
        if event.type == STEP_START:
            start = time.perf_counter()
            session.derive_messages()
            costs.append(time.perf_counter() - start)

    session.subscribe(at_step)
    record_workload(session, turns)
    if len(costs) != 4 * turns:
        raise RuntimeError(f"derive_messages() ran {len(costs)} times, expected {4 * turns}")
    return sum(costs) / len(costs) if costs else 0.0


def _derive(ctx: Context, turns: int, reference: Sequence[Event], per_event_dumps: float) -> None:
    small = min(SMALL_TURNS, turns)
    per_step: dict[int, Stat] = {}
    for size in dict.fromkeys((small, turns)):
        def once(size: int = size) -> Mapping[str, float]:
            return {"s": derive_cost_per_step(size)}

        samples = ctx.measure(f"derive_messages() per step at T = {size}", once)["s"]
        per_step[size] = Stat.of([value * 1e6 for value in samples])
    ctx.add(Figure("derive.step_us_small", f"derive_messages() per step, T = {small}", "µs",
                   per_step[small], baseline=f"{DUMPS} of one event",
                   ratio=per_step[small].median / (per_event_dumps * 1e6)))
    ctx.add(Figure("derive.step_us", f"derive_messages() per step, T = {turns}", "µs", per_step[turns],
                   baseline=f"same at T = {small}",
                   ratio=per_step[turns].median / max(per_step[small].median, 1e-12),
                   ratio_target=DERIVE_GROWTH))

    restored: list[Session] = []

    def cold() -> Mapping[str, float]:
        session = Session.restore("bench-derive", reference, Session.create("bench-derive").header)
        restored[:] = [session]
        start = time.perf_counter()
        session.derive_messages()
        return {"s": time.perf_counter() - start}

    def floor() -> Mapping[str, float]:
        session = restored[-1]
        log = session.events
        start = time.perf_counter()
        surface = [log[seq].data for seq in session.surface.nodes]
        elapsed = time.perf_counter() - start
        del surface
        return {"s": elapsed}

    cold_s = ctx.measure("derive_messages() once, cold cache", cold)["s"]
    floor_s = ctx.measure("baseline: list the surface events' data", floor)["s"]
    floor_stat = Stat.of([value * 1e3 for value in floor_s])
    cold_stat = Stat.of([value * 1e3 for value in cold_s])
    ctx.add(Figure("baseline.surface_list_ms", "list of the surface events' data (Python floor)", "ms",
                   floor_stat, is_baseline=True))
    ctx.add(Figure("derive.cold_ms", f"derive_messages() once after restore, T = {turns}", "ms", cold_stat,
                   baseline="surface list", ratio=cold_stat.median / max(floor_stat.median, 1e-12)))


def _restore(ctx: Context, reference: Sequence[Event], lines: Sequence[bytes], loads_s: float) -> None:
    header = Session.create("bench-restore").header
    wires = [orjson.loads(line) for line in lines]
    for key, what, events in (
        ("restore.wire_s", "Session.restore from wire dicts (orjson.loads output)", wires),
        ("restore.events_s", "Session.restore from Event objects", reference),
    ):
        def once(events: Sequence[Any] = events) -> Mapping[str, float]:
            start = time.perf_counter()
            session = Session.restore("bench-restore", events, header)
            elapsed = time.perf_counter() - start
            del session
            return {"s": elapsed}

        stat = Stat.of(ctx.measure(what, once)["s"])
        ctx.add(Figure(key, what, "s", stat, baseline=f"{LOADS} of the lines", ratio=stat.median / loads_s,
                       target=RESTORE_SECONDS if key == "restore.wire_s" else None))


SUITE: Final = Suite("core", "in memory: record, derive_messages, Session.restore", run)
