"""The benchmark runner: suite registry, timing method, and table/JSON/Markdown output.

Every measured phase runs a discarded warm-up, then ``runs`` measured runs; a figure is the
median with its min-max, shown beside its ratio to a physical baseline measured in the same
run and its target. Phases where memory matters run in a fresh subprocess (``run_child``).
"""

from __future__ import annotations

import gc
import importlib
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.status import Status
from rich.table import Table

__all__ = [
    "SUITE_MODULES",
    "Comparison",
    "Context",
    "Figure",
    "Options",
    "Report",
    "Stat",
    "Suite",
    "SuiteResult",
    "Target",
    "current_rss",
    "format_value",
    "peak_rss",
    "registered_suites",
    "run_child",
    "run_suites",
]

SUITE_MODULES: Final = (
    "benchmarks.core", "benchmarks.store", "benchmarks.compaction", "benchmarks.peers",
    "benchmarks.adapters", "benchmarks.export", "benchmarks.fidelity",
    "benchmarks.importers", "benchmarks.viewer", "benchmarks.search", "benchmarks.scale", "benchmarks.scrub")
"""Modules that each define a module-level ``SUITE``; later suites (compaction, peers) add theirs."""

REPORT_FORMAT: Final = 1
"""Version of the JSON report layout."""

TIMES: Final = "\u00d7"
"""The multiplication sign of ratios ("7.8x" is written with it)."""
DASH: Final = "\u2013"
"""The en dash of ranges ("1.2-1.4")."""

T = TypeVar("T")


# -- figures -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stat:
    """Median, min and max of the measured runs (the warm-up is never among them)."""

    median: float
    low: float
    high: float
    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stat:
        if not samples:
            raise ValueError("a figure needs at least one sample")
        values = tuple(float(value) for value in samples)
        return cls(statistics.median(values), min(values), max(values), values)

    @property
    def runs(self) -> int:
        return len(self.samples)


@dataclass(frozen=True, slots=True)
class Target:
    """A bound a figure (or its ratio) must meet: ``value <= limit`` or ``value >= limit``."""

    op: Literal["<=", ">="]
    limit: float

    def met(self, value: float) -> bool:
        return value <= self.limit if self.op == "<=" else value >= self.limit

    def describe(self, unit: str) -> str:
        sign = "≤" if self.op == "<=" else "≥"
        return f"{sign} {format_value(self.limit, unit)}{'' if unit == TIMES else ' ' + unit}".rstrip()


@dataclass(frozen=True, slots=True)
class Figure:
    """One reported number: its runs, its ratio to a baseline, and the targets it must meet.

    ``ratio`` is the figure's cost divided by the baseline's cost (for a rate, per-event cost),
    so 1.0 means "as cheap as the physical floor". Baseline rows have ``is_baseline`` set.
    """

    key: str
    label: str
    unit: str
    stat: Stat
    group: str = ""
    baseline: str | None = None
    ratio: float | None = None
    target: Target | None = None
    ratio_target: Target | None = None
    note: str = ""
    is_baseline: bool = False

    @property
    def misses(self) -> list[str]:
        """One sentence per target the median misses."""
        missed = []
        if self.target is not None and not self.target.met(self.stat.median):
            missed.append(f"{format_value(self.stat.median, self.unit)} {self.unit} "
                          f"(target {self.target.describe(self.unit)})")
        if self.ratio_target is not None and (self.ratio is None or not self.ratio_target.met(self.ratio)):
            shown = "n/a" if self.ratio is None else f"{format_value(self.ratio, TIMES)}{TIMES}"
            missed.append(f"{shown} {self.baseline} (target {self.ratio_target.describe(TIMES)}{TIMES})")
        return missed

    @property
    def passed(self) -> bool | None:
        """True/False when the figure has a target, None when it is only reported."""
        if self.target is None and self.ratio_target is None:
            return None
        return not self.misses

    def to_json(self) -> dict[str, Any]:
        return {
            "id": f"{self.group}.{self.key}" if self.group else self.key,
            "key": self.key, "group": self.group, "label": self.label, "unit": self.unit,
            "median": self.stat.median, "min": self.stat.low, "max": self.stat.high,
            "runs": self.stat.runs, "samples": list(self.stat.samples),
            "baseline": self.baseline, "ratio": self.ratio,
            "target": None if self.target is None else {"op": self.target.op, "limit": self.target.limit},
            "ratio_target": None if self.ratio_target is None else {
                "op": self.ratio_target.op, "limit": self.ratio_target.limit},
            "passed": self.passed, "is_baseline": self.is_baseline, "note": self.note,
        }


