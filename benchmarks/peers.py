"""The ``peers`` suite: agentlog beside the libraries users would pick instead, in one run.

The same conversation (the standard workload) is recorded and read back by agentlog (JSONL
zstd and SQLite stores) and by every installed peer: LangGraph (SqliteSaver, PostgresSaver;
``add_messages`` and the delta channel), the OpenAI Agents SDK (``SQLiteSession``) and Google
ADK (``DatabaseSessionService`` on SQLite). Every run of every phase is a fresh subprocess
with a wall-clock budget, so a quadratic peer cannot hang the run: a phase past the budget is
reported as "> budget", and a size whose growth predicts it would be is not started.
Peers install with ``pip install -r benchmarks/requirements.txt``; missing ones are skipped, with the reason.
"""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
import statistics
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

from benchmarks import peer_adk, peer_agentlog, peer_langgraph, peer_openai
from benchmarks.peer_common import PeerSystem
from benchmarks.runner import TIMES, Context, Figure, Stat, Suite, Target, format_value, run_child

__all__ = [
    "DEFAULT_SYSTEMS",
    "GROWTH_TURNS",
    "REFERENCE",
    "SUITE",
    "SYSTEMS",
    "budget_seconds",
    "child",
    "growth_exponent",
    "predict",
    "run",
    "selected_systems",
    "unavailable",
]

SYSTEMS: Final[dict[str, PeerSystem]] = {
    **peer_agentlog.SYSTEMS, **peer_langgraph.SYSTEMS, **peer_openai.SYSTEMS, **peer_adk.SYSTEMS}
"""Every system the suite knows, in the order it measures them."""

DEFAULT_SYSTEMS: Final = (
    "agentlog-jsonl-zstd", "agentlog-sqlite", "openai-agents-sqlite", "langgraph-sqlite-delta",
    "adk-sqlite", "langgraph-agentlog", "langgraph-sqlite", "langgraph-postgres",
)
"""Measured unless ``$AGENTLOG_BENCH_PEERS`` names others (``langgraph-postgres-delta`` and
``adk-agentlog`` are opt-in)."""

REFERENCE: Final = "agentlog-jsonl-zstd"
"""The agentlog configuration every peer's ratio is taken against (the targets' reference)."""

GROWTH_TURNS: Final = (50, 100, 200, 400, 1000)
"""Sizes of the growth series (one run each; those below ``--turns``, then ``--turns`` itself)."""

TARGET_TURNS: Final = 1000
"""The issue states its targets at T = 1000; smaller runs show the ratios without them."""

DEFAULT_BUDGET: Final = 600.0
SKIP_MARGIN: Final = 1.25
"""A size is not started when its predicted time passes the budget by this factor."""

ENV_BUDGET: Final = "AGENTLOG_BENCH_PEER_TIMEOUT"
ENV_SYSTEMS: Final = "AGENTLOG_BENCH_PEERS"
ENV_GROWTH: Final = "AGENTLOG_BENCH_PEER_GROWTH"
ENV_POSTGRES: Final = "AGENTLOG_BENCH_POSTGRES"
DEFAULT_POSTGRES: Final = "postgresql://postgres@127.0.0.1:5432/postgres"

RECORD_TARGETS: Final = {
    "langgraph-sqlite": Target(">=", 10.0), "langgraph-sqlite-delta": Target(">=", 10.0),
    "adk-sqlite": Target(">=", 10.0), "openai-agents-sqlite": Target(">=", 3.0),
}
"""Record + persist at T = 1000: how many times faster than each peer agentlog must be."""
FLOOR_TARGET: Final = Target("<=", 2.0)
"""agentlog's record + persist at T = 1000: at most this many times the physical floor."""
FLOOR_PARTS: Final = ("floor", "dumps", "compress", "write")
"""What a JSONL zstd record child returns as ``floor_<part>_s``: the floor and its three parts."""
FASTER: Final = Target(">=", 1.0)
LINEAR: Final = Target("<=", 1.2)
"""Growth exponent k of ``value ∝ T^k`` between the two largest sizes: linear, with room for noise."""

