"""``verify`` tells a live writer from a crashed one: a real writer subprocess holding the session
open makes it exit 3 ("open: being written by process N"); once SIGKILLed, the same open turn is
interrupted (exit 2). The writer lock is only read (/proc/locks; PostgreSQL: pg_locks), never taken."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlog import SessionHeader, open_store
from agentlog.store.filelock import flock_holder, lock_session_file
from tests.cli.conftest import REPO, invoke, run

WRITER = """
import sys
from agentlog import SessionHeader, open_store
store = open_store(sys.argv[1])
live = store.start(SessionHeader(id="busy", cwd="/w"))
live.session.append("turn/start", {"turn": 1})
live.flush()
print("ready", flush=True)
sys.stdin.read()  # hold the session open until the test kills us
"""


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":  # the holder is read from pg_locks
        from tests.store.pg_worker import throwaway_url

        with throwaway_url() as url:
            yield url
        return
    root = tmp_path / "store"
    yield f"jsonl://{root}" if request.param == "jsonl" else f"sqlite://{root}/sessions.db"


@pytest.fixture
def writer(url: str) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, url], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


def test_a_session_a_live_process_writes_is_open_not_recovered(
    url: str, writer: subprocess.Popen[str]
) -> None:
    result = invoke(url, "verify", "busy")
    assert result.exit_code == 3, result.output
    assert f"open busy: being written by process {writer.pid}" in result.output
    assert "turn 1 is being recorded" in result.output
    as_json = invoke(url, "verify", "busy", "--json")
    assert as_json.exit_code == 3
    report = json.loads(as_json.output)
    assert report["status"] == "open" and report["writer"] == writer.pid
    ran = run(url, "verify", "busy")
    assert ran.returncode == 3 and f"process {writer.pid}" in ran.stdout, ran.stderr


def test_verify_does_not_disturb_the_writer(url: str, writer: subprocess.Popen[str]) -> None:
    """The probe takes no lock: another opener still sees the writer's lock, the writer goes on."""
    assert invoke(url, "verify", "busy").exit_code == 3
    with open_store(url) as store, pytest.raises(Exception, match=f"process {writer.pid}"):
        store.open("busy")
    assert writer.poll() is None


def test_a_sigkilled_writer_leaves_an_interrupted_turn(url: str, writer: subprocess.Popen[str]) -> None:
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    deadline = time.monotonic() + 10  # PostgreSQL ends the dead client's backend when it notices
    while (result := invoke(url, "verify", "busy")).exit_code == 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert result.exit_code == 2, result.output
    assert "recovered busy" in result.output and "interrupted turn 1" in result.output
    assert json.loads(invoke(url, "verify", "busy", "--json").output)["writer"] is None


def test_an_intact_session_with_a_live_writer_is_ok(url: str, tmp_path: Path) -> None:
    with open_store(url) as store, store.start(SessionHeader(id="idle", cwd="/w")) as live:
        live.session.append("turn/start", {"turn": 1})
        live.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        live.flush()
        assert invoke(url, "verify", "idle").exit_code == 0


def test_flock_holder_reads_the_kernel_table_only(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "s.lock"
    assert flock_holder(path) is None  # no lock file: nobody
    lock = lock_session_file(path, "s")
    try:
        assert flock_holder(path) == os.getpid()
    finally:
        lock.release()
    assert flock_holder(path) is None


def test_flock_holder_skips_malformed_and_other_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.lock"
    path.write_text("1\n")
    st = os.stat(path)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    table = tmp_path / "locks"
    table.write_text(
        "garbage\n"
        f"1: POSIX  ADVISORY  WRITE 11 {dev}:{st.st_ino} 0 EOF\n"  # a POSIX lock, not ours
        f"2: FLOCK  ADVISORY  WRITE 12 {dev}:{st.st_ino + 1} 0 EOF\n"  # another inode
        f"3: -> FLOCK  ADVISORY  WRITE 13 {dev}:{st.st_ino} 0 EOF\n"  # a waiter
        f"4: FLOCK  ADVISORY  WRITE x {dev}:{st.st_ino} 0 EOF\n"
        f"5: FLOCK  ADVISORY  WRITE 14 {dev}:{st.st_ino} 0 EOF\n"
    )
    assert flock_holder(path, str(table)) == 14
    with pytest.raises(OSError):
        flock_holder(path, str(tmp_path / "no-such-table"))
