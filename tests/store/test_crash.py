"""Crash safety with real processes: SIGKILL a recorder at random moments, then restore."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.workload import workload_events

from agentlog import Session
from agentlog.core.invariants import check_invariants
from agentlog.store.urls import open_store
from tests.store.killing import kill_after_start

TURNS = 40
EXPECTED = workload_events(TURNS, seed=7)


def _kill_at_random(url: str, session_id: str, rng: random.Random, env: dict[str, str] | None = None) -> int:
    """Start a recorder, SIGKILL it after a random delay; return the highest acknowledged seq count."""
    acked = 0

    def take(line: bytes) -> None:
        nonlocal acked
        if line.startswith(b"ACK "):
            acked = max(acked, int(line.split()[1]))

    kill_after_start([sys.executable, "-m", "tests.store.crash_worker", url, session_id, str(TURNS)],
                     rng.uniform(0.0, 0.5), take, env)
    return acked


def _check_recovered(url: str, session_id: str, acked: int) -> None:
    store = open_store(url)
    try:
        loaded = store.load(session_id)
    finally:
        store.close()
    events = list(loaded.events)
    assert len(events) >= acked, f"lost acknowledged events: {len(events)} < {acked}"
    for event, expected in zip(events[:acked], EXPECTED[:acked], strict=True):
        assert (event.type, event.data) == (expected.type, expected.data), f"seq {event.seq} differs"
    check_invariants(events)
    session = Session.restore(session_id, events, loaded.header)
    calls: set[str] = set()
    results: set[str] = set()
    for message in session.derive_messages():
        for block in message["content"]:
            if block.get("type") == "tool-call":
                calls.add(block["id"])
            elif block.get("type") == "tool-result":
                results.add(block["toolCallId"])
    assert calls == results, f"unpaired tool calls on the surface: {calls ^ results}"


def _crash_loop(tmp_path: Path, compression: str, runs: int, seed: int) -> None:
    rng = random.Random(seed)
    url = f"jsonl://{tmp_path / 'root'}?compression={compression}&write_delay_ms=50"
    for run in range(runs):
        session_id = f"crash-{run}"
        acked = _kill_at_random(url, session_id, rng)
        store = open_store(url)
        try:
            exists = any(header.id == session_id for header in store.list())
        finally:
            store.close()
        if not exists:
            assert acked == 0
            continue
        _check_recovered(url, session_id, acked)


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_sigkill_at_random_moments_loses_no_acknowledged_event(tmp_path: Path, compression: str) -> None:
    _crash_loop(tmp_path, compression, runs=13, seed=1 if compression == "zstd" else 2)


@pytest.mark.slow
@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_sigkill_soak_500_runs(tmp_path: Path, compression: str) -> None:
    _crash_loop(tmp_path, compression, runs=250, seed=11 if compression == "zstd" else 12)


def test_two_processes_opening_one_session_for_writing_one_wins(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'root'}"
    store = open_store(url)
    live = store.start("shared")
    live.session.append("turn/start", {"turn": 1})
    live.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    live.flush()
    code = (
        "import sys\n"
        "from agentlog.store.urls import open_store\n"
        "from agentlog.errors import SessionLockedError\n"
        f"store = open_store({url!r})\n"
        "try:\n"
        "    store.open('shared')\n"
        "except SessionLockedError as exc:\n"
        "    print('LOCKED', exc.pid)\n"
        "    sys.exit(3)\n"
        "print('OPENED')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.split() == ["LOCKED", str(os.getpid())]
    live.close()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "OPENED", result.stdout + result.stderr
    store.close()


def test_a_killed_holder_releases_its_lock(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'root'}"
    code = (
        "import sys, time\n"
        "from agentlog.store.urls import open_store\n"
        f"live = open_store({url!r}).start('held')\n"
        "live.session.append('turn/start', {'turn': 1})\n"
        "live.flush()\n"
        "print('HELD', flush=True)\n"
        "time.sleep(60)\n"
    )
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "HELD"
        store = open_store(url)
        with pytest.raises(Exception, match="open for writing by process"):
            store.open("held")
        process.send_signal(signal.SIGKILL)
        process.wait()
    with store.open("held") as live:
        assert [e.type for e in live.session.events][-3:] == ["turn/start", "turn/end", "session/end-seed"]
    store.close()
