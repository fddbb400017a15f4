"""``agentlog stats``: figures per session and store-wide, the same JSON on every backend."""

from __future__ import annotations

import json

from tests.cli.conftest import crash, invoke, record, run


def test_stats_counts_turns_steps_tools_and_tokens(store_url: str) -> None:
    record(store_url, "a", turns=2)
    record(store_url, "b", turns=1, tool="grep")
    crash(store_url, "c")
    one = json.loads(invoke(store_url, "stats", "a", "--json").stdout)
    (a,) = one["sessions"]
    assert a["session"] == "a" and a["turns"] == 2 and a["steps"] == 2
    assert a["toolCalls"] == {"read_file": 2}
    assert a["tokens"] == {"input": 240, "output": 18, "cacheRead": 0}
    assert a["userMessages"] == 2 and a["assistantMessages"] == 2 and a["toolErrors"] == 0
    assert one["total"]["sessions"] == 1 and one["unreadable"] == []
    every = invoke(store_url, "stats", "--json")
    assert every.exit_code == 0, every.output
    shape = json.loads(every.stdout)
    assert [each["session"] for each in shape["sessions"]] == ["a", "b", "c"]
    total = shape["total"]
    assert total["session"] is None and total["sessions"] == 3
    assert total["toolCalls"] == {"grep": 1, "read_file": 2}
    assert total["turns"] == 4 and total["interruptedTurns"] == 1  # the crashed turn, as a load closes it
    assert set(total["durationsMs"]) == {"wall", "turns", "tools"}


def test_stats_table_in_a_real_process(store_url: str) -> None:
    record(store_url, "only-one", turns=3)
    shown = run(store_url, "stats")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split()[:3] == ["session", "events", "turns"]
    assert lines[1].split()[0] == "only-one" and lines[1].split()[2] == "3"
    assert lines[2].startswith("total (1 session)")
    assert any(line.split() == ["read_file", "3"] for line in lines)


def test_stats_of_a_missing_session_is_one_clear_error(store_url: str) -> None:
    record(store_url, "here")
    missing = invoke(store_url, "stats", "not-here")
    assert missing.exit_code == 1
    assert "not found" in missing.stderr and "not-here" in missing.stderr
