"""Golden tests: agentlog's codec and core restore the files that real DSH code wrote.

``../shared/data/dsh-fixtures`` holds logs written by DSH 0.1.0-rc.8 with their golden
events, derived messages and summaries; ``../shared/data/transcripts/deepseek-harness``
holds DSH's own test snapshots (other versions, template placeholders in headers).
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard

from agentlog import Session
from agentlog.core.events import Event
from agentlog.core.jsonvalue import thaw
from agentlog.errors import InvalidHeaderError
from agentlog.store.codec import decode_line, encode_batch, encode_records, pack_chunk_runs
from tests.dsh_reader import DshFile, read_dsh_file, split_zstd_frames

CLEAN = [
    "basic-T5.raw-unpacked.jsonl", "basic-T5.raw-packed.jsonl",
    "basic-T5.zstd-unpacked.jsonl.zstd", "basic-T5.zstd-packed.jsonl.zstd",
    "basic-T50.raw-unpacked.jsonl", "basic-T50.raw-packed.jsonl",
    "basic-T50.zstd-unpacked.jsonl.zstd", "basic-T50.zstd-packed.jsonl.zstd",
    "compaction-T5.raw-packed.jsonl", "compaction-T5.zstd-packed.jsonl.zstd",
    "fork-parent-T5.raw-packed.jsonl", "fork-parent-T5.zstd-packed.jsonl.zstd",
    "fork-child.raw-packed.jsonl", "fork-child.zstd-packed.jsonl.zstd",
]
CRASH = [
    "crash-midturn.raw-packed.jsonl", "crash-midturn.zstd-packed.jsonl.zstd",
    "crash-torn.raw-packed.jsonl", "crash-torn.zstd-packed.jsonl.zstd",
    "crash-torn-big.zstd-packed.jsonl.zstd",
]
AFTER_REPAIR = {
    "crash-midturn.raw-packed.after-repair.jsonl": "crash-midturn.raw-packed.jsonl",
    "crash-midturn.zstd-packed.after-repair.jsonl.zstd": "crash-midturn.zstd-packed.jsonl.zstd",
    "crash-torn.raw-packed.after-repair.jsonl": "crash-torn.raw-packed.jsonl",
    "crash-torn.zstd-packed.after-repair.jsonl.zstd": "crash-torn.zstd-packed.jsonl.zstd",
    "crash-torn-big.zstd-packed.after-repair.jsonl.zstd": "crash-torn-big.zstd-packed.jsonl.zstd",
}
ZSTD = [name for name in CLEAN + CRASH + list(AFTER_REPAIR) if name.endswith(".zstd")]
RAW_TWINS = {  # raw file -> the zstd file whose frames give its durable batch boundaries
    "basic-T5.raw-unpacked.jsonl": "basic-T5.zstd-unpacked.jsonl.zstd",
    "basic-T5.raw-packed.jsonl": "basic-T5.zstd-packed.jsonl.zstd",
    "basic-T50.raw-unpacked.jsonl": "basic-T50.zstd-unpacked.jsonl.zstd",
    "basic-T50.raw-packed.jsonl": "basic-T50.zstd-packed.jsonl.zstd",
    "compaction-T5.raw-packed.jsonl": "compaction-T5.zstd-packed.jsonl.zstd",
    "fork-parent-T5.raw-packed.jsonl": "fork-parent-T5.zstd-packed.jsonl.zstd",
    "fork-child.raw-packed.jsonl": "fork-child.zstd-packed.jsonl.zstd",
    "crash-midturn.raw-packed.jsonl": "crash-midturn.zstd-packed.jsonl.zstd",
    "crash-midturn.raw-packed.after-repair.jsonl": "crash-midturn.zstd-packed.after-repair.jsonl.zstd",
}
CLOSER_TYPES = {"tool/result", "step/end", "turn/end"}


@functools.cache
def _manifest(root: Path) -> dict[str, dict[str, Any]]:
    entries = json.loads((root / "manifest.json").read_bytes())
    return {entry["file"]: entry for entry in entries}


@functools.cache
def _read(path: Path) -> DshFile:
    return read_dsh_file(path)


@functools.cache
def _decoded(path: Path) -> tuple[Event, ...]:
    return tuple(_read(path).events())


def _expected_lines(root: Path, entry: dict[str, Any]) -> list[bytes]:
    return (root / entry["expected"]["events"]).read_bytes().split(b"\n")[:-1]


def _entry(root: Path, name: str) -> dict[str, Any]:
    """The manifest entry of a fixture file (after-repair files share their source's)."""
    return _manifest(root)[AFTER_REPAIR.get(name, name)]


def _summary(session: Session, events: list[Event], header: dict[str, Any]) -> dict[str, Any]:
    """The figures of ``*.expected-summary.json``, computed by agentlog."""
    meta = {key: value for key, value in header.items() if key != "type"}
    turn_ends = [event for event in events if event.type == "turn/end"]
    return {
        "meta": meta,
        "eventCount": len(events),
        "lastSeq": events[-1].seq,
        "eventTypeCounts": dict(Counter(event.type for event in events)),
        "surfaceNodeCount": len(session.surface.nodes),
        "surfaceReplaceGeneration": session.surface.replace_generation,
        "derivedMessageCount": len(session.derive_messages()),
        "lastTurnEndReason": thaw(turn_ends[-1].data["reason"]),
        "preparedSessionEventCount": len(session.events),
        "preparedSessionLastEventType": session.events[-1].type,
    }


def _check_restore(root: Path, entry: dict[str, Any], dsh: DshFile, events: list[Event]) -> None:
    session = Session.restore(entry["sessionId"], events, dsh.header)
    expected_messages = (root / entry["expected"]["messages"]).read_bytes()
    messages = orjson.dumps(session.derive_messages())
    assert orjson.loads(messages) == orjson.loads(expected_messages)
    assert messages == expected_messages  # byte for byte too: key order is kept end to end
    expected_summary = json.loads((root / entry["expected"]["summary"]).read_bytes())
    assert _summary(session, events, dsh.header) == expected_summary
    assert expected_summary == entry["summary"]


def test_manifest_lists_every_fixture_file(dsh_fixtures: Path) -> None:
    manifest = _manifest(dsh_fixtures)
    assert set(manifest) == set(CLEAN + CRASH)
    assert {entry["afterRepairFile"] for entry in manifest.values() if "afterRepairFile" in entry} == set(
        AFTER_REPAIR
    )


@pytest.mark.parametrize("name", CLEAN)
def test_fixture_decodes_to_the_expected_events(dsh_fixtures: Path, name: str) -> None:
    entry = _manifest(dsh_fixtures)[name]
    dsh = _read(dsh_fixtures / name)
    assert dsh.torn == b""
    assert [event.to_json() for event in _decoded(dsh_fixtures / name)] == _expected_lines(
        dsh_fixtures, entry
    )


@pytest.mark.parametrize("name", CLEAN)
def test_fixture_restores_to_the_expected_messages_and_summary(dsh_fixtures: Path, name: str) -> None:
    entry = _manifest(dsh_fixtures)[name]
    _check_restore(dsh_fixtures, entry, _read(dsh_fixtures / name), list(_decoded(dsh_fixtures / name)))


@pytest.mark.parametrize("name", CRASH)
def test_crash_fixture_complete_records_decode_and_restore(dsh_fixtures: Path, name: str) -> None:
    """Complete records before the torn tail decode to the golden prefix and restore.

    The rest of the golden log is what a torn zstd frame still yields plus the repair
    closers (their repair is the store's job, tested there).
    """
    entry = _manifest(dsh_fixtures)[name]
    dsh = _read(dsh_fixtures / name)
    expected = _expected_lines(dsh_fixtures, entry)
    events = list(_decoded(dsh_fixtures / name))
    assert [event.to_json() for event in events] == expected[: len(events)]
    Session.restore(entry["sessionId"], events, dsh.header)
    torn_lines = dsh.torn.split(b"\n")[:-1] if name.endswith(".zstd") else []
    recovered = [event for line in torn_lines for event in decode_line(line)]
    joined = events + recovered
    assert [event.to_json() for event in recovered] == expected[len(events): len(joined)]
    closers = [orjson.loads(line) for line in expected[len(joined):]]
    assert 2 <= len(closers) <= 3 and {closer["type"] for closer in closers} <= CLOSER_TYPES
    assert closers[-1]["data"]["reason"] == {"kind": "interrupted"}
    Session.restore(entry["sessionId"], joined, dsh.header)
    if name == "crash-torn-big.zstd-packed.jsonl.zstd":
        assert len(recovered) == 1496 and recovered[-1].seq == 2401


@pytest.mark.parametrize("name", list(AFTER_REPAIR))
def test_after_repair_file_decodes_to_the_expected_events_and_restores(dsh_fixtures: Path, name: str) -> None:
    """A repaired file is a clean log, byte for byte the golden one.

    DSH's repair writes its synthetic tool result with ``surfaceOp`` before
    ``sourceEventSeqs`` (its normal events do the opposite); the decoded event keeps that.
    """
    entry = _entry(dsh_fixtures, name)
    dsh = _read(dsh_fixtures / name)
    assert dsh.torn == b""
    events = list(_decoded(dsh_fixtures / name))
    assert [event.to_json() for event in events] == _expected_lines(dsh_fixtures, entry)
    synthetic = [event for event in events if event.type == "tool/result"
                 and event.data["message"]["id"].startswith("interrupted-tool-result-")]
    assert len(synthetic) == (1 if name.startswith(("crash-midturn", "crash-torn.zstd")) else 0)
    assert all(event.to_json().endswith(b'"surfaceOp":"append","sourceEventSeqs":[%d]}'
                                        % event.source_event_seqs[0]) for event in synthetic)
    _check_restore(dsh_fixtures, entry, dsh, events)


@pytest.mark.parametrize("name", ZSTD)
def test_reencoding_each_batch_reproduces_the_zstd_plaintext(dsh_fixtures: Path, name: str) -> None:
    dsh = _read(dsh_fixtures / name)
    packed = "unpacked" not in name
    assert dsh.frames[0].plaintext.count(b"\n") == 1
    for frame in dsh.frames[1:]:
        events = [event for line in frame.plaintext.split(b"\n")[:-1] for event in decode_line(line)]
        assert encode_batch(events, pack=packed) == frame.plaintext


@pytest.mark.parametrize("name", ZSTD)
def test_streaming_zstd_level_3_reproduces_dsh_frames_byte_for_byte(dsh_fixtures: Path, name: str) -> None:
    """A streaming level-3 frame with a checksum and no content size is exactly what Node wrote.

    A one-shot ``compress()`` also writes the content size, so it decodes the same but differs.
    """
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    for frame in _read(dsh_fixtures / name).frames:
        stream = compressor.compressobj()
        ours = stream.compress(frame.plaintext) + stream.flush()
        assert ours == frame.compressed
        one_shot = compressor.compress(frame.plaintext)
        assert one_shot != frame.compressed
        assert split_zstd_frames(one_shot) == ([split_zstd_frames(one_shot)[0][0]], None)
        assert split_zstd_frames(one_shot)[0][0].plaintext == frame.plaintext


def _batch_sizes(zstd: DshFile) -> list[int]:
    return [sum(len(decode_line(line)) for line in frame.plaintext.split(b"\n")[:-1])
            for frame in zstd.frames[1:]]


@pytest.mark.parametrize("name", list(RAW_TWINS))
def test_reencoding_the_expected_events_batch_by_batch_reproduces_the_raw_file(
    dsh_fixtures: Path, name: str
) -> None:
    entry = _entry(dsh_fixtures, name)
    raw = (dsh_fixtures / name).read_bytes()
    events = [Event.from_json(line) for line in _expected_lines(dsh_fixtures, entry)]
    sizes = _batch_sizes(_read(dsh_fixtures / RAW_TWINS[name]))
    closers = 3 if name == "crash-midturn.raw-packed.jsonl" else 0  # golden events include repair's
    assert sum(sizes) == len(events) - closers
    out = [raw[: raw.index(b"\n") + 1]]
    start = 0
    for size in sizes:
        out.append(encode_batch(events[start: start + size], pack="unpacked" not in name))
        start += size
    assert b"".join(out) == raw


def test_reencoding_the_torn_raw_file_reproduces_its_complete_lines(dsh_fixtures: Path) -> None:
    """crash-torn raw: five turn batches, the crash-midturn batch, then a batch cut inside its row."""
    name = "crash-torn.raw-packed.jsonl"
    raw = (dsh_fixtures / name).read_bytes()
    events = [Event.from_json(line) for line in _expected_lines(dsh_fixtures, _manifest(dsh_fixtures)[name])]
    sizes = _batch_sizes(_read(dsh_fixtures / "crash-torn.zstd-packed.jsonl.zstd"))
    torn = _read(dsh_fixtures / name)
    complete = len(_decoded(dsh_fixtures / name))
    sizes.append(complete - sum(sizes))  # the torn batch's surviving records
    out, start = [raw[: raw.index(b"\n") + 1]], 0
    for size in sizes:
        out.append(encode_batch(events[start: start + size]))
        start += size
    rebuilt = b"".join(out)
    assert rebuilt + torn.torn == raw
    assert torn.torn.startswith(b'{"type":"text-chunks","seq0":%d,' % complete)


# -- DSH's own test snapshots (other versions) --------------------------------------------

SNAPSHOTS: dict[str, tuple[int, int]] = {  # path -> (events, surface nodes)
    "apps/web/tests/snapshots/approval-composer/session.jsonl": (1814, 8),
    "apps/web/tests/snapshots/goal-multi-turn-actions/session.jsonl": (2098, 27),
    "apps/web/tests/snapshots/permission-policy-context/session.jsonl": (813, 19),
    "examples/acp-agent/tests/snapshots/advanced-toolchain/session.jsonl": (75, 13),
    "examples/acp-agent/tests/snapshots/subagent-fork-in-process/session.jsonl": (200, 7),
    "examples/acp-agent/tests/snapshots/subagent-fork-in-process/session.1.jsonl": (99, 6),
    "examples/headless-agent/tests/snapshots/advanced-toolchain/session.jsonl": (74, 12),
    "examples/headless-agent/tests/snapshots/advanced-toolchain/session.1.jsonl": (18, 3),
    "examples/headless-agent/tests/snapshots/advanced-toolchain/session.2.jsonl": (18, 3),
    "examples/headless-agent/tests/snapshots/compaction-recovery/session.jsonl": (31, 4),
    "examples/headless-agent/tests/snapshots/pty-tools/session.jsonl": (77, 15),
}
PLACEHOLDERS = {"{{cwd}}": "/home/user/project", "{{sessionId}}": "snapshot-session"}


def _fill_placeholders(header: dict[str, Any]) -> dict[str, Any]:
    filled = {}
    for key, value in header.items():
        if isinstance(value, str):
            for placeholder, replacement in PLACEHOLDERS.items():
                value = value.replace(placeholder, replacement)
        filled[key] = value
    return filled


def test_every_dsh_snapshot_is_covered(shared_data: Path) -> None:
    root = shared_data / "transcripts" / "deepseek-harness" / "toninfo__deepseek-harness"
    found = {str(path.relative_to(root)) for path in root.rglob("session*.jsonl")}
    assert found == set(SNAPSHOTS)


@pytest.mark.parametrize("relative", list(SNAPSHOTS))
def test_dsh_snapshot_decodes_restores_and_reencodes(shared_data: Path, relative: str) -> None:
    """Snapshots decode and re-encode byte for byte; they restore once their template headers are filled.

    Their headers hold the test suite's placeholders (``{{cwd}}``), which the header rules
    refuse as a relative cwd; nothing in their events needs a legacy upgrade.
    """
    path = shared_data / "transcripts" / "deepseek-harness" / "toninfo__deepseek-harness" / relative
    dsh = read_dsh_file(path)
    assert dsh.torn == b""
    events = dsh.events()
    raw = path.read_bytes()
    assert raw[: raw.index(b"\n") + 1] + encode_records(pack_chunk_runs(events)) == raw
    with pytest.raises(InvalidHeaderError, match="cwd must be an absolute path"):
        Session.restore(dsh.header["id"], events, dsh.header)
    header = _fill_placeholders(dsh.header)
    session = Session.restore(header["id"], events, header)
    assert (len(events), len(session.surface.nodes)) == SNAPSHOTS[relative]
    assert len(session.derive_messages()) == len(session.surface.nodes)
    assert session.events[-1].type == "session/end-seed"
