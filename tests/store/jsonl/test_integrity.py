"""The JSONL integrity data (store/jsonl/integrity.py, format 2 of the seek sidecar): digests of
what each append wrote, kept through the sidecar's rebuilds, and honest about what they cover."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Literal

import pytest
from benchmarks.workload import record_workload

from agentlog import SessionHeader
from agentlog.errors import SessionCorruptionError
from agentlog.store.jsonl import seek
from agentlog.store.jsonl.seek import SEEK_SUFFIX
from agentlog.store.jsonl.store import JsonlStore

Compression = Literal["zstd", "none"]
HEADER = SessionHeader(id="s1", created_at=1000, cwd="/home/user/project")


@pytest.fixture(params=["zstd", "none"])
def compression(request: pytest.FixtureRequest) -> Compression:
    return request.param  # type: ignore[no-any-return]


def record(root: Path, compression: Compression, turns: int = 2) -> Path:
    """A session of ``turns`` workload turns in many durable batches; returns its transcript."""
    with JsonlStore(root, compression=compression, write_delay_ms=60_000) as store:
        live = store.start(HEADER)
        record_workload(live.session, turns, flush=live.flush, checkpoint=live.flush)
        live.close()
        return Path(str(store.locate(HEADER)))


def append_turn(root: Path, compression: Compression) -> None:
    with JsonlStore(root, compression=compression, write_delay_ms=60_000) as store:
        live = store.open("s1")
        record_workload(live.session, 1, flush=live.flush)
        live.close()


def integrity(root: Path, compression: Compression) -> tuple[str, str]:
    with JsonlStore(root, compression=compression, create=False) as store:
        found = store.check_integrity("s1")
    return found.status, found.detail


def sidecar_of(transcript: Path) -> Path:
    return transcript.with_name(transcript.name + SEEK_SUFFIX)


def as_format_1(sidecar: Path) -> None:
    """Rewrite a sidecar as the previous build wrote it: the same records, without digests."""
    data = sidecar.read_bytes()
    found = seek._records(data)
    assert found is not None and found[1]
    records = b""
    for record in found[0]:
        assert record is not None
        dev, ino, size, mtime, ctime = record.after
        body = seek._BODY_V1.pack(record.seq, record.offset, size, dev, ino, mtime, ctime)
        records += body + hashlib.blake2b(body, digest_size=8).digest()
    sidecar.write_bytes(seek._MAGIC_V1 + records)


def test_every_byte_of_a_recorded_transcript_is_covered(tmp_path: Path, compression: Compression) -> None:
    transcript = record(tmp_path, compression)
    status, detail = integrity(tmp_path, compression)
    assert status == "checked" and f"all {transcript.stat().st_size} bytes" in detail, detail
    append_turn(tmp_path, compression)  # another process: the sidecar's last record is found on disk
    assert integrity(tmp_path, compression)[0] == "checked"


def test_a_format_1_sidecar_still_seeks_and_says_it_has_no_digests(tmp_path: Path,
                                                                  compression: Compression) -> None:
    transcript = record(tmp_path, compression)
    size = transcript.stat().st_size
    as_format_1(sidecar_of(transcript))
    with JsonlStore(tmp_path, compression=compression, create=False) as store:
        current = seek.identity_of(transcript.stat())
        assert store._seek.find(transcript, 10, current) is not None  # still read for seeking
        full = store.load("s1").events
        assert list(store.read_from("s1", 10).events) == list(full)[10:]
    assert integrity(tmp_path, compression) == (
        "none", f"no integrity data: {sidecar_of(transcript).name} is of format 1 (written before agentlog "
                "kept digests)")
    append_turn(tmp_path, compression)  # the writer replaces it with format 2: only its own bytes hashed
    status, detail = integrity(tmp_path, compression)
    assert status == "partial" and f"no digest for bytes 0..{size - 1}" in detail, detail
    assert sidecar_of(transcript).read_bytes().startswith(seek._MAGIC)


def test_a_lost_sidecar_record_leaves_a_named_gap_that_later_appends_keep(
        tmp_path: Path, compression: Compression) -> None:
    transcript = record(tmp_path, compression)
    sidecar = sidecar_of(transcript)
    data = sidecar.read_bytes()
    records = [record for record in seek._records(data)[0]]  # type: ignore[index]
    assert None not in records and len(records) > 4
    # a crash: the last record never landed, the one before only in part (the sidecar is not synced)
    sidecar.write_bytes(data[:-seek._RECORD - 3])
    gap = f"no digest for bytes {records[-3].after[2]}..{records[-1].after[2] - 1}"  # type: ignore[union-attr]
    status, detail = integrity(tmp_path, compression)
    assert status == "partial" and gap in detail, detail
    append_turn(tmp_path, compression)  # the rebuild keeps every digest of the prefix
    status, detail = integrity(tmp_path, compression)
    assert status == "partial" and gap in detail, detail
    flipped = bytearray(transcript.read_bytes())
    flipped[records[1].after[2] - 5] ^= 0x20  # type: ignore[union-attr]  # a batch still covered
    transcript.write_bytes(bytes(flipped))
    with pytest.raises(SessionCorruptionError, match="differ from what was written") as raised:
        integrity(tmp_path, compression)
    assert raised.value.file == str(transcript)


def test_a_copied_store_keeps_its_digests_through_appends(tmp_path: Path, compression: Compression) -> None:
    record(tmp_path / "a", compression)
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # new inodes: the seek index is stale, not the digests
    append_turn(tmp_path / "b", compression)
    assert integrity(tmp_path / "b", compression)[0] == "checked"


def test_a_repaired_torn_tail_leaves_every_byte_covered(tmp_path: Path) -> None:
    transcript = record(tmp_path, "none")
    with transcript.open("ab") as handle:
        handle.write(b'{"type":"turn/start","seq":')  # a torn last line
    status, detail = integrity(tmp_path, "none")
    assert status == "partial" and "no digest for bytes" in detail
    with JsonlStore(tmp_path, compression="none") as store:
        store.load("s1")  # commits the repair: cut, then closers appended
    assert integrity(tmp_path, "none")[0] == "checked"


def test_a_materialized_fork_is_covered_anew(tmp_path: Path, compression: Compression) -> None:
    record(tmp_path, compression)
    with JsonlStore(tmp_path, compression=compression) as store:
        boundary = len(store.inspect("s1").events) - 1
        with store.fork("s1", boundary, "child"):
            pass
        store.materialize("child")
        assert store.check_integrity("child").status == "checked"
