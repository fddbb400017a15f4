"""Codex CLI rollouts: every real sample imports with its calls, results, usage and turns."""

from __future__ import annotations

import pytest

from tests.conftest import shared_data_dir
from tests.io.importers.corpus import count, real_files
from tests.io.importers.helpers import FIXTURES, assert_golden, checked, import_file

REAL = real_files("codex")


def test_the_real_corpus_is_covered() -> None:
    shared_data_dir()
    assert len(REAL) == 7


@pytest.mark.parametrize("relative", REAL)
def test_every_real_rollout_imports_whole_and_verifies(relative: str) -> None:
    path = shared_data_dir() / relative
    (imported,) = import_file("codex", path)
    checked(imported)
    types = [event.type for event in imported.events]
    calls = count(path, b'"type":"function_call"') + count(path, b'"type":"custom_tool_call"')
    assert types.count("tool/call") == calls
    assert types.count("tool/result") == count(path, b'"type":"function_call_output"') + count(
        path, b'"type":"custom_tool_call_output"')
    prompts = count(path, b'"type":"user_message"')
    assert types.count("turn/start") >= prompts
    assert imported.header.id in path.name
    assert any("usage" in e.data for e in imported.events if e.type == "assistant/message")


def test_golden_small_rollout() -> None:
    sessions = import_file("codex", FIXTURES / "codex" / "small.jsonl")
    (imported,) = sessions
    checked(imported)
    assert imported.unmapped == {"response_item/ghost_snapshot record": 1}
    reasons = [e.data["reason"]["kind"] for e in imported.events if e.type == "turn/end"]
    assert reasons == ["completed", "aborted"]
    results = [e.data for e in imported.events if e.type == "tool/result"]
    assert [r["message"]["content"][0]["isError"] for r in results] == [False, True]  # exit code 1
    assert_golden(sessions, "codex-small")
