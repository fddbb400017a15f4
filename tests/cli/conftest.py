"""Stores for command tests on every durable backend, sessions to put in them, and ways to run the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import agentlog.cli.main  # noqa: F401 - registers the commands on the group
from agentlog import Recorder, SessionHeader, open_store
from agentlog.cli.app import cli

BACKENDS = ("jsonl-zstd", "jsonl-raw", "sqlite", "postgres")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL on one durable backend (PostgreSQL: a throwaway schema, dropped afterwards)."""
    kind = str(request.param)
    if kind == "postgres":
        from tests.store.pg_worker import throwaway_url

        with throwaway_url() as url:
            yield url
        return
    root = tmp_path / "store"
    yield {"jsonl-zstd": f"jsonl://{root}", "jsonl-raw": f"jsonl://{root}?compression=none",
           "sqlite": f"sqlite://{root}/sessions.db"}[kind]


def record(url: str, session_id: str, *, turns: int = 1, text: str = "What is in README.md?",
           tool: str = "read_file", output: str = "# agentlog ...", cwd: str = "/work/project") -> None:
    """A closed session of ``turns`` turns: user text, a streamed answer with usage, one tool call."""
    with open_store(url) as store, store.start(SessionHeader(id=session_id, cwd=cwd)) as live:
        recorder = Recorder(live)
        for number in range(turns):
            with recorder.turn() as turn, turn.step() as step:
                step.user_message(text)
                step.request_header({"config": {"provider": "deepseek", "model": "deepseek-chat"}})
                step.text_delta("Let me look.")
                call = f"call-{number}"
                step.tool_call_delta(call, tool, '{"path": "README.md"}')
                step.assistant(usage={"inputTokens": 120, "outputTokens": 9})
                step.tool_call(call, tool, '{"path": "README.md"}')
                step.tool_result(call, output)


def crash(url: str, session_id: str, text: str = "interrupted work") -> None:
    """A session whose writer went away inside turn 1 (durable up to its user message)."""
    with open_store(url) as store:
        live = store.start(SessionHeader(id=session_id))
        turn = Recorder(live).turn().__enter__()
        turn.user_message(text)
        live.flush()
        live.close()


def invoke(url: str, *args: str, input: str | None = None) -> Result:
    """The command through click's runner."""
    return CliRunner().invoke(cli, ["--store", url, *args], input=input, env={"COLUMNS": "200"})


def run(url: str, *args: str, columns: int = 200, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it: a real ``python -m agentlog.cli`` process."""
    env = {**os.environ, "AGENTLOG_STORE": url, "COLUMNS": str(columns), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "agentlog.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=REPO)
