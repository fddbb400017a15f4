"""What the runs of other projects' own test suites share: the download cache, the report, the counts.

A runner (``agents_sdk.py``, ``adk.py``) lays the other project's tests out in a temporary
directory and runs them under pytest with its swap plugin; the plugin records each test's
outcome through ``record_outcome`` and writes them with ``write_report``; the runner reads them
back with ``tally``. Tests listed as not applicable are skipped with ``NOT_APPLICABLE_PREFIX``
in their reason, so they count apart from the other project's own skips.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

NOT_APPLICABLE_PREFIX = "not applicable: "
REPORT_VARIABLE = "EXTERNAL_TESTS_REPORT"


@dataclass
class Counts:
    """What a run gave; ``with_agentlog`` counts the passed tests that went through agentlog."""

    title: str
    passed: int = 0
    failed: list[str] = field(default_factory=list)
    not_applicable: int = 0
    skipped: list[str] = field(default_factory=list)  # "node (reason)"
    with_agentlog: int = 0
    stale: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        return (f"{self.title}: {self.passed} passed ({self.with_agentlog} of them through agentlog), "
                f"{len(self.failed)} failed, {self.not_applicable} not applicable, "
                f"{len(self.skipped)} skipped by their suite in {self.seconds:.0f} s")

    def print(self) -> int:
        """Print the summary and each failure; the exit status (1 on a failure or a stale entry)."""
        print(self.line())
        for node in self.failed:
            print(f"failed: {node}")
        for node in self.skipped:
            print(f"skipped by the suite: {node}")
        for node in self.stale:
            print(f"stale not-applicable entry (no such test): {node}")
        return 1 if self.failed or self.stale else 0


def main(run: Callable[[], Counts], unavailable: type[Exception]) -> int:
    """A runner's ``main``: the counts printed (exit 0 or 1), or exit 3 when ``unavailable`` is raised."""
    try:
        counts = run()
    except unavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    return counts.print()


def cache_dir() -> Path:
    """``$AGENTLOG_EXTERNAL_CACHE``, default ``~/.cache/agentlog/external``."""
    configured = os.environ.get("AGENTLOG_EXTERNAL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "agentlog" / "external"


def read_not_applicable(path: Path) -> dict[str, str]:
    """A checked-in list: node id (or a test's id without its parameters) -> why it does not apply."""
    entries: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            node, _, reason = line.partition("|")
            entries[node.strip()] = reason.strip()
    return entries


def run_pytest(title: str, root: Path, plugin: str, files: tuple[str, ...], *,
               env: dict[str, str] | None = None, options: tuple[str, ...] = ()) -> Counts:
    """Run ``files`` in ``root`` in a subprocess with ``plugin`` (importable from this directory)."""
    report = root / "agentlog-report.json"
    here = str(Path(__file__).resolve().parent)
    full_env = {**os.environ, **(env or {}), REPORT_VARIABLE: str(report),
                "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "--no-header", "-p", "no:cacheprovider",
                    "-p", plugin, "--timeout", "120", "--tb=short", *options, *files],
                   cwd=root, env=full_env, check=False, timeout=1800)
    if not report.is_file():
        raise RuntimeError(f"the {title} test run wrote no report (pytest failed to start)")
    counts = tally(title, json.loads(report.read_text(encoding="utf-8")))
    counts.seconds = time.monotonic() - started
    return counts


def tally(title: str, report: dict[str, Any]) -> Counts:
    counts = Counts(title, stale=list(report["stale"]))
    for node, entry in sorted(report["tests"].items()):
        outcome = entry.get("outcome")
        if outcome == "failed":
            counts.failed.append(node)
        elif outcome == "skipped" and entry.get("reason", "").startswith(NOT_APPLICABLE_PREFIX):
            counts.not_applicable += 1
        elif outcome == "skipped":
            counts.skipped.append(f"{node} ({entry.get('reason', '')})")
        elif outcome == "passed":
            counts.passed += 1
            counts.with_agentlog += bool(entry.get("agentlog"))
    return counts


results: dict[str, dict[str, Any]] = {}
"""The plugin's record: node id -> {"outcome", "reason"?, "agentlog"?}."""
_STALE = pytest.StashKey[list[str]]()


def select(config: pytest.Config, items: list[pytest.Item], keep: Callable[[pytest.Item], bool],
           reasons: dict[str, str]) -> None:
    """A plugin's ``pytest_collection_modifyitems``: deselect what ``keep`` refuses, skip what
    ``reasons`` lists (node id, or id without parameters) as not applicable, note stale entries."""
    kept, dropped, matched = [], [], set()
    for item in items:
        if not keep(item):
            dropped.append(item)
            continue
        kept.append(item)
        entry = next((node for node in (item.nodeid, item.nodeid.split("[", 1)[0]) if node in reasons), None)
        if entry is not None:
            matched.add(entry)
            item.add_marker(pytest.mark.skip(reason=f"{NOT_APPLICABLE_PREFIX}{reasons[entry]}"))
    config.stash[_STALE] = sorted(set(reasons) - matched)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@contextlib.contextmanager
def noting_agentlog(item: pytest.Item, used: list[Any]) -> Iterator[None]:
    """Around one test: record whether it put anything in ``used`` (built an agentlog object)."""
    used.clear()
    try:
        yield
    finally:
        results.setdefault(item.nodeid, {})["agentlog"] = bool(used)
        used.clear()


def record_outcome(report: pytest.TestReport) -> None:
    """A plugin's ``pytest_runtest_logreport``: the outcome of each phase, the worst kept."""
    entry = results.setdefault(report.nodeid, {"outcome": "passed"})
    if report.skipped:
        entry["outcome"] = "skipped"
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
        entry["reason"] = reason.removeprefix("Skipped: ")
    elif report.failed:
        entry["outcome"] = "failed"
    else:
        entry.setdefault("outcome", "passed")


def write_report(session: pytest.Session) -> None:
    """A plugin's ``pytest_sessionfinish``: the outcomes to ``$EXTERNAL_TESTS_REPORT``."""
    target = os.environ.get(REPORT_VARIABLE)
    if target:
        stale = session.config.stash.get(_STALE, [])
        Path(target).write_text(json.dumps({"tests": results, "stale": stale}, indent=1), encoding="utf-8")


def check_suite(module: str, capsys: pytest.CaptureFixture[str], *,
                skip_unavailable_in_ci: bool = False) -> None:
    """The body of a test that runs ``python -m <module>``: its summary shown, its exit 0 required.

    Exit 3 (the other project's tests cannot be had) skips; under CI it fails unless
    ``skip_unavailable_in_ci`` (where CI has no way to get them).
    """
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", module], cwd=root, capture_output=True, text=True,
                          timeout=1700, check=False)
    if done.returncode == 3 and (skip_unavailable_in_ci or not os.environ.get("CI")):
        pytest.skip(done.stderr.strip() or f"{module}: the tests to run could not be had")
    prefixes = ("failed: ", "skipped by the suite: ", "stale ")
    summary = [line for line in done.stdout.splitlines()
               if line.startswith(prefixes) or " tests on Agentlog" in line]
    with capsys.disabled():
        print("\n" + "\n".join(summary))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
