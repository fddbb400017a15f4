"""A field of the wrong type (a list where a string is expected, a float where an int is) in an
otherwise well-formed file: the importer keeps going (the field is dropped or noted) or refuses the
file with an ``AgentlogError`` naming it, never a raw ``TypeError``, and ``agentlog import``
still imports the files after it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentlog import AgentlogError, open_store
from agentlog.io.importers import IMPORTERS, SourceFile
from tests.io.importers.helpers import FIXTURES, checked

_META = {"type": "session_meta", "payload": {"id": "codex-odd", "timestamp": "2026-01-02T16:39:45Z"}}
_ASK = {"type": "response_item", "payload": {"type": "message", "role": "user",
                                             "content": [{"type": "input_text", "text": "hi"}]}}


def _codex(*records: dict[str, Any]) -> bytes:
    return b"\n".join(orjson.dumps(record) for record in (_META, _ASK, *records))


def _tokens(output: Any) -> bytes:
    info = {"last_token_usage": {"input_tokens": 5, "output_tokens": output}}
    return _codex({"type": "event_msg", "payload": {"type": "token_count", "info": info}})


def _mini(message: dict[str, Any]) -> bytes:
    return orjson.dumps({"info": {}, "trajectory_format": "mini-swe-agent-1.1", "messages": [
        {"role": "user", "content": "fix it"}, {"role": "assistant", "content": "ok", **message}]})


def _swe_agent(tool_call_ids: Any) -> bytes:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    return orjson.dumps({"history": [
        {"role": "user", "content": "fix it"}, {"role": "assistant", "content": "ok", "tool_calls": [call]},
        {"role": "tool", "content": "done", "tool_call_ids": tool_call_ids}]})


CASES: dict[str, tuple[str, bytes]] = {
    "chat tool_calls an int": ("openai-chat", orjson.dumps(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "tool_calls": 5}])),
    "codex user_message a list": ("codex", _codex(
        {"type": "event_msg", "payload": {"type": "user_message", "message": ["hi"]}})),
    "codex event type a dict": ("codex", _codex({"type": "event_msg", "payload": {"type": {"x": 1}}})),
    "codex output_tokens a string": ("codex", _tokens("\x1b[2J")),
    "codex output_tokens an object": ("codex", _tokens({"n": 1})),
    "mini timestamp 1e308": ("mini-swe-agent", _mini({"extra": {"timestamp": 1e308}})),
    "mini usage details a list": ("mini-swe-agent", _mini({"extra": {"response": {"usage": {
        "prompt_tokens": 3, "prompt_tokens_details": ["x"], "completion_tokens_details": "y"}}}})),
    "mini tool_calls a float": ("mini-swe-agent", _mini({"tool_calls": 1.5})),
    "swe-agent tool_call_ids an int": ("swe-agent", _swe_agent(5)),
    "swe-agent tool_call_ids a list of objects": ("swe-agent", _swe_agent([{"id": "c1"}])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrong_typed_field_imports_or_is_refused_by_name(case: str) -> None:
    fmt, data = CASES[case]
    try:
        sessions = IMPORTERS[fmt](SourceFile(f"{fmt}.bin", data))
    except AgentlogError as exc:
        assert f"{fmt}.bin" in str(exc)
        return
    assert sessions
    for imported in sessions:
        checked(imported)


def test_the_cli_imports_the_files_after_a_wrong_typed_one(tmp_path: Path) -> None:
    bad = tmp_path / "a-bad.json"
    bad.write_bytes(CASES["chat tool_calls an int"][1])
    good = tmp_path / "b-good.json"
    good.write_bytes((FIXTURES / "openai-chat" / "small.json").read_bytes())
    url = f"jsonl://{tmp_path / 'store'}"
    done = subprocess.run([sys.executable, "-m", "agentlog.cli", "--store", url, "import", "openai-chat",
                           str(bad), str(good)], capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    with open_store(url) as store:
        assert len(store.list()) == 2, done.stdout + done.stderr


def test_a_folder_import_names_the_bad_trajectory_and_imports_the_rest(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "a-bad.traj").write_bytes(CASES["swe-agent tool_call_ids an int"][1])
    (folder / "b-good.traj").write_bytes(_swe_agent(["c1"]))
    url = f"jsonl://{tmp_path / 'store'}"
    done = subprocess.run([sys.executable, "-m", "agentlog.cli", "--store", url, "import", "swe-agent",
                           str(folder)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    [named] = [line for line in done.stderr.splitlines() if "a-bad.traj" in line]
    assert "tool_call_ids" in named, done.stderr
    assert "1 file could not be imported" in done.stderr
    with open_store(url) as store:
        assert len(store.list()) == 1, done.stdout + done.stderr


def test_a_shape_an_importer_misses_fails_that_file_only(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's backstop: an importer bug (here a stand-in raising ``TypeError`` on one file) is
    that file's error row, one line naming it, and the next file is imported."""
    from click.testing import CliRunner

    from agentlog.cli.main import cli
    from agentlog.io.importers import IMPORTERS

    real = IMPORTERS["swe-agent"]

    def buggy(source: SourceFile) -> list[Any]:
        if source.name.startswith("a-"):
            raise TypeError("'int' object is not iterable")
        return real(source)

    monkeypatch.setitem(IMPORTERS, "swe-agent", buggy)
    (tmp_path / "a-odd.traj").write_bytes(_swe_agent(["c1"]))
    (tmp_path / "b-good.traj").write_bytes(_swe_agent(["c1"]))
    url = f"jsonl://{tmp_path / 'store'}"
    result = CliRunner().invoke(cli, ["--store", url, "import", "swe-agent", str(tmp_path / "a-odd.traj"),
                                      str(tmp_path / "b-good.traj")])
    assert result.exit_code == 1, result.output
    assert f"{tmp_path / 'a-odd.traj'}: not readable as swe-agent (TypeError: 'int' object is not " \
           "iterable)" in result.stderr
    with open_store(url) as store:
        assert len(store.list()) == 1
