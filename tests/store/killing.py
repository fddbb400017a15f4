"""SIGKILL a worker process at a chosen moment while reading the acknowledgements it prints."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def kill_after_start(command: Sequence[str], delay: float, take: Callable[[bytes], None],
                     env: dict[str, str] | None = None) -> None:
    """Run ``command``, hand every stdout line to ``take``, and SIGKILL the process ``delay`` s
    after it printed ``START`` (or when it ends first). Lines still in the pipe after the kill
    are handed over too: what was printed before the kill is a promise."""
    process = subprocess.Popen(list(command), stdout=subprocess.PIPE, cwd=REPO,
                               env=env or {**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    started: float | None = None
    buffer = b""
    while started is None or time.monotonic() - started < delay:
        if not selector.select(timeout=0.005):
            if process.poll() is not None:
                break
            continue
        chunk = os.read(process.stdout.fileno(), 65536)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line == b"START" and started is None:
                started = time.monotonic()
            take(line)
    process.send_signal(signal.SIGKILL)
    for line in (buffer + process.stdout.read()).split(b"\n"):
        take(line)
    process.wait()
    process.stdout.close()
    selector.close()