MEASURES: Final = (
    ("record", "s", "record + persist"),
    ("load", "s", "cold load to the model's messages"),
    ("load_rss", "MB", "peak RSS of the load process"),
    ("fork", "ms", "fork at turn T/2"),
    ("fork_bytes", "bytes", "fork: bytes written"),
    ("bytes", "bytes", "bytes on disk"),
)


class OverBudgetError(Exception):
    """A phase ran past the per-phase wall-clock budget (its child was killed)."""


@dataclass(slots=True)
class Measured:
    """One system's samples per measure, and what stopped it."""

    system: PeerSystem
    samples: dict[str, list[float]] = field(default_factory=dict)
    over_budget: dict[str, str] = field(default_factory=dict)
    predicted: dict[str, float] = field(default_factory=dict)
    bounds: dict[str, float] = field(default_factory=dict)
    growth: dict[int, dict[str, float]] = field(default_factory=dict)
    items: float | None = None
    checkpoints: float | None = None
    cut: list[str] = field(default_factory=list)


def budget_seconds(options: object) -> float:
    """The per-phase budget: ``options.peer_timeout`` if the CLI has it, else the environment."""
    value: object = getattr(options, "peer_timeout", None) or os.environ.get(ENV_BUDGET) or DEFAULT_BUDGET
    if not isinstance(value, (int, float, str)):
        raise TypeError(f"the peer budget must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not seconds > 0:
        raise ValueError(f"the peer budget must be a positive number of seconds, got {value!r}")
    return seconds


def selected_systems() -> list[PeerSystem]:
    """The systems to measure: ``$AGENTLOG_BENCH_PEERS`` or the defaults, always with the reference."""
    names = [part.strip() for part in os.environ.get(ENV_SYSTEMS, "").split(",") if part.strip()]
    unknown = [name for name in names if name not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown peer system(s) {', '.join(unknown)} in ${ENV_SYSTEMS} "
                         f"(known: {', '.join(SYSTEMS)})")
    chosen = names or list(DEFAULT_SYSTEMS)
    if REFERENCE not in chosen:
        chosen.insert(0, REFERENCE)
    return [SYSTEMS[name] for name in SYSTEMS if name in chosen]


def _growth_turns(turns: int) -> list[int]:
    text = os.environ.get(ENV_GROWTH)
    sizes = [int(part) for part in text.split(",") if part.strip()] if text else list(GROWTH_TURNS)
    return sorted({size for size in sizes if 0 < size < turns})


def unavailable(system: PeerSystem) -> str | None:
    """Why ``system`` cannot run here (a module it needs is missing), else None."""
    for name in system.requires:
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            found = None
        if found is None:
            return f"not installed ({name} is missing: pip install -r benchmarks/requirements.txt)"
    return None


def growth_exponent(points: Sequence[tuple[float, float]]) -> float | None:
    """k of ``value ∝ T^k`` between the two largest sizes of ``(T, value)`` points."""
    usable = sorted((size, value) for size, value in points if size > 0 and value > 0)
    if len(usable) < 2 or usable[-1][0] == usable[-2][0]:
        return None
    (t0, v0), (t1, v1) = usable[-2], usable[-1]
    return math.log(v1 / v0) / math.log(t1 / t0)


def predict(points: Sequence[tuple[float, float]], turns: int) -> float | None:
    """``value`` at ``turns`` extrapolated from the largest measured sizes (exponent at least 1)."""
    usable = sorted((size, value) for size, value in points if size > 0 and value > 0)
    if not usable:
        return None
    exponent = growth_exponent(usable)
    exponent = 1.0 if exponent is None else min(3.0, max(1.0, exponent))
    size, value = usable[-1]
    return float(value * (turns / size) ** exponent)


# -- PostgreSQL databases for the Postgres savers ----------------------------------------------


class _Postgres:
    """A scratch database per record run (created and dropped through the admin DSN)."""

    def __init__(self, admin: str) -> None:
        self.admin = admin
        self.name = f"agentlog_bench_peers_{os.getpid()}"
        self.live = False

    def problem(self) -> str | None:
        try:
            self._execute("SELECT 1")
        except Exception as exc:
            return (f"PostgreSQL not reachable at {self.admin} (set ${ENV_POSTGRES}): "
                    f"{type(exc).__name__}: {exc}")
        return None

    def _execute(self, sql: str) -> None:
        psycopg = importlib.import_module("psycopg")
        with psycopg.connect(self.admin, autocommit=True, connect_timeout=5) as connection:
            connection.execute(sql)

    def fresh(self) -> str:
        self.drop()
        self._execute(f'CREATE DATABASE "{self.name}"')
        self.live = True
        conninfo = importlib.import_module("psycopg.conninfo")
        dsn: str = conninfo.make_conninfo(self.admin, dbname=self.name)
        return dsn

    def drop(self) -> None:
        self._execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        self.live = False


# -- measuring ---------------------------------------------------------------------------------


class _Runner:
    """Runs one system's phases in child processes, under the budget."""

    def __init__(self, ctx: Context, budget: float, postgres: _Postgres | None) -> None:
        self.ctx = ctx
        self.budget = budget
        self.postgres = postgres
        self.warmup = ctx.options.warmup > 0

    def child(self, kind: str, system: PeerSystem, turns: int, workdir: Path, dsn: str | None,
              run: int = 0) -> dict[str, Any]:
        spec = {"suite": "peers", "kind": kind, "system": system.name, "turns": turns, "dir": str(workdir),
                "warmup": self.warmup, "dsn": dsn, "run": run}
        try:
            return run_child(spec, timeout=self.budget)
        except subprocess.TimeoutExpired:
            raise OverBudgetError(
                f"{kind} at T = {turns} passed the {format_value(self.budget)} s budget") from None

    @contextmanager
    def store(self, system: PeerSystem, name: str) -> Iterator[tuple[Path, str | None]]:
        """An empty directory (and a fresh database for a Postgres saver) for one recording."""
        workdir = self.ctx.workdir / system.name / name
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        dsn = self.postgres.fresh() if system.postgres and self.postgres is not None else None
        try:
            yield workdir, dsn
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            if system.postgres and self.postgres is not None:
                self.postgres.drop()

    def growth_point(self, measured: Measured, turns: int) -> bool:
        """Record and load once at ``turns``; False when the series must stop (budget, disk)."""
        system = measured.system
        if not self._fits(measured, turns, "growth"):
            return False
        with self.store(system, f"T{turns}") as (workdir, dsn):
            try:
                recorded = self.child("record", system, turns, workdir, dsn)
                loaded = self.child("load", system, turns, workdir, dsn)
            except OverBudgetError as exc:
                measured.over_budget[f"growth T = {turns}"] = str(exc)
                return False
        measured.growth[turns] = {"record": recorded["s"], "load": loaded["load_s"],
                                  "bytes": recorded["bytes"], "items": recorded["items"]}
        self.ctx.say(f"{system.name}: T = {turns}: record {recorded['s']:.2f} s, load "
                     f"{loaded['load_s']:.3f} s, {recorded['bytes']:,.0f} bytes")
        return True

    def _fits(self, measured: Measured, turns: int, what: str) -> bool:
        """Whether ``turns`` is worth starting: its predicted record time and size fit."""
        points = sorted(measured.growth.items())
        predicted = {key: predict([(size, point[key]) for size, point in points], turns)
                     for key in ("record", "load", "bytes")}
        seconds, size = predicted["record"], predicted["bytes"]
        free = shutil.disk_usage(self.ctx.workdir).free
        if seconds is not None and seconds > self.budget * SKIP_MARGIN:
            reason = (f"not started: record + persist predicted at about {seconds:,.0f} s from the smaller "
                      f"sizes, past the {format_value(self.budget)} s budget")
        elif size is not None and size > 0.8 * free:
            reason = f"not started: about {size / 1e9:,.1f} GB predicted on disk, {free / 1e9:,.1f} GB free"
        else:
            return True
        measured.over_budget[f"{what} T = {turns}"] = reason
        if what == "main":
            measured.predicted = {key: value for key, value in predicted.items() if value is not None}
        return False

    def main(self, measured: Measured, turns: int, runs: int) -> None:
        """``runs`` record runs, then ``runs`` cold loads and ``runs`` forks of the last recording."""
        system = measured.system
        if not self._fits(measured, turns, "main"):
            return
        with self.store(system, "main") as (workdir, dsn):
            if not self._phase(measured, "record", runs, lambda run: self._record(measured, turns, run, dsn)):
                return
            self._phase(measured, "load", runs, lambda run: self._load(measured, turns, workdir, dsn, run))
            self._phase(measured, "fork", runs, lambda run: self._fork(measured, turns, workdir, dsn, run))

    def _phase(self, measured: Measured, name: str, runs: int, once: Callable[[int], float]) -> bool:
        spent = 0.0
        for run in range(runs):
            if run and spent > self.budget:
                measured.cut.append(f"{name}: {run} of {runs} runs (the runs' total passed the budget)")
                break
            try:
                spent += once(run)
            except OverBudgetError as exc:
                measured.over_budget[name] = str(exc)
                measured.bounds[name] = self.budget
                return False
        self.ctx.say(f"{measured.system.name}: {name}: {len(measured.samples.get(name, []))} runs, "
                     f"median {statistics.median(measured.samples[name]):.3f}")
        return True

    def _record(self, measured: Measured, turns: int, run: int, dsn: str | None) -> float:
        workdir = self.ctx.workdir / measured.system.name / "main"
        if run:  # every run records into an empty store (a fresh database for Postgres)
            shutil.rmtree(workdir, ignore_errors=True)
            workdir.mkdir(parents=True)
            if measured.system.postgres and self.postgres is not None:
                dsn = self.postgres.fresh()
        result = self.child("record", measured.system, turns, workdir, dsn, run)
        for key, name in (("s", "record"), ("bytes", "bytes")):
            measured.samples.setdefault(name, []).append(float(result[key]))
        if "generation_s" in result:
            measured.samples.setdefault("generation", []).append(float(result["generation_s"]))
        for key in FLOOR_PARTS:
            if f"floor_{key}_s" in result:
                measured.samples.setdefault(f"floor_{key}", []).append(float(result[f"floor_{key}_s"]))
        measured.items = float(result["items"])
        measured.checkpoints = result.get("checkpoints")
        return float(result["s"])

    def _load(self, measured: Measured, turns: int, workdir: Path, dsn: str | None, run: int) -> float:
        result = self.child("load", measured.system, turns, workdir, dsn, run)
        measured.samples.setdefault("load", []).append(float(result["load_s"]))
        measured.samples.setdefault("load_rss", []).append(float(result["peak_rss"]) / 1e6)
        return float(result["load_s"])

    def _fork(self, measured: Measured, turns: int, workdir: Path, dsn: str | None, run: int) -> float:
        result = self.child("fork", measured.system, turns, workdir, dsn, run)
        measured.samples.setdefault("fork", []).append(float(result["fork_s"]) * 1e3)
        measured.samples.setdefault("fork_bytes", []).append(float(result["fork_bytes"]))
        return float(result["fork_s"])


def run(ctx: Context) -> None:
    """Every system's record, load, fork and bytes at ``--turns``, and their growth with T."""
    turns, runs = ctx.options.turns, ctx.options.runs
    budget = budget_seconds(ctx.options)
    systems = selected_systems()
    postgres: _Postgres | None = None
    if any(system.postgres for system in systems):
        postgres = _Postgres(os.environ.get(ENV_POSTGRES) or DEFAULT_POSTGRES)
    measured: list[Measured] = []
    for system in systems:
        reason = unavailable(system)
        if reason is None and system.postgres:
            reason = "psycopg is missing" if importlib.util.find_spec("psycopg") is None else None
            reason = reason or (postgres.problem() if postgres is not None else "no PostgreSQL")
        if reason is not None:
            ctx.note(f"{system.name} ({system.label}): skipped, {reason}.")
            continue
        result = Measured(system)
        try:
            ctx.attempt(system.name, partial(_measure, _Runner(ctx, budget, postgres), result, turns, runs))
        finally:
            if postgres is not None and postgres.live:
                postgres.drop()
        measured.append(result)
    _figures(ctx, measured, turns)
    _notes(ctx, measured, turns, budget)


def _measure(runner: _Runner, measured: Measured, turns: int, runs: int) -> None:
    for size in _growth_turns(turns):
        if not runner.growth_point(measured, size):
            break
    runner.main(measured, turns, runs)
    samples = measured.samples
    if "record" in samples and "load" in samples:
        measured.growth[turns] = {"record": statistics.median(samples["record"]),
                                  "load": statistics.median(samples["load"]),
                                  "bytes": statistics.median(samples["bytes"]), "items": measured.items or 0}


# -- figures and notes -------------------------------------------------------------------------


def _figures(ctx: Context, measured: Sequence[Measured], turns: int) -> None:
    reference = next((m for m in measured if m.system.name == REFERENCE), None)
    for result in measured:
        _system_figures(ctx, result, reference, turns)


def _system_figures(ctx: Context, result: Measured, reference: Measured | None, turns: int) -> None:
    system = result.system
    group = system.name
    is_reference = system.name == REFERENCE
    for key, unit, what in MEASURES:
        samples = result.samples.get(key)
        label = f"{what}, {system.fork_kind}" if key == "fork" else what
        if not samples:
            bound = _bound(result, key)
            if bound is None:
                continue
            samples, label = [bound[0]], f"{label}: {bound[1]}"
        stat = Stat.of(samples)
        ratio, target = None, None
        base = None if reference is None else reference.samples.get(key)
        if not is_reference and base and statistics.median(base) > 0:
            ratio = stat.median / statistics.median(base)
            target = _target(system.name, key, turns)
        ctx.add(Figure(f"{key}.{unit.lower()}" if key != "bytes" else "size.bytes", label, unit, stat,
                       group=group, baseline=None if is_reference else REFERENCE, ratio=ratio,
                       ratio_target=target, is_baseline=is_reference,
                       note=_items_note(result) if key == "record" else ""))
    _floor_figures(ctx, result, turns)
    points = sorted(result.growth.items())
    for key, what in (("bytes", "bytes on disk"), ("load", "cold load"), ("record", "record + persist")):
        exponent = growth_exponent([(size, point[key]) for size, point in points])
        if exponent is None:
            continue
        sizes = f"T = {points[-2][0]:,} → {points[-1][0]:,}"
        ctx.add(Figure(f"growth.{key}_exponent", f"growth of {what}: k in T^k, {sizes}", "",
                       Stat.of([exponent]), group=group, baseline="linear (k = 1)", ratio=exponent,
                       ratio_target=LINEAR if system.is_agentlog and key in ("bytes", "load") else None))


def _floor_figures(ctx: Context, result: Measured, turns: int) -> None:
    """The physical floor of the same stream (measured in each record child, after recording)
    and agentlog's record + persist as a multiple of it, run by run."""
    samples = result.samples
    floors, records = samples.get("floor_floor"), samples.get("record")
    if not floors or not records:
        return
    parts = ", ".join(f"{what} {statistics.median(samples[f'floor_{key}']):.3f} s"
                      for key, what in (("dumps", "orjson.dumps"), ("compress", "zstd per turn"),
                                        ("write", "write + one fsync per turn")))
    group = result.system.name
    ctx.add(Figure("floor.s", "physical floor: orjson.dumps + zstd + one fsync per turn, same events", "s",
                   Stat.of(floors), group=group, note=parts, is_baseline=True))
    ratios = [record / floor for record, floor in zip(records, floors, strict=True) if floor > 0]
    if not ratios:
        return
    stat = Stat.of(ratios)
    net = [(record - drawn) / floor for record, drawn, floor
           in zip(records, samples.get("generation", []), floors, strict=False) if floor > 0]
    note = f"without drawing the workload text: {statistics.median(net):.2f}{TIMES}" if net else ""
    ctx.add(Figure("floor.ratio", "record + persist ÷ the physical floor (run by run)", TIMES, stat,
                   group=group, baseline="physical floor", ratio=stat.median,
                   ratio_target=FLOOR_TARGET if turns >= TARGET_TURNS else None, note=note))


def _bound(result: Measured, key: str) -> tuple[float, str] | None:
    """For a phase stopped by the budget: the budget (a lower bound), or the predicted value."""
    if key not in result.samples and key in result.predicted and "record" not in result.samples:
        return result.predicted[key], "not run, predicted from the smaller T (> budget)"
    if key in ("record", "load", "fork") and key in result.bounds:
        scale = 1e3 if key == "fork" else 1.0
        return result.bounds[key] * scale, "> budget (the value is the budget: a lower bound)"
    return None


def _target(name: str, key: str, turns: int) -> Target | None:
    if turns < TARGET_TURNS or name.startswith("agentlog"):
        return None
    if key == "record":
        return RECORD_TARGETS.get(name)
    if key in ("load", "bytes"):
        return FASTER
    return None


def _items_note(result: Measured) -> str:
    if result.items is None:
        return ""
    what = "events" if result.system.is_agentlog else "items"
    extra = "" if not result.checkpoints else f" in {result.checkpoints:,.0f} checkpoints"
    return f"{result.items:,.0f} {what}{extra}"


def _notes(ctx: Context, measured: Sequence[Measured], turns: int, budget: float) -> None:
    ctx.note(f"Ratios are the peer's cost ÷ {REFERENCE}'s (how many times agentlog is faster or smaller); "
             f"{REFERENCE} rows are the baseline. Targets are judged at T = {TARGET_TURNS} only"
             + ("." if turns >= TARGET_TURNS else f"; this run is at T = {turns}, so none is judged."))
    warm = ("imports done, then the phase's own code run once on a scratch store of T = 1 or 2, discarded"
            if ctx.options.warmup > 0 else "imports done, no warm-up (--warmup 0)")
    ctx.note(f"Method: every run of every phase is a fresh subprocess ({warm}); each run records into an "
             f"empty store; loads and forks read the last recording. Budget {format_value(budget)} s per run "
             f"of a phase; a phase stops taking runs once their total passes it. Growth sizes: one run each.")
    ctx.note("Durability: agentlog flushes at every turn/end (returns after fsync); peers use their "
             "defaults (SQLite commits per add_items / append_event / checkpoint, LangGraph durability "
             "'async'; PostgreSQL synchronous_commit as configured). The peers get their text prepared "
             "before the clock starts; agentlog draws it while recording (its share is noted below).")
    for result in measured:
        system = result.system
        ctx.note(f"{system.name}: {system.label}. Stores {system.stores}. Fork: {system.fork_kind}.")
        generation = result.samples.get("generation")
        if generation and result.samples.get("record"):
            share = statistics.median(generation) / statistics.median(result.samples["record"])
            ctx.note(f"{system.name}: record + persist includes drawing the workload text, "
                     f"{statistics.median(generation):.3f} s ({100 * share:.0f}%).")
        for what, reason in result.over_budget.items():
            ctx.note(f"{system.name}: {what}: {reason}.")
        for line in result.cut:
            ctx.note(f"{system.name}: {line}.")
        if result.growth:
            points = "; ".join(
                f"T = {size:,}: {point['record']:.2f} s record, {point['load']:.3f} s load, "
                f"{point['bytes'] / 1e6:,.2f} MB" for size, point in sorted(result.growth.items()))
            ctx.note(f"{system.name} growth: {points}.")
    _sqlite_ratios(ctx, measured)


def _sqlite_ratios(ctx: Context, measured: Sequence[Measured]) -> None:
    sqlite = next((m for m in measured if m.system.name == "agentlog-sqlite"), None)
    if sqlite is None:
        return
    for result in measured:
        if result.system.is_agentlog:
            continue
        parts = []
        for key, what in (("record", "record + persist"), ("load", "load"), ("bytes", "bytes")):
            ours, theirs = sqlite.samples.get(key), result.samples.get(key)
            if ours and theirs and statistics.median(ours) > 0:
                parts.append(f"{what} {statistics.median(theirs) / statistics.median(ours):,.1f}{TIMES}")
        if parts:
            ctx.note(f"{result.system.name} ÷ agentlog-sqlite: {', '.join(parts)}.")


# -- child processes ---------------------------------------------------------------------------


def child(spec: Mapping[str, Any]) -> dict[str, Any]:
    """One phase of one system in this fresh process: ``record``, ``load`` or ``fork``."""
    system = SYSTEMS[str(spec["system"])]
    turns, workdir = int(spec["turns"]), Path(str(spec["dir"]))
    kind = spec["kind"]
    if kind == "record":
        return dict(system.record(system, turns, workdir, spec))
    if kind == "load":
        return dict(system.load(system, turns, workdir, spec))
    if kind == "fork":
        return dict(system.fork(system, turns, workdir, spec))
    raise ValueError(f"unknown peers child measurement {kind!r}")


SUITE: Final = Suite("peers", "agentlog beside LangGraph, OpenAI Agents SDK and Google ADK", run, child)
