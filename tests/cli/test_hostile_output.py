"""Session content never reaches the terminal as control sequences: terminal escapes, bells and
bidirectional overrides in messages, tool output, paths and ids are shown as visible escapes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog import Recorder, SessionHeader, open_store
from agentlog.cli.main import cli

HOSTILE = "\x1b[2J\x1b]0;pwned\x07 \u202eevil\u202c \x9b31m \x1b]8;;http://x\x07link"
RAW = ("\x1b", "\x07", "\u202e", "\u202c", "\x9b")


def hostile_store(root: Path) -> str:
    url = f"jsonl://{root}"
    with open_store(url).start(SessionHeader(id="h\x1b[31m1", cwd=f"/w/{HOSTILE}")) as live:
        recorder = Recorder(live)
        with recorder.turn() as turn, turn.step() as step:
            step.user_message(f"hi {HOSTILE}")
            step.request_header({"config": {"provider": "p", "model": "m"}})
            step.text_delta(HOSTILE)
            step.tool_call_delta("c1", "ls", '{"path": "' + "\\u001b[2J" + '"}')
            step.assistant()
            step.tool_call("c1", "ls", '{"path": "x"}')
            step.tool_result("c1", f"out {HOSTILE}")
    return url


SID = "h\x1b[31m1"


@pytest.mark.parametrize("command", [["list"], ["show", SID], ["inspect", SID], ["verify", SID],
                                     ["show", "nope\x1b[2J"], ["stats"], ["stats", SID], ["search", "hi"],
                                     ["search", "out"], ["tail", SID, "-n", "100"],
                                     ["repair", SID, "--dry-run"],
                                     ["check-upgrade"], ["fork", SID, "--child", "k\x1b[2J"],
                                     ["tail", "nope\x1b[2J"], ["delete", "nope\x1b[2J", "--yes"]])
def test_session_content_is_printed_without_control_sequences(tmp_path: Path, command: list[str]) -> None:
    url = hostile_store(tmp_path / "root")
    result = CliRunner().invoke(cli, ["--store", url, *command])
    shown = result.output
    assert shown.strip(), command
    for raw in RAW:
        assert raw not in shown, (command, raw, shown)
    assert "\\x1b" in shown  # what was there is still visible, as an escape


@pytest.mark.parametrize("command", [["list", "--json"], ["show", SID, "--json"], ["inspect", SID, "--json"],
                                     ["verify", SID, "--json"], ["stats", "--json"],
                                     ["search", "hi", "--json"],
                                     ["tail", SID, "--json"], ["repair", SID, "--json", "--dry-run"],
                                     ["check-upgrade", "--json"]])
def test_json_output_escapes_every_control_and_decodes_to_the_stored_text(tmp_path: Path,
                                                                          command: list[str]) -> None:
    import json

    url = hostile_store(tmp_path / "root")
    result = CliRunner().invoke(cli, ["--store", url, *command])
    assert result.exit_code == 0, result.output
    for raw in RAW:
        assert raw not in result.stdout, (command, raw)
    text = result.stdout
    decoded = ([json.loads(line) for line in text.splitlines()]
               if command[0] in ("list", "inspect", "tail") else [json.loads(text)])
    texts = list(_strings(decoded))
    assert command[0] in ("show", "inspect", "tail") or SID in texts
    if command[0] in ("show", "inspect"):
        assert any(HOSTILE in text for text in texts)  # the stored text, intact once decoded


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.mark.parametrize("command", [["export", SID, "--format", "markdown", "-o", "OUT", "--json"],
                                     ["fork", SID, "--child", "k", "--json"], ["check-upgrade", "--json"]])
def test_json_output_names_a_path_that_is_not_utf8(tmp_path: Path, command: list[str]) -> None:
    import json
    import os
    import subprocess
    import sys

    root = os.fsdecode(os.fsencode(tmp_path) + b"/root\xff")  # a store root not valid UTF-8
    url = hostile_store(Path(root))
    out = os.fsdecode(os.fsencode(tmp_path) + b"/out\xff.md")
    done = subprocess.run([sys.executable, "-m", "agentlog.cli", "--store", url,
                           *[out if part == "OUT" else part for part in command]],
                          capture_output=True, timeout=120, check=False)
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    decoded = json.loads(done.stdout)
    assert any("\ufffd" in text for text in _strings(decoded))  # the undecodable byte, as U+FFFD
