"""``agentlog search``: hits with session id, seq and snippet, on every backend."""

from __future__ import annotations

import json

from tests.cli.conftest import invoke, record, run


def test_search_finds_user_assistant_and_tool_text(store_url: str) -> None:
    record(store_url, "s1", text="Why does the Parser crash on tabs?", output="parser.py: line 12")
    record(store_url, "s2", text="unrelated question")
    found = invoke(store_url, "search", "PARSER", "--json")
    assert found.exit_code == 0, found.output
    shape = json.loads(found.stdout)
    assert shape["query"] == "PARSER" and shape["unreadable"] == []
    hits = shape["hits"]
    assert {(hit["session"], hit["role"]) for hit in hits} == {("s1", "user"), ("s1", "tool")}
    user = next(hit for hit in hits if hit["role"] == "user")
    assert "Parser crash" in user["snippet"] and user["type"] == "user/message"
    events = [json.loads(line) for line in invoke(store_url, "inspect", "s1", "--json").stdout.splitlines()]
    assert events[user["seq"]]["type"] == "user/message"  # the seq points at the message


def test_search_without_a_hit_exits_1_and_in_a_real_process_prints_a_table(store_url: str) -> None:
    record(store_url, "s1", text="find the needle here")
    none = invoke(store_url, "search", "absent-word")
    assert none.exit_code == 1 and "no message contains" in none.stderr
    shown = run(store_url, "search", "needle")
    assert shown.returncode == 0, shown.stderr
    first = shown.stdout.splitlines()[1].split()
    assert first[:3] == ["s1", "1", "user"] or (first[0] == "s1" and "user" in first)
    assert "1 message in 1 session" in shown.stdout


def test_search_only_named_sessions_and_empty_text_is_refused(store_url: str) -> None:
    record(store_url, "s1", text="common word")
    record(store_url, "s2", text="common word")
    only = json.loads(invoke(store_url, "search", "common", "--session", "s2", "--json").stdout)
    assert {hit["session"] for hit in only["hits"]} == {"s2"}
    empty = invoke(store_url, "search", "  ")
    assert empty.exit_code == 1 and "empty" in empty.stderr


def test_search_text_with_index_syntax_is_plain_text_on_every_backend(store_url: str) -> None:
    record(store_url, "s1", text='say "NEAR" AND -x * 100% done_ok \\ here', output="ok")
    record(store_url, "s2", text="NEAR and x but 100 done ok")
    for text, sessions in (('"NEAR" AND -x', ["s1"]), ("*", ["s1"]), ("100%", ["s1"]), ("done_", ["s1"]),
                           ("\\ h", ["s1"]), ('"', ["s1", "s2"]), ("near", ["s1", "s2"])):
        found = invoke(store_url, "search", text, "--json")
        assert found.exit_code == 0, found.output
        assert sorted({hit["session"] for hit in json.loads(found.stdout)["hits"]}) == sessions, text


def test_a_terminal_escape_in_an_indexed_message_shows_as_an_escape_on_every_backend(store_url: str) -> None:
    """The index path (SQLite, PostgreSQL) hands its hits to the same snippet rendering as the scan:
    an OSC title, a clear-screen and a bidi override in a message reach the terminal as escapes."""
    record(store_url, "s1", text="hi \x1b]0;pwn\x07\x1b[2J needleword \u202e tail")
    shown = run(store_url, "search", "needleword")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\u202e" not in shown.stdout
    assert "\\x1b]0;pwn\\x07\\x1b[2J needleword \\u202e tail" in shown.stdout