def format_value(value: float, unit: str = "") -> str:
    """Three significant digits, thousands separators for large values and counts."""
    if unit in ("bytes", "events", "events/s") or abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == 0 or not math.isfinite(value):
        return str(value if not math.isfinite(value) else 0)
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{digits}f}"


@dataclass(frozen=True, slots=True)
class Comparison:
    """A table a suite adds after its figures: one row per measure, one column per subject."""

    title: str
    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]
    """(row label, one cell per column), cells already formatted."""

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "caption": self.caption, "columns": list(self.columns),
                "rows": [{"label": label, "cells": dict(zip(self.columns, cells, strict=True))}
                         for label, cells in self.rows]}

    def to_markdown(self) -> list[str]:
        out = [f"### {self.title}", "", self.caption, "", "| figure | " + " | ".join(self.columns) + " |",
               "|---|" + "---:|" * len(self.columns)]
        for label, cells in self.rows:
            out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in (label, *cells)) + " |")
        return [*out, ""]

    def to_rich(self) -> Table:
        table = Table(title=f"{self.title} — {self.caption}", title_justify="left")
        table.add_column("figure", justify="left", overflow="fold")
        for column in self.columns:
            table.add_column(column, justify="right", overflow="fold")
        for label, cells in self.rows:
            table.add_row(label, *cells)
        return table


# -- suites and their context ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Options:
    """What the user asked for on the command line."""

    turns: int = 1000
    runs: int = 5
    warmup: int = 1
    backends: tuple[str, ...] = ()
    tmp_dir: Path | None = None
    quiet: bool = False
    peer_timeout: float | None = None
    """Wall-clock budget of one peer phase run (seconds); None: $AGENTLOG_BENCH_PEER_TIMEOUT or 600."""


@dataclass(frozen=True, slots=True)
class Suite:
    """A named group of measurements; ``child`` runs a measurement inside a fresh subprocess."""

    name: str
    summary: str
    run: Callable[[Context], None]
    child: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None


def registered_suites() -> dict[str, Suite]:
    """Every suite of ``SUITE_MODULES``, by name, in registration order."""
    suites: dict[str, Suite] = {}
    for module_name in SUITE_MODULES:
        suite = importlib.import_module(module_name).SUITE
        if not isinstance(suite, Suite):
            raise TypeError(f"{module_name}.SUITE is not a Suite")
        suites[suite.name] = suite
    return suites


@dataclass(slots=True)
class SuiteResult:
    """What one suite produced: figures, notes, and phases that failed (with their error)."""

    name: str
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    comparisons: list[Comparison] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"figures": [figure.to_json() for figure in self.figures], "notes": self.notes,
                "errors": self.errors, "seconds": self.seconds}
        if self.comparisons:
            data["comparisons"] = [comparison.to_json() for comparison in self.comparisons]
        return data


class Context:
    """Handed to a suite: options, a private temp directory, timing and progress helpers."""

    def __init__(self, options: Options, result: SuiteResult, workdir: Path, console: Console) -> None:
        self.options = options
        self.result = result
        self.workdir = workdir
        self._console = console

    def say(self, text: str) -> None:
        """One progress line on stderr (unless quiet)."""
        if not self.options.quiet:
            self._console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] [bold]{self.result.name}[/] {text}",
                                highlight=False)

    def measure(self, label: str, run_once: Callable[[], Mapping[str, float]],
                runs: int | None = None) -> dict[str, list[float]]:
        """Run ``run_once`` warm-up + ``runs`` times (gc collected before each); keep measured runs.

        ``run_once`` times what it measures itself and returns named values (seconds, bytes...).
        """
        count = self.options.runs if runs is None else runs
        warmup = self.options.warmup
        started = time.perf_counter()
        samples: dict[str, list[float]] = {}
        with self._status(f"{self.result.name}: {label}") as status:
            for index in range(warmup + count):
                if status is not None:
                    status.update(f"{self.result.name}: {label} — "
                                  f"{'warm-up' if index < warmup else 'run'} {index + 1}/{warmup + count}")
                gc.collect()
                values = run_once()
                if index >= warmup:
                    for name, value in values.items():
                        samples.setdefault(name, []).append(float(value))
        self.say(f"{label}: {warmup}+{count} runs in {time.perf_counter() - started:.1f} s")
        return samples

    @contextmanager
    def _status(self, text: str) -> Iterator[Status | None]:
        """A spinner on a terminal (nothing otherwise) while a phase runs."""
        if self.options.quiet or not self._console.is_terminal:
            yield None
            return
        with self._console.status(text) as status:
            yield status

    def add(self, figure: Figure) -> Figure:
        self.result.figures.append(figure)
        return figure

    def note(self, text: str) -> None:
        self.result.notes.append(text)

    def compare(self, comparison: Comparison) -> None:
        """Add a table shown after the suite's figures (e.g. backends side by side)."""
        self.result.comparisons.append(comparison)

    def attempt(self, phase: str, action: Callable[[], T]) -> T | None:
        """Run one phase; a failure is recorded (phase, error, where) and None returned."""
        try:
            return action()
        except Exception as exc:
            frames = traceback.extract_tb(exc.__traceback__)
            where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
            self.result.errors.append({"phase": phase, "error": f"{type(exc).__name__}: {exc}",
                                       "where": where, "traceback": traceback.format_exc()})
            self.say(f"[red]{escape(f'{phase} failed: {type(exc).__name__}: {exc}')}[/]")
            return None


