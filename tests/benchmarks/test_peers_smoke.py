"""The ``peers`` suite end to end at T = 2: agentlog and every installed peer, through the real CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchmarks.peer_common import PeerSystem, conversation, items_per_turn
from benchmarks.peers import (
    DEFAULT_SYSTEMS,
    ENV_BUDGET,
    ENV_SYSTEMS,
    REFERENCE,
    SYSTEMS,
    budget_seconds,
    growth_exponent,
    predict,
    selected_systems,
    unavailable,
)
from benchmarks.runner import Options
from benchmarks.workload import workload_events

from agentlog.core.jsonvalue import thaw
from agentlog.core.session import Session

FIGURES = {"record.s", "load.s", "load_rss.mb", "fork.ms", "fork_bytes.bytes", "size.bytes"}
ITEMS_AT_T2 = {  # what each system stores of two turns (its record figure's note)
    "agentlog-jsonl-zstd": "363 events", "agentlog-sqlite": "363 events",
    "langgraph-sqlite": "16 items in 12 checkpoints", "langgraph-sqlite-delta": "16 items in 12 checkpoints",
    "langgraph-agentlog": "16 items in 12 checkpoints",
    "langgraph-postgres": "16 items in 12 checkpoints", "openai-agents-sqlite": "22 items",
    "adk-sqlite": "16 items",
}


def run_cli(tmp: Path, env: dict[str, str], *extra: str) -> tuple[subprocess.CompletedProcess[str],
                                                                  dict[str, Any]]:
    """``python -m benchmarks peers`` at T = 2 with ``env``; its output and JSON report."""
    scratch = tmp / "scratch"
    scratch.mkdir()
    out, markdown = tmp / "report.json", tmp / "report.md"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "peers", "--turns", "2", "--runs", "1", *extra,
         "--out", str(out), "--markdown", str(markdown), "--tmp-dir", str(scratch)],
        capture_output=True, text=True, timeout=150, check=False,
        env={key: value for key, value in os.environ.items() if not key.startswith("AGENTLOG_BENCH_")} | env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data: dict[str, Any] = json.loads(out.read_text())
    data["_markdown"] = markdown.read_text()
    data["_scratch_left"] = sorted(path.name for path in scratch.iterdir())
    return done, data


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real run of the peers suite at T = 2, one measured run per phase, no warm-up."""
    _done, data = run_cli(tmp_path_factory.mktemp("peers"), {}, "--warmup", "0")
    return data


def suite(data: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = data["suites"]["peers"]
    return result


def figures(data: dict[str, Any], group: str) -> dict[str, dict[str, Any]]:
    return {f["key"]: f for f in suite(data)["figures"] if f["group"] == group}


def skipped(data: dict[str, Any], system: PeerSystem) -> str | None:
    return next((note for note in suite(data)["notes"] if note.startswith(f"{system.name} (")
                 and ": skipped, " in note), None)


def test_every_default_system_is_measured_or_skipped_with_its_reason(report: dict[str, Any]) -> None:
    assert suite(report)["errors"] == []
    for name in DEFAULT_SYSTEMS:
        system = SYSTEMS[name]
        reason = skipped(report, system)
        if unavailable(system) is not None:
            assert reason is not None and "pip install -r benchmarks/requirements.txt" in reason, name
        elif system.postgres and reason is not None:
            assert "PostgreSQL not reachable" in reason, reason
        else:
            assert reason is None, reason
            floor = {"floor.s", "floor.ratio"} if name == "agentlog-jsonl-zstd" else set()
            assert set(figures(report, name)) == FIGURES | floor, name


def test_the_reference_prints_the_physical_floor_beside_its_record_time(report: dict[str, Any]) -> None:
    shown = figures(report, "agentlog-jsonl-zstd")
    floor, ratio = shown["floor.s"], shown["floor.ratio"]
    assert floor["median"] > 0 and floor["unit"] == "s"
    assert ratio["baseline"] == "physical floor" and floor["is_baseline"]
    assert ratio["median"] >= 1.0  # recording writes at least the floor's bytes, with its fsyncs


def test_adk_on_agentlog_is_measured_beside_adks_own_service(tmp_path: Path) -> None:
    _done, data = run_cli(tmp_path, {ENV_SYSTEMS: "adk-sqlite,adk-agentlog"}, "--warmup", "0")
    assert suite(data)["errors"] == []
    for name in ("adk-sqlite", "adk-agentlog"):
        assert set(figures(data, name)) == FIGURES, name
        assert figures(data, name)["record.s"]["note"] == "16 items"
        assert figures(data, name)["fork_bytes.bytes"]["median"] > 0


def test_agentlog_is_the_baseline_every_peer_is_divided_by(report: dict[str, Any]) -> None:
    reference = figures(report, REFERENCE)
    assert reference and all(f["is_baseline"] for key, f in reference.items() if key != "floor.ratio")
    assert not reference["floor.ratio"]["is_baseline"]  # agentlog's record time against the floor
    measured = {f["group"] for f in suite(report)["figures"]} - {REFERENCE}
    assert "agentlog-sqlite" in measured
    for group in measured:
        for key, item in figures(report, group).items():
            base = reference[key]["median"]
            assert item["baseline"] == REFERENCE and not item["is_baseline"]
            assert item["ratio"] == pytest.approx(item["median"] / base), (group, key)


def test_each_system_records_what_it_can_store_of_the_conversation(report: dict[str, Any]) -> None:
    for group in {f["group"] for f in suite(report)["figures"]}:
        record = figures(report, group)["record.s"]
        assert record["note"] == ITEMS_AT_T2[group], group
        assert math.isfinite(record["median"]) and record["median"] > 0
        assert figures(report, group)["size.bytes"]["median"] > 0
    notes = "\n".join(suite(report)["notes"])
    assert "40 stream chunks a step" in notes
    if any(not group.startswith("agentlog") for group in {f["group"] for f in suite(report)["figures"]}):
        assert "no stream chunks" in notes  # said of every installed peer


def test_no_target_is_judged_below_the_size_the_issue_states_them_at(report: dict[str, Any]) -> None:
    assert all(f["ratio_target"] is None for f in suite(report)["figures"])
    assert any("none is judged" in note for note in suite(report)["notes"])
    assert "### agentlog-jsonl-zstd" in report["_markdown"]
    assert report["_scratch_left"] == []


def test_a_phase_past_the_budget_is_reported_as_over_budget_not_as_a_failure(tmp_path: Path) -> None:
    done, data = run_cli(tmp_path, {ENV_SYSTEMS: REFERENCE, ENV_BUDGET: "0.05"})
    record = figures(data, REFERENCE)["record.s"]
    assert "> budget" in record["label"] and record["median"] == 0.05
    assert set(figures(data, REFERENCE)) == {"record.s"}
    assert any("passed the 0.0500 s budget" in note for note in suite(data)["notes"])
    assert suite(data)["errors"] == [] and data["errors"] == []
    assert "> budget" in done.stdout


def test_growth_exponent_tells_linear_from_quadratic() -> None:
    assert growth_exponent([(50, 1.0), (100, 2.0), (200, 4.0)]) == pytest.approx(1.0)
    assert growth_exponent([(100, 3.0), (200, 12.0)]) == pytest.approx(2.0)
    assert growth_exponent([(200, 12.0), (100, 3.0)]) == pytest.approx(2.0)  # order does not matter
    assert growth_exponent([(100, 3.0)]) is None
    assert growth_exponent([(100, 0.0), (200, 1.0)]) is None


def test_predict_extrapolates_with_the_measured_exponent_but_never_below_linear() -> None:
    assert predict([(100, 1.0), (200, 4.0)], 400) == pytest.approx(16.0)
    assert predict([(100, 2.0), (200, 3.0)], 400) == pytest.approx(6.0)  # sublinear noise: linear
    assert predict([(200, 5.0)], 1000) == pytest.approx(25.0)
    assert predict([], 1000) is None


def test_budget_comes_from_the_options_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_BUDGET, raising=False)
    assert budget_seconds(Options()) == 600.0
    monkeypatch.setenv(ENV_BUDGET, "42.5")
    assert budget_seconds(Options()) == 42.5
    monkeypatch.setenv(ENV_BUDGET, "0")
    with pytest.raises(ValueError, match="positive"):
        budget_seconds(Options())


