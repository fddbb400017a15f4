"""The JSONL seek index (store/jsonl/seek.py): ``read_from`` seeks when the sidecar is current,
and gives exactly the full scan's answer whatever state the sidecar or transcript is in."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path
from typing import Literal

import pytest
from benchmarks.workload import record_workload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog import Event, SessionHeader
from agentlog.core.packed import resolve_entries
from agentlog.store.fs import FileSystem
from agentlog.store.jsonl.format import MARK_STEP, compress_frame, encode_batch, scan_log, scan_suffix
from agentlog.store.jsonl.seek import SEEK_SUFFIX
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.writer import LiveSession

Compression = Literal["zstd", "none"]
HEADER = SessionHeader(id="s1", created_at=1000, cwd="/home/user/project")


class ReadCountingFS(FileSystem):
    """Counts whole-file reads: the full scan's, which an indexed ``read_from`` never makes."""

    def __init__(self) -> None:
        self.whole_reads = 0

    def read_bytes(self, path: str) -> bytes:
        self.whole_reads += 1
        return super().read_bytes(path)


@pytest.fixture(params=["zstd", "none"])
def compression(request: pytest.FixtureRequest) -> Compression:
    return request.param  # type: ignore[no-any-return]


def record(root: Path, compression: Compression, turns: int = 3) -> Path:
    """A session of ``turns`` workload turns, flushed before each model call and tool call and
    at every turn end (many batches; packed chunk rows inside them). Returns its transcript."""
    store = JsonlStore(root, compression=compression, write_delay_ms=60_000)
    live = store.start(HEADER)
    record_workload(live.session, turns, flush=live.flush, checkpoint=live.flush)
    live.close()
    store.close()
    return Path(store.locate(HEADER))


def one_turn_live(root: Path, compression: Compression) -> tuple[JsonlStore, LiveSession, Path]:
    """A store, its live session with one durable workload turn, and the transcript's sidecar."""
    store = JsonlStore(root, compression=compression, write_delay_ms=60_000)
    live = store.start(HEADER)
    record_workload(live.session, 1, flush=live.flush)
    transcript = Path(store.locate(HEADER))
    return store, live, transcript.with_name(transcript.name + SEEK_SUFFIX)


def foreign_append(root: Path, compression: Compression) -> tuple[list[Event], list[Event]]:
    """A one-turn session, then two events appended as another program (DSH) would: without a
    sidecar record. Returns the session's events before, and those appended."""
    transcript = record(root, compression, turns=1)
    store = JsonlStore(root, compression=compression)
    events = list(store.load("s1").events)
    store.close()
    more = [Event.from_wire({**event.to_wire(), "seq": len(events) + offset})
            for offset, event in enumerate(events[1:3])]
    batch = encode_batch(more)
    with open(transcript, "ab") as handle:
        handle.write(compress_frame(batch) if compression == "zstd" else batch)
    return events, more


def full_scan(root: Path, compression: Compression, from_seq: int) -> list[Event]:
    """``read_from`` as the full scan answers it (the sidecar removed from a copy of the store)."""
    copy = root.parent / f"{root.name}-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy)
    for sidecar in copy.rglob(f"*{SEEK_SUFFIX}"):
        if sidecar.is_dir():
            sidecar.rmdir()
        else:
            sidecar.unlink()
    store = JsonlStore(copy, compression=compression)
    try:
        return list(store.read_from("s1", from_seq).events)
    finally:
        store.close()


def indexed(root: Path, compression: Compression, from_seq: int) -> tuple[list[Event], int]:
    """``read_from`` through a new store object, and how many whole-file reads it made."""
    fs = ReadCountingFS()
    store = JsonlStore(root, compression=compression, fs=fs)
    try:
        return list(store.read_from("s1", from_seq).events), fs.whole_reads
    finally:
        store.close()


