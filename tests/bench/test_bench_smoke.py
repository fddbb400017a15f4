"""The benchmark runner end to end: every suite at T = 2 through the real CLI entry."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest

from agentlog.bench.__main__ import main
from agentlog.bench.runner import Figure, Options, Report, Stat, SuiteResult, Target

CORE_FIGURES = {
    "baseline.dumps_us_per_event", "baseline.loads_s", "baseline.generation_s",
    "record.events_per_s", "record.gross_events_per_s", "record_session_only.events_per_s",
    "derive.step_us_small", "derive.step_us", "baseline.surface_list_ms", "derive.cold_ms",
    "restore.wire_s", "restore.events_s",
}
STORE_FIGURES = {
    "baseline.dumps_s", "baseline.write_fsync_s", "baseline.physical_s",
    "persist.events_per_s", "persist.fsync_share",
    "baseline.json_lines_bytes", "size.packed_bytes", "size.unpacked_bytes",
    "baseline.loads_s", "baseline.loads_peak_rss_mb", "baseline.idle_rss_mb",
    "load.s", "load.read_s", "load.restore_s", "load.derive_s", "load.peak_rss_mb",
    "baseline.fork_write_ms", "baseline.full_copy_bytes", "fork.ms", "fork.warm_ms", "fork.bytes",
}
ZSTD_ONLY = {"baseline.compress_s", "baseline.zstd_one_frame_bytes"}
BACKENDS = ("jsonl-zstd", "jsonl-raw")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real run of every suite at T = 2, one measured run per phase."""
    base = tmp_path_factory.mktemp("bench")
    scratch = base / "scratch"
    scratch.mkdir()
    out, markdown = base / "report.json", base / "report.md"
    done = subprocess.run(
        [sys.executable, "-m", "agentlog.bench", "all", "--turns", "2", "--runs", "1",
         "--out", str(out), "--markdown", str(markdown), "--tmp-dir", str(scratch)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data: dict[str, Any] = json.loads(out.read_text())
    data["_markdown"] = markdown.read_text()
    data["_stdout"] = done.stdout
    data["_scratch_left"] = sorted(path.name for path in scratch.iterdir())
    return data


def ids(data: dict[str, Any], suite: str) -> set[str]:
    return {figure["id"] for figure in data["suites"][suite]["figures"]}


def figure(data: dict[str, Any], suite: str, figure_id: str) -> dict[str, Any]:
    return next(f for f in data["suites"][suite]["figures"] if f["id"] == figure_id)


def test_core_suite_reports_every_figure(report: dict[str, Any]) -> None:
    assert ids(report, "core") == CORE_FIGURES
    assert report["suites"]["core"]["errors"] == []


def test_store_suite_reports_every_figure_for_each_backend(report: dict[str, Any]) -> None:
    expected = {f"{backend}.{name}" for backend in BACKENDS for name in STORE_FIGURES}
    expected |= {f"jsonl-zstd.{name}" for name in ZSTD_ONLY}
    assert ids(report, "store") == expected
    assert report["suites"]["store"]["errors"] == []
    assert report["backends"] == list(BACKENDS)


def test_every_figure_is_a_measured_number_with_one_run(report: dict[str, Any]) -> None:
    for suite in report["suites"].values():
        for item in suite["figures"]:
            assert math.isfinite(item["median"]) and item["median"] >= 0, item["id"]
            assert item["min"] <= item["median"] <= item["max"], item["id"]
            assert item["runs"] == len(item["samples"]) == 1, item["id"]
            if not item["is_baseline"]:
                assert item["ratio"] is not None and item["baseline"], item["id"]


def test_targets_are_judged_on_the_figures_that_have_them(report: dict[str, Any]) -> None:
    record = figure(report, "core", "record.events_per_s")
    assert record["target"] == {"op": ">=", "limit": 200_000}
    assert record["ratio_target"] == {"op": "<=", "limit": 6.0}
    assert record["passed"] == (record["median"] >= 200_000 and record["ratio"] <= 6.0)
    load = figure(report, "store", "jsonl-raw.load.s")
    assert load["passed"] == (load["median"] <= 1.0 and load["ratio"] <= 3.0)
    missed_ids = {f["label"] for s in report["suites"].values() for f in s["figures"] if f["passed"] is False}
    assert all(any(label in line for line in report["missed"]) for label in missed_ids)


def test_store_figures_are_physically_plausible(report: dict[str, Any]) -> None:
    raw_unpacked = figure(report, "store", "jsonl-raw.size.unpacked_bytes")
    assert 0.95 < raw_unpacked["ratio"] < 1.1  # one event per line: the JSON lines themselves
    for backend in BACKENDS:
        packed = figure(report, "store", f"{backend}.size.packed_bytes")["median"]
        unpacked = figure(report, "store", f"{backend}.size.unpacked_bytes")["median"]
        assert packed < unpacked
        assert 0 < figure(report, "store", f"{backend}.fork.bytes")["median"] < packed
        assert figure(report, "store", f"{backend}.load.peak_rss_mb")["median"] > 1
        assert 0 < figure(report, "store", f"{backend}.persist.fsync_share")["median"] < 100
    zstd = figure(report, "store", "jsonl-zstd.size.packed_bytes")["median"]
    assert zstd < figure(report, "store", "jsonl-raw.size.packed_bytes")["median"]


def test_outputs_name_the_machine_and_clean_up(report: dict[str, Any]) -> None:
    machine = report["machine"]
    assert machine["cores"] >= 1 and machine["python"] and machine["packages"]["orjson"]
    assert "## core" in report["_markdown"] and "### jsonl-zstd" in report["_markdown"]
    assert "Missed targets" in report["_markdown"]
    assert "record + persist" in report["_stdout"]
    assert report["_scratch_left"] == []


def test_unknown_suite_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["nonesuch", "--turns", "1"])
    assert exit_info.value.code == 2
    assert "unknown suite(s) nonesuch" in capsys.readouterr().err


def test_unknown_backend_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["store", "--backends", "jsonl-zstd,floppy"])
    assert exit_info.value.code == 2
    assert "unknown backend(s) floppy" in capsys.readouterr().err


def test_a_missed_target_is_listed_with_its_figure_and_bound() -> None:
    slow = Figure("load.s", "cold load", "s", Stat.of([1.2, 1.4, 1.3]), group="jsonl-raw",
                  baseline="orjson.loads", ratio=2.0, target=Target("<=", 1.0),
                  ratio_target=Target("<=", 3.0))
    fine = Figure("fork.bytes", "fork bytes", "bytes", Stat.of([300]), target=Target("<=", 4096))
    report = Report(Options(turns=10, runs=3), {}, [SuiteResult("store", [slow, fine])], "now", 0.0)
    assert slow.passed is False and fine.passed is True
    assert report.misses() == ["store jsonl-raw: cold load: 1.30 s (target ≤ 1.00 s)"]
    assert "✗ miss" in report.to_markdown()
