"""examples/coding_agent.py end to end: a real subprocess, the real SDK, the scripted local provider.

The server records every request body, so each test checks what the provider was sent: the
tool results of a multi-step turn, the request after a SIGKILL in the middle of a tool and
``--resume`` (every call answered, a synthetic result for the interrupted one), and the
request after a pressure compaction and after a context overflow (carrying the summary).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentlog import JsonlStore, check_invariants
from agentlog.agent.loop import SYSTEM_PROMPT
from agentlog.agent.tools import TOOLS
from agentlog.compaction.events import COMPACTION_END
from agentlog.core.events import TOOL_RESULT, TURN_END
from agentlog.core.repair import OUTCOME_UNKNOWN_TEXT, TOOL_OUTCOME_UNKNOWN
from tests.agent.blocking_agent import BLOCK
from tests.integrations.server import Provider, error, sse, sse_cut

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "coding_agent.py"
BLOCKING = Path(__file__).with_name("blocking_agent.py")

ASSISTANT_CALLS = {"role": "assistant", "content": "Let me look.", "tool_calls": [
    {"id": "call_Kq1", "type": "function",
     "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
    {"id": "call_Zr2", "type": "function",
     "function": {"name": "list_dir", "arguments": '{"path": "."}'}},
]}
"""The assistant turn of the ``openai_parallel_tools`` fixture, as the next request carries it."""


def agent_command(provider: Provider, root: Path, store: Path, *args: str,
                  script: Path = EXAMPLE) -> list[str]:
    return [sys.executable, str(script), "--base-url", provider.base_url, "--api-key", "test-key",
            "--root", str(root), "--store", f"jsonl://{store}", *args]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTLOG_"))}
    return {**env, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def run_agent(provider: Provider, root: Path, store: Path, *args: str,
              stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(agent_command(provider, root, store, *args), capture_output=True, text=True,
                          env=environment(), timeout=120, input=stdin)


def session_id(stderr: str) -> str:
    first = stderr.splitlines()[0]
    assert first.startswith("session "), stderr
    return first.split()[1]


def test_a_multi_step_turn_runs_the_tools_and_sends_their_results(provider: Provider, root: Path,
                                                                   tmp_path: Path) -> None:
    provider.queue(sse("openai_parallel_tools"), sse("openai_final_text"))
    result = run_agent(provider, root, tmp_path / "store", "--model", "gpt-4o", "What is in a.txt?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Let me look.a.txt says hello; the directory has two files.\n"
    first, second = provider.requests
    system = {"role": "system", "content": SYSTEM_PROMPT}
    assert first["messages"] == [system, {"role": "user", "content": "What is in a.txt?"}]
    assert second == {
        "model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}, "tools": list(TOOLS),
        "messages": [*first["messages"], ASSISTANT_CALLS,
                     {"role": "tool", "tool_call_id": "call_Kq1", "content": "hello\n"},
                     {"role": "tool", "tool_call_id": "call_Zr2", "content": "a.txt"}],
    }
    log = JsonlStore(tmp_path / "store").load(session_id(result.stderr)).events
    check_invariants(log)
    assert [e.data["reason"]["kind"] for e in log if e.type == TURN_END] == ["completed"]


def wait_for_reader(fifo: Path, process: subprocess.Popen[str], timeout: float = 60) -> int:
    """Open ``fifo``'s write end once the agent's tool waits on its read end (a FIFO opens in pairs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        assert process.poll() is None, process.communicate()
        time.sleep(0.01)
    raise AssertionError("the agent never reached the blocking tool")


@pytest.mark.parametrize(("stop", "status", "ended"), [
    (signal.SIGKILL, -signal.SIGKILL, "interrupted"),  # crash repair closes the turn when it is resumed
    (signal.SIGINT, 130, "aborted"),  # Ctrl-C: the agent closes the turn itself, with the same results
])
def test_killed_in_the_middle_of_a_tool_then_resume_sends_every_call_answered(
        provider: Provider, root: Path, tmp_path: Path, stop: int, status: int, ended: str) -> None:
    store = tmp_path / "store"
    os.mkfifo(root / BLOCK)
    provider.queue(sse("openai_parallel_tools"))
    command = agent_command(provider, root, store, "--model", "gpt-4o", "What is in a.txt?", script=BLOCKING)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment())
    try:
        assert process.stderr is not None
        sid = session_id(process.stderr.readline())
        writer = wait_for_reader(root / BLOCK, process)  # list_dir (the 2nd call) is running now
        second = run_agent(provider, root, store, "--resume", sid, "me too")  # same session, 2nd process
        assert second.returncode == 1 and "open for writing by process" in second.stderr
        assert "Traceback" not in second.stderr
        process.send_signal(stop)
        process.wait(30)
        os.close(writer)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert process.returncode == status
    (crashed,) = provider.requests

    provider.queue(sse("openai_final_text"))
    result = run_agent(provider, root, store, "--resume", sid, "Go on.")  # the model comes from the log
    assert result.returncode == 0, result.stderr
    resumed = provider.requests[-1]
    assert resumed == {
        "model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}, "tools": list(TOOLS),
        "messages": [*crashed["messages"], ASSISTANT_CALLS,
                     {"role": "tool", "tool_call_id": "call_Kq1", "content": "hello\n"},
                     {"role": "tool", "tool_call_id": "call_Zr2", "content": OUTCOME_UNKNOWN_TEXT},
                     {"role": "user", "content": "Go on."}],
    }
    assert resumed["tools"] == crashed["tools"] and resumed["messages"][0] == crashed["messages"][0]
    log = JsonlStore(store).load(sid).events
    check_invariants(log)
    results = [e.data for e in log if e.type == TOOL_RESULT]
    assert [r.get("error", {}).get("code") for r in results] == [None, TOOL_OUTCOME_UNKNOWN]
    assert [e.data["reason"]["kind"] for e in log if e.type == TURN_END] == [ended, "completed"]


