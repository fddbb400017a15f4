"""JsonlStore beyond the format: discovery, identity binding, I/O failures, forks by reference.

Spec persistence §9 "jsonl.spec.ts" items that apply on POSIX, plus agentlog's own features:
``flock`` writer locks, forks that share their parent's prefix, ``materialize`` and ``delete``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import orjson
import pytest
from benchmarks.workload import record_workload

from agentlog import (
    Event,
    InvalidHeaderError,
    PersistenceIOError,
    SessionCorruptionError,
    SessionExistsError,
    SessionHeader,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
    UsageError,
)
from agentlog.core.repair import interrupted_turn_closers
from agentlog.store.base import Store
from agentlog.store.fs import FileSystem
from agentlog.store.hooks import _State
from agentlog.store.jsonl.format import SHARED_PREFIX_KEY, encode_header_line
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.jsonl.zstd_frames import compress_frame
from agentlog.store.writer import LiveSession
from tests.contract.logs import LogBuilder, wire
from tests.dsh_reader import read_dsh_file, split_zstd_frames

Compression = Literal["zstd", "none"]
HEADER = SessionHeader(id="s1", created_at=1000, cwd="/home/user/project")


@pytest.fixture(params=["zstd", "none"])
def compression(request: pytest.FixtureRequest) -> Compression:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions built by the store stamp every event with the same time (byte-comparable logs)."""
    monkeypatch.setattr("agentlog.core.session.now_ms", lambda: 1_767_225_600_000)


def make_log(turns: int = 2, *, close: bool = True, start: int = 0) -> LogBuilder:
    log = LogBuilder(start=start)
    for turn in range(1, turns + 1):
        log.turn(turn, close=close or turn < turns)
    return log


def jsonl(root: Path, compression: Compression = "zstd", **options: Any) -> JsonlStore:
    return JsonlStore(root, compression=compression, write_delay_ms=60_000, **options)


def put(store: Store, header: SessionHeader, events: Sequence[dict[str, Any]]) -> None:
    store.create(header)
    store.append(header.id, events)


def append_wire(live: LiveSession, events: Sequence[dict[str, Any]]) -> None:
    for event in events:
        live.session.append(event["type"], event["data"], surface_op=event.get("surfaceOp"),
                            source_event_seqs=event.get("sourceEventSeqs"))


def transcripts(root: Path) -> list[Path]:
    names = ("session.jsonl", "session.jsonl.zstd")  # not temp files, not seek indexes
    return sorted(p for p in root.rglob("session.jsonl*") if p.name in names)