def test_read_from_seeks_and_equals_the_full_scan(tmp_path: Path, compression: Compression) -> None:
    root = tmp_path / "root"
    record(root, compression)
    total = len(full_scan(root, compression, 0))
    assert total == 3 * 181 + 1
    for from_seq in (0, 1, 2, 45, 100, total - 50, total - 1, total, total + 7):
        events, whole_reads = indexed(root, compression, from_seq)
        assert events == full_scan(root, compression, from_seq), from_seq
        assert [event.seq for event in events] == list(range(from_seq, total))
        assert whole_reads == 0, f"read_from({from_seq}) scanned the whole transcript"


def test_a_writer_that_keeps_no_index_makes_reads_scan(tmp_path: Path, compression: Compression) -> None:
    """Another program (DSH) appends a batch: the sidecar no longer names the file, reads scan it."""
    root = tmp_path / "root"
    events, more = foreign_append(root, compression)
    got, whole_reads = indexed(root, compression, len(events) - 1)
    assert [event.seq for event in got] == [len(events) - 1, len(events), len(events) + 1]
    assert got[1:] == more
    assert whole_reads == 1


def test_a_damaged_or_foreign_sidecar_never_changes_the_answer(tmp_path: Path,
                                                               compression: Compression) -> None:
    root = tmp_path / "root"
    transcript = record(root, compression)
    sidecar = transcript.with_name(transcript.name + SEEK_SUFFIX)
    good = sidecar.read_bytes()
    total = len(full_scan(root, compression, 0))
    expected = full_scan(root, compression, total - 50)
    damages = {
        "truncated mid-record": good[:-5],
        "magic only": good[:16],
        "empty": b"",
        "wrong magic": b"x" + good[1:],
        "flipped seq of the last record": good[:-64] + bytes([good[-64] ^ 1]) + good[-63:],
        "flipped offset of the last record": good[:-56] + bytes([good[-56] ^ 0x40]) + good[-55:],
        "flipped size": good[:-48] + bytes([good[-48] ^ 1]) + good[-47:],
        "records of another file": good[:16] + good[16:80] * 3,
    }
    for name, content in damages.items():
        sidecar.write_bytes(content)
        assert indexed(root, compression, total - 50)[0] == expected, name
    sidecar.unlink()
    sidecar.mkdir()  # not even a file
    assert indexed(root, compression, total - 50)[0] == expected


def test_an_unwritable_sidecar_never_fails_a_write(tmp_path: Path, compression: Compression) -> None:
    root = tmp_path / "root"
    store, live, sidecar = one_turn_live(root, compression)
    sidecar.unlink()
    sidecar.mkdir()
    record_workload(live.session, 1, flush=live.flush)  # turn numbers restart: a fresh recorder
    live.close()
    store.close()
    assert sidecar.is_dir()
    total = len(full_scan(root, compression, 0))
    assert total == 2 * 181 + 2  # each recorder logs its request header once
    assert indexed(root, compression, 3) == (full_scan(root, compression, 3), 1)


def test_a_repair_rebuilds_the_index(tmp_path: Path, compression: Compression) -> None:
    """A torn tail truncated by ``open``: the sidecar named the file before the cut; the repair
    rebuilds it from the marks of the scan ``open`` made, so reads seek again at once."""
    root = tmp_path / "root"
    transcript = record(root, compression, turns=1)
    with open(transcript, "ab") as handle:
        torn = b'{"type":"assistant/chunk"}\n'  # a torn write: a line or frame cut short
        handle.write(compress_frame(torn)[:-3] if compression == "zstd" else torn[:-5])
    store = JsonlStore(root, compression=compression, write_delay_ms=60_000)
    live = store.open("s1")
    seq = live.session.seq
    assert indexed(root, compression, seq - 2) == (full_scan(root, compression, seq - 2), 0)
    record_workload(live.session, 1, flush=live.flush)
    live.close()
    store.close()
    total = len(full_scan(root, compression, 0))
    for from_seq in (0, 5, seq - 1, seq, total - 10):
        assert indexed(root, compression, from_seq) == (full_scan(root, compression, from_seq), 0), from_seq


