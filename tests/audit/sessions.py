"""Stores and sessions for the audit tests: the demo, a SIGKILLed recorder, forks and compactions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from agentlog import Recorder, SessionHeader, Store, open_store
from agentlog.cli.demo import record_turn
from agentlog.core.jsonvalue import freeze

REPO = Path(__file__).resolve().parents[2]


def recorded(url: str, session_id: str, *, turns: int = 2, cwd: str = "/tmp", **extra: object) -> Store:
    """A store holding ``session_id`` with the demo's first ``turns`` turns."""
    store = open_store(url)
    header = SessionHeader(id=session_id, cwd=cwd, extra=freeze(extra))
    with store.start(header) as live:
        recorder = Recorder(live)
        for turn in range(turns):
            record_turn(recorder, turn)
    return store


def crash_recorder(url: str, session_id: str) -> int:
    """Record the demo's turn 3 in a subprocess and SIGKILL it while its tool runs; the durable count."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    with subprocess.Popen([sys.executable, "-m", "agentlog.cli.demo", "worker", url, session_id],
                          stdout=subprocess.PIPE, text=True, env=env) as process:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("READY "), line
        process.send_signal(signal.SIGKILL)
        process.wait()
    return int(line.split()[1])
