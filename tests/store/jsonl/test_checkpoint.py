"""Validated-state checkpoints of the JSONL store (store/jsonl/checkpoint.py): a resume from a
checkpoint gives exactly what a full read and validation gives, whatever state the transcript
or the checkpoint is in, and leaves the prefix it covers unparsed."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
import pytest
from benchmarks.workload import record_workload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog import Event, Replace, SessionHeader
from agentlog.compaction.engine import Compactor
from agentlog.core.packed import LazySpan
from agentlog.core.session import Session
from agentlog.errors import AgentlogError
from agentlog.store.jsonl import checkpoint as jsonl_checkpoint
from agentlog.store.jsonl.checkpoint import CHECKPOINT_SUFFIX
from agentlog.store.jsonl.format import compress_frame, encode_batch, encode_header_line
from agentlog.store.jsonl.store import JsonlStore
from tests.compaction.helpers import FixedSummarizer
from tests.legacy_logs import legacy_message_log
from tests.store.jsonl.test_seek import full_scan, indexed
from tests.strategies import Op, run_ops, session_ops, user_message

Compression = Literal["zstd", "none"]
SID = "s1"
HEADER = SessionHeader(id=SID, created_at=1000, cwd="/home/user/project")
DAMAGES = ("none", "none", "cut-log", "flip-log", "cut-ckpt", "flip-ckpt", "drop-ckpt")


@pytest.fixture(params=["zstd", "none"])
def compression(request: pytest.FixtureRequest) -> Compression:
    return request.param  # type: ignore[no-any-return]


def transcript(root: Path, compression: Compression) -> Path:
    return Path(JsonlStore(root, compression=compression).locate(HEADER))


def sidecar(root: Path, compression: Compression) -> Path:
    path = transcript(root, compression)
    return path.with_name(path.name + CHECKPOINT_SUFFIX)


def untimed(events: Sequence[Event]) -> list[Any]:
    """Events with the time of each ``session/end-seed`` left out (a fork writes it at its own time)."""
    return [(event.type, event.seq, event.data, 0 if event.type == "session/end-seed" else event.time)
            for event in events]


def spans_of(session: Session) -> list[LazySpan]:
    seen: dict[int, LazySpan] = {}
    for entry in session._log:
        if isinstance(entry, LazySpan):
            seen.setdefault(id(entry), entry)
    return list(seen.values())


def record(root: Path, compression: Compression, turns: int, *, after: int = 0, open_tail: bool = False,
           seed: int = 0) -> None:
    """``turns`` workload turns closed by a store that checkpoints (at close); then ``after`` more
    turns by one that does not (the checkpoint's suffix), and an open turn left by a crash."""
    store = JsonlStore(root, compression=compression, write_delay_ms=60_000, checkpoint_bytes=0)
    live = store.start(HEADER)
    record_workload(live.session, turns, flush=live.flush, checkpoint=live.flush, seed=seed)
    live.close()
    if after or open_tail:
        plain = JsonlStore(root, compression=compression, write_delay_ms=60_000, checkpoint_bytes=None)
        live = plain.open(SID)
        record_workload(live.session, after, flush=live.flush, seed=seed + 1)
        if open_tail:
            live.session.append("turn/start", {"turn": turns + after + 1})
            live.session.append("user/message", user_message("u-tail"), surface_op="append")
        live.flush()
        live.abandon()


def record_ops(root: Path, compression: Compression, ops: list[Op], split: int) -> None:
    """Surface ops (appends, replacements, tool-result rewrites) in two closed turns, the first
    checkpointed at close, the second its suffix."""
    store = JsonlStore(root, compression=compression, write_delay_ms=60_000, checkpoint_bytes=0)
    live = store.start(HEADER, check_invariants=False)
    session = live.session
    session.append("turn/start", {"turn": 1})
    events = run_ops(session, ops[:split], after=live.flush)
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    live.close()
    plain = JsonlStore(root, compression=compression, write_delay_ms=60_000, checkpoint_bytes=None)
    live = plain.open(SID, check_invariants=False)
    session = live.session
    session.append("turn/start", {"turn": 2})
    for op in ops[split:]:  # references to ops of the first part name their logged seqs
        surface_op: Any = None
        if op.type in ("user/message", "assistant/message", "tool/result"):
            surface_op = "append" if op.replace is None else Replace(
                events[op.replace[0]].seq, events[op.replace[1]].seq)
        cites = None if op.cites is None else [events[ref].seq for ref in op.cites]
        events.append(session.append(op.type, op.data, surface_op=surface_op, source_event_seqs=cites))
        live.flush()
    session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    live.close()


def damage(root: Path, compression: Compression, kind: str, where: float, xor: int) -> None:
    target = sidecar(root, compression) if kind.endswith("ckpt") else transcript(root, compression)
    if kind == "none" or not target.exists():
        return
    if kind == "drop-ckpt":
        target.unlink()
        return
    data = bytearray(target.read_bytes())
    at = min(int(where * len(data)), len(data) - 1)
    if kind.startswith("cut"):
        del data[at:]
    else:
        data[at] ^= xor
    target.write_bytes(bytes(data))


def observe(root: Path, compression: Compression, checkpoint_bytes: int | None, *,
            check_invariants: bool = True, resumed: list[bool] | None = None) -> dict[str, Any]:
    """Everything a fresh store tells about the session (inspect, then open), and the transcript
    left behind (open commits repairs); ``resumed`` gets whether a checkpoint was used."""
    store = JsonlStore(root, compression=compression, write_delay_ms=60_000,
                       checkpoint_bytes=checkpoint_bytes)
    if resumed is not None:
        resumed.append(False)
    seen: dict[str, Any] = {}
    try:
        inspection = store.inspect(SID)
        seen["inspect"] = (list(inspection.events), inspection.recovery, inspection.header)
        live = store.open(SID, check_invariants=check_invariants)
    except AgentlogError as exc:
        seen["error"] = (type(exc).__name__, str(exc))
        store.close()
        return seen
    session = live.session
    if resumed is not None:
        resumed[-1] = bool(store._resumed)
    events = list(session.events)
    seen["open"] = (events[:-1], events[-1].type, session.seq, session.first_live_seq,
                    list(session.surface.nodes), session.surface.replace_generation,
                    session.derive_messages(), session.request_header(), session.request_context(),
                    live.durable_seq)
    try:
        session.append("step/start", {"turn": 99, "step": 1})
        seen["next"] = "appended"
    except AgentlogError as exc:
        seen["next"] = type(exc).__name__
    live.abandon()
    store.close()
    seen["file"] = transcript(root, compression).read_bytes()
    return seen


def same_as_full(pristine: Path, work: Path, compression: Compression, *, check_invariants: bool = True,
                 intact: bool = False) -> None:
    """A store reading the checkpoint sees what one ignoring it sees, twice: on the state left
    (the first opens commit the same repair; the checkpointing one may rewrite its checkpoint).
    ``intact``: nothing was damaged, so the checkpoint must have been used."""
    used: list[bool] = []
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    full = observe(work, compression, None, check_invariants=check_invariants)
    after_full = work.with_name(work.name + "-full")
    shutil.rmtree(after_full, ignore_errors=True)
    shutil.move(work, after_full)
    shutil.copytree(pristine, work)
    resumed = observe(work, compression, 0, check_invariants=check_invariants, resumed=used)
    assert resumed == full
    again = observe(work, compression, 0, check_invariants=check_invariants, resumed=used)
    if intact:
        assert used == [True, True]
    shutil.rmtree(work)
    shutil.move(after_full, work)
    assert again == observe(work, compression, None, check_invariants=check_invariants)


@dataclass(frozen=True)
class Damage:
    kind: str
    where: float
    xor: int


damages = st.builds(Damage, st.sampled_from(DAMAGES), st.floats(0, 1), st.integers(1, 255))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.integers(1, 3), after=st.integers(0, 2), open_tail=st.booleans(), seed=st.integers(0, 9),
       hurt=damages)
