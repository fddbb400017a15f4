"""Crash artifacts at the end of a JSONL transcript are torn tails (DESIGN 8b, issue 25 item 1).

Real files damaged with plain file writes, then read through the CLI in a subprocess and through
the API: a zero-filled tail (delayed allocation after a crash mid-append) or bytes after the last
good record that do not start one is reported by ``verify`` (offset, bytes, exit 2), cut by
``repair`` into a side file next to the transcript, and the next append lands.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentlog import Recorder, open_store
from agentlog.store.jsonl.zstd_frames import scan_zstd_frames
from tests.cli.conftest import REPO, record, run

TAILS = {"zeros-4k": b"\0" * 4096, "garbage-37": b"not a record, not a frame: garbage!!\n"[:37]}


def transcript_of(root: Path) -> Path:
    names = ("session.jsonl", "session.jsonl.zstd")
    (path,) = [path for path in root.rglob("session.jsonl*") if path.name in names]
    return path


def url_of(root: Path, compression: str) -> str:
    return f"jsonl://{root}?compression={compression}"


def recorded(tmp_path: Path, compression: str, turns: int = 1) -> tuple[str, Path]:
    """A store URL holding session ``s`` of ``turns`` closed turns, and the path of its transcript."""
    root = tmp_path / "store"
    url = url_of(root, compression)
    record(url, "s", turns=turns)
    return url, transcript_of(root)


def events_of(url: str, session_id: str) -> list[tuple[int, str]]:
    with open_store(url) as store:
        return [(event.seq, event.type) for event in store.inspect(session_id).events]


def torn_copies(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".torn-at-*"))


@pytest.mark.parametrize("tail", TAILS.values(), ids=TAILS.keys())
@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_a_tail_that_is_not_a_record_is_torn_reported_cut_into_a_side_file_and_appended_after(
    tmp_path: Path, compression: str, tail: bytes,
) -> None:
    url, path = recorded(tmp_path, compression, 2)
    good = path.read_bytes()
    before = events_of(url, "s")
    with open(path, "ab") as handle:  # what the file system left: the size grew, the data never came
        handle.write(tail)

    with open_store(url) as store:  # the API: every valid event, the tail named
        inspection = store.inspect("s")
        assert [(event.seq, event.type) for event in inspection.events] == before
        assert inspection.recovery is not None and inspection.recovery.torn
        assert (inspection.recovery.torn_offset, inspection.recovery.torn_bytes) == (len(good), len(tail))

    verify = run(url, "verify", "s")
    assert verify.returncode == 2, verify.stdout + verify.stderr
    assert f"torn tail: {len(tail)} bytes ignored after byte {len(good)} of {path}" in verify.stdout
    shape = json.loads(run(url, "verify", "s", "--json").stdout)
    assert shape["status"] == "recovered"
    assert (shape["recovery"]["tornOffset"], shape["recovery"]["tornBytes"]) == (len(good), len(tail))
    assert path.read_bytes() == good + tail, "verify writes nothing"

    repair = run(url, "repair", "s", "--json")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    (copy,) = torn_copies(path)
    assert copy.read_bytes() == tail, "the cut bytes are kept beside the transcript"
    assert json.loads(repair.stdout)["tornCopy"] == str(copy)
    assert path.read_bytes() == good
    assert run(url, "verify", "s").returncode == 0

    with open_store(url) as store, store.open("s") as live, Recorder(live).turn() as turn:
        turn.user_message("after the repair")  # the next append lands
    after = events_of(url, "s")
    assert after[:len(before)] == before and len(after) > len(before)
    assert run(url, "verify", "s").returncode == 0


def test_repair_names_the_side_file_in_its_report(tmp_path: Path) -> None:
    url, path = recorded(tmp_path, "zstd")
    size = path.stat().st_size
    with open(path, "ab") as handle:
        handle.write(b"\0" * 512)
    repaired = run(url, "repair", "s")
    assert repaired.returncode == 0, repaired.stderr
    (copy,) = torn_copies(path)
    assert copy.name == f"session.jsonl.zstd.torn-at-{size}"
    assert f"cut bytes kept in {copy}" in repaired.stdout


def test_a_second_cut_at_the_same_offset_keeps_both_copies(tmp_path: Path) -> None:
    url, path = recorded(tmp_path, "zstd")
    for tail in (b"\0" * 100, b"\0" * 200):
        with open(path, "ab") as handle:
            handle.write(tail)
        with open_store(url) as store:
            store.load("s")  # load commits the repair as `repair` does: the bytes are kept too
    assert sorted(len(copy.read_bytes()) for copy in torn_copies(path)) == [100, 200]


def test_a_zero_filled_end_of_the_last_frame_is_torn(tmp_path: Path) -> None:
    """Delayed allocation loses whole pages: the last frame's start was written, its end reads as zeros."""
    url, path = recorded(tmp_path, "zstd", 2)
    data = path.read_bytes()
    start, end = scan_zstd_frames(data).frames[-1]
    assert end == len(data)
    damaged = data[:start + 12] + b"\0" * (end - start - 12)
    path.write_bytes(damaged)
    with open_store(url) as store:
        recovery = store.inspect("s").recovery
    assert recovery is not None and (recovery.torn_offset, recovery.torn_bytes) == (start, end - start)
    assert run(url, "repair", "s").returncode == 0
    assert path.read_bytes().startswith(data[:start])  # then the closers of the turn the cut left open
    assert [copy.read_bytes() for copy in torn_copies(path)] == [damaged[start:]]
    assert run(url, "verify", "s").returncode == 0


def test_a_damaged_frame_in_the_middle_stays_a_refusal(tmp_path: Path) -> None:
    url, path = recorded(tmp_path, "zstd", 3)
    data = bytearray(path.read_bytes())
    frames = scan_zstd_frames(bytes(data)).frames
    assert len(frames) >= 4
    start, end = frames[2]
    data[start:end] = b"\0" * (end - start)  # zeros where a frame was, good frames after it
    path.write_bytes(bytes(data))
    for command in (("verify", "s"), ("repair", "s")):
        result = run(url, *command)
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"invalid frame magic at byte {start}" in result.stderr and str(path) in result.stderr
    assert path.read_bytes() == bytes(data) and not torn_copies(path)


HOLD = """
import sys
from agentlog import Recorder, open_store
store = open_store(sys.argv[1])
live = store.start("s")
with Recorder(live).turn() as turn:
    turn.user_message("before the crash")
live.flush()
print("READY", flush=True)
sys.stdin.readline()
"""


def test_a_writer_killed_then_a_zero_filled_tail_is_repaired_and_appended_to(tmp_path: Path) -> None:
    root = tmp_path / "store"
    url = url_of(root, "zstd")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen([sys.executable, "-c", HOLD, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          env=env) as child:
        assert child.stdout is not None and child.stdout.readline() == b"READY\n"
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.stdin is not None
        child.stdin.close()
        child.stdout.close()
    path = transcript_of(root)
    size = path.stat().st_size
    with open(path, "ab") as handle:  # the append the crash interrupted: its size, no data
        handle.write(b"\0" * 1500)
    verify = run(url, "verify", "s")
    assert verify.returncode == 2 and f"torn tail: 1500 bytes ignored after byte {size}" in verify.stdout
    assert run(url, "repair", "s").returncode == 0
    with open_store(url) as store, store.open("s") as live, Recorder(live).turn() as turn:
        turn.user_message("after the crash")
    assert run(url, "verify", "s").returncode == 0
