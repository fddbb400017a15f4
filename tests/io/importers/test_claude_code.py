"""Claude Code transcripts: every real sample imports whole, compactions become real ones."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from agentlog import SourceFormatError, transcript
from agentlog.io.importers import SourceFile
from agentlog.io.importers.builder import ORPHAN_RESULT
from agentlog.io.importers.claude_code import companions, import_claude_code
from tests.conftest import SHARED_DATA, shared_data_dir
from tests.io.importers.helpers import FIXTURES, assert_golden, checked, import_file

ROOTS = ("transcripts/claude-code", "transcripts-more/claude-code")
REAL = sorted(str(path.relative_to(SHARED_DATA)) for root in ROOTS
              for path in (SHARED_DATA / root).rglob("*.jsonl")) if SHARED_DATA.is_dir() else []
SMALL = FIXTURES / "claude-code" / "small.jsonl"
SMALL_AGENT = FIXTURES / "claude-code" / "small" / "subagents" / "agent-s1.jsonl"


def _source_counts(path: Path) -> dict[str, int]:
    """Tool calls and results, human prompts and compactions as the source file has them."""
    counts = {"tool_use": 0, "tool_result": 0, "compact": 0}
    for line in path.read_bytes().splitlines():
        record = orjson.loads(line)
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if block.get("type") in ("tool_use", "tool_result"):
                counts[block["type"]] += 1
        counts["compact"] += record.get("isCompactSummary") is True
    return counts


def test_the_real_corpus_is_covered() -> None:
    shared_data_dir()
    assert len(REAL) >= 26


@pytest.mark.parametrize("relative", REAL)
def test_every_real_transcript_imports_whole_and_verifies(relative: str) -> None:
    path = shared_data_dir() / relative
    (imported,) = import_file("claude-code", path)
    session = checked(imported)
    counts = _source_counts(path)
    types = [event.type for event in imported.events]
    assert types.count("tool/call") == counts["tool_use"]
    orphans = imported.unmapped.get(ORPHAN_RESULT, 0)
    assert types.count("tool/result") + orphans == counts["tool_result"]
    assert types.count("compaction/end") == counts["compact"]
    if counts["compact"]:  # the surface starts with Claude's own summary, as Claude saw it
        first = session.derive_messages()[0]
        assert first["source"]["plugin"] == "compact"
        assert first["content"][0]["text"].startswith("This session is being continued")
        assert len(transcript(session.events)) > len(session.derive_messages())


def test_the_spotter_compactions_replace_everything_before_the_boundary(shared_data: Path) -> None:
    path = next((shared_data / "transcripts/claude-code/marot__spotter").rglob("4d5611e5-*.jsonl"))
    (imported,) = import_file("claude-code", path)
    session = checked(imported)
    summary = next(e for e in imported.events if e.type == "compaction/summary")
    assert summary.data["shadowedTokenCount"] == 170251
    checkpoint = next(e for e in imported.events if e.type == "user/message" and e.surface_op != "append")
    assert session.surface.nodes[0] == checkpoint.seq
    assert set(checkpoint.source_event_seqs or ()) >= set(summary.data["shadowedSeqs"])


def test_subagent_files_become_children_of_their_session(shared_data: Path) -> None:
    main = next((shared_data / "transcripts/claude-code/marot__spotter").rglob("fa812bfe-*.jsonl"))
    children = companions(main)
    assert [p.name for p in children] == ["agent-a93ccab.jsonl", "agent-aa84377.jsonl",
                                          "agent-acompact-70d8e7.jsonl"]
    (parent,) = import_file("claude-code", main)
    for child_path in children:
        (child,) = import_file("claude-code", child_path)
        assert child.header.parent_session == parent.header.id
        assert child.header.origin == "subagent" and child.header.delegation_depth == 1
        assert child.header.id == f"{parent.header.id}-agent-{child_path.stem.removeprefix('agent-')}"
        checked(child)


def test_golden_small_transcript_with_compaction_and_subagent() -> None:
    sessions = [*import_file("claude-code", SMALL),
                *import_file("claude-code", SMALL_AGENT)]
    for imported in sessions:
        checked(imported)
    main = sessions[0]
    assert main.unmapped == {"file-history-snapshot record": 1, "progress record": 1,
                             "system/turn_duration record": 1}
    reasons = [e.data["reason"]["kind"] for e in main.events if e.type == "turn/end"]
    assert reasons == ["completed", "interrupted"]  # the last call never got its result
    assert_golden(sessions, "claude-code-small")


def test_reply_blocks_split_by_their_results_make_one_step() -> None:
    (imported,) = import_file("claude-code", SMALL)
    message = next(e for e in imported.events if e.type == "assistant/message")
    assert [b["type"] for b in message.data["message"]["content"]] == ["reasoning", "tool-call", "tool-call"]
    assert message.data["usage"]["outputTokens"] == 20  # the last record's usage: the final count


def test_an_interrupted_request_aborts_its_turn() -> None:
    lines = [
        {"type": "user", "sessionId": "s", "uuid": "u1", "message": {"role": "user", "content": "go"}},
        {"type": "assistant", "sessionId": "s", "uuid": "a1", "message": {
            "id": "m1", "model": "claude", "content": [{"type": "text", "text": "working"}]}},
        {"type": "user", "sessionId": "s", "uuid": "u2", "message": {"role": "user", "content": [
            {"type": "text", "text": "[Request interrupted by user]"}]}},
        {"type": "user", "sessionId": "s", "uuid": "u3", "message": {"role": "user", "content": "again"}},
    ]
    data = b"\n".join(orjson.dumps(line) for line in lines)
    (imported,) = import_claude_code(SourceFile("t.jsonl", data))
    checked(imported)
    ends = [e.data["reason"] for e in imported.events if e.type == "turn/end"]
    assert ends == [{"kind": "aborted", "reason": {"kind": "user"}}, {"kind": "completed"}]


def test_a_malformed_line_names_file_and_line() -> None:
    good = (SMALL).read_bytes().splitlines()
    data = b"\n".join([*good[:3], b'{"type": "user", "message": ', *good[3:]])
    with pytest.raises(SourceFormatError) as caught:
        import_claude_code(SourceFile("bad.jsonl", data))
    assert caught.value.file == "bad.jsonl" and "line 4:" in str(caught.value)
    assert caught.value.offset == sum(len(line) + 1 for line in good[:3])


def test_the_todo_list_is_logged_when_it_changes() -> None:
    todo = [{"content": "write tests", "status": "pending", "activeForm": "Writing tests"}]
    def user(uuid: str, text: str, todos: list[dict[str, str]]) -> dict[str, object]:
        return {"type": "user", "sessionId": "t", "uuid": uuid, "message": {"role": "user", "content": text},
                "todos": todos}

    reply = {"type": "assistant", "sessionId": "t", "uuid": "a1",
             "message": {"id": "m1", "model": "claude", "content": []}}
    lines = [user("u1", "plan", todo), reply, user("u2", "go", todo),
             user("u3", "done?", [{**todo[0], "status": "completed"}])]
    (imported,) = import_claude_code(SourceFile("t.jsonl", b"\n".join(orjson.dumps(line) for line in lines)))
    checked(imported)
    snapshots = [e.data["todos"][0]["status"] for e in imported.events if e.type == "todo/write"]
    assert snapshots == ["pending", "completed"]


def test_a_torn_last_line_imports_the_valid_prefix_with_a_warning() -> None:
    whole = SMALL.read_bytes()
    (intact,) = import_claude_code(SourceFile("s.jsonl", whole))
    lines = whole.splitlines(keepends=True)
    prefix = b"".join(lines[:-1])
    torn = prefix + lines[-1][: len(lines[-1]) // 2]  # a writer killed inside its last line
    (imported,) = import_claude_code(SourceFile("torn.jsonl", torn))
    (expected,) = import_claude_code(SourceFile("prefix.jsonl", prefix))
    checked(imported)
    assert [event.type for event in imported.events] == [event.type for event in expected.events]
    assert intact.warnings == () and expected.warnings == ()
    (warning,) = imported.warnings
    assert f"line {len(lines)}" in warning and f"byte {len(prefix)}" in warning and "torn" in warning


def test_a_malformed_last_line_that_was_written_whole_is_still_refused() -> None:
    whole = SMALL.read_bytes()
    with pytest.raises(SourceFormatError, match="not a JSON line"):
        import_claude_code(SourceFile("bad.jsonl", whole + b'{"type": "user", "mess\n'))
