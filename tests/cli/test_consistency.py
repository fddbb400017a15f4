"""The command line's manners across commands: one meaning per short option, singular counts,
clear errors for an export path, and repair reporting what it did (issue 26, item 10)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import crash, record, run


def _jsonl(tmp_path: Path) -> str:
    return f"jsonl://{tmp_path / 'store'}"


def test_dash_f_means_follow_and_export_spells_format_in_full(tmp_path: Path) -> None:
    url = _jsonl(tmp_path)
    record(url, "s1")
    assert "-f, --follow" in run(url, "tail", "--help").stdout
    assert "-f," not in run(url, "export", "--help").stdout
    short = run(url, "export", "s1", "-f", "markdown")
    assert short.returncode == 2 and "No such option '-f'" in short.stderr
    assert run(url, "export", "s1", "--format", "markdown").returncode == 0


def test_export_into_a_missing_directory_is_one_clear_line(tmp_path: Path) -> None:
    url = _jsonl(tmp_path)
    record(url, "s1")
    target = tmp_path / "missing" / "dir" / "f.md"
    result = run(url, "export", "s1", "--format", "markdown", "-o", str(target))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(target.parent) in lines[0] and "does not exist" in lines[0]
    assert "FileNotFoundError" not in lines[0] and "Errno" not in lines[0]


def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    url = _jsonl(tmp_path)
    record(url, "s1")
    stats = run(url, "stats")
    assert stats.returncode == 0 and "total (1 session)" in stats.stdout, stats.stdout
    crash(url, "c")
    repaired = run(url, "repair", "c")
    assert repaired.returncode == 0, repaired.stderr
    assert "1 synthetic event:" in repaired.stdout and "1 synthetic events" not in repaired.stdout


def test_repair_says_closed_after_it_closed(tmp_path: Path) -> None:
    url = _jsonl(tmp_path)
    crash(url, "c")
    dry = run(url, "repair", "c", "--dry-run")
    assert "would be closed" in dry.stdout
    done = run(url, "repair", "c")
    assert done.returncode == 0, done.stderr
    assert "interrupted turn 1 was closed by" in done.stdout and "would be" not in done.stdout


def test_a_mistake_in_the_command_line_exits_2_on_every_command(tmp_path: Path) -> None:
    url = _jsonl(tmp_path)
    for command in ("list", "show", "verify", "inspect", "tail", "search", "stats", "repair", "compact",
                    "fork", "materialize", "delete", "gc", "check-upgrade", "import", "export", "audit",
                    "chat", "serve", "demo"):
        result = run(url, command, "--no-such-option")
        # verify keeps 2 and 3 for "needs a repair" and "open": its usage errors are EX_USAGE
        assert result.returncode == (64 if command == "verify" else 2), (command, result.stderr)
        assert "No such option" in result.stderr and "Traceback" not in result.stderr


def test_a_claude_code_file_with_a_torn_last_line_imports_its_prefix_with_a_warning(tmp_path: Path) -> None:
    from tests.io.importers.helpers import FIXTURES

    lines = (FIXTURES / "claude-code" / "small.jsonl").read_bytes().splitlines(keepends=True)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])
    url = _jsonl(tmp_path)
    result = run(url, "import", "claude-code", str(torn))
    assert result.returncode == 0, result.stderr
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert str(torn) in warning and f"line {len(lines)} is torn" in warning
    shape = json.loads(run(url, "import", "claude-code", str(torn), "--replace", "--json").stdout)
    assert shape["outcome"] == "replaced" and len(shape["warnings"]) == 1


def test_every_command_that_writes_names_the_store_it_wrote_to(tmp_path: Path) -> None:
    from tests.io.importers.helpers import FIXTURES

    url = _jsonl(tmp_path)
    record(url, "s1", turns=3, output="the README says a great deal about the project. " * 200)
    crash(url, "c")
    commands = [("import", "claude-code", str(FIXTURES / "claude-code" / "small.jsonl")),
                ("fork", "s1", "--child", "kid"), ("materialize", "kid"), ("compact", "s1"),
                ("repair", "c"), ("delete", "kid", "--yes"), ("gc", "--older-than", "1000d", "--yes")]
    for command in commands:
        result = run(url, *command)
        assert result.returncode == 0, (command, result.stderr)
        assert f"store: {url}" in result.stdout.splitlines()[-1], (command, result.stdout)


def test_a_store_is_named_without_its_password() -> None:
    from agentlog.cli.app import State

    assert State("postgresql://me:s3cret@db.example/x", False).store_label == "postgresql://me:***@db.example/x"
    assert State("sqlite:///tmp/a.db", False).store_label == "sqlite:///tmp/a.db"


CUT_OFF = """
import os, signal, sys
from agentlog import Recorder, SessionHeader, open_store
store = open_store(sys.argv[1])
live = store.start(SessionHeader(id="cut"))
turn = Recorder(live).turn().__enter__()
turn.user_message("Explain the parser.")
step = turn.step().__enter__()
step.text_delta("The parser reads ")
step.text_delta("one line at")
live.flush()
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_show_keeps_the_answer_a_crash_cut_off_marked_partial(tmp_path: Path) -> None:
    url = _jsonl(tmp_path)
    killed = subprocess.run([sys.executable, "-c", CUT_OFF, url], capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    for args in ((), ("--json",)):
        before = run(url, "show", "cut", *args)
        assert before.returncode == 0, before.stderr
    shown = run(url, "show", "cut")
    assert "The parser reads one line at" in shown.stdout and "partial" in shown.stdout
    messages = json.loads(run(url, "show", "cut", "--json").stdout)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["partial"] is True
    assert messages[1]["content"] == [{"type": "text", "text": "The parser reads one line at"}]
    assert run(url, "repair", "cut").returncode == 0  # still shown once the turn is closed
    assert json.loads(run(url, "show", "cut", "--json").stdout)[1]["partial"] is True
