"""``agentlog gc``: idle sessions go, forks' parents and open sessions stay, children before parents."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from agentlog import open_store
from tests.cli.conftest import REPO, invoke, record, run
from tests.io.importers.helpers import FIXTURES

NO_TIMES = FIXTURES / "openai-chat" / "small.json"
"""A chat-completions export: no timestamps at all, so every imported event says 1970."""


def _ids(url: str) -> set[str]:
    return {json.loads(line)["id"] for line in invoke(url, "list", "--json").stdout.splitlines()}


def test_gc_removes_an_old_family_children_first_and_keeps_a_parent_of_a_recent_fork(store_url: str) -> None:
    record(store_url, "family")
    record(store_url, "elder")
    with open_store(store_url) as store:
        store.fork("family", None, "family-kid").close()
    time.sleep(4.2)  # the young fork stays younger than 4s until the subprocess below has read it
    with open_store(store_url) as store:
        store.fork("elder", None, "young-kid").close()  # recent: its parent must stay
    dry = invoke(store_url, "gc", "--older-than", "4s", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert plan["dryRun"] is True
    assert plan["deleted"] == ["family-kid", "family"]  # the fork before its parent
    assert plan["kept"] == [{"id": "elder", "reason": "fork young-kid references it"}]
    assert _ids(store_url) == {"family", "family-kid", "elder", "young-kid"}  # a dry run removes nothing
    done = run(store_url, "gc", "--older-than", "4s", "--yes")
    assert done.returncode == 0, done.stderr
    assert "2 sessions deleted, 1 old one kept" in done.stdout
    assert "elder" in done.stdout and "young-kid references it" in done.stdout
    assert _ids(store_url) == {"elder", "young-kid"}


def test_gc_keeps_recent_sessions_and_rejects_a_bad_age(store_url: str) -> None:
    record(store_url, "fresh")
    kept = json.loads(invoke(store_url, "gc", "--older-than", "30d", "--json").stdout)
    assert kept["deleted"] == [] and kept["kept"] == [] and kept["unreadable"] == []
    assert _ids(store_url) == {"fresh"}
    bad = invoke(store_url, "gc", "--older-than", "30 days")
    assert bad.exit_code == 1 and "like 30d" in bad.stderr


def _imported(url: str) -> str:
    done = invoke(url, "import", "openai-chat", str(NO_TIMES), "--json")
    assert done.exit_code == 0, done.output
    (sid,) = _ids(url)
    return sid


def test_gc_counts_an_import_from_when_it_was_stored_not_from_its_source_times(store_url: str) -> None:
    sid = _imported(store_url)
    kept = invoke(store_url, "gc", "--older-than", "30d", "--yes", "--json")
    assert kept.exit_code == 0, kept.output
    assert json.loads(kept.stdout)["deleted"] == [] and _ids(store_url) == {sid}
    by_source = json.loads(invoke(store_url, "gc", "--older-than", "30d", "--by", "last-event",
                                  "--dry-run", "--json").stdout)
    assert by_source["deleted"] == [sid] and by_source["by"] == "last-event"
    assert by_source["since"] == {sid: 0}  # the source's (missing) times: 1970
    assert _ids(store_url) == {sid}


def test_gc_without_a_terminal_and_without_yes_refuses_and_deletes_nothing(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    sid = _imported(url)
    refused = run(url, "gc", "--older-than", "1d", "--by", "last-event")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        "error: gc would delete 1 session and stdin is not a terminal to confirm on: nothing deleted "
        "(see them with --dry-run, delete them with --yes)"]
    assert _ids(url) == {sid}
    done = run(url, "gc", "--older-than", "1d", "--by", "last-event", "--yes")
    assert done.returncode == 0, done.stderr
    assert _ids(url) == set()


def _on_a_terminal(url: str, answer: str, *args: str) -> str:
    """Run the command with a pseudo-terminal as stdin and stdout, answer its prompt, return its output."""
    leader, follower = pty.openpty()
    env = {**os.environ, "AGENTLOG_STORE": url, "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-m", "agentlog.cli", *args], stdin=follower, stdout=follower,
                             stderr=follower, env=env, cwd=REPO)
    os.close(follower)
    seen, answered = b"", False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        if not answered and b"[y/N]" in seen:
            os.write(leader, answer.encode() + b"\r")
            answered = True
        if child.poll() is not None and not ready:
            break
    child.wait(timeout=10)
    os.close(leader)
    return seen.decode(errors="replace").replace("\r\n", "\n")


def test_gc_lists_what_it_will_delete_and_asks_first(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    sid = _imported(url)
    declined = _on_a_terminal(url, "n", "gc", "--older-than", "1d", "--by", "last-event")
    listed = declined.split("[y/N]")[0]
    assert sid in listed and "to delete" in listed and "1970-01-01" in listed
    assert "delete 1 session?" in listed
    assert _ids(url) == {sid}
    accepted = _on_a_terminal(url, "y", "gc", "--older-than", "1d", "--by", "last-event")
    assert "1 session deleted" in accepted
    assert _ids(url) == set()
