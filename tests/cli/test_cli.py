"""The command line, run as a user would: real subprocesses, a real JSONL store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog.cli.main import cli

REPO = Path(__file__).resolve().parents[2]


def run(store: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{store}", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "agentlog.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120, input=input)


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    store = tmp_path_factory.mktemp("cli") / "store"
    result = run(store, "demo")
    assert result.returncode == 0, result.stderr
    assert "SIGKILL" in result.stdout
    assert "turn/end" in result.stdout and "tool/result" in result.stdout
    listed = [json.loads(line) for line in run(store, "list", "--json").stdout.splitlines()]
    parent = next(header["id"] for header in listed if "parentSession" not in header)
    return store, parent


def test_demo_records_crashes_restores_and_forks(demo_store: tuple[Path, str]) -> None:
    store, parent = demo_store
    listed = [json.loads(line) for line in run(store, "list", "--json").stdout.splitlines()]
    child = next(header for header in listed if header.get("parentSession") == parent)
    assert child["id"] == f"{parent}-fork"


def test_verify_passes_on_the_restored_session_and_fails_on_a_missing_one(
    demo_store: tuple[Path, str],
) -> None:
    store, parent = demo_store
    ok = run(store, "verify", parent)
    assert ok.returncode == 0 and ok.stdout.startswith("ok")
    missing = run(store, "verify", "no-such-session")
    assert missing.returncode == 1
    assert "not found" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_show_prints_the_human_transcript(demo_store: tuple[Path, str]) -> None:
    store, parent = demo_store
    shown = run(store, "show", parent)
    assert shown.returncode == 0
    assert "calc.divide" in shown.stdout
    as_json = json.loads(run(store, "show", parent, "--json").stdout)
    assert as_json[0]["role"] == "user"


def test_inspect_lists_events_and_json_lines_round_trip(demo_store: tuple[Path, str]) -> None:
    store, parent = demo_store
    lines = run(store, "inspect", parent, "--json").stdout.splitlines()
    events = [json.loads(line) for line in lines]
    assert [event["seq"] for event in events] == list(range(len(events)))
    assert any(
        event["type"] == "turn/end" and event["data"]["reason"]["kind"] == "interrupted" for event in events
    )


def test_bad_store_url_is_one_clear_line(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "agentlog.cli", "--store", "bogus://x", "list"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "unknown store scheme" in result.stderr
    assert "Traceback" not in result.stderr


def test_corrupt_session_is_reported_without_a_traceback(tmp_path: Path) -> None:
    store = tmp_path / "store"
    root = store / "_no-cwd" / "broken"
    root.mkdir(parents=True)
    (root / "session.jsonl.zstd").write_bytes(b"not zstd at all")
    result = run(store, "verify", "broken")
    assert result.returncode == 1
    assert "error:" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_has_help(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_text_that_looks_like_markup_is_printed_verbatim(tmp_path: Path) -> None:
    from agentlog import JsonlStore, Recorder, SessionHeader

    store = JsonlStore(tmp_path / "store")
    with store.start(SessionHeader(id="[red]odd[/red]")) as live:
        recorder = Recorder(live)
        with recorder.turn() as turn:
            turn.user_message("closing tag [/bold] and [link=x]")
    store.close()
    shown = run(tmp_path / "store", "show", "[red]odd[/red]")
    assert shown.returncode == 0, shown.stderr
    assert "closing tag [/bold] and [link=x]" in shown.stdout
    inspected = run(tmp_path / "store", "inspect", "[red]odd[/red]")
    assert inspected.returncode == 0, inspected.stderr
    assert "[red]odd[/red]" in inspected.stdout


def test_benchmarks_run_from_the_repository_not_the_cli() -> None:
    assert "bench" not in cli.commands  # the installed package holds no benchmark code
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout and "--turns" in done.stdout


def _two_turns(store_dir: Path) -> None:
    from agentlog import JsonlStore, Recorder, SessionHeader

    with JsonlStore(store_dir) as store, store.start(SessionHeader(id="s1", cwd="/p")) as live:
        recorder = Recorder(live)
        for number in (1, 2):
            with recorder.turn() as turn:
                turn.user_message(f"question {number}")


def test_fork_materialize_and_delete(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _two_turns(store)
    events = [json.loads(line) for line in run(store, "inspect", "s1", "--json").stdout.splitlines()]
    first_end = next(event["seq"] for event in events if event["type"] == "turn/end")

    forked = run(store, "fork", "s1", "--at", str(first_end), "--child", "kid")
    assert forked.returncode == 0, forked.stderr
    assert f"forked kid from s1: {first_end + 1} events shared" in forked.stdout
    kid = [json.loads(line) for line in run(store, "inspect", "kid", "--json").stdout.splitlines()]
    assert [event["type"] for event in kid] == [event["type"] for event in events[: first_end + 1]] + [
        "session/end-seed"]

    inside = run(store, "fork", "s1", "--at", "1", "--child", "bad")
    assert inside.returncode == 1 and "open turn" in inside.stderr and "Traceback" not in inside.stderr

    refused = run(store, "delete", "s1", "--yes")
    assert refused.returncode == 1 and "kid" in refused.stderr and "Traceback" not in refused.stderr
    kept = run(store, "delete", "s1", input="n\n")
    assert kept.returncode == 1 and "Aborted" in kept.stderr
    assert run(store, "materialize", "kid").returncode == 0
    assert run(store, "delete", "s1", input="y\n").returncode == 0
    assert [json.loads(line)["id"] for line in run(store, "list", "--json").stdout.splitlines()] == ["kid"]
    assert run(store, "verify", "kid").returncode == 0
    missing = run(store, "delete", "s1", "--yes")
    assert missing.returncode == 1 and "not found" in missing.stderr


def test_a_reader_that_goes_away_is_not_an_error(tmp_path: Path) -> None:
    from benchmarks.workload import record_workload

    from agentlog import JsonlStore, SessionHeader

    store = tmp_path / "store"
    with JsonlStore(store) as opened, opened.start(SessionHeader(id="big")) as live:
        record_workload(live.session, 20)  # about 1 MB of JSON lines: more than a pipe holds
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{store}"}
    command = f"{sys.executable} -m agentlog.cli inspect big --json | head -1"
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=120)
    assert result.stdout.count("\n") == 1
    assert result.stderr == ""


def test_paths_are_printed_unbroken_on_a_narrow_terminal(tmp_path: Path) -> None:
    store = tmp_path / ("a-long-directory-name-" * 4) / "store"
    _two_turns(store)
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{store}", "COLUMNS": "40"}
    result = subprocess.run([sys.executable, "-m", "agentlog.cli", "fork", "s1", "--child", "kid"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"file: {store}" in result.stdout