def test_resume_from_a_checkpoint_equals_the_full_restore_of_a_recorded_log(
    tmp_path: Path, compression: Compression, turns: int, after: int, open_tail: bool, seed: int,
    hurt: Damage,
) -> None:
    pristine = tmp_path / "pristine"
    shutil.rmtree(pristine, ignore_errors=True)
    record(pristine, compression, turns, after=after, open_tail=open_tail, seed=seed)
    damage(pristine, compression, hurt.kind, hurt.where, hurt.xor)
    same_as_full(pristine, tmp_path / "work", compression, intact=hurt.kind == "none")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=session_ops(max_ops=16), data=st.data(), hurt=damages)
def test_resume_from_a_checkpoint_equals_the_full_restore_of_random_surface_ops(
    tmp_path: Path, compression: Compression, ops: list[Op], data: st.DataObject, hurt: Damage,
) -> None:
    split = data.draw(st.integers(0, len(ops)))
    if any(op.replace is not None and op.replace[0] < split <= max(op.replace) for op in ops):
        split = len(ops)  # a replacement spanning the split would name seqs of both parts: keep it simple
    pristine = tmp_path / "pristine"
    shutil.rmtree(pristine, ignore_errors=True)
    record_ops(pristine, compression, ops, split)
    damage(pristine, compression, hurt.kind, hurt.where, hurt.xor)
    same_as_full(pristine, tmp_path / "work", compression, check_invariants=False,
                 intact=hurt.kind == "none")


