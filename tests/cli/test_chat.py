"""``agentlog chat``: the reference agent on the command line, through CliRunner and a real subprocess."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from agentlog import JsonlStore, check_invariants
from agentlog.agent.loop import SYSTEM_PROMPT
from agentlog.cli.main import cli
from agentlog.core.events import TURN_END
from tests.agent.conftest import provider, root
from tests.integrations.server import Provider, sse

__all__ = ["provider", "root"]


def chat(provider: Provider, store: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--store", f"jsonl://{store}", "chat", "--base-url", provider.base_url,
                                    "--api-key", "k", *args], input=input)


def _started(provider: Provider, store: Path, root: Path, *scripts: str) -> str:
    """A session whose first turn ("hi") completed, with ``scripts`` queued; its id."""
    provider.queue(*(sse(script) for script in scripts))
    first = chat(provider, store, "--model", "gpt-4o", "--root", str(root), "hi")
    assert first.exit_code == 0, first.output
    return first.stderr.split()[1]


def test_chat_runs_a_tool_turn_and_logs_it(provider: Provider, root: Path, tmp_path: Path) -> None:
    provider.queue(sse("openai_parallel_tools"), sse("openai_final_text"))
    result = chat(provider, tmp_path / "store", "--model", "gpt-4o", "--root", str(root), "What is in a.txt?")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Let me look.a.txt says hello; the directory has two files.\n"
    sid = result.stderr.split()[1]
    assert provider.requests[-1]["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "call_Kq1", "content": "hello\n"},
        {"role": "tool", "tool_call_id": "call_Zr2", "content": "a.txt"}]
    log = JsonlStore(tmp_path / "store").load(sid).events
    check_invariants(log)
    assert [e.data["reason"]["kind"] for e in log if e.type == TURN_END] == ["completed"]


def test_chat_resumes_in_a_subprocess_reading_prompts_from_stdin(provider: Provider, root: Path,
                                                                 tmp_path: Path) -> None:
    store = tmp_path / "store"
    sid = _started(provider, store, root, "openai_final_text", "openai_final_text", "openai_final_text")
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{store}", "OPENAI_API_KEY": "k",
           "OPENAI_BASE_URL": provider.base_url}
    command = [sys.executable, "-m", "agentlog.cli", "chat", "--resume", sid, "--root", str(root)]
    result = subprocess.run(command, input="one\n\n  \ntwo\n", capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "a.txt says hello; the directory has two files.\n" * 2
    assert provider.requests[-1]["model"] == "gpt-4o"  # the session's model
    messages = provider.requests[-1]["messages"]
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert [m["content"] for m in messages if m["role"] == "user"] == ["hi", "one", "two"]


def test_chat_errors_are_one_line(provider: Provider, root: Path, tmp_path: Path) -> None:
    no_model = chat(provider, tmp_path / "store", "--root", str(root), "hi")
    assert no_model.exit_code == 2 and "--model is needed" in no_model.output
    no_root = chat(provider, tmp_path / "store", "--model", "m", "--root", str(tmp_path / "absent"), "hi")
    assert no_root.exit_code == 1 and "not a directory" in no_root.output
    missing = chat(provider, tmp_path / "store", "--resume", "nope\x1b[2J", "hi")
    assert missing.exit_code == 1 and "nope\\x1b[2J" in missing.output and "\x1b" not in missing.output
    failed = chat(provider, tmp_path / "store", "--model", "m", "--root", str(root), "hi")  # no script: 500
    assert failed.exit_code == 1 and "error: Error code: 500" in failed.stderr
    assert all(result.exception is None or isinstance(result.exception, SystemExit)
               for result in (no_model, no_root, missing, failed))


def test_chat_escapes_terminal_controls_in_the_answer(provider: Provider, root: Path, tmp_path: Path) -> None:
    provider.queue(sse("openai_terminal_escapes"))
    result = chat(provider, tmp_path / "store", "--model", "m", "--root", str(root), "hi")
    assert result.exit_code == 0, result.output
    assert result.stdout == "\\x1b]0;pwned\\x07\\x1b[2JDone.\\u202e\n"


def _run_chat(store: Path, *args: str, cwd: Path, input: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{store}", "OPENAI_API_KEY": "k", "COLUMNS": "200"}
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.run([sys.executable, "-m", "agentlog.cli", "chat", *args], input=input,
                          capture_output=True, text=True, env=env, timeout=120, cwd=cwd)


def _stored(store: Path) -> list[str]:
    return [header.id for header in JsonlStore(store).list()] if store.exists() else []


def test_a_connection_error_names_the_url_and_how_to_point_elsewhere(root: Path, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    result = _run_chat(tmp_path / "store", "--base-url", url, "--model", "m", "--root", str(root), "hi",
                       cwd=tmp_path)
    assert result.returncode == 1
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert url in line and "--base-url" in line and "$OPENAI_API_KEY" in line and "Traceback" not in line


def test_a_failed_first_request_leaves_no_session_behind(provider: Provider, root: Path,
                                                          tmp_path: Path) -> None:
    store = tmp_path / "store"
    failed = chat(provider, store, "--model", "m", "--root", str(root), "hi")  # no script: 500
    assert failed.exit_code == 1 and "error: Error code: 500" in failed.stderr
    assert _stored(store) == []
    assert "not kept" in failed.stderr
    provider.queue(sse("openai_final_text"))  # a later prompt that succeeds keeps the session
    kept = chat(provider, store, "--model", "m", "--root", str(root), input="first\nsecond\n")
    assert kept.exit_code == 1, kept.output
    assert len(_stored(store)) == 1


def test_resume_restores_the_working_directory_of_the_session(provider: Provider, root: Path,
                                                              tmp_path: Path) -> None:
    store = tmp_path / "store"
    sid = _started(provider, store, root, "openai_final_text", "openai_parallel_tools", "openai_final_text")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.txt").write_text("the wrong tree\n")
    result = _run_chat(store, "--base-url", provider.base_url, "--resume", sid, "What is in a.txt?",
                       cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    tool_results = [m for m in provider.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_results[0]["content"] == "hello\n"
    assert str(root) in result.stderr  # says where the tools read
