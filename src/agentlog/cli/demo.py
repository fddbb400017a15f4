"""The offline demo: record a scripted coding-agent session, crash it, restore it, fork it.

Runs with no network and no API key. A subprocess records a turn and is killed with
SIGKILL while a tool runs; restoring the session closes the interrupted turn with
synthetic events instead of truncating it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.errors import UsageError
from agentlog.recording.recorder import Recorder, Step
from agentlog.store.base import Store
from agentlog.store.urls import open_store

__all__ = ["DemoReport", "check_demo_store", "run_demo"]

PROVIDER, MODEL = "deepseek", "deepseek-chat"
HEADER = {
    "config": {"provider": PROVIDER, "model": MODEL, "maxTokens": 8192},
    "system": "You are a careful coding agent working in the user's repository.",
    "tools": [
        {"name": "read_file", "description": "Read a text file.",
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
        {"name": "write_file", "description": "Write a text file.",
         "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                          "text": {"type": "string"}}}},
        {"name": "run", "description": "Run a shell command.",
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
    ],
}

# (user prompt, [(assistant text, tool name, tool args, tool output) ...], final answer)
SCRIPT: list[tuple[str, list[tuple[str, str, str, str]], str]] = [
    (
        "The test for calc.divide fails. Please fix it, and don't change the test file.",
        [
            ("Let me look at the implementation first.", "read_file", '{"path": "calc.py"}',
             "def divide(a, b):\n    return a // b\n"),
            ("It uses floor division. Running the tests to confirm.", "run", '{"cmd": "pytest -q"}',
             "FAILED tests/test_calc.py::test_divide - assert 2 == 2.5\n1 failed, 4 passed"),
            ("Fixing divide to use true division.", "write_file",
             '{"path": "calc.py", "text": "def divide(a, b):\\n    return a / b\\n"}', "wrote 34 bytes"),
        ],
        "Fixed: `divide` now uses true division (`a / b`); the test file is unchanged.",
    ),
    (
        "Thanks. Now make divide raise ValueError on a zero divisor.",
        [
            ("Updating divide with an explicit check.", "write_file",
             '{"path": "calc.py", "text": "def divide(a, b):\\n    if b == 0:\\n        raise ValueError(\\"b'
             ' must not be zero\\")\\n    return a / b\\n"}', "wrote 92 bytes"),
            ("Running the tests.", "run", '{"cmd": "pytest -q"}', "5 passed in 0.03s"),
        ],
        "Done: divide raises ValueError('b must not be zero'); all 5 tests pass.",
    ),
    (
        "Run the full test suite with coverage and summarize.",
        [
            ("Starting the slow coverage run now.", "run", '{"cmd": "pytest --cov -q"}', ""),
        ],
        "",
    ),
]


def _stream(step: Step, text: str, rng: random.Random) -> None:
    """Stream ``text`` as small deltas, as a provider would."""
    index = 0
    while index < len(text):
        size = rng.randint(3, 9)
        step.text_delta(text[index : index + size])
        index += size


def record_turn(recorder: Recorder, turn_index: int, *, stop_at_tool: bool = False,
                on_tool_started: Callable[[], None] | None = None, seed: int = 0) -> None:
    """Record SCRIPT[turn_index] as one turn: a step per tool call, then a final answer."""
    prompt, actions, answer = SCRIPT[turn_index]
    rng = random.Random(seed + turn_index)
    with recorder.turn() as turn:
        for number, (text, tool, args, output) in enumerate(actions):
            with turn.step() as step:
                if number == 0:
                    step.user_message(prompt)
                step.request_header(HEADER, context={"provider": PROVIDER, "model": MODEL,
                                                     "contextWindow": 65536})
                _stream(step, text, rng)
                call_id = f"call-{turn_index + 1}-{number + 1}"
                step.tool_call_delta(call_id, tool, args)
                step.assistant(usage={"inputTokens": 900 + 150 * number, "outputTokens": 40})
                step.tool_call(call_id, tool, args)
                if stop_at_tool:
                    if on_tool_started is not None:
                        on_tool_started()
                    time.sleep(3600)  # the "slow tool": the demo kills the process here
                step.tool_result(call_id, output)
        with turn.step() as step:
            step.request_header(HEADER)
            _stream(step, answer, rng)
            step.assistant(usage={"inputTokens": 1400, "outputTokens": 30})


@dataclass
class DemoReport:
    """What the demo did, for printing."""

    store_url: str
    session_id: str
    child_id: str
    session_path: str | None
    child_path: str | None
    recorded_events: int
    durable_before_crash: int
    closers: list[Event] = field(default_factory=list)
    restored_messages: int = 0
    child_events: int = 0
    child_messages: int = 0
    fork_boundary: int = 0
    steps: list[str] = field(default_factory=list)


def check_demo_store(store_url: str) -> None:
    """Refuse ``memory:``: the demo records in a second process and kills it, which needs a shared store."""
    if urlsplit(store_url).scheme.lower() == "memory":
        raise UsageError(f"the demo records in a second process and kills it, so it needs a store that "
                         f"process can open (jsonl:, sqlite: or postgresql:), not {store_url}")


def run_demo(store_url: str, *, log: Callable[[str], None] = print) -> DemoReport:
    """Record, crash (SIGKILL), restore and fork a scripted session in the store at ``store_url``.

    A ``memory:`` store is refused: the demo kills a second process, which cannot reach it.
    """
    check_demo_store(store_url)
    store = open_store(store_url)
    try:
        return _run(store, store_url, log)
    finally:
        store.close()


def _run(store: Store, store_url: str, log: Callable[[str], None]) -> DemoReport:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    session_id = f"demo-{stamp}-{os.getpid() % 10000:04d}"
    header = SessionHeader(id=session_id, cwd=os.getcwd())
    with store.start(header) as live:
        recorder = Recorder(live)
        record_turn(recorder, 0)
        record_turn(recorder, 1)
        recorded = live.session.seq
        boundary = recorded - 1
    log(f"recorded 2 turns ({recorded} events) into session {session_id}")

    durable = _crash_in_subprocess(store_url, session_id, log)
    inspection = store.inspect(session_id)
    closers = list(inspection.events[durable:])
    with store.open(session_id) as live:  # load commits the repair, then we resume
        messages = live.session.derive_messages()
    log(f"restored: {len(closers)} synthetic events close the interrupted turn; "
        f"{len(messages)} model messages")

    child_id = f"{session_id}-fork"
    with store.fork(session_id, boundary, child_id) as child:
        recorder = Recorder(child)
        with recorder.turn() as turn, turn.step() as step:
            step.user_message("Instead of coverage, just list the test files.")
            step.request_header(HEADER)
            _stream(step, "tests/test_calc.py is the only test file.", random.Random(7))
            step.assistant(usage={"inputTokens": 1500, "outputTokens": 12})
        child_events = child.session.seq
        child_messages = len(child.session.derive_messages())
    log(f"forked {child_id} at seq {boundary} (end of turn 2) and recorded a different turn 3")
    return DemoReport(
        store_url=store_url, session_id=session_id, child_id=child_id,
        session_path=store.locate(header), child_path=store.locate(store.load(child_id).header),
        recorded_events=recorded, durable_before_crash=durable, closers=closers,
        restored_messages=len(messages), child_events=child_events, child_messages=child_messages,
        fork_boundary=boundary,
    )


def _crash_in_subprocess(store_url: str, session_id: str, log: Callable[[str], None]) -> int:
    """Record turn 3 in a child process and SIGKILL it while its tool runs; return durable count."""
    with subprocess.Popen(  # leaving the block closes the pipe and reaps the child
        [sys.executable, "-m", "agentlog.cli.demo", "worker", store_url, session_id],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        line = _read_line(process.stdout)
        if not line.startswith("READY "):
            process.kill()
            said = process.stderr.read().strip().splitlines()
            raise RuntimeError(f"demo worker did not start: {said[-1] if said else line!r}")
        durable = int(line.split()[1])
        process.send_signal(signal.SIGKILL)
    log(f"a recorder process (pid {process.pid}) started turn 3 and was killed with SIGKILL "
        f"while its tool ran ({durable} events were durable)")
    return durable


def _read_line(stream: Any) -> str:
    line: str = stream.readline()
    return line.strip()


def _worker(store_url: str, session_id: str) -> None:
    store = open_store(store_url)
    live = store.open(session_id)
    recorder = Recorder(live)

    def ready() -> None:
        print(f"READY {live.durable_seq}", flush=True)

    record_turn(recorder, 2, stop_at_tool=True, on_tool_started=ready)


def _main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "worker":
        _worker(argv[1], argv[2])
        return 0
    print("usage: python -m agentlog.cli.demo worker STORE_URL SESSION_ID", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
