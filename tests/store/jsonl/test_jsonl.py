"""JsonlStore on real files: layout, write path, repair, DSH compatibility, fault injection."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from pathlib import Path

import orjson
import pytest
import zstandard

from agentlog import (
    PersistenceIOError,
    Session,
    SessionCorruptionError,
    SessionFormatUnsupportedError,
    SessionHeader,
)
from agentlog.core.repair import interrupted_turn_closers
from agentlog.store.fs import FileSystem
from agentlog.store.jsonl.store import JsonlStore
from tests.contract.logs import LogBuilder, wire

HEADER = SessionHeader(id="s1", created_at=1000, cwd="/home/user/project")


def make_log(turns: int = 2, *, close: bool = True) -> LogBuilder:
    log = LogBuilder()
    for turn in range(1, turns + 1):
        log.turn(turn, close=close or turn < turns)
    return log


@pytest.fixture(params=["zstd", "none"])
def compression(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- layout and lazy materialization -------------------------------------------------------


def test_create_writes_nothing_and_first_append_publishes_the_file(tmp_path: Path, compression: str) -> None:
    store = JsonlStore(tmp_path / "root", compression=compression)  # type: ignore[arg-type]
    path = store.locate(HEADER)
    assert os.path.isabs(path)
    store.create(HEADER)
    assert not (tmp_path / "root").exists()
    store.append("s1", make_log().events)
    assert Path(path).is_file()
    assert path.endswith("session.jsonl.zstd" if compression == "zstd" else "session.jsonl")
    assert Path(path).parent.parent.name == "--home-user-project--"
    assert [h.id for h in store.list()] == ["s1"]
    # the transcript and its seek index (store/jsonl/seek.py), no temp file left behind
    assert sorted(Path(path).parent.iterdir()) == [Path(path), Path(path + ".seek")]


def test_traversal_ids_stay_under_the_root(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root")
    for sid in ("../escape", "/abs", "a/b", ".", ".."):
        header = SessionHeader(id=sid, created_at=1)
        store.create(header)
        store.append(sid, make_log(1).events)
        assert Path(store.locate(header)).resolve().is_relative_to((tmp_path / "root").resolve())
    assert sorted(h.id for h in store.list()) == sorted(["../escape", "/abs", "a/b", ".", ".."])


def test_revisions_are_stable_on_reopen_and_distinct_across_roots(tmp_path: Path) -> None:
    for root in ("a", "b"):
        store = JsonlStore(tmp_path / root)
        store.create(HEADER)
        store.append("s1", make_log().events)
    first = JsonlStore(tmp_path / "a").list_snapshots()[0].revision
    assert JsonlStore(tmp_path / "a").list_snapshots()[0].revision == first
    assert JsonlStore(tmp_path / "b").list_snapshots()[0].revision != first


def test_read_raw_returns_the_decoded_text(tmp_path: Path, compression: str) -> None:
    store = JsonlStore(tmp_path / "root", compression=compression)  # type: ignore[arg-type]
    assert store.read_raw("s1") is None
    store.create(HEADER)
    log = make_log()
    store.append("s1", log.events)
    raw = store.read_raw("s1")
    assert raw is not None
    assert raw.filename == "session.jsonl"
    lines = raw.content.splitlines()
    assert json.loads(lines[0])["type"] == "session"
    assert raw.header.id == "s1"
    if compression == "none":
        assert raw.content.encode() == Path(store.locate(HEADER)).read_bytes()


def test_committed_prefix_bytes_are_unchanged_by_repair_and_append(tmp_path: Path, compression: str) -> None:
    store = JsonlStore(tmp_path / "root", compression=compression)  # type: ignore[arg-type]
    log = make_log(2, close=False)
    store.create(HEADER)
    store.append("s1", log.events)
    path = Path(store.locate(HEADER))
    before = path.read_bytes()
    loaded = JsonlStore(tmp_path / "root", compression=compression).load("s1")  # type: ignore[arg-type]
    assert loaded.events[-1].data["reason"]["kind"] == "interrupted"
    assert path.read_bytes().startswith(before)


def test_header_naming_another_session_is_refused_before_any_write(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root", compression="none")
    store.create(HEADER)
    store.append("s1", make_log(1, close=False).events)
    path = Path(store.locate(HEADER))
    text = path.read_text().replace('"id":"s1"', '"id":"s2"', 1)
    path.write_text(text)
    with pytest.raises(SessionCorruptionError):
        JsonlStore(tmp_path / "root", compression="none").load("s1")
    assert path.read_text() == text


def test_future_header_version_is_refused_as_unsupported(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root", compression="none")
    store.create(HEADER)
    store.append("s1", make_log(1).events)
    path = Path(store.locate(HEADER))
    path.write_text(path.read_text().replace('"version":0', '"version":99', 1))
    with pytest.raises(SessionFormatUnsupportedError, match="upgrade"):
        JsonlStore(tmp_path / "root", compression="none").load("s1")


def test_opposite_encoding_in_the_same_root_is_refused(tmp_path: Path) -> None:
    raw = JsonlStore(tmp_path / "root", compression="none")
    raw.create(HEADER)
    raw.append("s1", make_log(1).events)
    with pytest.raises(Exception, match="other encoding"):
        JsonlStore(tmp_path / "root").list()


# -- DSH compatibility ---------------------------------------------------------------------


def _manifest(dsh_fixtures: Path) -> list[dict[str, object]]:
    return json.loads((dsh_fixtures / "manifest.json").read_text())  # type: ignore[no-any-return]


def _install(dsh_fixtures: Path, entry: dict[str, object], root: Path) -> Path:
    target = root / str(entry["originalPath"])
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(dsh_fixtures / str(entry["file"]), target)
    return target


def _expected(dsh_fixtures: Path, entry: dict[str, object]) -> list[bytes]:
    names = entry["expected"]
    assert isinstance(names, dict)
    return (dsh_fixtures / str(names["events"])).read_bytes().splitlines()


_SYNTHETIC = re.compile(rb'("id":"interrupted-tool-result-.*?"text":)"(?:[^"\\]|\\.)*"')


def _normalized(lines: list[bytes]) -> list[bytes]:
    """Blank the advice text of synthetic tool results: agentlog words it its own way."""
    return [_SYNTHETIC.sub(rb'\1"<advice>"', line) for line in lines]


def test_every_dsh_fixture_loads_with_the_expected_events(dsh_fixtures: Path, tmp_path: Path) -> None:
    for index, entry in enumerate(_manifest(dsh_fixtures)):
        root = tmp_path / f"r{index}"
        _install(dsh_fixtures, entry, root)
        compression = "zstd" if str(entry["file"]).endswith(".zstd") else "none"
        store = JsonlStore(root, compression=compression)  # type: ignore[arg-type]
        sid = str(entry["sessionId"])
        inspected = store.inspect(sid)
        expected = _normalized(_expected(dsh_fixtures, entry))
        assert _normalized([event.to_json() for event in inspected.events]) == expected, entry["file"]
        loaded = store.load(sid)
        assert _normalized([event.to_json() for event in loaded.events]) == expected, entry["file"]


def test_dsh_crash_fixtures_repair_exactly_like_dsh(dsh_fixtures: Path, tmp_path: Path) -> None:
    """Repairs write the same records as DSH (synthetic advice wording aside)."""
    for index, entry in enumerate(_manifest(dsh_fixtures)):
        after = entry.get("afterRepairFile")
        if not after:
            continue
        root = tmp_path / f"r{index}"
        path = _install(dsh_fixtures, entry, root)
        compressed = str(entry["file"]).endswith(".zstd")
        store = JsonlStore(root, compression="zstd" if compressed else "none")
        store.load(str(entry["sessionId"]))
        expected = (dsh_fixtures / str(after)).read_bytes()
        if compressed:
            ours, theirs = _decompress(path.read_bytes()), _decompress(expected)
        else:
            ours, theirs = path.read_bytes(), expected
        assert _normalized(ours.split(b"\n")) == _normalized(theirs.split(b"\n")), entry["file"]


def _decompress(data: bytes) -> bytes:
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    return reader.read()


def test_dsh_fork_child_resumes_and_continues(dsh_fixtures: Path, tmp_path: Path) -> None:
    entries = {str(e["name"]): e for e in _manifest(dsh_fixtures)}
    root = tmp_path / "root"
    for name in ("fork-parent-T5.zstd-packed", "fork-child.zstd-packed"):
        _install(dsh_fixtures, entries[name], root)
    store = JsonlStore(root)
    with store.open("fx-fork-child") as live:
        assert live.session.header.parent_session == "fx-fork-parent"
        live.session.append("turn/start", {"turn": 5})
        live.session.append("turn/end", {"turn": 5, "reason": {"kind": "completed"}})
    events = JsonlStore(root).load("fx-fork-child").events
    assert [e.type for e in events[-3:]] == ["session/end-seed", "turn/start", "turn/end"]


def test_writing_dsh_events_reproduces_dsh_raw_files(dsh_fixtures: Path, tmp_path: Path) -> None:
    """Same batches in, same bytes out (packed and unpacked raw files)."""
    entries = {str(e["name"]): e for e in _manifest(dsh_fixtures)}
    for name, pack in (("basic-T5.raw-packed", True), ("basic-T5.raw-unpacked", False)):
        entry = entries[name]
        source = dsh_fixtures / str(entry["file"])
        lines = source.read_bytes().splitlines(keepends=True)
        header = SessionHeader.from_wire({k: v for k, v in orjson.loads(lines[0]).items() if k != "type"})
        events = [Session.restore(header.id, [], header)]  # noqa: F841 - header validity
        expected_events = [orjson.loads(line) for line in _expected(dsh_fixtures, entry)]
        store = JsonlStore(tmp_path / name, compression="none", pack_chunks=pack)
        store.create(header)
        # DSH flushed once per turn/end: the same batches.
        batch: list[dict[str, object]] = []
        for event in expected_events:
            batch.append(event)
            if event["type"] == "turn/end":
                store.append(header.id, batch)
                batch = []
        if batch:
            store.append(header.id, batch)
        assert Path(store.locate(header)).read_bytes() == source.read_bytes(), name


# -- crashes, torn tails and faults ----------------------------------------------------------


def test_raw_crash_tail_is_truncated_and_the_open_turn_closed(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root", compression="none")
    log = make_log(2, close=False)
    store.create(HEADER)
    store.append("s1", log.events)
    path = Path(store.locate(HEADER))
    with open(path, "ab") as handle:
        handle.write(b'{"type":"assistant/chunk","seq":')
    loaded = JsonlStore(tmp_path / "root", compression="none").load("s1")
    assert [e.seq for e in loaded.events] == list(range(len(log.events) + 1))  # + turn/end
    assert not path.read_bytes().count(b'"seq":\n')
    assert path.read_bytes().endswith(b"\n")
    nxt = LogBuilder(start=len(loaded.events))
    nxt.turn(3)
    JsonlStore(tmp_path / "root", compression="none").append("s1", nxt.events)
    assert len(JsonlStore(tmp_path / "root", compression="none").load("s1").events) == len(
        loaded.events
    ) + len(nxt.events)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_truncation_at_every_offset_of_the_last_batch_recovers(tmp_path: Path, compression: str) -> None:
    store = JsonlStore(tmp_path / "root", compression=compression)  # type: ignore[arg-type]
    log = make_log(3)
    store.create(HEADER)
    store.append("s1", log.events[:18])
    path = Path(store.locate(HEADER))
    size_before = path.stat().st_size
    store.append("s1", log.events[18:])
    full = path.read_bytes()
    for cut in range(size_before, len(full) + 1):
        path.write_bytes(full[:cut])
        fresh = JsonlStore(tmp_path / "root", compression=compression)  # type: ignore[arg-type]
        loaded = fresh.load("s1")
        events = wire(list(loaded.events))
        kept = 0
        while kept < min(len(events), len(log.events)) and events[kept] == log.events[kept]:
            kept += 1
        assert kept >= 18, f"cut at {cut} lost committed events"
        closers = interrupted_turn_closers(list(loaded.events[:kept]))
        assert events[kept:] == wire(closers), f"cut at {cut}"
        assert loaded.events[-1].type == "turn/end"
        assert fresh.load("s1").events == loaded.events


def test_flipped_byte_in_a_committed_zstd_frame_is_corruption(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root")
    log = make_log(2)
    store.create(HEADER)
    store.append("s1", log.events[:9])
    path = Path(store.locate(HEADER))
    middle = path.stat().st_size - 20
    store.append("s1", log.events[9:])
    data = bytearray(path.read_bytes())
    data[middle] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(SessionCorruptionError) as info:
        JsonlStore(tmp_path / "root").load("s1")
    assert str(path) in str(info.value)


def test_a_cold_fork_before_a_corrupt_frame_reads_only_its_prefix(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root")
    log = make_log(3)
    store.create(HEADER)
    store.append("s1", log.events[:9])  # turn 1 (turn/end at seq 8) in its own frames
    path = Path(store.locate(HEADER))
    middle = path.stat().st_size + 20
    store.append("s1", log.events[9:])
    data = bytearray(path.read_bytes())
    data[middle] ^= 0xFF
    path.write_bytes(bytes(data))
    with JsonlStore(tmp_path / "root").fork("s1", 8, "kid") as child:
        assert child.session.header.seed_length == 9
    assert [e.type for e in JsonlStore(tmp_path / "root").load("kid").events][-2:] == [
        "turn/end", "session/end-seed"]
    with pytest.raises(SessionCorruptionError):
        JsonlStore(tmp_path / "root").fork("s1", 17, "late")  # its prefix crosses the bad frame
    with pytest.raises(SessionCorruptionError):
        JsonlStore(tmp_path / "root").load("s1")


class FailingFS(FileSystem):
    """Fails the Nth write or fsync with ENOSPC (real files otherwise)."""

    def __init__(self) -> None:
        self.fail_write_at: int | None = None
        self.fail_fsync_at: int | None = None
        self.fail_truncate = False
        self.writes = 0
        self.fsyncs = 0

    def write(self, fd: int, data: bytes) -> None:
        self.writes += 1
        if self.writes == self.fail_write_at:
            os.write(fd, data[: len(data) // 2])  # a partial write, then the failure
            raise OSError(errno.ENOSPC, "No space left on device")
        super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        if self.fsyncs == self.fail_fsync_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        super().fsync(fd)

    def truncate(self, fd: int, length: int) -> None:
        if self.fail_truncate:
            raise OSError(errno.EIO, "I/O error")
        super().truncate(fd, length)


@pytest.mark.parametrize("fault", ["write", "fsync"])
def test_enospc_rolls_the_append_back_and_a_retry_succeeds(
    tmp_path: Path, compression: str, fault: str
) -> None:
    fs = FailingFS()
    store = JsonlStore(tmp_path / "root", compression=compression, fs=fs,  # type: ignore[arg-type]
                       write_delay_ms=10_000)
    live = store.start(HEADER)
    log = make_log(3)
    for event in log.events[:9]:
        live.session.append(event["type"], event["data"], surface_op=event.get("surfaceOp"),
                            source_event_seqs=event.get("sourceEventSeqs"))
    live.flush()
    path = Path(store.locate(HEADER))
    size = path.stat().st_size
    for event in log.events[9:]:
        live.session.append(event["type"], event["data"], surface_op=event.get("surfaceOp"),
                            source_event_seqs=event.get("sourceEventSeqs"))
    if fault == "write":
        fs.fail_write_at = fs.writes + 1
    else:
        fs.fail_fsync_at = fs.fsyncs + 1
    with pytest.raises(PersistenceIOError) as info:
        live.flush()
    assert info.value.__cause__ is not None
    assert path.stat().st_size == size, "failed append was not rolled back"
    assert live.durable_seq == 9
    live.flush()  # the fault is gone: the retained batch is written
    live.close()
    reloaded = JsonlStore(tmp_path / "root", compression=compression).load("s1")  # type: ignore[arg-type]
    assert [{**e, "time": 0} for e in wire(list(reloaded.events))] == [{**e, "time": 0} for e in log.events]


def test_failed_rollback_reports_both_errors(tmp_path: Path) -> None:
    fs = FailingFS()
    store = JsonlStore(tmp_path / "root", compression="none", fs=fs)
    store.create(HEADER)
    log = make_log(2)
    store.append("s1", log.events[:9])
    fs.fail_fsync_at = fs.fsyncs + 1
    fs.fail_truncate = True
    with pytest.raises(PersistenceIOError, match="failed to roll back") as info:
        store.append("s1", log.events[9:])
    both = info.value.__cause__
    assert isinstance(both, ExceptionGroup)
    assert [getattr(exc, "errno", None) for exc in both.exceptions] == [errno.ENOSPC, errno.EIO]
    assert info.value.offset is not None
