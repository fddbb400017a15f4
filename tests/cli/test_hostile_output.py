"""Session content never reaches the terminal as control sequences: terminal escapes, bells and
bidirectional overrides in messages, tool output, paths and ids are shown as visible escapes."""

from __future__ import annotations

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


@pytest.mark.parametrize("command", [["list"], ["show", "h\x1b[31m1"], ["inspect", "h\x1b[31m1"],
                                     ["verify", "h\x1b[31m1"], ["show", "nope\x1b[2J"]])
def test_session_content_is_printed_without_control_sequences(tmp_path: Path, command: list[str]) -> None:
    url = hostile_store(tmp_path / "root")
    result = CliRunner().invoke(cli, ["--store", url, *command])
    shown = result.output
    assert shown.strip(), command
    for raw in RAW:
        assert raw not in shown, (command, raw, shown)
    assert "\\x1b" in shown  # what was there is still visible, as an escape