def test_a_resume_parses_only_the_spans_it_reads(tmp_path: Path, compression: Compression) -> None:
    record(tmp_path, compression, 4)
    store = JsonlStore(tmp_path, compression=compression, checkpoint_bytes=0)
    live = store.open(SID)
    session = live.session
    spans = spans_of(session)
    assert len(spans) > 10
    assert session.derive_messages()  # from the checkpoint: no span parsed for it
    assert session.request_header() is not None  # logged once, in the first turn
    session.request_context()
    parsed = [span for span in spans if span._entries is not None]
    assert len(parsed) <= 3  # the request header's, and the last turn's boundary (checker priming)
    middle = spans[len(spans) // 2]
    assert middle._entries is None
    full = JsonlStore(tmp_path, compression=compression, checkpoint_bytes=None).inspect(SID)
    assert session.events[middle.seq0] == full.events[middle.seq0]  # reading an event parses its span
    assert middle._entries is not None
    assert list(session.events)[:-1] == list(full.events)
    live.close()


def test_inspect_writes_no_checkpoint_and_load_writes_one(tmp_path: Path, compression: Compression) -> None:
    store = JsonlStore(tmp_path, compression=compression, write_delay_ms=60_000, checkpoint_bytes=None)
    live = store.start(HEADER)
    record_workload(live.session, 2, flush=live.flush)
    live.close()
    reader = JsonlStore(tmp_path, compression=compression, checkpoint_bytes=0)
    reader.inspect(SID)
    assert not sidecar(tmp_path, compression).exists()
    loaded = reader.load(SID)
    assert sidecar(tmp_path, compression).exists()
    resumed = JsonlStore(tmp_path, compression=compression, checkpoint_bytes=0).load(SID)
    assert any(isinstance(entry, LazySpan) for entry in resumed.events._log)  # type: ignore[attr-defined]
    assert list(resumed.events) == list(loaded.events)


@pytest.mark.parametrize("version", [1, 3])  # 1: the messages as one JSON array
def test_a_checkpoint_of_a_foreign_version_is_ignored(tmp_path: Path, compression: Compression,
                                                      version: int) -> None:
    record(tmp_path, compression, 2)
    path = sidecar(tmp_path, compression)
    data = bytearray(path.read_bytes())
    magic = len(b"agentlog-ckpt\n")
    head = struct.Struct("<IQQ32s32s")
    fields = list(head.unpack_from(data, magic))
    assert fields[0] == 2
    fields[0] = version
    packed = head.pack(*fields)
    data[magic:magic + head.size] = packed
    data[magic + head.size:magic + head.size + 16] = hashlib.blake2b(packed, digest_size=16).digest()
    path.write_bytes(bytes(data))
    live = JsonlStore(tmp_path, compression=compression, checkpoint_bytes=None).open(SID)
    assert not spans_of(live.session)
    live.abandon()
    live = JsonlStore(tmp_path, compression=compression, checkpoint_bytes=0).open(SID)
    assert not spans_of(live.session)  # read in full (and a current checkpoint written)
    live.abandon()
    live = JsonlStore(tmp_path, compression=compression, checkpoint_bytes=0).open(SID)
    assert spans_of(live.session)
    live.abandon()


def test_a_fork_of_a_checkpointed_parent_equals_a_fork_of_a_fully_read_one(
    tmp_path: Path, compression: Compression,
) -> None:
    record(tmp_path / "a", compression, 4, after=1)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    full = JsonlStore(tmp_path / "a", compression=compression, checkpoint_bytes=None)
    cold = JsonlStore(tmp_path / "b", compression=compression, checkpoint_bytes=0)
    events = full.inspect(SID).events
    ends = [event.seq for event in events if event.type == "turn/end"]
    for boundary in (ends[1], ends[-1], None):
        name = f"child-{boundary}"
        one, two = full.fork(SID, boundary, name), cold.fork(SID, boundary, name)
        assert list(two.session.events)[:-1] == list(one.session.events)[:-1]
        assert two.session.derive_messages() == one.session.derive_messages()
        assert list(two.session.surface.nodes) == list(one.session.surface.nodes)
        assert two.session.request_header() == one.session.request_header()
        one.close()
        two.close()
        again = JsonlStore(tmp_path / "b", compression=compression, checkpoint_bytes=0).load(name)
        reference = JsonlStore(tmp_path / "a", compression=compression).load(name)
        assert untimed(again.events) == untimed(reference.events)


@pytest.mark.parametrize("flip", ["none", "before", "after"])
def test_a_cold_fork_verifies_only_the_prefix_it_forks(
    tmp_path: Path, compression: Compression, monkeypatch: pytest.MonkeyPatch, flip: str,
) -> None:
    monkeypatch.setattr(jsonl_checkpoint, "_PREFIX_STEP", 1)  # a digested prefix at every batch
    record(tmp_path / "a", compression, 6)
    events = JsonlStore(tmp_path / "a", compression=compression).inspect(SID).events
    boundary = [event.seq for event in events if event.type == "turn/end"][1]
    path = transcript(tmp_path / "a", compression)
    data = bytearray(path.read_bytes())
    if flip != "none":  # a byte of the first event (before), or of the last batch (after)
        at = len(data) - 3 if flip == "after" else data.index(b"\n") + 20 if compression == "none" else 200
        data[at] ^= 0x01
        path.write_bytes(bytes(data))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    full = JsonlStore(tmp_path / "a", compression=compression, checkpoint_bytes=None)
    cold = JsonlStore(tmp_path / "b", compression=compression, checkpoint_bytes=0)
    outcomes = []
    for store in (full, cold):
        try:
            live = store.fork(SID, boundary, "child")
        except AgentlogError as exc:
            outcomes.append(type(exc))
            continue
        outcomes.append((untimed(live.session.events), live.session.derive_messages(),
                         live.session.request_header()))
        live.close()
    assert outcomes[1] == outcomes[0]
    verified = cold._fork_sources.get(SID)
    if flip == "before":
        assert verified is None or verified[2] == len(events)  # the digest failed: the whole way
    else:
        assert verified is not None and boundary < verified[2] < len(events)  # only a prefix read


def test_compaction_after_a_resume_equals_compaction_after_a_full_read(
    tmp_path: Path, compression: Compression,
) -> None:
    record(tmp_path / "a", compression, 3)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    results = []
    for name, checkpoint_bytes in (("a", None), ("b", 0)):
        store = JsonlStore(tmp_path / name, compression=compression, checkpoint_bytes=checkpoint_bytes)
        live = store.open(SID)
        assert bool(spans_of(live.session)) == (checkpoint_bytes == 0)
        Compactor(FixedSummarizer()).compact_now(live)
        session = live.session
        results.append(([event.type for event in session.events], list(session.surface.nodes),
                         session.surface.replace_generation, len(session.derive_messages()),
                         session.derive_messages()[1:]))
        live.close()
    assert results[0] == results[1]


REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3])
def test_sigkill_while_checkpointing_then_open_equals_the_full_restore(
    tmp_path: Path, compression: Compression, delay: float,
) -> None:
    root = tmp_path / "root"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.store.jsonl.checkpoint_worker", str(root), compression],
        stdout=subprocess.PIPE, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stdout is not None
    try:
        for _ in range(3):  # a few checkpoints written: the session (and each write) has grown
            assert process.stdout.readline().startswith(b"CLOSED ")
        time.sleep(delay)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stdout.close()
    same_as_full(root, tmp_path / "work", compression)


