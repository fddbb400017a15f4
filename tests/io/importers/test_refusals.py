"""Hostile and foreign input: every importer refuses another format's file with an error naming the
file, the place and the shape it expected, and keeps terminal escapes as data."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from agentlog import SourceFormatError
from agentlog.io.importers import IMPORTERS, SourceFile
from tests.io.importers.helpers import FIXTURES, checked

SAMPLES = {
    "claude-code": FIXTURES / "claude-code" / "small.jsonl",
    "codex": FIXTURES / "codex" / "small.jsonl",
    "openai-chat": FIXTURES / "openai-chat" / "small.json",
    "openai-responses": FIXTURES / "openai-responses" / "small.json",
    "swe-agent": FIXTURES / "swe-agent" / "small.traj",
    "mini-swe-agent": FIXTURES / "mini-swe-agent" / "small.traj.json",
}
EXPECTED = {
    "claude-code": "expected Claude Code JSONL",
    "codex": "expected a Codex CLI rollout",
    "openai-chat": "expected Chat Completions messages",
    "openai-responses": "expected Responses API items",
    "swe-agent": "expected a SWE-agent trajectory",
    "mini-swe-agent": "expected a mini-swe-agent trajectory",
    "dsh": "expected a DSH session file",
}
MISMATCHED = [(fmt, other) for fmt in IMPORTERS for other in SAMPLES if other != fmt
              and {fmt, other} != {"openai-chat", "mini-swe-agent"}]  # a bare message list is both


def test_every_format_has_a_sample_and_an_expected_shape() -> None:
    assert set(EXPECTED) == set(IMPORTERS)
    assert set(SAMPLES) == set(IMPORTERS) - {"dsh"}


@pytest.mark.parametrize(("fmt", "other"), MISMATCHED)
def test_a_file_of_another_format_is_refused_naming_the_expected_shape(fmt: str, other: str) -> None:
    path = SAMPLES[other]
    with pytest.raises(SourceFormatError) as caught:
        IMPORTERS[fmt](SourceFile(str(path), path.read_bytes()))
    assert EXPECTED[fmt] in str(caught.value)
    assert caught.value.file == str(path)


@pytest.mark.parametrize("fmt", sorted(IMPORTERS))
@pytest.mark.parametrize("data", [b"", b"\x00\xff\xfe garbage", b"{not json", b"[]", b"42"])
def test_garbage_is_refused_by_every_format(fmt: str, data: bytes) -> None:
    with pytest.raises(SourceFormatError) as caught:
        IMPORTERS[fmt](SourceFile("junk.bin", data))
    assert EXPECTED[fmt] in str(caught.value) and "junk.bin" in str(caught.value)


@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_a_malformed_line_is_named_by_number_and_byte_offset(fmt: str) -> None:
    lines = SAMPLES[fmt].read_bytes().splitlines(keepends=True)
    data = b"".join([*lines[:2], b'{"type": "user", "mess\n', *lines[2:]])
    with pytest.raises(SourceFormatError) as caught:
        IMPORTERS[fmt](SourceFile("bad.jsonl", data))
    assert "line 3:" in str(caught.value) and caught.value.offset == len(lines[0]) + len(lines[1])


def test_a_huge_line_imports_whole(tmp_path: Path) -> None:
    big = "x" * (8 << 20)
    lines = [{"type": "user", "sessionId": "big", "uuid": "u1", "message": {"role": "user", "content": big}},
             {"type": "assistant", "sessionId": "big", "uuid": "a1",
              "message": {"id": "m1", "model": "claude", "content": [{"type": "text", "text": big}]}}]
    data = b"\n".join(orjson.dumps(line) for line in lines)
    (imported,) = IMPORTERS["claude-code"](SourceFile("big.jsonl", data))
    session = checked(imported)
    assert [len(m["content"][0]["text"]) for m in session.derive_messages()] == [len(big), len(big)]


def test_terminal_escapes_are_kept_as_data() -> None:
    hostile = "\x1b]0;owned\x07\x1b[2J\u202e"
    messages = [{"role": "user", "content": hostile}, {"role": "assistant", "content": hostile}]
    (imported,) = IMPORTERS["openai-chat"](SourceFile("e.json", orjson.dumps(messages)))
    session = checked(imported)
    assert [m["content"][0]["text"] for m in session.derive_messages()] == [hostile, hostile]


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_a_file_name_that_is_not_utf8_imports(fmt: str) -> None:
    # os.fsdecode(b"\xff\xfe.json"): what the CLI gets for a file whose name is not UTF-8
    sessions = IMPORTERS[fmt](SourceFile("/imports/\udcff\udcfe.json", SAMPLES[fmt].read_bytes()))
    for imported in sessions:
        checked(imported)
        origin = imported.header.to_wire()["importedFrom"]
        assert origin["file"] == "\ufffd\ufffd.json"
