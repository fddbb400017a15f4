"""The ``scale`` suite end to end at a small size: many sessions (with and without group commit on
SQLite), and the resumed RSS of a cached session, through the real CLI entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("scale")
    scratch, cache = base / "scratch", base / "cache"
    scratch.mkdir()
    out = base / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "scale", "--turns", "8", "--runs", "1", "--warmup", "0",
         "--backends", "sqlite,jsonl-raw", "--out", str(out), "--tmp-dir", str(scratch)],
        capture_output=True, text=True, timeout=400, check=False,
        env={**os.environ, "AGENTLOG_BENCH_CACHE": str(cache)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data: dict[str, Any] = json.loads(out.read_text())
    data["_cache"] = sorted(path.name for path in cache.iterdir())
    data["_scratch_left"] = sorted(path.name for path in scratch.iterdir())
    return data


def figures(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {figure["id"]: figure for figure in report["suites"]["scale"]["figures"]}


def test_many_sessions_are_measured_beside_one_session_with_the_2x_target(report: dict[str, Any]) -> None:
    found = figures(report)
    for backend in ("sqlite", "jsonl-raw"):
        many = found[f"{backend}.scale.many_events_per_s"]
        single = found[f"{backend}.scale.single_events_per_s"]
        assert many["ratio"] == pytest.approx(single["median"] / many["median"])
        assert many["ratio_target"] == {"op": "<=", "limit": 0.5}
        p50, p99 = (found[f"{backend}.scale.many_flush_{key}"]["median"] for key in ("p50_ms", "p99_ms"))
        assert 0 < p50 <= p99
    assert "sqlite.scale.ungrouped_events_per_s" in found  # group commit on and off, same run
    assert "jsonl-raw.scale.ungrouped_events_per_s" not in found  # JSONL has no group commit
    assert "batches per group commit" in found["sqlite.scale.many_events_per_s"]["note"]
    assert report["suites"]["scale"]["errors"] == []


def test_resumed_rss_is_reported_for_t_and_10_t_from_a_cached_log(report: dict[str, Any]) -> None:
    found = figures(report)
    for turns in (8, 80):
        peak = found[f"jsonl-raw T={turns}.rss.resumed_peak_mb"]
        idle = found[f"jsonl-raw T={turns}.rss.idle_mb"]
        interpreter = found[f"jsonl-raw T={turns}.rss.interpreter_mb"]
        assert peak["median"] > idle["median"] > interpreter["median"] > 1
        assert found[f"jsonl-raw T={turns}.rss.per_1000_events_mb"]["median"] > 0
    assert report["_cache"] == ["jsonl-raw-T8-per-turn", "jsonl-raw-T80-per-turn"]
    assert report["_scratch_left"] == []
    notes = " ".join(report["suites"]["scale"]["notes"])
    assert "tracemalloc of the resume" in notes