def test_a_write_after_a_resume_keeps_reads_seeking(tmp_path: Path, compression: Compression) -> None:
    """A foreign append (no seek record) after a checkpoint: the next write rebuilds the seek index
    from the checkpoint's batch starts, as it does from a full scan's marks."""
    root = tmp_path / "root"
    record(root, compression, 2)
    path = transcript(root, compression)
    events = list(JsonlStore(root, compression=compression, checkpoint_bytes=None).inspect(SID).events)
    more = [Event.from_wire({**event.to_wire(), "seq": len(events) + offset})
            for offset, event in enumerate(events[1:3])]
    with open(path, "ab") as handle:
        batch = encode_batch(more)
        handle.write(compress_frame(batch) if compression == "zstd" else batch)
    store = JsonlStore(root, compression=compression, write_delay_ms=60_000, checkpoint_bytes=0)
    store.append(SID, [{**event.to_wire(), "seq": len(events) + 2 + offset}
                       for offset, event in enumerate(events[3:5])])
    assert store._resumed
    store.close()
    total = len(events) + 4
    for from_seq in (0, 5, len(events) - 1, len(events) + 1, total - 1):
        assert indexed(root, compression, from_seq) == (full_scan(root, compression, from_seq), 0), from_seq


def test_a_legacy_log_is_never_checkpointed_even_when_its_load_repairs_it(tmp_path: Path) -> None:
    """Its load upgrades the events in memory: a checkpoint would vouch for bytes that parse to the
    legacy shapes. A torn tail makes the load repair first, which must not lose that knowledge."""
    path = transcript(tmp_path, "none")
    path.parent.mkdir(parents=True)
    lines = [encode_header_line(HEADER), *(orjson.dumps(wire) + b"\n" for wire in legacy_message_log())]
    path.write_bytes(b"".join(lines) + b'{"type":"step/sta')  # a torn last line
    store = JsonlStore(tmp_path, compression="none", write_delay_ms=60_000, checkpoint_bytes=0)
    live = store.open(SID)
    live.session.append("turn/start", {"turn": 2})
    live.session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    live.close()
    assert not sidecar(tmp_path, "none").exists()
    full = JsonlStore(tmp_path, compression="none", checkpoint_bytes=None).load(SID)
    resumed = JsonlStore(tmp_path, compression="none", checkpoint_bytes=0).load(SID)
    assert list(resumed.events) == list(full.events)


