"""Store-wide commands survive one damaged session: the others are reported, the damaged one named."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, invoke, record


def _store_with_a_broken_session(tmp_path: Path) -> str:
    url = f"jsonl://{tmp_path}/store"
    record(url, "good", text="needle in a good session")
    broken = tmp_path / "store" / "_no-cwd" / "broken"
    broken.mkdir(parents=True)
    (broken / "session.jsonl.zstd").write_bytes(b"not zstd at all")
    return url


@pytest.mark.parametrize("args", [["stats", "--json"], ["search", "needle", "--json"],
                                  ["gc", "--older-than", "1s", "--dry-run", "--json"]])
def test_one_damaged_session_is_named_and_never_hides_the_others(tmp_path: Path, args: list[str]) -> None:
    url = _store_with_a_broken_session(tmp_path)
    result = invoke(url, *args)
    assert result.exit_code == 1, result.output
    shape = json.loads(result.stdout)
    assert len(shape["unreadable"]) == 1
    bad = shape["unreadable"][0]
    assert "broken" in (bad["id"] or "") + bad["where"] and bad["error"]
    if args[0] == "stats":
        assert [each["session"] for each in shape["sessions"]] == ["good"]
    if args[0] == "search":
        assert [hit["session"] for hit in shape["hits"]] == ["good"]


def test_progress_goes_to_a_terminal_stderr_and_never_into_the_output(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path}/store"
    for number in range(3):
        record(url, f"s{number}")
    leader, follower = pty.openpty()
    env = {**os.environ, "AGENTLOG_STORE": url, "PYTHONPATH": str(REPO), "COLUMNS": "120", "TERM": "xterm"}
    try:
        done = subprocess.run([sys.executable, "-m", "agentlog.cli", "stats", "--json"],
                              stdout=subprocess.PIPE, stderr=follower, env=env, timeout=120, check=False)
    finally:
        os.close(follower)
    os.set_blocking(leader, False)
    try:
        shown = os.read(leader, 65536)
    except BlockingIOError:
        shown = b""
    finally:
        os.close(leader)
    assert done.returncode == 0
    assert json.loads(done.stdout)["total"]["sessions"] == 3  # stdout is pure JSON
    assert b"reading sessions" in shown  # a transient bar, on the terminal only
    piped = subprocess.run([sys.executable, "-m", "agentlog.cli", "stats", "--json"], capture_output=True,
                           env=env, timeout=120, check=False)
    assert piped.returncode == 0 and piped.stderr == b""  # not a terminal: no bar
