"""``agentlog audit`` through click's runner and a real process: table, JSON, exit status, hostile content."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog import Recorder, SessionHeader, open_store
from agentlog.cli.main import cli
from tests.audit.sessions import crash_recorder, recorded

HOSTILE = "\x1b[2J\x1b]0;pwned\x07 \u202eevil [red]markup[/red]"


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"jsonl://{tmp_path / 'store'}"
    recorded(url, "clean").close()
    with open_store(url).start(SessionHeader(id=f"bad{HOSTILE}", cwd=str(tmp_path / "gone"))) as live:
        recorder = Recorder(live)
        with recorder.turn() as turn, turn.step() as step:
            step.user_message(f"deploy with AKIAIOSFODNN7EXAMPLE {HOSTILE}")
            step.request_header({"config": {"provider": "p", "model": "m"}})
            step.text_delta(f"ok {HOSTILE}")
            step.assistant()
    return url


def invoke(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", url, "audit", *args])
    return result.exit_code, result.stdout, result.stderr


def test_a_clean_session_exits_0_with_its_table(store: str) -> None:
    code, out, _ = invoke(store, "clean")
    assert code == 0, out
    assert out.splitlines()[0] == "audit clean: reviewable"
    for name in ("order", "tool-results", "turns", "restore-drift", "fork-lineage", "compaction", "secrets"):
        assert name in out
    code, out, _ = invoke(store, "clean", "--timeline")
    assert code == 0 and "timeline" in out and "calc.divide" in out


def test_problems_exit_1_and_never_show_the_secret_or_a_control(store: str) -> None:
    code, out, err = invoke(store, f"bad{HOSTILE}")
    assert code == 1 and err == ""
    assert "problems found" in out and "aws-access-key at seq" in out and "no longer exists" in out
    assert "AKIAIOSFODNN7EXAMPLE" not in out
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in out
    assert "[red]markup[/red]" in out  # session text is never read as rich markup
    code, out, _ = invoke(store, f"bad{HOSTILE}", "--json", "--timeline")
    report = json.loads(out)
    assert code == 1 and report["clean"] is False
    secrets = next(check for check in report["checks"] if check["name"] == "secrets")
    assert {"text": "aws-access-key at seq 2 data.content[0].text", "problem": True, "seq": 2,
            "path": "data.content[0].text"} in secrets["items"]
    assert "AKIAIOSFODNN7EXAMPLE" not in out and "[REDACTED:aws-access-key]" in out


def test_current_tools_model_and_preset_are_compared(store: str, tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "read_file", "parameters": {}}}]))
    args = ("--tools", str(tools), "--model", "deepseek/deepseek-chat", "--json")
    code, out, _ = invoke(store, "clean", *args)
    drift = next(check for check in json.loads(out)["checks"] if check["name"] == "restore-drift")
    assert code == 1 and [i["text"] for i in drift["items"] if i["problem"]] == [
        "tool read_file changed its schema", "tool run was recorded but is gone",
        "tool write_file was recorded but is gone"]


@pytest.mark.parametrize(("content", "message"), [("{", "not JSON"), ('{"a": 1}', "expected a JSON array"),
                                                  ('[{"description": "x"}]', "tool [0] has no name")])
def test_a_bad_tools_file_is_named(store: str, tmp_path: Path, content: str, message: str) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(content)
    code, _, err = invoke(store, "clean", "--tools", str(tools))
    assert code == 1 and f"--tools {tools}: {message}" in err and "Traceback" not in err


def test_missing_session_and_store_are_one_line_errors(store: str, tmp_path: Path) -> None:
    code, _, err = invoke(store, "nope")
    assert code == 1 and 'session "nope"' in err and "Traceback" not in err
    code, _, err = invoke(f"jsonl://{tmp_path / 'none'}", "x")
    assert code == 1 and "no store at" in err and not (tmp_path / "none").exists()


def test_a_real_process_audits_a_sigkilled_session(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    recorded(url, "crashed").close()
    crash_recorder(url, "crashed")
    env = {**os.environ, "AGENTLOG_STORE": url, "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "agentlog.cli", "audit", "crashed"], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "left open by a crash" in result.stdout and "outcome unknown" in result.stdout