# -- subprocess measurements -------------------------------------------------------------------


def child_env() -> dict[str, str]:
    """This environment with the repository root first on ``PYTHONPATH``: ``benchmarks`` lives
    beside the installed package, not in it, so a child finds it only through the path."""
    root = str(Path(__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}


def run_child(spec: Mapping[str, Any], timeout: float = 600.0) -> dict[str, Any]:
    """Run ``SUITE.child(spec)`` of ``spec["suite"]`` in a fresh interpreter; return its JSON."""
    command = [sys.executable, "-m", "benchmarks", "--child", json.dumps(spec)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                          env=child_env())
    if done.returncode != 0:
        raise RuntimeError(f"benchmark child {spec.get('kind')!r} exited {done.returncode}: "
                           f"{done.stderr.strip()[-2000:]}")
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"benchmark child {spec.get('kind')!r} printed nothing")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def child_main(spec_text: str) -> int:
    """Entry of ``--child``: run the suite's child measurement and print its JSON on one line."""
    spec = json.loads(spec_text)
    suite = registered_suites()[spec["suite"]]
    if suite.child is None:
        raise ValueError(f"suite {suite.name!r} has no child measurements")
    print(json.dumps(suite.child(spec)), flush=True)
    return 0


def _status_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_rss() -> int:
    """This process's peak resident set size in bytes (VmHWM, else ``ru_maxrss``)."""
    kib = _status_kib("VmHWM")
    if kib is None:
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib * 1024


def current_rss() -> int:
    """This process's resident set size now, in bytes (0 where /proc is missing)."""
    kib = _status_kib("VmRSS")
    return 0 if kib is None else kib * 1024


# -- running and reporting ---------------------------------------------------------------------


@dataclass(slots=True)
class Report:
    """Everything one invocation measured, with the machine it ran on."""

    options: Options
    machine: dict[str, Any]
    results: list[SuiteResult]
    started: str
    seconds: float

    @property
    def figures(self) -> Iterator[tuple[str, Figure]]:
        for result in self.results:
            for figure in result.figures:
                yield result.name, figure

    def misses(self) -> list[str]:
        """"suite group label: what was missed" for every missed target."""
        lines = []
        for suite, figure in self.figures:
            for miss in figure.misses:
                where = f"{suite} {figure.group}".strip()
                lines.append(f"{where}: {figure.label}: {miss}")
        return lines

    def errors(self) -> list[str]:
        return [f"{result.name}/{error['phase']}: {error['error']} ({error['where']})"
                for result in self.results for error in result.errors]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": REPORT_FORMAT,
            "workload": "standard coding-agent session (bench/WORKLOAD.md)",
            "turns": self.options.turns, "runs": self.options.runs, "warmup": self.options.warmup,
            "backends": list(self.options.backends), "started": self.started, "seconds": self.seconds,
            "machine": self.machine,
            "suites": {result.name: result.to_json() for result in self.results},
            "missed": self.misses(), "errors": self.errors(),
        }

    def to_markdown(self) -> str:
        machine = self.machine
        out = [
            f"# agentlog benchmark: T = {self.options.turns}, "
            f"{self.options.runs} runs (median, min{DASH}max)",
            "",
            f"{self.started}; {machine.get('cpu')}, {machine.get('cores')} cores, "
            f"{machine.get('ram_gb')} GB RAM; Python {machine.get('python')}; {machine.get('os')}; "
            f"temp dir on {machine.get('temp_filesystem')}; load average "
            f"{machine.get('load_average_start')} → {machine.get('load_average_end')}.",
            "",
        ]
        for result in self.results:
            out += [f"## {result.name}", ""]
            group: str | None = None
            for figure in result.figures:
                if figure.group != group:
                    if group is not None:
                        out.append("")
                    group = figure.group
                    if group:
                        out += [f"### {group}", ""]
                    out += [f"| figure | median | min{DASH}max | runs | ratio to baseline | target | |",
                            "|---|---:|---:|---:|---|---|:-:|"]
                cells = _cells(figure, with_group=False)
                out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
            out.append("")
            for comparison in result.comparisons:
                out += comparison.to_markdown()
            out += [f"- {note}" for note in result.notes]
            out += [f"- **error** in {e['phase']}: {e['error']} ({e['where']})" for e in result.errors]
            out.append("")
        misses = self.misses()
        out += ["## Missed targets", ""] + ([f"- {miss}" for miss in misses] or ["- none"])
        return "\n".join(out) + "\n"

    def print_table(self, console: Console) -> None:
        for result in self.results:
            table = Table(title=f"{result.name} — T = {self.options.turns}, median of "
                          f"{self.options.runs} runs (min{DASH}max)", title_justify="left")
            for name, justify in (("figure", "left"), ("median", "right"), (f"min{DASH}max", "right"),
                                  ("runs", "right"), ("ratio to baseline", "left"), ("target", "left"),
                                  ("", "left")):
                table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
            group: str | None = None
            for figure in result.figures:
                if figure.group != group:
                    group = figure.group
                    if group:
                        table.add_section()
                        table.add_row(f"[bold]{group}[/]", "", "", "", "", "", "")
                style = "dim" if figure.is_baseline else ("red" if figure.passed is False else None)
                table.add_row(*_cells(figure, with_group=False), style=style)
            console.print(table)
            for comparison in result.comparisons:
                console.print(comparison.to_rich())
            for note in result.notes:
                console.print(f"  • {note}", highlight=False)
            for error in result.errors:
                console.print(f"  [red]error in {error['phase']}: {error['error']} ({error['where']})[/]",
                              highlight=False)
        misses = self.misses()
        if misses:
            console.print("[bold red]Missed targets:[/]")
            for miss in misses:
                console.print(f"  ✗ {miss}", highlight=False)
        else:
            console.print("[bold green]Every target met.[/]")