def test_a_writer_rebuilds_the_index_after_a_foreign_append(tmp_path: Path, compression: Compression) -> None:
    root = tmp_path / "root"
    events, _more = foreign_append(root, compression)
    store = JsonlStore(root, compression=compression, write_delay_ms=60_000)
    store.append("s1", [{**event.to_wire(), "seq": len(events) + 2 + offset}
                        for offset, event in enumerate(events[3:5])])
    store.close()
    for from_seq in (0, len(events) - 1, len(events) + 1, len(events) + 3):
        assert indexed(root, compression, from_seq) == (full_scan(root, compression, from_seq), 0), from_seq


def test_scan_marks_are_line_or_frame_starts(tmp_path: Path, compression: Compression) -> None:
    """Every ``LogScan.marks`` entry reads back, as a suffix, exactly the events from its seq."""
    root = tmp_path / "root"
    transcript = record(root, compression, turns=16)  # over 64 KiB even compressed
    data = transcript.read_bytes()
    scan = scan_log(data, compressed=compression == "zstd", path=str(transcript))
    assert len(scan.marks) >= 2 and scan.marks[0] == (0, scan.header_end)
    assert all(later[1] - earlier[1] >= MARK_STEP for earlier, later in itertools.pairwise(scan.marks))
    for seq, offset in scan.marks:
        suffix = scan_suffix(data[offset:], compressed=compression == "zstd", path="t", offset=offset,
                             first_seq=seq)
        assert suffix is not None
        assert resolve_entries(suffix, seq) == resolve_entries(scan.events[seq:], seq)


def test_a_shared_prefix_fork_reads_its_parent_for_the_prefix(tmp_path: Path,
                                                              compression: Compression) -> None:
    root = tmp_path / "root"
    record(root, compression, turns=2)
    store = JsonlStore(root, compression=compression, write_delay_ms=60_000)
    child = store.fork("s1", 181, child_id="c1")
    record_workload(child.session, 1, flush=child.flush)
    child.close()
    expected = list(store.load("c1").events)
    store.close()
    for from_seq in (0, 100, 181, 182, len(expected) - 3):
        fresh = JsonlStore(root, compression=compression)
        assert list(fresh.read_from("c1", from_seq).events) == expected[from_seq:], from_seq
        fresh.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.integers(1, 3), data=st.data())
def test_property_indexed_read_equals_the_full_scan(tmp_path: Path, turns: int, data: st.DataObject) -> None:
    """Random sessions, random read points, random damage to the sidecar: always the full scan's answer."""
    compression: Compression = data.draw(st.sampled_from(["zstd", "none"]))
    root = tmp_path / f"root-{os.urandom(4).hex()}"
    transcript = record(root, compression, turns)
    total = turns * 181 + 1
    from_seq = data.draw(st.integers(0, total + 3))
    sidecar = transcript.with_name(transcript.name + SEEK_SUFFIX)
    if data.draw(st.booleans()):
        content = bytearray(sidecar.read_bytes())
        where = data.draw(st.integers(0, len(content) - 1))
        content[where] ^= 1 << data.draw(st.integers(0, 7))
        sidecar.write_bytes(bytes(content))
    assert indexed(root, compression, from_seq)[0] == full_scan(root, compression, from_seq)
    shutil.rmtree(root)
    shutil.rmtree(root.parent / f"{root.name}-copy", ignore_errors=True)


def test_a_symlink_planted_as_the_sidecar_is_never_written_through(tmp_path: Path,
                                                                  compression: Compression) -> None:
    root = tmp_path / "root"
    store, live, sidecar = one_turn_live(root, compression)
    victim = tmp_path / "victim"
    victim.write_bytes(sidecar.read_bytes())  # even a file that looks like this sidecar
    before = victim.read_bytes()
    sidecar.unlink()
    sidecar.symlink_to(victim)
    live.session.append("turn/start", {"turn": 2})
    live.flush()
    live.close()
    store.close()
    assert victim.read_bytes() == before
    assert not sidecar.is_symlink()  # replaced by a sidecar of its own
    events, whole_reads = indexed(root, compression, 182)  # turn 1: header, 181 events
    assert [event.seq for event in events] == [182] and whole_reads == 0
