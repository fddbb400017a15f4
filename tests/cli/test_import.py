"""``agentlog import``: through click's runner and a real subprocess, into real stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from agentlog import open_store
from agentlog.cli.main import cli
from tests.io.importers.helpers import FIXTURES

SMALL = FIXTURES / "claude-code" / "small.jsonl"


def invoke(store: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", store, *args], catch_exceptions=False)


def rows(result: Result) -> list[dict[str, object]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        from tests.store.pg_worker import throwaway_url

        with throwaway_url() as url:
            yield url
        return
    yield f"jsonl://{tmp_path / 'store'}" if request.param == "jsonl" else f"sqlite://{tmp_path / 's.db'}"


def test_import_brings_subagents_along_and_list_show_verify_see_them(store_url: str) -> None:
    result = invoke(store_url, "import", "claude-code", str(SMALL), "--json")
    assert result.exit_code == 0, result.output
    assert [(r["session"], r["outcome"]) for r in rows(result)] == [
        ("cc-small", "imported"), ("cc-small-agent-s1", "imported")]
    assert rows(result)[0]["unmapped"] == {"file-history-snapshot record": 1, "progress record": 1,
                                           "system/turn_duration record": 1}
    listed = [json.loads(line) for line in invoke(store_url, "list", "--json").stdout.splitlines()]
    parents = {h["id"]: h.get("parentSession") for h in listed}
    assert parents == {"cc-small": None, "cc-small-agent-s1": "cc-small"}
    assert invoke(store_url, "verify", "cc-small").exit_code == 0
    shown = invoke(store_url, "show", "cc-small")
    assert "README.md is missing" in shown.stdout
    # the escape in a prompt is shown, not run
    assert "\x1b" not in shown.stdout and "\\x1b[2J" in shown.stdout


def test_a_second_import_skips_and_replace_overwrites(store_url: str) -> None:
    assert invoke(store_url, "import", "claude-code", str(SMALL)).exit_code == 0
    again = invoke(store_url, "import", "claude-code", str(SMALL))
    assert again.exit_code == 0
    assert "2 sessions already in the store, left unchanged (--replace overwrites)" in again.stdout
    replaced = invoke(store_url, "import", "claude-code", str(SMALL), "--replace", "--json")
    assert [r["outcome"] for r in rows(replaced)] == ["replaced", "replaced"]
    with open_store(store_url) as store:
        assert len(store.load("cc-small").events) == 25


def test_id_renames_the_session_and_its_subagents_follow(store_url: str) -> None:
    result = invoke(store_url, "import", "claude-code", str(SMALL), "--id", "mine", "--json")
    assert [(r["session"]) for r in rows(result)] == ["mine", "cc-small-agent-s1"]
    with open_store(store_url) as store:
        assert store.load("cc-small-agent-s1").header.parent_session == "mine"
    two = invoke(store_url, "import", "claude-code", str(SMALL), str(FIXTURES), "--id", "x")
    assert two.exit_code == 2 and "--id needs exactly one file" in two.output


def test_a_bad_file_is_reported_with_its_line_and_the_others_still_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(SMALL.read_bytes().replace(b'"type":"assistant","uuid":"a4"', b'"type":"assistant",,', 1))
    wrong = tmp_path / "tau.jsonl"
    wrong.write_text('[{"role": "user", "content": "hi"}]\n')
    store = f"jsonl://{tmp_path / 'store'}"
    result = invoke(store, "import", "claude-code", str(bad), str(wrong), str(SMALL), "--json")
    assert result.exit_code == 1
    errors = [r for r in rows(result) if "error" in r]
    assert [Path(str(r["file"])).name for r in errors] == ["bad.jsonl", "tau.jsonl"]
    assert "line 9:" in str(errors[0]["error"]) and "bad.jsonl" in str(errors[0]["error"])
    assert "expected Claude Code JSONL" in str(errors[1]["error"])
    assert "could not be imported" in result.stderr
    assert {r.get("session") for r in rows(result)} >= {"cc-small", "cc-small-agent-s1"}


def test_terminal_escapes_in_file_names_are_shown_not_run(tmp_path: Path) -> None:
    hostile = tmp_path / "a\x1b]0;pwned\x07.jsonl"
    hostile.write_bytes(b"not json\n")
    result = invoke(f"jsonl://{tmp_path / 'store'}", "import", "claude-code", str(hostile))
    assert result.exit_code == 1
    assert "\x1b" not in result.stdout and "\\x1b]0;pwned\\x07" in result.stdout


def test_import_in_a_real_subprocess_prints_the_summary_table(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{tmp_path / 'store'}", "COLUMNS": "200"}
    command = [sys.executable, "-m", "agentlog.cli", "import", "claude-code", str(FIXTURES / "claude-code")]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "cc-small" in done.stdout and "imported" in done.stdout and "progress record: 1" in done.stdout
    assert "Traceback" not in done.stderr
    listed = subprocess.run([sys.executable, "-m", "agentlog.cli", "list", "--json"], capture_output=True,
                            text=True, env=env, timeout=120)
    ids = {json.loads(line)["id"] for line in listed.stdout.splitlines()}
    assert ids == {"cc-small", "cc-small-agent-s1"}


@pytest.mark.parametrize(("fmt", "path", "sessions"), [
    ("codex", FIXTURES / "codex" / "small.jsonl", 1),
    ("openai-chat", FIXTURES / "openai-chat" / "small.json", 1),
    ("swe-agent", FIXTURES / "swe-agent" / "small.traj", 1),
    ("mini-swe-agent", FIXTURES / "mini-swe-agent" / "small.traj.json", 1),
    ("swe-agent", FIXTURES / "swe-agent", 1),  # a directory: the files of the format under it
])
def test_every_format_imports_through_the_cli(fmt: str, path: Path, sessions: int, tmp_path: Path) -> None:
    store = f"jsonl://{tmp_path / 'store'}"
    result = invoke(store, "import", fmt, str(path), "--json")
    assert result.exit_code == 0, result.output
    imported = rows(result)
    assert len(imported) == sessions and imported[0]["outcome"] == "imported"
    assert invoke(store, "verify", str(imported[0]["session"])).exit_code == 0


def test_dsh_files_import_where_the_store_expects_them(tmp_path: Path) -> None:
    from tests.conftest import shared_data_dir

    fixture = shared_data_dir() / "dsh-fixtures" / "fork-parent-T5.zstd-packed.jsonl.zstd"
    result = invoke(f"jsonl://{tmp_path}", "import", "dsh", str(fixture))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "--home-user-project--" / "fx-fork-parent" / "session.jsonl.zstd").is_file()
    assert invoke(f"jsonl://{tmp_path}", "show", "fx-fork-parent").exit_code == 0


def test_concurrent_imports_of_the_same_files_write_each_session_once(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{tmp_path / 'store'}"}
    command = [sys.executable, "-m", "agentlog.cli", "import", "claude-code", str(SMALL), "--json"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(3)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], outputs
    outcomes = [json.loads(line)["outcome"] for out, _ in outputs for line in out.splitlines()]
    assert sorted(outcomes) == ["imported"] * 2 + ["skipped"] * 4
    with open_store(f"jsonl://{tmp_path / 'store'}") as store:
        assert store.inspect("cc-small").recovery is None


def test_replace_is_refused_while_another_writer_holds_the_session(tmp_path: Path) -> None:
    from agentlog.errors import SessionLockedError
    from agentlog.io.importers import save_imported
    from tests.io.importers.helpers import import_file

    (imported,) = import_file("claude-code", SMALL)
    url = f"jsonl://{tmp_path}"
    with open_store(url) as store:
        assert save_imported(store, imported) == "imported"
    with open_store(url) as holder, holder.open("cc-small"), open_store(url) as other:
        with pytest.raises(SessionLockedError, match="open for writing"):
            save_imported(other, imported, replace=True, wait=0.2)
        assert save_imported(other, imported, wait=0.2) == "skipped"  # no write needed: no lock
    with open_store(url) as store:  # the import is intact (the live open added its end-seed marker)
        assert list(store.load("cc-small").events)[: len(imported.events)] == list(imported.events)


def test_many_files_show_a_progress_bar_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from rich.console import Console

    import agentlog.cli.importing as importing
    import agentlog.cli.progress as progress

    screen, table = io.StringIO(), io.StringIO()
    monkeypatch.setattr(progress, "errors", Console(file=screen, force_terminal=True, width=160))
    monkeypatch.setattr(importing, "console", Console(file=table, width=160))
    result = invoke(f"jsonl://{tmp_path}", "import", "claude-code", str(SMALL))
    assert result.exit_code == 0, result.output
    shown = screen.getvalue()
    assert "importing" in shown and "\x1b[" in shown  # the bar on stderr, drawn with terminal controls
    assert "cc-small-agent-s1" not in shown and "cc-small-agent-s1" in table.getvalue()  # the table: stdout


def test_help_lists_every_format_of_the_registry() -> None:
    from agentlog.io.importers import IMPORTERS

    shown = CliRunner().invoke(cli, ["import", "--help"], terminal_width=200).output
    assert f"FORMAT: {', '.join(IMPORTERS)}." in shown
    assert "``" not in shown and ":class:" not in shown  # no reStructuredText markup


def test_a_value_the_log_cannot_hold_is_refused_naming_the_file(tmp_path: Path) -> None:
    source = tmp_path / "huge-int.jsonl"
    lines = [{"type": "user", "sessionId": "h", "uuid": "u1", "message": {"role": "user", "content": "hi"}},
             {"type": "assistant", "sessionId": "h", "uuid": "a1", "message": {
                 "id": "m1", "model": "claude", "content": [], "usage": {"input_tokens": 2**60}}}]
    source.write_text("\n".join(json.dumps(line) for line in lines))
    result = invoke(f"jsonl://{tmp_path / 'store'}", "import", "claude-code", str(source))
    assert result.exit_code == 1
    assert f"error: {source}: " in result.stderr
    assert 'session "h", assistant/message, seq 4' in result.stderr
    assert "data.usage.inputTokens" in result.stderr
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("session.jsonl*"))


def test_the_summary_table_never_wraps_a_session_id_in_a_narrow_terminal(tmp_path: Path) -> None:
    source = tmp_path / "chat.json"
    source.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]))
    store = f"jsonl://{tmp_path / 'store'}"
    result = CliRunner().invoke(cli, ["--store", store, "import", "openai-chat", str(source)],
                                catch_exceptions=False, env={"COLUMNS": "40"})
    assert result.exit_code == 0, result.output
    (session_id,) = (line.split()[1] for line in result.output.splitlines() if "imported" in line)
    assert session_id.startswith("openai-chat-") and len(session_id) > 20
    with open_store(store, create=False) as opened:
        assert [snapshot.header.id for snapshot in opened.listing().snapshots] == [session_id]


@pytest.mark.parametrize("broken", ["not contiguous", "a turn/start no turn/end can close"])
def test_a_replacement_the_store_refuses_leaves_the_stored_session(tmp_path: Path, broken: str) -> None:
    import dataclasses

    from agentlog import AgentlogError, Event
    from agentlog.io.importers import save_imported
    from tests.io.importers.helpers import import_file

    (imported,) = import_file("claude-code", SMALL)
    wire = [event.to_wire() for event in imported.events]
    if broken == "not contiguous":
        wire[1:] = [{**event, "seq": event["seq"] + 1} for event in wire[1:]]
    else:  # a load refuses a turn/start whose turn is not a positive integer
        wire[0] = {**wire[0], "data": {"turn": "one"}}
    bad = dataclasses.replace(imported, events=tuple(Event.from_wire(event) for event in wire))
    url = f"jsonl://{tmp_path}"
    with open_store(url) as store:
        assert save_imported(store, imported) == "imported"
        with pytest.raises(AgentlogError):
            save_imported(store, bad, replace=True, wait=0.2)
    with open_store(url) as store:  # the refused replacement deleted nothing
        assert list(store.load("cc-small").events) == list(imported.events)


def test_json_rows_escape_controls_and_undecodable_bytes_in_file_names(tmp_path: Path) -> None:
    source = os.fsencode(tmp_path / "in")
    os.makedirs(source)
    good, bad = source + b"/\xff\xe2\x80\xaegood.json", source + b"/\x1b[2Jbad.json"
    with open(good, "wb") as out:
        out.write((FIXTURES / "openai-chat" / "small.json").read_bytes())
    with open(bad, "wb") as out:
        out.write(b"junk")
    done = subprocess.run([sys.executable, "-m", "agentlog.cli", "--store", f"jsonl://{tmp_path / 'store'}",
                           "import", "openai-chat", os.fsdecode(source), "--json"],
                          capture_output=True, timeout=120, check=False)
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert done.returncode == 1  # one file could not be imported
    found = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(row.get("outcome", "error") for row in found) == ["error", "imported"]
    for raw in (b"\x1b", "\u202e".encode()):  # escaped in JSON, never raw on the terminal
        assert raw not in done.stdout
    assert any("\u202egood.json" in row["file"] for row in found)
