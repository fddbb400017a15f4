"""``agentlog tail [-f]``: the last events, then each new one while a real writer process appends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, invoke, record

WRITER = """
import sys, time
from agentlog import Recorder, open_store
url, sid, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open_store(url + ("&" if "?" in url else "?") + "write_delay_ms=5") as store:
    with store.open(sid) as live:
        recorder = Recorder(live)
        print("OPEN", flush=True)
        sys.stdin.readline()
        for n in range(turns):
            with recorder.turn() as turn:
                turn.user_message(f"appended turn {n}")
            live.flush()
            time.sleep(0.2)
"""


def test_tail_prints_the_last_events(store_url: str) -> None:
    record(store_url, "t1")
    last = invoke(store_url, "tail", "t1", "-n", "2", "--json")
    assert last.exit_code == 0, last.output
    events = [json.loads(line) for line in last.stdout.splitlines()]
    assert [event["type"] for event in events] == ["step/end", "turn/end"]
    table = invoke(store_url, "tail", "t1", "-n", "1")
    assert "turn/end" in table.stdout
    assert invoke(store_url, "tail", "t1", "-n", "0").stdout == ""


def test_tail_follows_a_writer_process(store_url: str) -> None:
    record(store_url, "live")
    env = {**os.environ, "PYTHONPATH": str(REPO), "AGENTLOG_STORE": store_url}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, store_url, "live", "3"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    follower = None
    try:
        assert writer.stdout is not None and writer.stdin is not None
        assert writer.stdout.readline().strip() == "OPEN"
        follower = subprocess.Popen(
            [sys.executable, "-m", "agentlog.cli", "tail", "live", "-f", "-n", "1", "--json",
             "--idle-timeout", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())  # the last stored event, before following
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.wait(60) == 0
        out, err = follower.communicate(timeout=60)
    finally:
        for process in (writer, follower):
            if process is not None and process.poll() is None:
                process.kill()
                process.communicate()
            for pipe in (process.stdin, process.stdout, process.stderr) if process is not None else ():
                if pipe is not None:
                    pipe.close()
    assert follower.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [event["seq"] for event in events] == list(range(first["seq"] + 1, first["seq"] + 1 + len(events)))
    texts = [event["data"]["content"][0]["text"] for event in events if event["type"] == "user/message"]
    assert texts == ["appended turn 0", "appended turn 1", "appended turn 2"]


def test_tail_of_a_missing_session_is_one_clear_error(store_url: str) -> None:
    record(store_url, "t1")
    missing = invoke(store_url, "tail", "nope", "-f")
    assert missing.exit_code == 1 and "not found" in missing.stderr


def test_a_nan_idle_timeout_or_poll_interval_is_refused_not_followed_forever(tmp_path: Path) -> None:
    from agentlog import MemoryStore, UsageError, follow
    from tests.cli.conftest import run

    with MemoryStore() as store, store.start("s") as live:
        live.session.append("turn/start", {"turn": 1})
        live.flush()
        for options in ({"idle_timeout": float("nan")}, {"idle_timeout": -1.0}, {"poll_interval": 0.0},
                        {"poll_interval": float("nan")}):
            with pytest.raises(UsageError):
                next(follow(store, "s", 0, **options))
    url = f"jsonl://{tmp_path}/store"
    record(url, "t1")
    done = run(url, "tail", "t1", "-f", "--idle-timeout", "nan", timeout=30)
    assert done.returncode == 1 and "idle" in done.stderr and "Traceback" not in done.stderr