def bytes_under(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def stored_header_line(path: Path) -> dict[str, Any]:
    return read_dsh_file(path).header


def turn_end_seq(events: Sequence[Event], turn: int) -> int:
    return next(e.seq for e in events if e.type == "turn/end" and e.data["turn"] == turn)


class CopyForkStore(JsonlStore):
    """A JsonlStore whose forks copy their prefix, as DSH's do: the baseline for forks by reference."""

    def _write_fork_prefix(self, header: SessionHeader, prefix: Sequence[Event], state: _State,
                           suffix: Sequence[Event] = ()) -> None:
        Store._write_fork_prefix(self, header, prefix, state, suffix)


# -- roots and discovery -----------------------------------------------------------------------


def test_relative_root_is_resolved_before_locate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = JsonlStore("relative/root")
    monkeypatch.chdir("/")
    path = store.locate(HEADER)
    assert path.startswith(str(tmp_path / "relative" / "root") + os.sep)
    put(store, HEADER, make_log(1).events)
    assert Path(path).is_file()


def test_list_spans_projects_and_no_cwd(tmp_path: Path, compression: Compression) -> None:
    store = jsonl(tmp_path / "root", compression)
    headers = [SessionHeader(id="a", cwd="/p/one"), SessionHeader(id="b", cwd="/p/two"),
               SessionHeader(id="c")]
    for header in headers:
        put(store, header, make_log(1).events)
    assert sorted((h.id, h.cwd) for h in jsonl(tmp_path / "root", compression).list()) == [
        ("a", "/p/one"), ("b", "/p/two"), ("c", None)]
    # ``.agentlog`` holds the writer locks that every write (live, or a direct append) takes.
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == [
        "--p-one--", "--p-two--", ".agentlog", "_no-cwd"]


def test_normalized_collision_projects_share_a_directory(tmp_path: Path, compression: Compression) -> None:
    store = jsonl(tmp_path / "root", compression)
    first, second = SessionHeader(id="x", cwd="/a/b-c"), SessionHeader(id="y", cwd="/a-b/c")
    assert Path(store.locate(first)).parent.parent == Path(store.locate(second)).parent.parent
    put(store, first, make_log(1).events)
    put(store, second, make_log(2).events)
    fresh = jsonl(tmp_path / "root", compression)
    assert sorted((h.id, h.cwd) for h in fresh.list()) == [("x", "/a/b-c"), ("y", "/a-b/c")]
    assert fresh.load("x").header.cwd == "/a/b-c"
    assert len(fresh.load("y").events) == len(make_log(2).events)


def test_missing_and_empty_roots_list_nothing(tmp_path: Path, compression: Compression) -> None:
    missing = jsonl(tmp_path / "missing", compression)
    assert missing.list() == []
    assert missing.list_snapshots() == []
    with pytest.raises(SessionNotFoundError):
        missing.load("s1")
    assert not (tmp_path / "missing").exists(), "reading must not create the root"
    (tmp_path / "empty").mkdir()
    assert jsonl(tmp_path / "empty", compression).list() == []


def test_extra_files_in_project_and_session_dirs_are_ignored(
    tmp_path: Path, compression: Compression
) -> None:
    root = tmp_path / "root"
    store = jsonl(root, compression)
    put(store, HEADER, make_log(1).events)
    session_dir = Path(store.locate(HEADER)).parent
    project = session_dir.parent
    (project / "notes.txt").write_text("not a session")
    (project / "empty-session-dir").mkdir()
    (project / "other" / "deeper").mkdir(parents=True)
    (project / "other" / "deeper" / "session.jsonl").write_text("not at the transcript path")
    (session_dir / "README").write_text("extra")
    (session_dir / "attachments").mkdir()
    (root / "stray.txt").write_text("a file in the root")
    fresh = jsonl(root, compression)
    assert [h.id for h in fresh.list()] == ["s1"]
    assert len(fresh.load("s1").events) == len(make_log(1).events)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zstd"])
def test_obsolete_flat_file_layout_is_refused(tmp_path: Path, compression: Compression, suffix: str) -> None:
    root = tmp_path / "root"
    put(jsonl(root, compression), HEADER, make_log(1).events)
    flat = Path(jsonl(root, compression).locate(HEADER)).parent.parent / f"old{suffix}"
    flat.write_bytes(b"")
    with pytest.raises(StoreError, match="flat-file layout"):
        jsonl(root, compression).list()
    with pytest.raises(StoreError, match="flat-file layout"):
        jsonl(root, compression).load("s1")


def test_flat_file_appearing_after_first_use_is_refused_by_lookup_and_listing(
    tmp_path: Path, compression: Compression
) -> None:
    store = jsonl(tmp_path / "root", compression)
    put(store, HEADER, make_log(1).events)
    assert [h.id for h in store.list()] == ["s1"]  # the preflight has passed
    project = Path(store.locate(HEADER)).parent.parent
    (project / "s2.jsonl").write_bytes(b"")
    with pytest.raises(StoreError, match="flat-file layout"):
        store.list()
    with pytest.raises(StoreError, match="flat-file layout"):
        store.load("s2")


def test_a_failed_preflight_is_memoized_for_the_instance(tmp_path: Path) -> None:
    root = tmp_path / "root"
    put(jsonl(root), HEADER, make_log(1).events)
    flat = Path(jsonl(root).locate(HEADER)).parent.parent / "old.jsonl"
    flat.write_bytes(b"")
    store = jsonl(root)
    with pytest.raises(StoreError, match="flat-file layout"):
        store.load("s1")
    flat.unlink()
    with pytest.raises(StoreError, match="flat-file layout"):
        store.load("s1")
    assert len(jsonl(root).load("s1").events) == len(make_log(1).events)


def test_late_opposite_encoding_is_refused_by_lookup_listing_and_materialization(tmp_path: Path) -> None:
    store = jsonl(tmp_path / "root", "zstd")
    put(store, HEADER, make_log(1).events)
    assert [h.id for h in store.list()] == ["s1"]
    session_dir = Path(store.locate(HEADER)).parent
    (session_dir / "session.jsonl").write_bytes(b"")
    with pytest.raises(StoreError, match="other encoding"):
        store.load("s1")
    with pytest.raises(StoreError, match="other encoding"):
        store.list()
    other = SessionHeader(id="s2", cwd=HEADER.cwd)
    other_dir = Path(store.locate(other)).parent
    store.create(other)  # lazily: the opposite artifact appears before the first write
    other_dir.mkdir()
    (other_dir / "session.jsonl").write_bytes(b"")
    with pytest.raises(StoreError, match="other encoding"):
        store.append("s2", make_log(1).events)
    assert not (other_dir / "session.jsonl.zstd").exists()


def _bad_transcripts(compression: Compression) -> dict[str, bytes]:
    if compression == "none":
        return {"empty": b"", "not-header": b'{"type":"other"}\n', "bad-json": b"{nope\n",
                "no-newline": b'{"type":"session"'}
    return {"empty": b"", "magic-only": b"\x28\xb5\x2f\xfd",
            "not-header": compress_frame(b'{"type":"other"}\n'), "bad-json": compress_frame(b"{nope\n")}


def test_listing_skips_empty_non_header_and_bad_json_transcripts_that_load_rejects(
    tmp_path: Path, compression: Compression
) -> None:
    store = jsonl(tmp_path / "root", compression)
    put(store, HEADER, make_log(1).events)
    project = Path(store.locate(HEADER)).parent.parent
    name = Path(store.locate(HEADER)).name
    for sid, content in _bad_transcripts(compression).items():
        (project / sid).mkdir()
        (project / sid / name).write_bytes(content)
    fresh = jsonl(tmp_path / "root", compression)
    assert [h.id for h in fresh.list()] == ["s1"]
    for sid in _bad_transcripts(compression):
        with pytest.raises(SessionCorruptionError):
            fresh.load(sid)


def test_header_longer_than_8_kib_is_listed(tmp_path: Path, compression: Compression) -> None:
    preset = os.urandom(12_000).hex()  # incompressible: the zstd header frame spans several 8 KiB reads
    header = SessionHeader(id="long", created_at=5, cwd="/p", agent_preset=preset)
    store = jsonl(tmp_path / "root", compression)
    put(store, header, make_log(1).events)
    if compression == "zstd":
        frames, _ = split_zstd_frames(Path(store.locate(header)).read_bytes())
        assert len(frames[0].compressed) > 8192
    listed = jsonl(tmp_path / "root", compression).list()
    assert [(h.id, h.agent_preset) for h in listed] == [("long", preset)]


def test_misplaced_cwd_rejects_listing_and_loading(tmp_path: Path, compression: Compression) -> None:
    root = tmp_path / "root"
    store = jsonl(root, compression)
    put(store, HEADER, make_log(1).events)
    session_dir = Path(store.locate(HEADER)).parent
    elsewhere = root / "--some-other-project--"
    elsewhere.mkdir()
    session_dir.rename(elsewhere / session_dir.name)
    fresh = jsonl(root, compression)
    with pytest.raises(SessionCorruptionError, match="not where its header places it"):
        fresh.list()
    with pytest.raises(SessionCorruptionError, match="not where its header places it"):
        fresh.load("s1")


def test_symlinked_project_dirs_are_accepted(tmp_path: Path, compression: Compression) -> None:
    """A project dir moved elsewhere and linked back, plus an alias link, still name one session."""
    root = tmp_path / "root"
    store = jsonl(root, compression)
    log = make_log(2)
    put(store, HEADER, log.events[:9])
    project = Path(store.locate(HEADER)).parent.parent
    moved = tmp_path / "other-disk" / "project"
    moved.parent.mkdir()
    project.rename(moved)
    project.symlink_to(moved, target_is_directory=True)
    (root / "--alias--").symlink_to(moved, target_is_directory=True)
    fresh = jsonl(root, compression)
    assert [h.id for h in fresh.list()] == ["s1"]
    assert wire(list(fresh.load("s1").events)) == log.events[:9]
    fresh.append("s1", log.events[9:])
    assert wire(list(jsonl(root, compression).load("s1").events)) == log.events
    assert transcripts(moved) == [moved / "s1" / Path(store.locate(HEADER)).name]


def test_duplicate_id_across_projects_rejects_load_and_list(tmp_path: Path, compression: Compression) -> None:
    root = tmp_path / "root"
    put(jsonl(root, compression), HEADER, make_log(1).events)
    other = SessionHeader(id="s1", cwd="/elsewhere")
    put(jsonl(tmp_path / "other", compression), other, make_log(1).events)
    shutil.move(tmp_path / "other" / "--elsewhere--", root / "--elsewhere--")
    fresh = jsonl(root, compression)
    with pytest.raises(SessionCorruptionError, match="multiple project directories"):
        fresh.list()
    with pytest.raises(SessionCorruptionError, match="multiple project directories"):
        fresh.load("s1")
    with pytest.raises(SessionCorruptionError, match="multiple project directories"):
        fresh.inspect("s1")


def test_root_that_is_a_file_fails_at_construction(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.write_text("a file")
    with pytest.raises(PersistenceIOError, match="not a directory") as info:
        JsonlStore(root)
    assert info.value.errno == errno.ENOTDIR


def test_root_replaced_by_a_file_later_fails_listing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = jsonl(root)
    put(store, HEADER, make_log(1).events)
    shutil.rmtree(root)
    root.write_text("now a file")
    with pytest.raises(PersistenceIOError) as info:
        store.list()
    assert info.value.errno == errno.ENOTDIR
    assert str(root) in str(info.value)


def test_project_path_blocked_by_a_file_fails_flush_and_keeps_the_events(
    tmp_path: Path, compression: Compression
) -> None:
    root = tmp_path / "root"
    store = jsonl(root, compression)
    project = Path(store.locate(HEADER)).parent.parent
    root.mkdir()
    project.write_text("in the way")
    live = store.start(HEADER)
    log = make_log(1)
    append_wire(live, log.events[:3])
    with pytest.raises(PersistenceIOError, match="is a path component a file") as info:
        live.flush()
    assert info.value.errno in (errno.EEXIST, errno.ENOTDIR)
    assert live.durable_seq == 0
    assert store.list() == []
    project.unlink()
    live.flush()
    assert live.durable_seq == 3
    live.close()
    loaded = jsonl(root, compression).load("s1")
    assert [e.type for e in loaded.events] == [e["type"] for e in log.events[:3]] + [
        "step/end", "turn/end"]


def test_create_rejects_an_id_stored_under_another_project(tmp_path: Path, compression: Compression) -> None:
    store = jsonl(tmp_path / "root", compression)
    put(store, HEADER, make_log(1).events)
    moved = SessionHeader(id="s1", cwd="/a/different/project")
    with pytest.raises(SessionExistsError, match="already exists in this store"):
        store.create(moved)
    with pytest.raises(SessionExistsError, match="already has a persisted log"):
        jsonl(tmp_path / "root", compression).create(moved)
    assert len(transcripts(tmp_path / "root")) == 1


# -- identity, locations and live sessions ---------------------------------------------------------


def test_loaded_header_is_frozen_and_appends_go_to_the_original_path(
    tmp_path: Path, compression: Compression
) -> None:
    store = jsonl(tmp_path / "root", compression)
    log = make_log(2)
    put(store, HEADER, log.events[:9])
    path = Path(store.locate(HEADER))
    size = path.stat().st_size
    fresh = jsonl(tmp_path / "root", compression)
    header = fresh.load("s1").header
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.cwd = "/somewhere/else"  # type: ignore[misc]
    with pytest.raises(TypeError):
        header.extra["x"] = 1
    fresh.append("s1", log.events[9:])
    assert path.stat().st_size > size
    assert transcripts(tmp_path / "root") == [path]
    assert wire(list(jsonl(tmp_path / "root", compression).load("s1").events)) == log.events


def test_same_location_after_load_and_a_fork_child_gets_its_own(tmp_path: Path) -> None:
    store = jsonl(tmp_path / "root")
    put(store, HEADER, make_log(2).events)
    original = store.locate(HEADER)
    loaded = jsonl(tmp_path / "root").load("s1")
    assert store.locate(loaded.header) == original
    with store.fork("s1", child_id="child") as child:
        child_header = child.session.header
    assert store.locate(child_header) != original
    assert Path(store.locate(child_header)).is_file()
    assert Path(store.locate(child_header)).parent.parent == Path(original).parent.parent


def test_two_live_sessions_buffers_never_mix(tmp_path: Path, compression: Compression) -> None:
    store = jsonl(tmp_path / "root", compression)
    first = store.start(SessionHeader(id="one", cwd="/p"))
    second = store.start(SessionHeader(id="two", cwd="/p"))
    logs = {"one": make_log(3), "two": make_log(4)}
    for a, b in zip(logs["one"].events, logs["two"].events, strict=False):
        append_wire(first, [a])
        append_wire(second, [b])
    append_wire(second, logs["two"].events[len(logs["one"].events):])
    flushers = [threading.Thread(target=live.flush) for live in (first, second)]
    for thread in flushers:
        thread.start()
    for thread in flushers:
        thread.join()
    first.close()
    second.close()
    fresh = jsonl(tmp_path / "root", compression)
    for sid, log in logs.items():
        events = fresh.load(sid).events
        assert [{**e, "time": 0} for e in wire(list(events))] == [
            {**e, "time": 0} for e in log.events], sid


class GrowingFS(FileSystem):
    """Appends ``extra`` to the file right after its first whole-file read (a concurrent writer)."""

    def __init__(self, extra: bytes) -> None:
        self.extra = extra
        self.reads = 0

    def read_bytes(self, path: str) -> bytes:
        data = super().read_bytes(path)
        self.reads += 1
        if self.reads == 1:
            with open(path, "ab") as handle:
                handle.write(self.extra)
        return data


def test_read_raw_retries_when_the_file_changes_during_the_read(
    tmp_path: Path, compression: Compression
) -> None:
    root = tmp_path / "root"
    log = make_log(2)
    writer = jsonl(root, compression)
    put(writer, HEADER, log.events[:9])
    batch = [Event.from_wire(e) for e in log.events[9:]]
    extra = writer._encode(batch)
    fs = GrowingFS(extra)
    raw = jsonl(root, compression, fs=fs).read_raw("s1")
    assert raw is not None
    assert fs.reads == 2
    assert raw.content.count("\n") == 1 + len(log.events) - 2 * 2  # header + lines (chunk runs packed)
    assert '"turn":2' in raw.content


def test_full_read_retries_on_a_revision_race_and_agrees_with_listing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    log = make_log(2)
    writer = jsonl(root, "none")
    put(writer, HEADER, log.events[:9])
    fs = GrowingFS(writer._encode([Event.from_wire(e) for e in log.events[9:]]))
    store = jsonl(root, "none", fs=fs)
    stored = store._load_stored("s1")
    assert stored is not None
    assert fs.reads == 2
    assert len(stored.events) == len(log.events)
    assert store.list_snapshots()[0].revision == stored.revision
    assert store._load_stored("missing") is None


def test_read_raw_reads_only_the_header_so_a_damaged_log_can_still_be_examined(tmp_path: Path) -> None:
    store = jsonl(tmp_path / "root", "none")
    put(store, HEADER, make_log(2).events)
    path = Path(store.locate(HEADER))
    lines = path.read_bytes().split(b"\n")
    lines[2] = b"{garbage"
    path.write_bytes(b"\n".join(lines) + "é".encode()[:1])  # and a tail cut inside a character
    with pytest.raises(SessionCorruptionError):
        jsonl(tmp_path / "root", "none").load("s1")
    raw = jsonl(tmp_path / "root", "none").read_raw("s1")
    assert raw is not None
    assert "{garbage" in raw.content
    assert raw.content.endswith("\ufffd")


def test_read_raw_rejects_a_header_that_names_another_session(
    tmp_path: Path, compression: Compression
) -> None:
    store = jsonl(tmp_path / "root", compression)
    put(store, HEADER, make_log(1).events)
    path = Path(store.locate(HEADER))
    other = encode_header_line(dataclasses.replace(HEADER, id="s2"))
    body = read_dsh_file(path).body
    path.write_bytes(compress_frame(other) + compress_frame(body) if compression == "zstd" else other + body)
    with pytest.raises(SessionCorruptionError, match="names session 's2'"):
        jsonl(tmp_path / "root", compression).read_raw("s1")


class VanishingFS(FileSystem):
    """``stat`` of a transcript deletes it first (an artifact removed between discovery and stat)."""

    def __init__(self, victim: str, error: int | None = None) -> None:
        self.victim = victim
        self.error = error

    def stat(self, path: str) -> os.stat_result:
        if path == self.victim:
            if self.error is not None:
                raise OSError(self.error, os.strerror(self.error), path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        return super().stat(path)


def test_snapshot_of_a_vanished_artifact_is_omitted_and_other_stat_errors_surface(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = jsonl(root)
    put(store, HEADER, make_log(1).events)
    put(store, SessionHeader(id="s2", cwd=HEADER.cwd), make_log(1).events)
    victim = store.locate(HEADER)
    denied = jsonl(root, fs=VanishingFS(victim, errno.EACCES))
    with pytest.raises(PersistenceIOError, match="cannot stat") as info:
        denied.list_snapshots()
    assert info.value.errno == errno.EACCES
    assert [s.header.id for s in jsonl(root, fs=VanishingFS(victim)).list_snapshots()] == ["s2"]


def test_stored_legacy_shapes_are_refused_on_load(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = jsonl(root, "none")
    log = make_log(1)
    put(store, HEADER, log.events)
    path = Path(store.locate(HEADER))
    clean = path.read_bytes()
    for legacy in (
        {"type": "request/header-delta", "seq": len(log.events), "time": 1, "data": {}},
        {"type": "request/header", "seq": len(log.events), "time": 1,
         "data": {"reason": "fallback", "header": {}}},
    ):
        path.write_bytes(clean + orjson.dumps(legacy) + b"\n")
        with pytest.raises(StoreError, match="unsupported legacy"):
            jsonl(root, "none").load("s1")


# -- forks by reference ------------------------------------------------------------------------------


def workload_parent(root: Path, compression: Compression, turns: int, *,
                    cls: type[JsonlStore] = JsonlStore) -> tuple[JsonlStore, list[Event]]:
    """A parent recorded with the standard workload, closed (cold) and flushed once per turn."""
    store = cls(root, compression=compression, write_delay_ms=60_000)
    with store.start(SessionHeader(id="parent", created_at=1, cwd="/bench")) as live:
        record_workload(live.session, turns, flush=live.flush)
        events = list(live.session.events)
    return store, events


@pytest.mark.parametrize("turns", [10, 50])
def test_fork_by_reference_writes_o1_bytes_whatever_the_prefix(
    tmp_path: Path, compression: Compression, turns: int
) -> None:
    root = tmp_path / "root"
    store, events = workload_parent(root, compression, turns)
    boundary = turn_end_seq(events, turns // 2)
    parent_bytes = Path(store.locate(SessionHeader(id="parent", cwd="/bench"))).stat().st_size
    before = bytes_under(root)
    store.fork("parent", boundary, "child").close()
    written = bytes_under(root) - before
    assert written <= 4096, f"fork of a {turns}-turn parent at turn {turns // 2} wrote {written} bytes"
    assert written < parent_bytes / 8
    child = jsonl(root, compression).load("child")
    assert len(child.events) == boundary + 2  # the prefix and the end-seed marker


def test_fork_by_reference_loads_identically_to_a_copied_fork(
    tmp_path: Path, compression: Compression, fixed_clock: None
) -> None:
    stores = {
        "ref": workload_parent(tmp_path / "ref", compression, 6)[0],
        "copy": workload_parent(tmp_path / "copy", compression, 6, cls=CopyForkStore)[0],
    }
    loads: dict[str, Any] = {}
    for name, store in stores.items():
        boundary = turn_end_seq(store.load("parent").events, 3)
        with store.fork("parent", boundary, "child") as live:
            record_workload(live.session, 2, seed=7, flush=live.flush)
        fresh = type(store)(store.root, compression=compression)
        loaded = fresh.load("child")
        loads[name] = (dataclasses.replace(loaded.header, created_at=0), wire(list(loaded.events)))
        assert [h.id for h in fresh.list() if h.id == "child"] == ["child"]
    assert loads["ref"] == loads["copy"]
    assert SHARED_PREFIX_KEY not in loads["ref"][0].extra
    ref_file = Path(stores["ref"].locate(loads["ref"][0]))
    assert ref_file.stat().st_size < Path(stores["copy"].locate(loads["copy"][0])).stat().st_size / 2


def _normalized_transcript(path: Path) -> list[bytes]:
    """The transcript as parts to compare byte for byte, the header's createdAt blanked."""
    def blank(line: bytes) -> bytes:
        return re.sub(rb'"createdAt":\d+', b'"createdAt":0', line)

    data = path.read_bytes()
    if path.name.endswith(".zstd"):
        frames, torn = split_zstd_frames(data)
        assert torn is None
        return [blank(frames[0].plaintext)] + [frame.compressed for frame in frames[1:]]
    header, _, rest = data.partition(b"\n")
    return [blank(header), rest]


def test_materialize_writes_the_same_bytes_as_a_copying_fork(
    tmp_path: Path, compression: Compression, fixed_clock: None
) -> None:
    results: dict[str, Path] = {}
    stores: dict[str, JsonlStore] = {}
    for name, cls in (("ref", JsonlStore), ("copy", CopyForkStore)):
        store, events = workload_parent(tmp_path / name, compression, 4, cls=cls)
        with store.fork("parent", turn_end_seq(events, 2), "child", check_invariants=False) as live:
            record_workload(live.session, 1, seed=3, flush=live.flush, check_invariants=False)
            live.session.append("turn/start", {"turn": 99})  # out of order on purpose: bytes, not turns
            live.session.append("turn/end", {"turn": 99, "reason": {"kind": "completed"}})
        stores[name] = store
        results[name] = Path(store.locate(SessionHeader(id="child", cwd="/bench")))
    before = wire(list(stores["ref"].load("child").events))
    assert SHARED_PREFIX_KEY in stored_header_line(results["ref"])
    stores["ref"].materialize("child")
    assert _normalized_transcript(results["ref"]) == _normalized_transcript(results["copy"])
    header = stored_header_line(results["ref"])
    assert SHARED_PREFIX_KEY not in header
    assert header["parentSession"] == "parent"
    dsh_view = read_dsh_file(results["ref"])
    assert [e.seq for e in dsh_view.events()] == list(range(len(before)))
    fresh = jsonl(tmp_path / "ref", compression)
    assert wire(list(fresh.load("child").events)) == before
    fresh.delete("parent")  # nothing references it any more
    assert wire(list(jsonl(tmp_path / "ref", compression).load("child").events)) == before
    stores["ref"].materialize("child")  # a full copy is left as it is
    assert wire(list(jsonl(tmp_path / "ref", compression).load("child").events)) == before


def test_shared_prefix_child_stores_only_events_from_its_seed_length(
    tmp_path: Path, compression: Compression
) -> None:
    store = jsonl(tmp_path / "root", compression)
    put(store, HEADER, make_log(3).events)
    boundary = turn_end_seq(store.load("s1").events, 2)
    with store.fork("s1", boundary, "child") as live:
        live.session.append("turn/start", {"turn": 3})
        live.session.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    path = Path(store.locate(SessionHeader(id="child", cwd=HEADER.cwd)))
    stored = read_dsh_file(path)
    assert stored.header[SHARED_PREFIX_KEY] is True
    assert stored.header["seedLength"] == boundary + 1
    assert [e.seq for e in stored.events()] == [boundary + 1, boundary + 2, boundary + 3]
    assert [e.type for e in stored.events()] == ["session/end-seed", "turn/start", "turn/end"]


def test_delete_of_a_referenced_parent_is_refused_until_the_child_lets_go(
    tmp_path: Path, compression: Compression
) -> None:
    root = tmp_path / "root"
    store = jsonl(root, compression)
    put(store, HEADER, make_log(2).events)
    store.fork("s1", child_id="keeps").close()
    store.fork("s1", child_id="drops").close()
    marker_dir = Path(store.locate(HEADER)).parent / "forks"
    assert sorted(p.name for p in marker_dir.iterdir()) == ["drops", "keeps"]
    with pytest.raises(UsageError, match=r"fork children reference this session \(drops, keeps\)"):
        jsonl(root, compression).delete("s1")
    store.delete("drops")
    assert [p.name for p in marker_dir.iterdir()] == ["keeps"]
    with pytest.raises(UsageError, match=r"\(keeps\)"):
        store.delete("s1")
    store.materialize("keeps")
    assert list(marker_dir.iterdir()) == []
    kept = wire(list(store.load("keeps").events))
    store.delete("s1")
    fresh = jsonl(root, compression)
    assert [h.id for h in fresh.list()] == ["keeps"]
    assert wire(list(fresh.load("keeps").events)) == kept


def test_stale_fork_markers_do_not_block_deletion(tmp_path: Path) -> None:
    store = jsonl(tmp_path / "root")
    put(store, HEADER, make_log(1).events)
    marker_dir = Path(store.locate(HEADER)).parent / "forks"
    marker_dir.mkdir()
    (marker_dir / "never-published").write_bytes(b"")
    put(store, SessionHeader(id="unrelated", cwd="/x"), make_log(1).events)
    (marker_dir / "unrelated").write_bytes(b"")  # names a session that does not share this prefix
    store.delete("s1")
    assert [h.id for h in store.list()] == ["unrelated"]


def test_fork_of_a_fork_loads_through_the_chain(tmp_path: Path, compression: Compression) -> None:
    root = tmp_path / "root"
    store = jsonl(root, compression)
    log = make_log(4)
    put(store, HEADER, log.events)
    full = store.load("s1").events
    with store.fork("s1", turn_end_seq(full, 3), "child") as live:
        live.session.append("turn/start", {"turn": 4})
        live.session.append("turn/end", {"turn": 4, "reason": {"kind": "completed"}})
        child_events = list(live.session.events)
    # One grandchild beyond the child's own seed, one inside the part the child shares.
    store.fork("child", child_events[-1].seq, "beyond").close()
    store.fork("child", turn_end_seq(full, 1), "inside").close()
    fresh = jsonl(root, compression)
    beyond = fresh.load("beyond").events
    assert wire(list(beyond[: len(child_events)])) == wire(child_events)
    inside = fresh.load("inside").events
    assert wire(list(inside[: turn_end_seq(full, 1) + 1])) == wire(list(full[: turn_end_seq(full, 1) + 1]))
    assert stored_header_line(Path(fresh.locate(fresh.load("beyond").header)))["parentSession"] == "child"
    with pytest.raises(UsageError, match="reference"):
        fresh.delete("child")
    with pytest.raises(UsageError, match="reference"):
        fresh.delete("s1")
    fresh.materialize("child")
    with pytest.raises(UsageError, match="reference"):
        fresh.delete("child")  # its own children still read from it
    fresh.delete("s1")
    assert wire(list(jsonl(root, compression).load("beyond").events)) == wire(list(beyond))
    assert wire(list(jsonl(root, compression).load("inside").events)) == wire(list(inside))


def test_abandoned_shared_prefix_child_repairs_its_own_file_only(
    tmp_path: Path, compression: Compression
) -> None:
    root = tmp_path / "root"
    store = jsonl(root, compression)
    put(store, HEADER, make_log(2).events)
    parent_path = Path(store.locate(HEADER))
    parent_bytes = parent_path.read_bytes()
    live = store.fork("s1", child_id="child")
    seed = live.session.seq  # prefix + end-seed
    continuation = make_log(1, close=False, start=seed).events[:6]
    for event in continuation:
        event["data"] = {**event["data"], "turn": 3} if "turn" in event["data"] else event["data"]
    append_wire(live, continuation)
    live.flush()
    append_wire(live, [{"type": "assistant/chunk", "data": {"turn": 3, "step": 1, "chunk": {
        "type": "text-delta", "index": 0, "text": "lost"}}}])
    live.abandon()  # the crash: the last chunk was never flushed
    child_path = Path(store.locate(SessionHeader(id="child", cwd=HEADER.cwd)))
    with open(child_path, "ab") as handle:
        handle.write(b"\x28\xb5\x2f" if compression == "zstd" else b'{"type":"assistant/ch')
    fresh = jsonl(root, compression)
    inspected = fresh.inspect("child")
    loaded = fresh.load("child")
    assert loaded.events == inspected.events
    durable = list(loaded.events[: seed + len(continuation)])
    assert [e.type for e in loaded.events[seed + len(continuation):]] == ["step/end", "turn/end"]
    assert list(loaded.events[seed + len(continuation):]) == interrupted_turn_closers(durable)
    assert loaded.events[-1].data["reason"] == {"kind": "interrupted"}
    assert parent_path.read_bytes() == parent_bytes
    assert [e.seq for e in read_dsh_file(child_path).events()] == list(range(seed - 1, len(loaded.events)))
    assert jsonl(root, compression).load("child").events == loaded.events


def test_open_of_a_shared_prefix_child_continues_at_the_right_seq(
    tmp_path: Path, compression: Compression
) -> None:
    root = tmp_path / "root"
    store = jsonl(root, compression)
    put(store, HEADER, make_log(3).events)
    boundary = turn_end_seq(store.load("s1").events, 2)
    store.fork("s1", boundary, "child").close()
    with jsonl(root, compression).open("child") as live:
        assert live.session.seq == boundary + 2  # the prefix and one end-seed, not a second one
        assert live.durable_seq == boundary + 2
        live.session.append("turn/start", {"turn": 3})
        live.session.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    loaded = jsonl(root, compression).load("child")
    assert [e.seq for e in loaded.events] == list(range(boundary + 4))
    assert [e.type for e in loaded.events[boundary + 1:]] == ["session/end-seed", "turn/start", "turn/end"]
    assert loaded.header.seed_length == boundary + 1


def test_a_shared_prefix_child_whose_parent_vanished_is_corrupt_not_short(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = jsonl(root)
    put(store, HEADER, make_log(2).events)
    store.fork("s1", child_id="child").close()
    shutil.rmtree(Path(store.locate(HEADER)).parent)  # behind the store's back
    with pytest.raises(SessionCorruptionError, match="fork parent 's1' is missing"):
        jsonl(root).load("child")


def test_fork_of_a_torn_parent_survives_the_parents_repair(tmp_path: Path, compression: Compression) -> None:
    root = tmp_path / "root"
    store = jsonl(root, compression)
    log = make_log(3)
    put(store, HEADER, log.events[:18])
    store.append("s1", log.events[18:])
    parent_path = Path(store.locate(HEADER))
    parent_path.write_bytes(parent_path.read_bytes()[:-4])  # the last batch is torn
    fresh = jsonl(root, compression)
    boundary = turn_end_seq(fresh.inspect("s1").events, 2)
    fresh.fork("s1", boundary, "child").close()
    child_before = wire(list(jsonl(root, compression).load("child").events))
    assert child_before[: boundary + 1] == log.events[: boundary + 1]
    jsonl(root, compression).load("s1")  # the parent's repair truncates and re-appends after the prefix
    assert wire(list(jsonl(root, compression).load("child").events)) == child_before


def test_materialize_is_refused_for_live_or_missing_sessions(tmp_path: Path) -> None:
    store = jsonl(tmp_path / "root")
    put(store, HEADER, make_log(1).events)
    live = store.fork("s1", child_id="child")
    with pytest.raises(UsageError, match="live"):
        store.materialize("child")
    live.close()
    with pytest.raises(SessionNotFoundError):
        store.materialize("nope")
    with store.open("child"), pytest.raises(SessionLockedError, match="open for writing"):
        jsonl(tmp_path / "root").materialize("child")
    plain = Path(store.locate(HEADER)).read_bytes()
    store.materialize("s1")  # not a fork by reference: nothing to do
    assert Path(store.locate(HEADER)).read_bytes() == plain


def test_the_shared_prefix_flag_never_reaches_callers(tmp_path: Path, compression: Compression) -> None:
    root = tmp_path / "root"
    store = jsonl(root, compression)
    put(store, HEADER, make_log(1).events)
    with store.fork("s1", child_id="child") as live:
        assert SHARED_PREFIX_KEY not in live.session.header.extra
    fresh = jsonl(root, compression)
    headers = [fresh.load("child").header, fresh.inspect("child").header, fresh.read_from("child", 3).header,
               *[h for h in fresh.list() if h.id == "child"]]
    raw = fresh.read_raw("child")
    assert raw is not None
    headers.append(raw.header)
    assert all(SHARED_PREFIX_KEY not in header.extra for header in headers)
    assert all(header.parent_session == "s1" for header in headers)
    # A header that claims a shared prefix is not trusted on an ordinary first write.
    claimed = SessionHeader(id="claims", cwd="/c", extra={SHARED_PREFIX_KEY: True})  # type: ignore[arg-type]
    put(fresh, claimed, make_log(1).events)
    assert SHARED_PREFIX_KEY not in stored_header_line(Path(fresh.locate(claimed)))


def test_failed_fork_publication_leaves_no_marker(tmp_path: Path) -> None:
    class NoLinkFS(FileSystem):
        def link(self, source: str, target: str) -> None:
            raise OSError(errno.EIO, "I/O error")

    root = tmp_path / "root"
    put(jsonl(root), HEADER, make_log(1).events)
    store = jsonl(root, fs=NoLinkFS())
    with pytest.raises(PersistenceIOError):
        store.fork("s1", child_id="child")
    marker_dir = Path(store.locate(HEADER)).parent / "forks"
    assert not marker_dir.exists() or list(marker_dir.iterdir()) == []
    assert [h.id for h in jsonl(root).list()] == ["s1"]
    jsonl(root).delete("s1")


def test_a_fork_published_by_another_writer_during_delete_keeps_its_parent(tmp_path: Path) -> None:
    """Delete re-checks for children under the reference guard, after its first check passed."""
    root = tmp_path / "root"
    put(jsonl(root), HEADER, make_log(2).events)
    other_process = jsonl(root)

    class ForkDuringDelete(JsonlStore):
        def _acquire_writer_lock(self, session_id: str) -> Any:
            lock = super()._acquire_writer_lock(session_id)
            if session_id == "s1":  # after Store.delete found no children, before the unlink
                other_process.fork("s1", child_id="late").close()
            return lock

    with pytest.raises(UsageError, match=r"fork children reference this session \(late\)"):
        ForkDuringDelete(root).delete("s1")
    fresh = jsonl(root)
    assert wire(list(fresh.load("late").events))[:18] == make_log(2).events
    assert sorted(h.id for h in fresh.list()) == ["late", "s1"]


# -- more of the checklist ------------------------------------------------------------------------------


def test_a_no_cwd_live_session_cannot_adopt_a_log_stored_under_a_cwd(tmp_path: Path) -> None:
    root = tmp_path / "root"
    put(jsonl(root), HEADER, make_log(1).events)
    with pytest.raises(SessionExistsError):
        jsonl(root).start(SessionHeader(id="s1"))
    assert not (root / "_no-cwd").exists()
    assert [h.cwd for h in jsonl(root).list()] == [HEADER.cwd]


def test_a_root_that_cannot_be_examined_fails_at_construction(tmp_path: Path) -> None:
    class DeniedFS(FileSystem):
        def stat(self, path: str) -> os.stat_result:
            raise OSError(errno.EACCES, "Permission denied", path)

    with pytest.raises(PersistenceIOError, match="cannot use") as info:
        JsonlStore(tmp_path / "root", fs=DeniedFS())
    assert info.value.errno == errno.EACCES


def test_append_on_a_fresh_instance_adopts_and_repairs_a_crash_tail(
    tmp_path: Path, compression: Compression
) -> None:
    root = tmp_path / "root"
    log = make_log(1, close=False)  # turn/start .. step/end: the turn is open
    put(jsonl(root, compression), HEADER, log.events)
    path = Path(jsonl(root, compression).locate(HEADER))
    with open(path, "ab") as handle:
        handle.write(b"\x28\xb5\x2f\xfd\x04" if compression == "zstd" else b'{"type":"turn/e')
    following = LogBuilder(start=len(log.events) + 1)
    following.turn(2)
    jsonl(root, compression).append("s1", following.events)
    events = jsonl(root, compression).load("s1").events
    assert [e.seq for e in events] == list(range(len(log.events) + 1 + len(following.events)))
    assert events[len(log.events)].type == "turn/end"
    assert events[len(log.events)].data["reason"] == {"kind": "interrupted"}


def test_a_log_holding_only_an_open_turn_start_loads_with_its_closer(
    tmp_path: Path, compression: Compression
) -> None:
    root = tmp_path / "root"
    put(jsonl(root, compression), HEADER, [{"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1}}])
    events = jsonl(root, compression).load("s1").events
    assert [(e.type, e.seq, e.time) for e in events] == [("turn/start", 0, 5), ("turn/end", 1, 5)]
    assert events[1].data == {"turn": 1, "reason": {"kind": "interrupted"}}


def test_zstd_transcript_is_a_header_frame_then_one_frame_per_batch(tmp_path: Path) -> None:
    store = jsonl(tmp_path / "root")
    log = make_log(2)
    put(store, HEADER, log.events[:9])
    path = Path(store.locate(HEADER))
    assert not path.with_name("session.jsonl").exists()
    first = path.read_bytes()
    assert first.startswith(b"\x28\xb5\x2f\xfd")
    assert len(split_zstd_frames(first)[0]) == 2
    store.append("s1", log.events[9:])
    data = path.read_bytes()
    assert data.startswith(first), "committed frames must never be rewritten"
    frames, torn = split_zstd_frames(data)
    assert torn is None
    assert [f.plaintext.count(b"\n") for f in frames] == [1, 7, 7]  # chunk runs packed per batch


def test_listing_reads_only_the_header_frame_while_load_rejects_a_corrupt_event_frame(tmp_path: Path) -> None:
    store = jsonl(tmp_path / "root")
    log = make_log(2)
    put(store, HEADER, log.events[:9])
    store.append("s1", log.events[9:])
    path = Path(store.locate(HEADER))
    data = bytearray(path.read_bytes())
    frames, _ = split_zstd_frames(bytes(data))
    middle = len(frames[0].compressed) + len(frames[1].compressed) // 2
    data[middle] ^= 0xFF
    path.write_bytes(bytes(data))
    fresh = jsonl(tmp_path / "root")
    assert [h.id for h in fresh.list()] == ["s1"]
    with pytest.raises(SessionCorruptionError):
        fresh.load("s1")


def test_directories_and_transcripts_are_private_to_the_owner(tmp_path: Path) -> None:
    store = jsonl(tmp_path / "root")
    put(store, HEADER, make_log(1).events)
    path = Path(store.locate(HEADER))
    for directory in (tmp_path / "root", path.parent.parent, path.parent):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    assert path.stat().st_mode & 0o777 == 0o600


# -- a child reads only the prefix it shares ---------------------------------------------------------


@pytest.mark.parametrize("compressed", [False, True])
def test_prefix_scan_stops_after_the_requested_seq(tmp_path: Path, compressed: bool) -> None:
    from agentlog.core.packed import resolve_entries
    from agentlog.store.jsonl.format import scan_log

    store = jsonl(tmp_path / "root", "zstd" if compressed else "none")
    log = make_log(6 if compressed else 200)  # raw: larger than one 64 KiB scanning step
    put(store, HEADER, log.events[:18])
    for start in range(18, len(log.events), 9 if compressed else len(log.events)):
        store.append("s1", log.events[start:start + 9 if compressed else None])
    data = Path(store.locate(HEADER)).read_bytes()
    assert compressed or len(data) > 2 * 2**16
    full = scan_log(data, compressed=compressed, path="p")
    assert not full.partial
    part = scan_log(data, compressed=compressed, path="p", until_seq=20)
    assert part.partial
    assert part.torn is None
    assert 20 <= len(part.events) < len(full.events)
    assert resolve_entries(part.events) == resolve_entries(full.events[: len(part.events)])
    everything = scan_log(data, compressed=compressed, path="p", until_seq=len(log.events))
    assert resolve_entries(everything.events) == resolve_entries(full.events)


def test_a_child_loads_although_its_parent_is_damaged_after_the_shared_prefix(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = jsonl(root, "none")
    log = make_log(200)  # several 64 KiB scanning steps
    put(store, HEADER, log.events[:18])
    store.fork("s1", child_id="early").close()
    store.append("s1", log.events[18:])
    path = Path(store.locate(HEADER))
    lines = path.read_bytes().split(b"\n")
    lines[len(lines) // 2] = b"{damaged"  # far past the child's prefix, before later turn/ends
    path.write_bytes(b"\n".join(lines))
    fresh = jsonl(root, "none")
    assert wire(list(fresh.load("early").events))[:18] == log.events[:18]
    with pytest.raises(SessionCorruptionError, match="unparsable committed event"):
        fresh.load("s1")  # the partial scan made for the child does not stand in for a full one
    assert wire(list(fresh.inspect("early").events))[:18] == log.events[:18]


def test_a_symlink_planted_as_a_session_directory_is_refused_and_never_followed(
        tmp_path: Path, compression: Compression) -> None:
    elsewhere = jsonl(tmp_path / "elsewhere", compression)
    other = dataclasses.replace(HEADER, id="s2")
    put(elsewhere, other, make_log(1).events)
    target = Path(elsewhere.locate(other)).parent
    outside = sorted(path.name for path in target.rglob("*"))
    store = jsonl(tmp_path / "root", compression)
    put(store, HEADER, make_log(1).events)
    planted = Path(store.locate(other)).parent
    planted.symlink_to(target, target_is_directory=True)
    for attempt in (store.list, lambda: store.load("s2"), lambda: store.delete("s2")):
        with pytest.raises(StoreError, match="symlink") as info:
            attempt()
        assert str(planted) in str(info.value)
    assert sorted(path.name for path in target.rglob("*")) == outside
    assert wire(list(elsewhere.load("s2").events)) == make_log(1).events


@pytest.mark.parametrize(("fits", "too_long"), [("x" * 244, "x" * 245), ("x" + "€" * 48, "€" * 49)])
def test_an_id_too_long_for_a_file_name_is_refused_at_start_and_nothing_is_written(
        tmp_path: Path, fits: str, too_long: str) -> None:
    """The encoded id names the session's directory and files (``<id>.lock``, DSH's flat
    ``<id>.jsonl.zstd``), which a file system takes up to 255 bytes: a longer one is refused at
    ``start``/``create`` with the reason, not as an I/O error on the first write, and the store
    is left as it was."""
    store = JsonlStore(tmp_path / "store")
    with pytest.raises(InvalidHeaderError, match="too long") as refused:
        store.start(SessionHeader(id=too_long, cwd="/p"))
    assert refused.value.session_id == too_long
    with pytest.raises(InvalidHeaderError, match="too long"):
        store.create(SessionHeader(id=too_long, cwd="/p"))
    assert store.list() == [] and not any(path.is_file() for path in (tmp_path / "store").rglob("*"))
    with store.start(SessionHeader(id=fits, cwd="/p")) as live:
        live.session.append("turn/start", {"turn": 1})
        live.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    events = JsonlStore(tmp_path / "store").load(fits).events
    assert [event.type for event in events] == ["turn/start", "turn/end"]