def summaries(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"]
            if m["role"] == "user" and "<compacted-summary>" in m["content"]]


def long_file(path: Path) -> str:
    """Write about 2,800 tokens of distinct lines to ``path``; returns the text."""
    text = "".join(f"line {i}: the parser keeps state {i * 7} in module m{i}.\n" for i in range(200))
    path.write_text(text)
    return text


def test_pressure_compaction_with_a_small_context_window_sends_the_summary(provider: Provider, root: Path,
                                                                            tmp_path: Path) -> None:
    text = long_file(root / "a.txt")
    # Turn 2 reads the file again: two copies pass 80 % of the 6,000-token window, so its second
    # step starts with a compaction of turn 1.
    provider.queue(sse("openai_parallel_tools"), sse("openai_final_text"),
                   sse("openai_parallel_tools"), sse("openai_final_text"))
    result = run_agent(provider, root, tmp_path / "store", "--model", "gpt-4o", "--context-window", "6000",
                       stdin="What is in a.txt?\n\nRead it again.\n")  # the blank line is skipped
    assert result.returncode == 0, result.stderr
    *earlier, last = provider.requests
    assert len(earlier) == 3 and not any(summaries(request) for request in earlier)
    (summary,) = summaries(last)
    assert "What is in a.txt?" in summary and "a.txt says hello" in summary
    assert last["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert last["messages"][-3]["tool_calls"] == ASSISTANT_CALLS["tool_calls"]
    assert "What is in a.txt?" not in str(last["messages"][2:])  # turn 1 is only in the summary now
    assert [m.get("tool_call_id") for m in last["messages"] if m["content"] == text] == ["call_Kq1"]
    log = JsonlStore(tmp_path / "store").load(session_id(result.stderr)).events
    check_invariants(log)
    (end,) = [e.data for e in log if e.type == COMPACTION_END]
    assert end["turn"] == 2 and "error" not in end


def test_a_context_overflow_is_compacted_and_retried_in_the_same_step(provider: Provider, root: Path,
                                                                       tmp_path: Path) -> None:
    long_file(root / "a.txt")  # something worth compacting
    provider.queue(sse("openai_parallel_tools"), sse("openai_final_text"),
                   error(400, "openai_context_length"), sse("openai_final_text"))
    result = run_agent(provider, root, tmp_path / "store", "--model", "gpt-4o", "What is in a.txt?", "More?")
    assert result.returncode == 0, result.stderr
    overflowed, retried = provider.requests[2:]
    assert not summaries(overflowed)
    assert len(summaries(retried)) == 1 and retried["messages"][-1] == {"role": "user", "content": "More?"}
    assert len(retried["messages"]) < len(overflowed["messages"])
    log = JsonlStore(tmp_path / "store").load(session_id(result.stderr)).events
    check_invariants(log)
    assert [e.data["reason"]["kind"] for e in log if e.type == TURN_END] == ["completed", "completed"]


def test_provider_errors_and_bad_arguments_are_one_line_each(provider: Provider, root: Path,
                                                             tmp_path: Path) -> None:
    provider.queue(*[error(429, "openai_rate_limit", {"retry-after-ms": "1"})] * 3)  # the SDK retries twice
    failed = run_agent(provider, root, tmp_path / "store", "--model", "gpt-4o", "hi")
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert failed.stderr.splitlines()[-1].startswith("error: Error code: 429 - ")
    sid = session_id(failed.stderr)
    (end,) = [e for e in JsonlStore(tmp_path / "store").load(sid).events if e.type == TURN_END]
    assert end.data["reason"]["kind"] == "error" and end.data["reason"]["error"]["code"] == "RATE_LIMITED"
    provider.queue(sse_cut("openai_cut_mid_tool", b'"arguments":"th'), sse("openai_final_text"))  # dropped
    cut = run_agent(provider, root, tmp_path / "store", "--model", "gpt-4o", "hi", "again")
    assert cut.returncode == 1 and "Traceback" not in cut.stderr  # the first turn failed, the second ran
    assert cut.stdout == "a.txt says hello; the directory has two files.\n"
    reasons = [e.data["reason"] for e in JsonlStore(tmp_path / "store").load(session_id(cut.stderr)).events
               if e.type == TURN_END]
    assert [r.get("error", {}).get("code") for r in reasons] == ["CONNECTION_ERROR", None]
    missing = run_agent(provider, root, tmp_path / "store", "--resume", "no-such-session", "hi")
    assert missing.returncode == 1 and "no-such-session" in missing.stderr
    assert "Traceback" not in missing.stderr
    window = run_agent(provider, root, tmp_path / "store", "--model", "m", "--context-window", "0", "hi")
    assert window.returncode == 2 and "--context-window must be a positive" in window.stderr
    no_root = run_agent(provider, tmp_path / "absent", tmp_path / "store", "--model", "m", "hi")
    assert no_root.returncode == 1 and "not a directory" in no_root.stderr
    assert "Traceback" not in no_root.stderr


def test_model_text_reaches_the_terminal_with_its_controls_escaped(provider: Provider, root: Path,
                                                                  tmp_path: Path) -> None:
    provider.queue(sse("openai_terminal_escapes"))
    result = run_agent(provider, root, tmp_path / "store", "--model", "gpt-4o", "hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "\\x1b]0;pwned\\x07\\x1b[2JDone.\\u202e\n"
