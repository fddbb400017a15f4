"""A cold read in another process never writes under a live writer (issue 11 item 1).

Real processes: ``tests/store/lock_worker.py`` holds a session with a turn open at a tool
call while this process loads, appends, opens, forks and runs the CLI on it; the writer
then finishes and its log must be intact with the real tool result. After a SIGKILL, a
load in another process takes the lock and repairs. (The memory store, which cannot
cross processes, runs the same rules in ``tests/contract/test_writer_lock_contract.py``.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentlog.errors import ForkError, SessionLockedError
from agentlog.store.urls import open_store
from tests.store.lock_worker import assert_intact
from tests.store.pg_worker import REPO, Schema
from tests.store.pg_worker import finish as finish_worker

SID = "s1"


@pytest.fixture(params=["jsonl-raw", "jsonl-zstd", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        schema = Schema.new()
        yield f"{schema.url}&write_delay_ms=20"
        schema.drop()
        return
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'sessions.db'}?write_delay_ms=20"
        return
    compression = "none" if request.param == "jsonl-raw" else "zstd"
    yield f"jsonl://{tmp_path / 'root'}?compression={compression}&write_delay_ms=20"


@pytest.fixture
def writer(url: str) -> Iterator[Callable[[], tuple[subprocess.Popen[str], int, int]]]:
    """Start the lock worker; returns (process, pid, durable seq) once it holds the open turn."""
    started: list[subprocess.Popen[str]] = []

    def start() -> tuple[subprocess.Popen[str], int, int]:
        process = subprocess.Popen([sys.executable, "-m", "tests.store.lock_worker", url, SID],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
                                   env={**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"})
        started.append(process)
        assert process.stdout is not None
        word, pid, durable = process.stdout.readline().split()
        assert word == "READY"
        return process, int(pid), int(durable)

    yield start
    for process in started:
        finish_worker(process)  # type: ignore[arg-type]


def finish(process: subprocess.Popen[str]) -> None:
    """Let the worker record the tool result, end its turn and close."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("\n")
    process.stdin.flush()
    assert process.stdout.readline().split()[0] == "DONE"
    assert process.wait(timeout=60) == 0


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentlog.cli", "--store", url, *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO / "src")})


def test_load_in_another_process_is_refused_naming_the_writer_and_its_log_stays_intact(
    url: str, writer: Callable[[], tuple[subprocess.Popen[str], int, int]]
) -> None:
    process, pid, durable = writer()
    store = open_store(url)
    with pytest.raises(SessionLockedError, match="cannot repair its interrupted turn") as info:
        store.load(SID)
    assert info.value.pid == pid and f"process {pid}" in str(info.value)
    assert "inspect() and read_from()" in str(info.value)
    assert len(store.read_from(SID, 0).events) == durable  # nothing was written
    assert store.inspect(SID).events[-1].data["reason"] == {"kind": "interrupted"}
    finish(process)
    assert_intact(store, SID)
    store.close()


def test_cold_append_open_and_fork_in_another_process_leave_the_writer_intact(
    url: str, writer: Callable[[], tuple[subprocess.Popen[str], int, int]]
) -> None:
    process, pid, durable = writer()
    store = open_store(url)
    event = {"type": "turn/start", "seq": durable, "time": 1, "data": {"turn": 9}}
    with pytest.raises(SessionLockedError, match="cannot append") as info:
        store.append(SID, [event])
    assert info.value.pid == pid
    with pytest.raises(SessionLockedError, match=r"cannot open for writing: .*inspect") as info:
        store.open(SID)
    assert info.value.pid == pid
    with pytest.raises(ForkError):
        store.fork(SID)  # the durable log ends inside the open turn
    boundary = next(e.seq for e in store.read_from(SID, 0).events if e.type == "turn/end")
    with store.fork(SID, boundary, "child") as child:
        assert child.session.events[boundary].type == "turn/end"
    assert len(store.read_from(SID, 0).events) == durable
    finish(process)
    assert_intact(store, SID)
    store.close()


def test_cli_commands_never_break_a_live_writer(
    url: str, writer: Callable[[], tuple[subprocess.Popen[str], int, int]]
) -> None:
    process, pid, durable = writer()
    for args in (["show", SID], ["inspect", SID], ["verify", SID], ["list"]):
        result = cli(url, *args)
        assert "Traceback" not in result.stderr, result.stderr
    for args in (["delete", SID, "--yes"], ["materialize", SID]):
        result = cli(url, *args)
        if args[0] == "delete":
            assert result.returncode != 0, result.stdout
            assert "cannot delete:" in result.stderr and f"process {pid}" in result.stderr
        assert "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) <= 1, result.stderr
    store = open_store(url)
    assert len(store.read_from(SID, 0).events) == durable
    finish(process)
    assert_intact(store, SID)
    store.close()


def test_after_the_writer_is_killed_a_load_in_another_process_repairs(
    url: str, writer: Callable[[], tuple[subprocess.Popen[str], int, int]]
) -> None:
    process, _pid, durable = writer()
    process.send_signal(signal.SIGKILL)
    process.wait()
    store = open_store(url)
    before = list(store.read_from(SID, 0).events)
    assert len(before) == durable
    events = store.load(SID).events
    assert list(events[:durable]) == before  # the closers follow what was durable
    assert "tool/result" in [e.type for e in events[durable:]]
    assert events[-1].type == "turn/end" and events[-1].data["reason"] == {"kind": "interrupted"}
    with store.open(SID) as live:  # the repair released the lock
        assert live.session.events[-1].type == "session/end-seed"
    store.close()


def test_the_first_lock_on_a_fresh_jsonl_root_creates_every_directory_private(tmp_path: Path) -> None:
    store = open_store(f"jsonl://{tmp_path / 'new' / 'root'}")
    with store.start(SID) as live:  # the lock is the first thing a live session writes
        live.session.append("turn/start", {"turn": 1})
        live.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    for directory in (tmp_path / "new", tmp_path / "new" / "root", tmp_path / "new" / "root" / ".agentlog"):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    store.close()
