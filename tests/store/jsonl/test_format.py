"""The JSONL store's file format: paths, header line, scanner, torn tails (persistence §4, §6).

Covers jsonl.spec.ts 1, 2, 4, 24-27 and zstd.spec.ts 3, 9-12, 14, 15, plus every DSH fixture.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.packed import resolve_entries
from agentlog.errors import InvalidHeaderError, SessionCorruptionError, SessionFormatUnsupportedError
from agentlog.store.jsonl.format import (
    TRANSCRIPT_RAW,
    TRANSCRIPT_ZSTD,
    LogScan,
    compress_frame,
    decode_complete_frames,
    decode_session_id,
    encode_batch,
    encode_header_line,
    encode_session_id,
    first_stored_seq,
    parse_header_line,
    project_key,
    read_header_prefix,
    scan_log,
    scan_zstd_frames,
)

PATH = "/root/--w--/s1/session.jsonl"
HEADER = SessionHeader(id="s1", created_at=1_000, cwd="/w")
HEADER_LINE = encode_header_line(HEADER)
T0 = 1_767_225_600_000


# -- helpers ----------------------------------------------------------------------------------


def line(value: Any) -> bytes:
    return orjson.dumps(value) + b"\n"


def wire(seq: int, kind: str = "turn/start", data: Any = None, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": T0 + seq, "data": {"turn": 1} if data is None else data,
            **extra}


def turn_end(seq: int) -> dict[str, Any]:
    return wire(seq, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})


def chunk(seq: int, text: str = "ab") -> dict[str, Any]:
    return wire(seq, "assistant/chunk",
                {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}})


def events_of(*wires: dict[str, Any]) -> list[Event]:
    return [Event.from_wire(w) for w in wires]


def raw_log(*records: Any) -> bytes:
    return HEADER_LINE + b"".join(r if isinstance(r, bytes) else line(r) for r in records)


def zstd_log(*batches: bytes) -> bytes:
    return compress_frame(HEADER_LINE) + b"".join(compress_frame(b) for b in batches)


def scan_expanded(data: bytes, *, compressed: bool, path: str, until_seq: int | None = None) -> LogScan:
    """``scan_log`` with packed rows expanded, to compare events directly."""
    found = scan_log(data, compressed=compressed, path=path, until_seq=until_seq)
    return replace(found, events=resolve_entries(found.events, first_stored_seq(found.header)))


def scan_raw(data: bytes) -> LogScan:
    return scan_expanded(data, compressed=False, path=PATH)


def scan_zstd(data: bytes) -> LogScan:
    return scan_expanded(data, compressed=True, path=PATH)


def chunks_of(data: bytes, pulled: list[int], size: int = 8192) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        pulled.append(start)
        yield data[start:start + size]


def expected_events(dsh_fixtures: Path, name: str) -> list[Event]:
    raw = (dsh_fixtures / name).read_bytes()
    return [Event.from_json(text) for text in raw.split(b"\n") if text]


def manifest(dsh_fixtures: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads((dsh_fixtures / "manifest.json").read_text())
    return entries


def is_closer(event: Event) -> bool:
    """A synthetic event that crash repair appends (spec §6.3)."""
    if event.type == "turn/end":
        return bool(event.data["reason"]["kind"] == "interrupted")
    if event.type == "tool/result":
        return str(event.data["message"]["id"]).startswith("interrupted-tool-result-")
    return event.type == "step/end"


# -- path encodings (jsonl.spec 1-2) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("session_id", "encoded"),
    [
        ("fx-basic-t5", "fx-basic-t5"),
        ("A.b_c-9", "A.b_c-9"),
        (".", "~002E"),
        ("..", "~002E~002E"),
        ("...", "..."),
        ("../etc", "..~002Fetc"),
        ("/abs/path", "~002Fabs~002Fpath"),
        ("a\\b", "a~005Cb"),
        ("C:x", "C~003Ax"),
        ("nul\x00byte", "nul~0000byte"),
        ("tilde~", "tilde~007E"),
        ("~0041", "~007E0041"),
        ("会话", "~4F1A~8BDD"),
        ("\U0001F600", "~D83D~DE00"),
        ("\ud800", "~D800"),
        ("x\udc00y", "x~DC00y"),
    ],
)
def test_session_id_encoding_examples(session_id: str, encoded: str) -> None:
    assert encode_session_id(session_id) == encoded
    assert decode_session_id(encoded) == session_id


def test_empty_session_id_is_refused() -> None:
    with pytest.raises(InvalidHeaderError, match="empty"):
        encode_session_id("")


js_strings = st.lists(
    st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr)), max_size=12
).map("".join).map(lambda s: s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass"))


@given(js_strings.filter(bool), js_strings.filter(bool))
def test_session_id_encoding_is_injective_and_one_safe_segment(first: str, second: str) -> None:
    encoded = encode_session_id(first)
    assert decode_session_id(encoded) == first
    assert encoded not in (".", "..") and "/" not in encoded and "\\" not in encoded
    assert all(ch.isascii() and (ch.isalnum() or ch in "._-~") for ch in encoded)
    assert (encoded == encode_session_id(second)) == (first == second)


@pytest.mark.parametrize(
    ("cwd", "key"),
    [
        (None, "_no-cwd"),
        ("/home/user/project", "--home-user-project--"),
        ("/a/b-c", "--a-b-c--"),
        ("/a-b/c", "--a-b-c--"),
        ("C:\\work\\agent", "--C-work-agent--"),
        ("//srv//share:/x", "--srv-share-x--"),
        ("/home/用户/~proj", "--home-~7528~6237-~007Eproj--"),
        ("/", "--root--"),
        ("///", "--root--"),
        ("-/-", "--root--"),
        ("/-x/y-", "--x-y---"),
        ("/x/\U0001F600", "--x-~D83D~DE00--"),
    ],
)
def test_project_key_examples(cwd: str | None, key: str) -> None:
    assert project_key(cwd) == key


def test_project_key_lossy_collision_shares_a_directory() -> None:
    assert project_key("/a/b-c") == project_key("/a-b/c")


def test_project_key_is_capped_at_255_characters() -> None:
    key = project_key("/" + "a" * 400)
    assert len(key) == 255 and key == "--" + "a" * 251 + "--"
    assert len(project_key("/" + "é" * 400)) == 255


def test_empty_project_path_is_refused() -> None:
    with pytest.raises(InvalidHeaderError):
        project_key("")


def test_fixture_paths_match_the_manifest(dsh_fixtures: Path) -> None:
    for entry in manifest(dsh_fixtures):
        name = TRANSCRIPT_ZSTD if entry["file"].endswith(".zstd") else TRANSCRIPT_RAW
        meta = entry["summary"]["meta"]
        built = f"{project_key(meta.get('cwd'))}/{encode_session_id(meta['id'])}/{name}"
        assert built == entry["originalPath"]


# -- header line ------------------------------------------------------------------------------


def first_record(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".zstd"):
        span = scan_zstd_frames(data, max_frames=1).frames[0]
        return decode_complete_frames(data[:span[1]], path=str(path))
    return data[:data.index(b"\n") + 1]


def test_fixture_header_lines_reencode_byte_for_byte(dsh_fixtures: Path) -> None:
    paths = sorted(p for p in dsh_fixtures.iterdir() if p.name.endswith((".jsonl", ".jsonl.zstd"))
                   and ".expected-" not in p.name)
    assert len(paths) >= 20
    for path in paths:
        header_line = first_record(path)
        header = parse_header_line(header_line, path=str(path))
        assert encode_header_line(header) == header_line, path.name


def test_fork_child_header_carries_lineage(dsh_fixtures: Path) -> None:
    header = parse_header_line(first_record(dsh_fixtures / "fork-child.raw-packed.jsonl"), path="p")
    lineage = (header.parent_session, header.seed_length, header.cwd)
    assert lineage == ("fx-fork-parent", 544, "/home/user/project")


def test_header_line_writes_every_key_in_dsh_order() -> None:
    header = SessionHeader(
        id="c", created_at=5, cwd="/w", parent_session="p", seed_length=3, origin="subagent",
        delegation_depth=2, agent_preset="coder", extra={"zeta": [1, "é"]},
    )
    assert encode_header_line(header) == (
        '{"type":"session","version":0,"id":"c","createdAt":5,"cwd":"/w","parentSession":"p",'
        '"seedLength":3,"origin":"subagent","delegationDepth":2,"agentPreset":"coder","zeta":[1,"é"]}\n'
    ).encode()


def test_header_line_always_writes_delegation_depth() -> None:
    assert encode_header_line(SessionHeader(id="s", created_at=1)) == (
        b'{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}\n'
    )


def test_header_round_trips_agent_preset_and_extra_keys() -> None:
    header = SessionHeader(id="s", created_at=1, agent_preset="reviewer", extra={"agentlogX": True})
    parsed = parse_header_line(encode_header_line(header), path=PATH)
    assert parsed.agent_preset == "reviewer" and parsed.extra == {"agentlogX": True}
    assert parsed.delegation_depth == 0


@pytest.mark.parametrize("key", ["type", "version", "sandboxMode", "approvalPolicy"])
def test_header_line_refuses_reserved_extra_keys(key: str) -> None:
    with pytest.raises(InvalidHeaderError, match="reserved"):
        encode_header_line(SessionHeader(id="s", created_at=1, extra={key: 1}))


def header_with(**fields: Any) -> bytes:
    base: dict[str, Any] = {"type": "session", "version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0}
    base.update(fields)
    return orjson.dumps({k: v for k, v in base.items() if v is not ...}) + b"\n"


def test_newer_version_is_refused_with_upgrade_advice_and_the_raw_log_path() -> None:
    with pytest.raises(SessionFormatUnsupportedError) as info:
        parse_header_line(header_with(version=99), path=PATH)
    message = str(info.value)
    assert 'session "s" uses log format v99, but this build reads only v0' in message
    assert "upgrade agentlog" in message
    assert message.count(f"(raw log: {PATH})") == 1
    assert info.value.file == PATH


def test_older_version_is_refused_saying_there_is_no_upgrade_path() -> None:
    with pytest.raises(SessionFormatUnsupportedError, match="older than the supported v0") as info:
        parse_header_line(header_with(version=-1), path=PATH)
    assert "no upgrade path" in str(info.value) and f"(raw log: {PATH})" in str(info.value)


def test_version_refusal_precedes_shape_checks_and_stringifies_the_id() -> None:
    alien = b'{"version":7,"id":42,"frames":{"v7":true}}\n'
    with pytest.raises(SessionFormatUnsupportedError, match='session "42" uses log format v7') as info:
        parse_header_line(alien, path=PATH)
    assert f"(raw log: {PATH})" in str(info.value)
    with pytest.raises(SessionFormatUnsupportedError, match="v2"):
        parse_header_line(b'{"type":"not-a-session","version":2,"sandboxMode":"x"}\n', path=PATH)


def test_version_refusal_comes_before_event_decoding_in_a_whole_log() -> None:
    data = header_with(version=3) + b"garbage\n" + line(turn_end(5))
    with pytest.raises(SessionFormatUnsupportedError):
        scan_raw(data)
    zstd = compress_frame(header_with(version=3)) + b"\x00" * 9
    with pytest.raises(SessionFormatUnsupportedError):
        scan_zstd(zstd)


@pytest.mark.parametrize(
    "raw",
    [
        b"42\n",
        b"[]\n",
        b'"session"\n',
        b"null\n",
        b"{not json\n",
        b"\n",
        header_with(type="event"),
        header_with(type=...),
        header_with(version="0"),
        header_with(version=...),
        header_with(id=...),
        header_with(id=7),
        header_with(createdAt=1.5),
        header_with(createdAt=-1),
        header_with(createdAt=2**53),
        header_with(createdAt="1"),
        header_with(createdAt=...),
        b'{"type":"session","version":0,"id":"s","createdAt":-0,"delegationDepth":0}\n',
        b'{"type":"session","version":0,"id":"s","createdAt":-0.0,"delegationDepth":0}\n',
        header_with(delegationDepth=...),
        header_with(delegationDepth="0"),
        header_with(delegationDepth=0.5),
        header_with(delegationDepth=-1),
        b'{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":-0}\n',
        header_with(agentPreset=5),
        header_with(agentPreset=None),
        header_with(origin="user"),
        header_with(cwd="relative/dir"),
    ],
)
def test_malformed_headers_are_corruption_not_a_session_header(raw: bytes) -> None:
    with pytest.raises(SessionCorruptionError, match="not a session header") as info:
        parse_header_line(raw, path=PATH)
    assert info.value.file == PATH and info.value.offset == 0


@pytest.mark.parametrize("key", ["sandboxMode", "approvalPolicy"])
def test_retired_policy_fields_are_rejected(key: str) -> None:
    with pytest.raises(SessionCorruptionError, match="retired"):
        parse_header_line(header_with(**{key: "x"}), path=PATH)


def test_header_with_an_empty_id_cannot_name_a_path() -> None:
    with pytest.raises(SessionCorruptionError, match="empty id"):
        parse_header_line(header_with(id=""), path=PATH)


def test_integral_floats_in_the_header_read_as_integers() -> None:
    header = parse_header_line(header_with(version=0.0, createdAt=7.0, delegationDepth=1.0), path=PATH)
    assert (header.version, header.created_at, header.delegation_depth) == (0, 7, 1)
    assert type(header.created_at) is int


def test_a_legitimate_zero_next_to_a_minus_zero_elsewhere_is_accepted() -> None:
    header = parse_header_line(header_with(createdAt=0, cwd="/tmp/x-0"), path=PATH)
    assert header.created_at == 0


# -- raw scanner (jsonl.spec 24, 26, 27) --------------------------------------------------------


def test_header_must_be_a_newline_terminated_record() -> None:
    for data in (b"", HEADER_LINE[:-1]):
        with pytest.raises(SessionCorruptionError, match="empty or header-less") as info:
            scan_raw(data)
        assert info.value.file == PATH


def test_header_only_log_has_no_events_and_commits_the_header() -> None:
    scan = scan_raw(HEADER_LINE)
    assert scan.header == replace(HEADER, delegation_depth=0)  # JSONL always writes delegationDepth
    assert scan.events == [] and scan.torn is None
    assert scan.header_end == scan.committed_end == len(HEADER_LINE)


def test_complete_lines_are_accepted_and_a_final_fragment_is_torn() -> None:
    complete = raw_log(wire(0), chunk(1))
    scan = scan_raw(complete + line(chunk(2))[:-7])
    assert [e.seq for e in scan.events] == [0, 1]
    assert scan.committed_end == len(complete)
    assert scan.torn is not None and scan.torn.truncate_to == len(complete) and scan.torn.recovered == []


def test_corrupt_line_followed_by_ordinary_lines_keeps_only_the_prefix() -> None:
    prefix = raw_log(wire(0), chunk(1))
    scan = scan_raw(prefix + b'{"type":"assistant/chunk","seq":2,\n' + line(chunk(3)) + line(chunk(4)))
    assert [e.seq for e in scan.events] == [0, 1]
    assert scan.torn is not None and scan.torn.truncate_to == len(prefix)


def test_corrupt_line_before_a_later_turn_end_is_unparsable_committed_event() -> None:
    prefix = raw_log(wire(0), chunk(1))
    data = prefix + b"\x00garbage\n" + line(chunk(2)) + line(turn_end(3))
    with pytest.raises(SessionCorruptionError, match="unparsable committed event at line 4") as info:
        scan_raw(data)
    assert info.value.offset == len(prefix) and info.value.file == PATH


def test_gap_after_the_last_turn_end_bounds_the_prefix() -> None:
    prefix = raw_log(wire(0), turn_end(1))
    scan = scan_raw(prefix + line(wire(3)) + line(chunk(4)))
    assert [e.seq for e in scan.events] == [0, 1]
    assert scan.torn is not None and scan.torn.truncate_to == len(prefix)


def test_gap_before_a_later_turn_end_is_rejected() -> None:
    prefix = raw_log(wire(0), chunk(1))
    gap = r"seq gap in committed region at line 4 \(expected 2, got 3\)"
    with pytest.raises(SessionCorruptionError, match=gap) as info:
        scan_raw(prefix + line(chunk(3)) + line(turn_end(4)))
    assert info.value.offset == len(prefix)


def test_gapped_record_that_itself_holds_a_turn_end_is_rejected() -> None:
    with pytest.raises(SessionCorruptionError, match="seq gap in committed region"):
        scan_raw(raw_log(wire(0), turn_end(5)))


def test_duplicate_seq_is_a_gap() -> None:
    with pytest.raises(SessionCorruptionError, match="expected 2, got 1"):
        scan_raw(raw_log(wire(0), chunk(1), chunk(1), turn_end(2)))


def test_default_packing_writes_one_row_that_loads_identically() -> None:
    events = events_of(wire(0), *(chunk(seq, f"t{seq}") for seq in range(1, 6)), turn_end(6))
    packed = encode_batch(events)
    assert packed.count(b"\n") == 3 and b'"type":"text-chunks"' in packed
    unpacked = encode_batch(events, pack=False)
    assert unpacked == b"".join(event.to_json() + b"\n" for event in events)
    for body in (packed, unpacked):
        assert scan_raw(HEADER_LINE + body).events == events
        assert scan_zstd(zstd_log(body)).events == events


def test_mixed_packed_and_unpacked_batches_load_alike() -> None:
    first = events_of(wire(0), *(chunk(seq) for seq in range(1, 5)), turn_end(5))
    second = events_of(wire(6), *(chunk(seq) for seq in range(7, 12)))
    data = HEADER_LINE + encode_batch(first, pack=False) + encode_batch(second)
    scan = scan_raw(data)
    assert scan.events == first + second and scan.torn is None and scan.committed_end == len(data)


def test_a_row_advances_the_seq_by_its_run() -> None:
    row = {"type": "text-chunks", "seq0": 1, "time0": T0,
           "data": {"turn": 1, "step": 1, "index": 0, "dt": [5, 5], "texts": ["a", "b", "c"]}}
    scan = scan_raw(raw_log(wire(0), row, turn_end(4)))
    assert [e.seq for e in scan.events] == [0, 1, 2, 3, 4]
    assert [e.time for e in scan.events[1:4]] == [T0, T0 + 5, T0 + 10]


def test_malformed_row_in_the_committed_region_is_rejected() -> None:
    bad = {"type": "text-chunks", "seq0": 1, "time0": T0,
           "data": {"turn": 1, "step": 1, "index": 0, "dt": [5], "texts": ["a", "b", "c"]}}
    with pytest.raises(SessionCorruptionError, match="unparsable committed event at line 3"):
        scan_raw(raw_log(wire(0), bad, turn_end(4)))


def test_malformed_row_after_the_last_turn_end_is_a_torn_tail() -> None:
    prefix = raw_log(wire(0), turn_end(1))
    bad = {"type": "tool-call-chunks", "seq0": 2, "time0": T0, "data": {}}
    scan = scan_raw(prefix + line(bad))
    assert len(scan.events) == 2 and scan.torn is not None and scan.torn.truncate_to == len(prefix)


def test_gapped_row_after_the_last_turn_end_is_dropped_whole() -> None:
    prefix = raw_log(wire(0), turn_end(1))
    row = {"type": "text-chunks", "seq0": 3, "time0": T0,
           "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]}}
    scan = scan_raw(prefix + line(row))
    assert [e.seq for e in scan.events] == [0, 1]
    assert scan.torn is not None and scan.torn.truncate_to == len(prefix)


def test_unknown_type_without_ignorable_is_a_format_refusal() -> None:
    data = raw_log(wire(0), wire(1, "future/thing", {}), turn_end(2))
    refusal = "not marked ignorable, likely written by a newer"
    with pytest.raises(SessionFormatUnsupportedError, match=refusal) as info:
        scan_raw(data)
    assert info.value.event_type == "future/thing" and info.value.seq == 1
    assert f"(raw log: {PATH})" in str(info.value)


def test_unknown_type_marked_ignorable_is_kept() -> None:
    scan = scan_raw(raw_log(wire(0), wire(1, "future/thing", {}, ignorable=True), turn_end(2)))
    assert scan.events[1].type == "future/thing" and scan.events[1].ignorable


def test_json_that_agentlog_cannot_represent_is_refused_not_truncated() -> None:
    lone = b'{"type":"turn/start","seq":1,"time":1,"data":{"turn":1,"note":"\\ud800"}}\n'
    with pytest.raises(SessionFormatUnsupportedError, match="cannot represent") as info:
        scan_raw(raw_log(wire(0)) + lone)
    assert info.value.offset == len(raw_log(wire(0)))


def test_committed_event_with_an_invalid_envelope_is_corruption() -> None:
    bad = {"type": "turn/start", "seq": 1, "time": "noon", "data": {}}
    with pytest.raises(SessionCorruptionError, match="invalid committed event at line 3"):
        scan_raw(raw_log(wire(0), bad))


def test_invalid_envelope_with_a_wrong_seq_after_the_last_turn_end_is_torn() -> None:
    prefix = raw_log(wire(0), turn_end(1))
    scan = scan_raw(prefix + line({"type": "turn/start", "seq": 9, "time": "x", "data": {}}))
    assert scan.torn is not None and scan.torn.truncate_to == len(prefix)


def test_invalid_turn_end_with_a_wrong_seq_is_rejected_like_dsh() -> None:
    with pytest.raises(SessionCorruptionError, match="seq gap"):
        scan_raw(raw_log(wire(0), {"type": "turn/end", "seq": 9, "time": "x", "data": {}}))


# -- zstd scanner (zstd.spec 3, 9-12, 15) -------------------------------------------------------


def test_artifact_without_a_complete_frame_is_empty_or_header_less() -> None:
    header_frame = compress_frame(HEADER_LINE)
    for data in (b"", header_frame[:4], header_frame[:-1]):
        with pytest.raises(SessionCorruptionError, match="empty or header-less"):
            scan_zstd(data)


def test_header_frame_must_hold_exactly_one_line() -> None:
    for plaintext in (b"", HEADER_LINE[:-1], HEADER_LINE + line(wire(0))):
        with pytest.raises(SessionCorruptionError, match="not exactly one header line") as info:
            scan_zstd(compress_frame(plaintext))
        assert info.value.offset == 0


def test_header_frame_checksum_failure_is_corruption() -> None:
    frame = bytearray(compress_frame(HEADER_LINE))
    frame[-2] ^= 0x40
    with pytest.raises(SessionCorruptionError) as info:
        scan_zstd(bytes(frame))
    assert info.value.offset == 0


def test_complete_frame_holding_a_partial_record_is_corruption() -> None:
    body = line(wire(0)) + line(chunk(1))[:-9]
    with pytest.raises(SessionCorruptionError, match="complete frame contains a torn JSONL record") as info:
        scan_zstd(zstd_log(body))
    assert info.value.offset == len(compress_frame(HEADER_LINE))


def test_any_defect_in_a_complete_frame_is_corruption_even_without_a_later_turn_end() -> None:
    header_frame = compress_frame(HEADER_LINE)
    ok = compress_frame(line(wire(0)))
    with pytest.raises(SessionCorruptionError, match="complete frame contains a torn JSONL record") as info:
        scan_zstd(header_frame + ok + compress_frame(line(chunk(5))))
    assert info.value.offset == len(header_frame) + len(ok)


def test_records_split_across_frames_even_mid_character_scan_identically() -> None:
    text = "héllo 世界 🙂"
    events = events_of(wire(0), chunk(1, text), chunk(2, text), turn_end(3))
    body = encode_batch(events, pack=False)
    whole = scan_zstd(zstd_log(body))
    assert whole.events == events
    split_at = body.index("世".encode()) + 1  # inside a three-byte character
    split = scan_zstd(zstd_log(body[:split_at], body[split_at:]))
    assert split.events == events and split.torn is None


def test_flipping_a_byte_inside_a_committed_frame_is_corruption_at_that_frame(dsh_fixtures: Path) -> None:
    data = (dsh_fixtures / "basic-T5.zstd-packed.jsonl.zstd").read_bytes()
    frames = scan_zstd_frames(data).frames
    for start, end in (frames[2], frames[-1]):
        for position in (start + 9 + (end - start - 13) // 2, end - 1, end - 3):
            damaged = bytearray(data)
            damaged[position] ^= 0x24
            with pytest.raises(SessionCorruptionError) as info:
                scan_zstd(bytes(damaged))
            assert info.value.offset == start and info.value.file == PATH
            assert f"at byte {start}" in str(info.value)


def test_flipping_a_frame_magic_byte_is_corruption_at_that_frame(dsh_fixtures: Path) -> None:
    data = bytearray((dsh_fixtures / "basic-T5.zstd-packed.jsonl.zstd").read_bytes())
    start = scan_zstd_frames(bytes(data)).frames[3][0]
    data[start + 1] ^= 0x01
    with pytest.raises(SessionCorruptionError, match="invalid frame magic") as info:
        scan_zstd(bytes(data))
    assert info.value.offset == start


def test_torn_frame_keeps_its_complete_records_and_drops_the_partial_one() -> None:
    committed = events_of(wire(0), turn_end(1))
    tail = events_of(wire(2), chunk(3), chunk(4))
    plaintext = encode_batch(tail, pack=False)
    cut = plaintext.index(b"\n", plaintext.index(b"\n") + 1) + 1 + 20  # two records + part of the third
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True).compressobj()
    torn_frame = (compressor.compress(plaintext[:cut]) + compressor.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
                  + compressor.compress(plaintext[cut:]) + compressor.flush())
    prefix = zstd_log(encode_batch(committed))
    data = prefix + torn_frame[:-10]
    scan = scan_zstd(data)
    assert scan.events == committed
    assert scan.committed_end == len(prefix)
    assert scan.torn is not None and scan.torn.truncate_to == len(prefix)
    assert scan.torn.recovered == tail[:2]


def test_torn_frame_missing_only_its_checksum_recovers_every_record(dsh_fixtures: Path) -> None:
    data = (dsh_fixtures / "basic-T5.zstd-packed.jsonl.zstd").read_bytes()
    expected = expected_events(dsh_fixtures, "basic-T5.expected-events.jsonl")
    last_start = scan_zstd_frames(data).frames[-1][0]
    scan = scan_zstd(data[:-4])
    assert scan.torn is not None and scan.torn.truncate_to == last_start
    assert scan.events + scan.torn.recovered == expected
    assert scan.torn.recovered[-1].type == "turn/end"


def test_partial_magic_tail_is_dropped(dsh_fixtures: Path) -> None:
    data = (dsh_fixtures / "basic-T5.zstd-packed.jsonl.zstd").read_bytes()
    for tail in (b"\x28", b"\x28\xb5", b"\x28\xb5\x2f\xfd"):
        scan = scan_zstd(data + tail)
        assert len(scan.events) == 906 and scan.committed_end == len(data)
        assert scan.torn is not None and scan.torn.truncate_to == len(data) and scan.torn.recovered == []


def test_turn_end_recovered_after_a_defect_in_a_torn_frame_is_corruption() -> None:
    plaintext = line(chunk(5)) + line(turn_end(6))
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True).compressobj()
    frame = compressor.compress(plaintext) + compressor.flush()
    with pytest.raises(SessionCorruptionError, match="seq gap in committed region"):
        scan_zstd(zstd_log(line(wire(0))) + frame[:-2])


# -- DSH fixtures ------------------------------------------------------------------------------


def test_every_dsh_fixture_scans_to_its_expected_events(dsh_fixtures: Path) -> None:
    for entry in manifest(dsh_fixtures):
        expected = expected_events(dsh_fixtures, entry["expected"]["events"])
        for name in filter(None, (entry["file"], entry.get("afterRepairFile"))):
            data = (dsh_fixtures / name).read_bytes()
            scan = scan_expanded(data, compressed=name.endswith(".zstd"), path=name)
            assert scan.header.id == entry["sessionId"], name
            got = scan.events + (scan.torn.recovered if scan.torn else [])
            if "killedBy" not in entry or name == entry.get("afterRepairFile"):
                assert got == expected and scan.torn is None, name
                assert scan.committed_end == len(data)
            else:
                assert got == expected[:len(got)], name
                assert expected[len(got):] and all(map(is_closer, expected[len(got):])), name
                assert expected[-1].type == "turn/end"


def test_crash_fixtures_truncate_where_dsh_cut_and_repaired(dsh_fixtures: Path) -> None:
    crashes = [entry for entry in manifest(dsh_fixtures) if "afterRepairFile" in entry]
    assert len(crashes) == 5
    for entry in crashes:
        compressed = entry["file"].endswith(".zstd")
        data = (dsh_fixtures / entry["file"]).read_bytes()
        after = (dsh_fixtures / entry["afterRepairFile"]).read_bytes()
        scan = scan_expanded(data, compressed=compressed, path=entry["file"])
        cut = scan.torn.truncate_to if scan.torn else len(data)
        if "lastFrame" in entry:
            assert cut == entry["lastFrame"]["start"]
            assert scan.committed_end == cut
        elif "truncatedTo" in entry:
            assert cut == data.rindex(b"\n") + 1 < entry["truncatedTo"] <= entry["originalBytes"]
        else:
            assert scan.torn is None
        assert after[:cut] == data[:cut], entry["file"]
        repaired = scan_expanded(after, compressed=compressed, path=entry["afterRepairFile"])
        recovered = scan.torn.recovered if scan.torn else []
        closers = repaired.events[len(scan.events) + len(recovered):]
        assert repaired.events[:len(scan.events)] == scan.events
        if all(event.type != "tool/result" for event in closers):
            # DSH writes a synthetic tool/result with surfaceOp before sourceEventSeqs: compare the rest.
            body = encode_batch(list(recovered) + closers)
            assert after[cut:] == (compress_frame(body) if compressed else body), entry["file"]


def test_crash_torn_big_recovers_the_intact_first_block(dsh_fixtures: Path) -> None:
    data = (dsh_fixtures / "crash-torn-big.zstd-packed.jsonl.zstd").read_bytes()
    scan = scan_zstd(data)
    assert len(scan.events) == 906
    assert scan.torn is not None and scan.torn.recovered[-1].seq == 2401
    assert scan.torn.recovered[-1].type == "step/start"


def last_batch_start_raw(data: bytes) -> int:
    """Start of the last durable batch of a fixture flushed at every turn end."""
    ends = [i + 1 for i in range(len(data)) if data.startswith(b"\n", i)]
    turn_end_lines = [end for start, end in zip([0, *ends], ends, strict=False)
                      if b'"type":"turn/end"' in data[start:end]]
    return turn_end_lines[-2]


def torn_offsets(start: int, stop: int, *, every: bool) -> list[int]:
    if every:
        return list(range(start, stop))
    edge = list(range(start, start + 40)) + list(range(stop - 300, stop))
    return sorted(set(edge + list(range(start, stop, 97))))


def check_torn_at(data: bytes, compressed: bool, cut: int, expected: list[Event]) -> None:
    scan = scan_expanded(data[:cut], compressed=compressed, path=PATH)
    got = scan.events + (scan.torn.recovered if scan.torn else [])
    assert got == expected[:len(got)], cut
    assert scan.committed_end <= cut
    if scan.torn is not None:
        assert scan.torn.truncate_to <= cut
        assert scan.torn.truncate_to == scan.committed_end


@pytest.mark.parametrize("every", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["sampled", "every-byte"])
@pytest.mark.parametrize("name", ["basic-T5.raw-packed.jsonl", "basic-T5.zstd-packed.jsonl.zstd"])
def test_torn_tail_at_byte_offsets_inside_the_last_batch(dsh_fixtures: Path, name: str, every: bool) -> None:
    data = (dsh_fixtures / name).read_bytes()
    expected = expected_events(dsh_fixtures, "basic-T5.expected-events.jsonl")
    compressed = name.endswith(".zstd")
    start = scan_zstd_frames(data).frames[-1][0] if compressed else last_batch_start_raw(data)
    prior = scan_expanded(data[:start], compressed=compressed, path=PATH)
    assert prior.torn is None and 700 < len(prior.events) < 906
    for cut in torn_offsets(start + 1, len(data), every=every):
        check_torn_at(data, compressed, cut, expected)
        if compressed:
            scan = scan_expanded(data[:cut], compressed=True, path=PATH)
            assert scan.torn is not None and scan.torn.truncate_to == start
            assert scan.events == prior.events


# -- listing (zstd.spec 14, 15; jsonl.spec 28) ---------------------------------------------------


def test_listing_reads_only_the_first_chunk_of_fixtures(dsh_fixtures: Path) -> None:
    for name in ("basic-T50.raw-packed.jsonl", "basic-T50.zstd-packed.jsonl.zstd"):
        data = (dsh_fixtures / name).read_bytes()
        pulled: list[int] = []
        header = read_header_prefix(chunks_of(data, pulled), compressed=name.endswith(".zstd"), path=name)
        assert header is not None and header.id == "fx-basic-t50"
        assert pulled == [0]


def test_listing_reads_a_header_longer_than_one_chunk() -> None:
    header = SessionHeader(id="big", created_at=1, extra={"note": "x" * 20_000})
    raw = encode_header_line(header) + line(wire(0))
    pulled: list[int] = []
    assert read_header_prefix(chunks_of(raw, pulled), compressed=False, path=PATH) == replace(
        header, delegation_depth=0)
    assert len(pulled) == 3
    numbers = orjson.dumps(list(range(6000))).decode()  # compresses to more than one 8 KiB chunk
    noisy = SessionHeader(id="big", created_at=1, delegation_depth=0, extra={"note": numbers})
    damaged = bytearray(compress_frame(encode_header_line(noisy)) + compress_frame(line(wire(0))))
    damaged[-3] ^= 0xFF  # an event frame's checksum: listing never looks at it
    pulled = []
    assert read_header_prefix(chunks_of(bytes(damaged), pulled), compressed=True, path=PATH) == noisy
    assert len(pulled) >= 2
    with pytest.raises(SessionCorruptionError):
        scan_zstd(bytes(damaged))


@pytest.mark.parametrize(
    ("data", "compressed"),
    [
        (b"", False),
        (HEADER_LINE[:-1], False),
        (b"{not json\n" + line(wire(0)), False),
        (b"42\n", False),
        (header_with(createdAt=-5), False),
        (b"", True),
        (b"\x28\xb5\x2f\xfd", True),
        (compress_frame(HEADER_LINE)[:-3], True),
        (compress_frame(b'{"type":"turn/start"}\n'), True),
        (compress_frame(b"not json\n"), True),
    ],
    ids=["raw-empty", "raw-no-newline", "raw-bad-json", "raw-scalar", "raw-bad-shape", "zstd-empty",
         "zstd-magic-only", "zstd-partial-frame", "zstd-non-header", "zstd-bad-json"],
)
def test_listing_skips_empty_and_non_header_artifacts(data: bytes, compressed: bool) -> None:
    assert read_header_prefix(chunks_of(data, []), compressed=compressed, path=PATH) is None


def test_listing_rejects_a_multi_line_or_empty_header_frame() -> None:
    for plaintext in (HEADER_LINE + line(wire(0)), b""):
        with pytest.raises(SessionCorruptionError, match="not exactly one header line"):
            read_header_prefix(chunks_of(compress_frame(plaintext), []), compressed=True, path=PATH)


def test_listing_rejects_a_header_frame_checksum_failure() -> None:
    frame = bytearray(compress_frame(HEADER_LINE))
    frame[-1] ^= 0x01
    with pytest.raises(SessionCorruptionError, match="header frame failed validation"):
        read_header_prefix(chunks_of(bytes(frame), []), compressed=True, path=PATH)


def test_listing_surfaces_format_refusals_and_unpathable_ids() -> None:
    with pytest.raises(SessionFormatUnsupportedError):
        read_header_prefix(chunks_of(header_with(version=4), []), compressed=False, path=PATH)
    with pytest.raises(SessionCorruptionError, match="empty id"):
        read_header_prefix(chunks_of(compress_frame(header_with(id="")), []), compressed=True, path=PATH)


def test_odd_json_values_after_the_last_turn_end_are_a_torn_tail() -> None:
    prefix = raw_log(wire(0), turn_end(1))
    for odd in (b'{"type":[1],"seq":7}\n', b"[2]\n", b'"text"\n', b"{}\n"):
        scan = scan_raw(prefix + odd)
        assert scan.torn is not None and scan.torn.truncate_to == len(prefix), odd
