"""Manners every command keeps: help without reST markup, ids never wrapped, JSON on every command,
errors that name the next step."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog import Recorder, SessionHeader, open_store
from agentlog.cli.app import cli
from tests.cli.conftest import REPO, invoke, record, run

LONG_ID = "session-with-a-rather-long-identifier-0123456789abcdef"


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_help_has_no_restructuredtext_markup(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0
    text = result.output
    assert "``" not in text and ":param" not in text and ".. " not in text, text
    assert not re.search(r":(func|class|meth|attr):`", text)


def test_group_help_lists_every_command_without_markup() -> None:
    text = CliRunner().invoke(cli, ["--help"]).output
    assert "``" not in text
    for name in cli.commands:
        assert name in text


@pytest.mark.parametrize("args", [["list"], ["stats"], ["search", "README"],
                                  ["gc", "--older-than", "1s", "--dry-run"], ["check-upgrade"]])
def test_ids_and_paths_are_never_wrapped_in_a_narrow_terminal(tmp_path: Path, args: list[str]) -> None:
    url = f"jsonl://{tmp_path}/store"
    record(url, LONG_ID, cwd="/a/very/long/working/directory/that/does/not/fit/in/forty/columns")
    if args[0] == "gc":
        import time

        time.sleep(1.1)
    shown = run(url, *args, columns=40)
    assert shown.returncode == 0, shown.stderr
    assert any(line.startswith(LONG_ID) for line in shown.stdout.splitlines()), shown.stdout
    if args == ["list"]:
        assert "/a/very/long/working/directory/that/does/not/fit/in/forty/columns" in shown.stdout
    runner = CliRunner().invoke(cli, ["--store", url, *args], env={"COLUMNS": "40"})
    assert any(line.startswith(LONG_ID) for line in runner.stdout.splitlines()), runner.stdout


def test_fork_materialize_delete_print_json(store_url: str) -> None:
    record(store_url, "parent", turns=2)
    forked = invoke(store_url, "fork", "parent", "--child", "kid", "--at", "10", "--json")
    assert forked.exit_code == 0, forked.output
    shape = json.loads(forked.stdout)
    assert shape["id"] == "kid" and shape["parent"] == "parent"
    assert shape["seedLength"] == 11 and shape["boundary"] == 10
    assert (shape["file"] is None) == (not store_url.startswith("jsonl"))
    refused = invoke(store_url, "delete", "parent", "--yes", "--json")
    assert refused.exit_code == 1
    assert "materialize" in refused.stderr and "kid" in refused.stderr
    done = invoke(store_url, "materialize", "kid", "--json")
    assert json.loads(done.stdout) == {"id": "kid", "materialized": True}
    deleted = invoke(store_url, "delete", "parent", "--yes", "--json")
    assert deleted.exit_code == 0, deleted.output
    assert json.loads(deleted.stdout) == {"id": "parent", "deleted": True}


def test_verify_json_has_one_shape_for_ok_recovered_and_invalid(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path}/store"
    record(url, "fine")
    with open_store(url) as store:
        live = store.start(SessionHeader(id="crashed"))
        Recorder(live).turn().__enter__().user_message("x")
        live.flush()
        live.close()
    shapes = {}
    for sid, status in (("fine", 0), ("crashed", 2), ("missing", 1)):
        result = invoke(url, "verify", sid, "--json")
        assert result.exit_code == status, result.output
        shapes[sid] = json.loads(result.stdout)
    assert {tuple(sorted(shape)) for shape in shapes.values()} == {
        ("error", "events", "id", "integrity", "messages", "recovery", "scrubs", "status", "surfaceNodes",
         "writer")}
    assert [shapes[sid]["status"] for sid in ("fine", "crashed", "missing")] == ["ok", "recovered", "invalid"]
    assert shapes["crashed"]["recovery"]["interruptedTurn"] == 1
    assert "not found" in shapes["missing"]["error"]


def test_a_fork_inside_a_turn_names_the_nearest_valid_boundaries(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path}/store"
    record(url, "parent", turns=2)
    with open_store(url) as store:
        events = store.read_from("parent", 0).events
    first_end = next(event.seq for event in events if event.type == "turn/end")
    second_end = events[-1].seq
    refused = run(url, "fork", "parent", "--at", str(first_end + 3))
    assert refused.returncode == 1
    assert f"the nearest valid boundary before it is seq {first_end}; seq {second_end} (where that turn " \
        "ends) is valid too" in refused.stderr


def test_the_other_jsonl_encoding_names_the_compression_option(tmp_path: Path) -> None:
    record(f"jsonl://{tmp_path}/store?compression=none", "raw")
    refused = invoke(f"jsonl://{tmp_path}/store", "show", "raw")
    assert refused.exit_code == 1
    assert "?compression=none" in refused.stderr


@pytest.mark.parametrize("how", ["option", "environment"])
def test_an_empty_store_is_an_error_not_the_default_store(tmp_path: Path, how: str) -> None:
    """``--store "$UNSET" gc`` must not clean the user's real sessions in the default store."""
    home = tmp_path / "data"
    default = f"jsonl://{home / 'agentlog' / 'sessions'}"
    record(default, "precious")
    env = {**os.environ, "XDG_DATA_HOME": str(home), "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    env.pop("AGENTLOG_STORE", None)
    args = ["--store", ""] if how == "option" else []
    if how == "environment":
        env["AGENTLOG_STORE"] = ""
    for command in (["gc", "--older-than", "1s", "--by", "last-event", "--yes"], ["list"]):
        done = subprocess.run([sys.executable, "-m", "agentlog.cli", *args, *command], capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=60)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "empty" in done.stderr and "Traceback" not in done.stderr
        assert done.stdout == ""
    with open_store(default, create=False) as store:
        assert [header.id for header in store.list()] == ["precious"]
