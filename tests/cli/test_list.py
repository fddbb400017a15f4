"""``agentlog list`` survives one bad session: every readable one is listed, each bad one on its row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog.cli.main import cli
from agentlog.store.urls import open_store
from tests.contract.test_listing import _fill, damage_header


@pytest.mark.parametrize("url", ["jsonl://{tmp}/root", "jsonl://{tmp}/root?compression=none",
                                 "sqlite://{tmp}/db/sessions.db"])
def test_list_shows_every_readable_session_and_each_bad_one_on_its_own_row(url: str, tmp_path: Path) -> None:
    url = url.format(tmp=tmp_path)
    with open_store(url) as store:
        _fill(store)
        damage_header(store, tmp_path)
    result = CliRunner().invoke(cli, ["--store", url, "list", "--json"])
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["id"] for row in rows] == ["s1", "s3", "s2"]
    assert "error" not in rows[0] and "error" not in rows[1]
    assert "s2" in rows[2]["error"] and rows[2]["where"]  # the error names the session
    assert result.exit_code == 1
    table = CliRunner().invoke(cli, ["--store", url, "list"], env={"COLUMNS": "300"})
    assert table.exit_code == 1
    lines = [line for line in table.stdout.splitlines() if line.startswith("s")]
    assert [line.split()[0] for line in lines] == ["s1", "s3", "s2"]
    assert "unreadable" in lines[2] and "error:" in lines[2]
    assert "error: 1 session could not be read" in table.stderr
    assert "Traceback" not in table.output
