"""``verify``, ``check-upgrade`` and ``Store.inspect(trust_checkpoint=False)`` validate the whole
log: a JSONL validated-state checkpoint that vouches for bad bytes fools a resume, never them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner

from agentlog import MemoryStore, SessionHeader, SqliteStore
from agentlog.audit import audit_session
from agentlog.cli.main import cli
from agentlog.core.packed import LazySpan
from agentlog.errors import SessionCorruptionError
from agentlog.ops.upgrade import check_upgrade
from agentlog.store.jsonl.checkpoint import (
    _read_core,
    _read_messages,
    checkpoint_path,
    encode_checkpoint,
    prefix_digests,
)
from agentlog.store.jsonl.format import compress_frame
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.jsonl.zstd_frames import scan_zstd_frames
from tests.store.jsonl.test_checkpoint import SID, Compression, record, transcript

BAD_FROM = b'"data":{"turn":1,"reason"'
BAD_TO = b'"data":{"turn":1,"reasoX"'
"""A ``turn/end`` whose data is not ``{turn, reason}``: a parse, restore and the invariants let it
pass, the load's legacy rule refuses it (same length: the checkpoint's spans stay true)."""


def url(root: Path, compression: Compression = "none") -> str:
    return f"jsonl://{root}?compression={compression}"


def checkpointed(root: Path, compression: Compression = "none") -> Path:
    """A closed two-turn session whose checkpoint covers every byte of its transcript."""
    record(root, compression, 2)
    path = transcript(root, compression)
    core = _read_core(checkpoint_path(path), SID)
    assert core is not None and core.offset == path.stat().st_size
    return path


def vouch_for_bad_bytes(root: Path, compression: Compression = "none") -> None:
    """Rewrite a prefix event to one a full validation refuses (in zstd: re-compress its frame
    and move the spans after it), and re-seal the checkpoint over the new bytes with the module's
    own encoder, so its hash and span checks pass."""
    path = checkpointed(root, compression)
    sidecar = checkpoint_path(path)
    core = _read_core(sidecar, SID)
    assert core is not None
    messages = _read_messages(sidecar, core)
    assert messages is not None
    data = path.read_bytes()
    if compression == "none":
        start = data.index(BAD_FROM)
        end, plain = start + len(BAD_FROM), BAD_TO
    else:
        start, end = next((start, end) for start, end in scan_zstd_frames(data).frames
                          if BAD_FROM in unzip(data[start:end]))
        plain = compress_frame(unzip(data[start:end]).replace(BAD_FROM, BAD_TO, 1))
    assert end <= core.offset
    data = data[:start] + plain + data[end:]
    shift = len(plain) - (end - start)
    spans = [(seq, at + shift if at > start else at) for seq, at in core.spans]
    offset = core.offset + shift
    path.write_bytes(data)
    sidecar.write_bytes(encode_checkpoint(SID, offset, prefix_digests(data[:offset], spans), spans,
                                          core.state, messages))


def unzip(frame: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(frame)


def verify(root: Path, *args: str, compression: Compression = "none") -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", url(root, compression), "verify", SID, *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_verify_refuses_a_prefix_a_checkpoint_vouches_for(tmp_path: Path, compression: Compression) -> None:
    vouch_for_bad_bytes(tmp_path, compression)
    resumed = JsonlStore(tmp_path, compression=compression).load(SID)  # a load trusts the checkpoint
    assert isinstance(resumed.events._log[0], LazySpan)  # type: ignore[attr-defined]
    code, output = verify(tmp_path, compression=compression)
    assert code == 1, output
    assert "turn/end" in output and "malformed" in output and "data must be exactly {turn, reason}" in output
    code, output = verify(tmp_path, "--json", compression=compression)
    report = json.loads(output)
    assert code == 1 and report["status"] == "invalid" and "malformed" in report["error"]


def test_inspect_without_trusting_the_checkpoint_validates_every_event(tmp_path: Path) -> None:
    vouch_for_bad_bytes(tmp_path)
    store = JsonlStore(tmp_path, compression="none")
    trusted = store.inspect(SID)  # resumed, and cached for this revision
    assert isinstance(trusted.events._log[0], LazySpan)  # type: ignore[attr-defined]
    with pytest.raises(SessionCorruptionError, match="malformed pre-react-loop turn/end") as caught:
        store.inspect(SID, trust_checkpoint=False)
    assert caught.value.session_id == SID and caught.value.seq is not None
    with pytest.raises(SessionCorruptionError):  # nor does a fresh store trust it
        JsonlStore(tmp_path, compression="none").inspect(SID, trust_checkpoint=False)


def test_check_upgrade_refuses_a_prefix_a_checkpoint_vouches_for(tmp_path: Path) -> None:
    vouch_for_bad_bytes(tmp_path)
    report = check_upgrade(url(tmp_path))
    assert [(check.session_id, check.status) for check in report.sessions] == [(SID, "fails")]
    assert "malformed pre-react-loop turn/end" in report.sessions[0].detail


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_verify_and_check_upgrade_pass_an_intact_checkpointed_session(
        tmp_path: Path, compression: Compression) -> None:
    checkpointed(tmp_path / "a", compression)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    checkpoint_path(transcript(tmp_path / "b", compression)).unlink()
    with_checkpoint = verify(tmp_path / "a", compression=compression)
    assert with_checkpoint[0] == 0 and with_checkpoint == verify(tmp_path / "b", compression=compression)
    assert not check_upgrade(url(tmp_path / "a", compression)).failed
    full = JsonlStore(tmp_path / "a", compression=compression).inspect(SID, trust_checkpoint=False)
    assert not isinstance(full.events._log[0], LazySpan)  # type: ignore[attr-defined]
    plain = JsonlStore(tmp_path / "b", compression=compression).inspect(SID)
    assert list(full.events) == list(plain.events)


def test_trust_checkpoint_changes_nothing_where_no_checkpoint_is_kept(tmp_path: Path) -> None:
    for store in (MemoryStore(), SqliteStore(tmp_path / "sessions.db")):
        with store:
            store.create(SessionHeader(id=SID))
            store.append(SID, [{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}])
            trusted, full = store.inspect(SID), store.inspect(SID, trust_checkpoint=False)
            assert list(full.events) == list(trusted.events) and full.recovery == trusted.recovery


def test_audit_refuses_a_prefix_a_checkpoint_vouches_for(tmp_path: Path) -> None:
    """``audit`` answers "is this session reviewable": like ``verify`` it reads every event, not
    what a checkpoint vouches for, so a prefix a full validation refuses is a problem found."""
    vouch_for_bad_bytes(tmp_path)
    result = CliRunner().invoke(cli, ["--store", url(tmp_path), "audit", SID])
    assert result.exit_code == 1, result.output
    assert "malformed pre-react-loop turn/end" in result.output
    with pytest.raises(SessionCorruptionError):
        audit_session(JsonlStore(tmp_path, compression="none"), SID)