def test_a_resumed_log_whose_resume_was_forgotten_is_not_reparsed(
    tmp_path: Path, compression: Compression,
) -> None:
    """The prepared-log cache may keep a resumed log longer than the memory of its resume: a load
    then neither parses its prefix (to compare it with the bytes) nor stops checkpointing it."""
    ids = [f"s{number}" for number in range(1, 8)]
    for session_id in ids:
        writer = JsonlStore(tmp_path, compression=compression, write_delay_ms=60_000, checkpoint_bytes=0)
        live = writer.start(SessionHeader(id=session_id, created_at=1000, cwd="/home/user/project"))
        record_workload(live.session, 2, flush=live.flush, checkpoint=live.flush)
        live.close()
    store = JsonlStore(tmp_path, compression=compression, checkpoint_bytes=0)
    for session_id in ids[:5]:
        store.load(session_id)
    store.load("s1")  # a cache hit: s1 is the most recent prepared log
    store.load("s6")  # resumes s6: the oldest remembered resume (s1's) is forgotten
    assert "s1" not in store._resumed
    source = store._prepared["s1"][1]
    store.load("s1")
    assert "s1" not in store._unmirrored
    assert sum(span._entries is not None for span in spans_of(source)) <= 3


def test_recording_after_a_resume_writes_what_recording_after_a_full_read_writes(
        tmp_path: Path, compression: Compression) -> None:
    """A resumed session (prefix as lazy spans) that records more turns, stream deltas packed
    on the write path, stores what a fully read one stores (event times aside: the recording
    reads the clock), and reads back alike."""
    files = {}
    for name, checkpoint_bytes in (("resumed", 0), ("full", None)):
        root = tmp_path / name
        record(root, compression, 2)
        store = JsonlStore(root, compression=compression, write_delay_ms=60_000,
                           checkpoint_bytes=checkpoint_bytes)
        live = store.open(SID)
        assert bool(store._resumed) is (checkpoint_bytes is not None)
        record_workload(live.session, 2, flush=live.flush, seed=1)
        live.close()
        store.close()
        stored = JsonlStore(root, compression=compression, checkpoint_bytes=None).inspect(SID).events
        files[name] = [(event.type, event.seq, event.data) for event in stored]
    assert len(files["resumed"]) > 100 and files["resumed"] == files["full"]
    same_as_full(tmp_path / "resumed", tmp_path / "work", compression, intact=True)


