"""Temp files a killed writer left beside a transcript go at the next open, under the writer lock
(issue 25 item 4); never while another process holds that lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentlog import Recorder, SessionHeader
from agentlog.errors import SessionLockedError
from agentlog.store.jsonl.store import JsonlStore
from tests.store.killing import REPO

HEADER = SessionHeader(id="s", cwd="/work/project")


def recorded(root: Path, compression: str = "zstd") -> Path:
    store = JsonlStore(root, compression=compression)  # type: ignore[arg-type]
    with store.start(HEADER) as live, Recorder(live).turn() as turn:
        turn.user_message("hello")
    store.close()
    return Path(store.locate(HEADER))


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_an_open_removes_the_temp_files_a_killed_writer_left(tmp_path: Path, compression: str) -> None:
    path = recorded(tmp_path, compression)
    stale = [path.with_name(f"{path.name}.0123456789ab.tmp"),
             path.with_name(f"{path.name}.seek.{dead_pid()}.140234.tmp"),
             path.with_name(f"{path.name}.ckpt.{dead_pid()}.140234.tmp")]
    kept = [path.with_name(f"{path.name}.seek.{os.getpid()}.1.tmp"),  # its writer still runs
            path.with_name("notes.tmp"), path.with_name(f"{path.name}.torn-at-12")]
    for planted in (*stale, *kept):
        planted.write_bytes(b"partial")
    store = JsonlStore(tmp_path, compression=compression)  # type: ignore[arg-type]
    store.inspect("s")  # reads never write, nor remove
    assert all(planted.exists() for planted in stale)
    with store.open("s") as live, Recorder(live).turn() as turn:
        turn.user_message("again")
    assert not any(planted.exists() for planted in stale)
    assert all(planted.exists() for planted in kept)


IMPORT = """
import sys, time
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.fs import FileSystem

class Slow(FileSystem):
    def link(self, source, target):
        print("TEMP", source, flush=True)
        time.sleep(60)

store = JsonlStore(sys.argv[1], fs=Slow())
store.create(__import__("agentlog").SessionHeader(id="s", cwd="/work/project"))
store.append("s", [{"type": "session/note", "seq": 0, "time": 1, "data": {"text": "x"}, "ignorable": True}])
"""


def test_a_temp_left_by_a_sigkilled_import_is_removed_by_the_next_writer(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", IMPORT, str(tmp_path)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, env=env) as child:
        assert child.stdout is not None
        line = child.stdout.readline().decode()
        assert line.startswith("TEMP "), line
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    temp = Path(line.split(" ", 1)[1].strip())
    assert temp.exists()
    with JsonlStore(tmp_path).start(HEADER) as live, Recorder(live).turn() as turn:  # the import again
        turn.user_message("imported again")
    assert not temp.exists()


HOLD = """
import sys
from agentlog.store.jsonl.store import JsonlStore
live = JsonlStore(sys.argv[1]).open("s")
print("HELD", flush=True)
sys.stdin.readline()
"""


def test_a_temp_is_left_alone_while_another_process_holds_the_writer_lock(tmp_path: Path) -> None:
    path = recorded(tmp_path)
    temp = path.with_name(f"{path.name}.0123456789ab.tmp")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, env=env) as child:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == b"HELD\n"  # its open removed nothing yet planted
        temp.write_bytes(b"being written")
        with pytest.raises(SessionLockedError):
            JsonlStore(tmp_path).open("s")
        assert temp.exists()
        child.stdin.close()
        child.wait()
        child.stdout.close()