def test_selection_names_known_systems_and_keeps_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SYSTEMS, "adk-sqlite")
    assert [system.name for system in selected_systems()] == [REFERENCE, "adk-sqlite"]
    monkeypatch.setenv(ENV_SYSTEMS, "adk-sqlite,nonesuch")
    with pytest.raises(ValueError, match="unknown peer system"):
        selected_systems()


def test_a_system_whose_library_is_missing_is_unavailable_with_the_install_hint() -> None:
    system = SYSTEMS["adk-sqlite"]
    missing = PeerSystem(**{**{name: getattr(system, name) for name in system.__dataclass_fields__},
                            "requires": ("agentlog_no_such_peer_module",)})
    assert unavailable(missing) == ("not installed (agentlog_no_such_peer_module is missing: "
                                    "pip install -r benchmarks/requirements.txt)")
    assert unavailable(SYSTEMS[REFERENCE]) is None


def test_the_peers_conversation_is_the_workload_agentlog_records() -> None:
    turns = conversation(3)
    assert [len(turn) for turn in turns] == [4, 4, 4]
    assert all(items_per_turn(turn) == 8 for turn in turns)
    steps = [step for turn in turns for step in turn]
    assert [step.prompt is not None for step in steps] == [True, False, False, False] * 3
    assert [step.call is not None for step in steps] == [True, True, True, False] * 3
    assert {len(step.text) for step in steps} == {320}
    assert {len(step.call.result) for step in steps if step.call is not None} == {2000}
    session = Session.restore("peers", workload_events(3), Session.create("peers").header)
    blocks = [block for message in session.derive_messages() for block in thaw(message)["content"]]
    texts = [block["content"][0]["text"] if block["type"] == "tool-result" else block.get("text")
             for block in blocks]
    expected = []
    for step in steps:
        expected += ([step.prompt] if step.prompt else []) + [step.text]
        expected += [None, step.call.result] if step.call is not None else []
    assert texts == expected


@pytest.mark.parametrize(("module", "function", "per_turn"), [
    ("benchmarks.peer_langgraph", "messages_of", 8),
    ("benchmarks.peer_openai", "items_of", 11),
    ("benchmarks.peer_adk", "events_of", 8),
])
def test_each_peer_maps_a_turn_to_its_own_records(module: str, function: str, per_turn: int) -> None:
    names = {"benchmarks.peer_langgraph": "langgraph-sqlite", "benchmarks.peer_openai":
             "openai-agents-sqlite", "benchmarks.peer_adk": "adk-sqlite"}
    reason = unavailable(SYSTEMS[names[module]])
    if reason is not None:
        pytest.skip(reason)
    mapper = getattr(__import__(module, fromlist=[function]), function)
    turn = conversation(1)[0]
    records = [record for step in turn for record in (mapper(step, "e-1") if function == "events_of"
                                                       else mapper(step))]
    assert len(records) == per_turn
    dumped = json.dumps([record.model_dump(mode="json") if hasattr(record, "model_dump") else record
                         for record in records], default=str)
    for step in turn:
        assert step.text in dumped
        if step.call is not None:
            assert step.call.id in dumped and step.call.result[:200] in dumped.replace("\\n", "\n")
