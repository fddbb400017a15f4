"""``agentlog gc``: idle sessions go, forks' parents and open sessions stay, children before parents."""

from __future__ import annotations

import json
import time

from agentlog import open_store
from tests.cli.conftest import invoke, record, run


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
    done = run(store_url, "gc", "--older-than", "4s")
    assert done.returncode == 0, done.stderr
    assert "2 sessions deleted, 1 old ones kept" in done.stdout
    assert "elder" in done.stdout and "young-kid references it" in done.stdout
    assert _ids(store_url) == {"elder", "young-kid"}


def test_gc_keeps_recent_sessions_and_rejects_a_bad_age(store_url: str) -> None:
    record(store_url, "fresh")
    kept = json.loads(invoke(store_url, "gc", "--older-than", "30d", "--json").stdout)
    assert kept["deleted"] == [] and kept["kept"] == [] and kept["unreadable"] == []
    assert _ids(store_url) == {"fresh"}
    bad = invoke(store_url, "gc", "--older-than", "30 days")
    assert bad.exit_code == 1 and "like 30d" in bad.stderr
