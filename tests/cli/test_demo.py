"""``agentlog demo`` on stores other than the default: refusals in one line, hints that work."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path


def agentlog(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items() if key != "AGENTLOG_STORE"}
    return subprocess.run([sys.executable, "-m", "agentlog.cli", *args], capture_output=True, text=True,
                          env={**environ, "COLUMNS": "300", **(env or {})}, timeout=120)


def test_the_demo_refuses_a_memory_store_in_one_line() -> None:
    result = agentlog("--store", "memory:", "demo")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "memory:" in result.stderr and "jsonl:" in result.stderr
    assert result.stdout == ""


def test_the_demo_on_sqlite_names_the_database_and_its_hints_carry_the_store(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/demo.db"
    result = agentlog("--store", url, "demo")
    assert result.returncode == 0, result.stderr
    assert "None" not in result.stdout
    assert f"{tmp_path}/demo.db" in result.stdout
    (hints,) = [line for line in result.stdout.splitlines() if line.startswith("next: ")]
    commands = [shlex.split(part) for part in hints.removeprefix("next: ").split("   ·   ")]
    assert commands and all(command[:3] == ["agentlog", "--store", url] for command in commands)
    for command in commands:  # each hint runs as printed, against the demo's store
        ran = agentlog(*command[1:])
        assert ran.returncode == 0, (command, ran.stderr)


def test_the_hints_of_the_default_store_stay_short(tmp_path: Path) -> None:
    result = agentlog("demo", env={"XDG_DATA_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    (hints,) = [line for line in result.stdout.splitlines() if line.startswith("next: ")]
    assert "--store" not in hints