def test_a_resume_keeps_long_lines_and_look_alike_objects_exactly(tmp_path: Path,
                                                                   compression: Compression) -> None:
    """Messages longer than one decompression read, and small objects equal in Python but not in
    JSON (1 and true, 1 and 1.0, other key order), resume exactly as a full restore derives them."""
    store = JsonlStore(tmp_path, compression=compression, checkpoint_bytes=0)
    live = store.start(HEADER)
    live.session.append("user/message", user_message("big", "x\x1b]0;title\x07\u202e" * 100_000),
                        surface_op="append")
    look_alikes = ({"a": 1, "b": True}, {"a": True, "b": 1}, {"b": True, "a": 1}, {"a": 1.0, "b": True})
    for index, extra in enumerate(look_alikes):
        message = user_message(f"m{index}", "\U0001f600", source={"kind": "user", **extra})
        live.session.append("user/message", message, surface_op="append")
    live.close()
    resumed = JsonlStore(tmp_path, compression=compression).open(SID)
    assert spans_of(resumed.session)  # resumed from the checkpoint, not read whole
    full = JsonlStore(tmp_path, compression=compression, checkpoint_bytes=None).inspect(SID)
    expected = Session.restore(SID, full.events, full.header).derive_messages()
    messages = resumed.session.derive_messages()
    assert orjson.dumps(messages) == orjson.dumps(expected)
    assert [list(message["source"].items())[1:] for message in messages[1:]] == [
        list(extra.items()) for extra in look_alikes]
    assert [type(message["source"]["a"]) for message in messages[1:]] == [int, bool, int, float]
    resumed.close()


def test_a_closed_session_of_a_few_hundred_kilobytes_has_a_checkpoint_its_next_load_resumes_from(
        tmp_path: Path) -> None:
    """Issue 30: at 1 MiB a 200-turn workload session (0.97 MB zstd) had none, so its cold load
    parsed all 36k events; past 256 KiB (60 turns here) the close writes one and a cold load
    resumes from it (its prefix stays unparsed spans) with the same messages."""
    store = JsonlStore(tmp_path, compression="zstd")
    live = store.start(SessionHeader(id="s", cwd="/tmp"))
    record_workload(live.session, 60, flush=live.flush)
    live.close()
    messages = live.session.derive_messages()
    store.close()
    transcript = next(tmp_path.rglob("*.jsonl.zstd"))
    assert 1 << 18 < transcript.stat().st_size < 1 << 20
    assert transcript.with_name(transcript.name + CHECKPOINT_SUFFIX).exists()
    cold = JsonlStore(tmp_path, compression="zstd")
    try:
        loaded = cold.open("s")
        assert isinstance(loaded.session._log[0], LazySpan)
        assert loaded.session.derive_messages() == messages
        loaded.close()
    finally:
        cold.close()
