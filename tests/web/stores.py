"""Stores the viewer tests look at: the demo, a crashed session, a fork, a compacted session and
hostile content. Built with the real library (recorder, subprocess + SIGKILL, compactor)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from agentlog import Compactor, ExtractiveSummarizer, Recorder, SessionHeader, open_store
from agentlog.cli.demo import record_turn

CRASHED: Final = "crashed-session"
COMPACTED: Final = "compacted-session"
PARENT: Final = "parent-session"
CHILD: Final = "child-session"
HOSTILE_ID: Final = '<script>window.__pwned=1</script>"\u202e\x1b[31m'

PAYLOADS: Final = (
    "<script>window.__pwned = 1; alert(1)</script>",
    '<img src=x onerror="window.__pwned=2;alert(2)">',
    '<a href="javascript:window.__pwned=3">click me</a>',
    '<svg onload="window.__pwned=4"><script>alert(4)</script></svg>',
    "\x1b[2J\x1b]0;owned title\x07 ANSI escapes",
    "RTL \u202eoverride\u202c and \u2066isolate\u2069",
    "</pre></div></article><script>alert(5)</script>",
    "{{ 7*7 }} ${7*7} <%= 7*7 %>",
)
"""Hostile strings: each must show up as text and run nothing."""


def two_turns(url: str, session_id: str) -> None:
    """A session of two complete turns (the demo's script)."""
    with open_store(url) as store, store.start(SessionHeader(id=session_id, cwd="/work/demo")) as live:
        recorder = Recorder(live)
        record_turn(recorder, 0)
        record_turn(recorder, 1)


@contextmanager
def recording(url: str, session_id: str) -> Iterator[subprocess.Popen[str]]:
    """A subprocess holding ``session_id``'s writer lock, in turn 3 while its tool runs (the demo's
    worker); killed with SIGKILL when the block ends, if the caller has not killed it already."""
    with subprocess.Popen([sys.executable, "-m", "agentlog.cli.demo", "worker", url, session_id],
                          stdout=subprocess.PIPE, text=True) as worker:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line.startswith("READY"), line
        try:
            yield worker
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.wait()


def crash_session(url: str, session_id: str) -> None:
    """Two complete turns, then a third recorded by a subprocess that is SIGKILLed while its tool runs."""
    two_turns(url, session_id)
    with recording(url, session_id):
        pass


def compacted_session(url: str, session_id: str) -> None:
    """Three turns, a manual compaction, then one more turn."""
    with open_store(url) as store, store.start(SessionHeader(id=session_id, cwd="/work/demo")) as live:
        recorder = Recorder(live)
        record_turn(recorder, 0)
        record_turn(recorder, 1)
        result = Compactor(ExtractiveSummarizer()).compact_now(live)
        assert result is not None
        with recorder.turn() as turn, turn.step() as step:
            step.user_message("After the checkpoint: what changed?")
            step.request_header({"config": {"provider": "p", "model": "after-compaction"}})
            step.text_delta("divide now raises ValueError on zero.")
            step.assistant(usage={"inputTokens": 300, "outputTokens": 9})


def forked_sessions(url: str) -> int:
    """A parent of two turns and a child forked at the end of turn 1; returns the boundary."""
    with open_store(url) as store:
        with store.start(SessionHeader(id=PARENT, cwd="/work/demo")) as live:
            recorder = Recorder(live)
            record_turn(recorder, 0)
            boundary = live.session.seq - 1  # the last event of turn 1
            record_turn(recorder, 1)
        with store.fork(PARENT, boundary, CHILD) as child, Recorder(child).turn() as turn, \
                turn.step() as step:
            step.user_message("In the fork: list the test files instead.")
            step.request_header({"config": {"provider": "p", "model": "m"}})
            step.text_delta("tests/test_calc.py")
            step.assistant()
    return boundary


def hostile_session(url: str, session_id: str = HOSTILE_ID) -> None:
    """Every payload in a user message, an assistant answer, a tool call's arguments and its result."""
    with open_store(url) as store, store.start(SessionHeader(id=session_id, cwd="/work/<b>cwd</b>")) as live:
        recorder = Recorder(live)
        rng = random.Random(1)
        for number, payload in enumerate(PAYLOADS):
            with recorder.turn() as turn:
                with turn.step() as step:
                    step.user_message(payload)
                    step.request_header({"config": {"provider": "p", "model": payload[:40]},
                                         "system": payload})
                    step.reasoning_delta(f"thinking about {payload}")
                    step.text_delta(payload[: rng.randint(1, len(payload))])
                    call, arguments = f"call-{number}", json.dumps({"cmd": payload})
                    step.tool_call_delta(call, "run", arguments)
                    step.assistant()
                    step.tool_call(call, "run", arguments)
                    step.tool_result(call, payload)
                with turn.step() as step:
                    step.request_header({"config": {"provider": "p", "model": "m"}})
                    step.text_delta(payload)
                    step.assistant()


def build_all(url: str) -> str:
    """A store (any backend URL) with every kind of session above; returns its URL."""
    crash_session(url, CRASHED)
    compacted_session(url, COMPACTED)
    forked_sessions(url)
    hostile_session(url)
    return url