def _cells(figure: Figure, *, with_group: bool = True) -> list[str]:
    stat, unit = figure.stat, figure.unit
    label = f"{figure.group}: {figure.label}" if figure.group and with_group else figure.label
    if figure.is_baseline:
        label = f"baseline: {label}"
    if figure.note:
        label = f"{label} ({figure.note})"
    ratio = "\u2014" if figure.ratio is None else (
        f"{format_value(figure.ratio, TIMES)}{TIMES} {figure.baseline}")
    targets = [t.describe(unit) for t in (figure.target,) if t is not None]
    if figure.ratio_target is not None:
        targets.append(f"ratio {figure.ratio_target.describe(TIMES)}{TIMES}")
    mark = {None: "", True: "✓", False: "✗ miss"}[figure.passed]
    spread = "" if stat.runs == 1 else f"{format_value(stat.low, unit)}{DASH}{format_value(stat.high, unit)}"
    return [label, f"{format_value(stat.median, unit)} {unit}", spread, str(stat.runs), ratio,
            ", ".join(targets), mark]


def run_suites(names: Sequence[str], options: Options, console: Console) -> Report:
    """Run the named suites in order, each in its own temp directory (removed afterwards)."""
    import tempfile

    from benchmarks.machine import describe_machine, load_average

    suites = registered_suites()
    started = time.strftime("%Y-%m-%d %H:%M:%S %z")
    clock = time.perf_counter()
    results: list[SuiteResult] = []
    with tempfile.TemporaryDirectory(prefix="agentlog-bench-", dir=options.tmp_dir) as tmp:
        machine = describe_machine(Path(tmp))
        for name in names:
            suite = suites[name]
            result = SuiteResult(name)
            workdir = Path(tmp) / name
            workdir.mkdir()
            context = Context(options, result, workdir, console)
            suite_clock = time.perf_counter()
            context.attempt("suite", partial(suite.run, context))
            result.seconds = time.perf_counter() - suite_clock
            results.append(result)
            _clear(workdir)
    machine["load_average_end"] = load_average()
    return Report(options, machine, results, started, time.perf_counter() - clock)


def _clear(directory: Path) -> None:
    """Remove a suite's temp files as soon as it is done (large stores add up)."""
    import shutil

    shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def timed() -> Iterator[list[float]]:
    """``with timed() as elapsed:`` then ``elapsed[0]`` holds the seconds the block took."""
    holder: list[float] = []
    start = time.perf_counter()
    try:
        yield holder
    finally:
        holder.append(time.perf_counter() - start)


def directory_bytes(root: str | os.PathLike[str]) -> int:
    """Total size of the regular files under ``root`` (what a store keeps on disk)."""
    total = 0
    for directory, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except FileNotFoundError:
                continue
    return total
