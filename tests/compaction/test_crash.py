"""A process SIGKILLed between ``compaction/start`` and ``compaction/end`` does not wedge the session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentlog.compaction.engine import Compactor
from agentlog.compaction.events import COMPACTION_END, COMPACTION_START
from agentlog.compaction.invariants import CompactionInvariantChecker, check_compaction_invariants
from agentlog.compaction.lock import scan_lock
from agentlog.core.invariants import check_invariants
from agentlog.recording.recorder import Recorder
from agentlog.store.jsonl.store import JsonlStore
from tests.compaction.helpers import FixedSummarizer, fill, record_turn

REPO = Path(__file__).resolve().parents[2]


def kill_inside_compaction(root: Path, mode: str) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "tests.compaction.crash_worker", str(root), mode],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    ) as process:
        assert process.stdout is not None
        try:
            line = process.stdout.readline()
            assert line.startswith(b"STARTED"), line
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


@pytest.mark.parametrize("mode", ["standalone", "in-turn"])
def test_a_killed_compaction_leaves_a_stale_lock_and_the_session_compacts_again(
    tmp_path: Path, mode: str
) -> None:
    kill_inside_compaction(tmp_path, mode)
    store = JsonlStore(tmp_path, compression="none", write_delay_ms=5)
    live = store.open("crash")
    session = live.session
    kinds = [event.type for event in session.events]
    orphan = kinds.index(COMPACTION_START)
    assert COMPACTION_END not in kinds[orphan:]
    state = scan_lock(session.events)
    assert not state.live and state.stale_start is not None and state.stale_start.seq == orphan
    assert kinds[-1] == "session/end-seed"
    if mode == "in-turn":  # the repair closed the interrupted turn before the end-seed
        assert kinds[-3:] == ["step/end", "turn/end", "session/end-seed"] or kinds[-2:] == [
            "turn/end",
            "session/end-seed",
        ]
        assert session.events[-2].data["reason"]["kind"] == "interrupted"
    check_invariants(session.events)
    assert check_compaction_invariants(session.events).bracket is None
    CompactionInvariantChecker.attach(session)

    compactor = Compactor(FixedSummarizer())
    result = compactor.compact_now(live)
    assert result is not None and live.durable_seq == session.seq
    recorder = Recorder(live)
    record_turn(recorder, 5)
    turn = recorder.turn().start()
    fill(turn, 6)
    region = compactor.select_range(session, 0)
    assert region is not None
    compactor.compact_region(session, region.start, region.end)
    turn.end()
    live.close()
    reloaded = JsonlStore(tmp_path, compression="none").load("crash")
    check_invariants(reloaded.events)
    assert check_compaction_invariants(reloaded.events).bracket is None
