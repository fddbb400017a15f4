"""``save_imported(replace=True)`` / ``agentlog import --replace`` never leaves neither copy.

The new session is written whole under a stand-in id before the old one is deleted; a refusal
halfway through the new batch, a fork that references the old session, or a SIGKILL between
the delete and the final write each leave a complete session behind (issue 13 holes).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog import AgentlogError, Event, UsageError, open_store
from agentlog.cli.main import cli
from agentlog.io.importers import Imported, save_imported
from agentlog.io.importers.writing import REPLACING_KEY, stand_in_id
from tests.io.importers.helpers import FIXTURES, import_file

SMALL = FIXTURES / "claude-code" / "small.jsonl"
REPO = Path(__file__).resolve().parents[2]


def session() -> Imported:
    return import_file("claude-code", SMALL)[0]


def broken_halfway(imported: Imported) -> Imported:
    """The same session with a message the store refuses in the middle of its batch."""
    events = list(imported.events)
    middle = next(i for i, e in enumerate(events) if e.type == "user/message" and i > len(events) // 3)
    bad = events[middle].to_wire()
    bad["data"] = {**bad["data"], "content": 7}
    events[middle] = Event.from_wire(bad)
    return dataclasses.replace(imported, events=tuple(events))


def stored_ids(store_url: str) -> list[str]:
    with open_store(store_url) as store:
        return sorted(header.id for header in store.list())


def test_a_replacement_refused_halfway_keeps_the_old_session(store_url: str) -> None:
    old = session()
    with open_store(store_url) as store:
        assert save_imported(store, old) == "imported"
        with pytest.raises(AgentlogError) as refused:
            save_imported(store, broken_halfway(old), replace=True)
        assert refused.value.session_id == stand_in_id(old.header.id)
    assert stored_ids(store_url) == [old.header.id]
    with open_store(store_url) as store:
        assert list(store.load(old.header.id).events) == list(old.events)
        assert save_imported(store, old, replace=True) == "replaced"  # nothing was left in the way
    assert stored_ids(store_url) == [old.header.id]


def test_replace_of_a_session_with_forks_is_refused_and_changes_nothing(store_url: str) -> None:
    old = session()
    with open_store(store_url) as store:
        save_imported(store, old)
        store.fork(old.header.id, len(old.events) - 1, "child").close()
        child = list(store.load("child").events)
        with pytest.raises(UsageError, match=r"cannot replace: fork children reference this session "
                                             r"\(child\).*agentlog materialize") as refused:
            save_imported(store, old, replace=True)
        assert refused.value.session_id == old.header.id
        assert list(store.load(old.header.id).events) == list(old.events)
        assert list(store.load("child").events) == child
        store.materialize("child")
        assert save_imported(store, old, replace=True) == "replaced"
        assert list(store.load("child").events) == child
    assert stored_ids(store_url) == sorted(["child", old.header.id])


def test_a_stand_in_id_taken_by_another_session_is_refused(store_url: str) -> None:
    old = session()
    with open_store(store_url) as store:
        save_imported(store, old)
        taken = dataclasses.replace(old.header, id=stand_in_id(old.header.id))
        other = dataclasses.replace(old, header=taken)
        save_imported(store, other)
        with pytest.raises(UsageError, match=r"stand-in id .* is taken by another session"):
            save_imported(store, old, replace=True)
        assert list(store.load(old.header.id).events) == list(old.events)


CRASH = textwrap.dedent("""
    import os, signal, sys
    from agentlog import open_store
    from agentlog.io.importers import save_imported
    from tests.io.importers.helpers import import_file
    from pathlib import Path

    store_url, path = sys.argv[1], Path(sys.argv[2])
    imported = import_file("claude-code", path)[0]
    store = open_store(store_url)
    delete = store.delete

    def delete_then_die(session_id):
        delete(session_id)
        if session_id == imported.header.id:  # the old copy is gone, the new one not yet written
            os.kill(os.getpid(), signal.SIGKILL)

    store.delete = delete_then_die
    save_imported(store, imported, replace=True)
""")


def test_a_replacement_killed_after_the_delete_leaves_the_new_session_and_a_rerun_finishes(
    store_url: str,
) -> None:
    imported = session()
    with open_store(store_url) as store:
        save_imported(store, imported)
    done = subprocess.run([sys.executable, "-c", CRASH, store_url, str(SMALL)], cwd=REPO, timeout=120,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == -signal.SIGKILL, done.stderr
    stand_in = stand_in_id(imported.header.id)
    assert stored_ids(store_url) == [stand_in]  # never neither: the complete new session is there
    with open_store(store_url) as store:
        kept = store.load(stand_in)
        assert kept.header.extra[REPLACING_KEY] == imported.header.id
        assert list(kept.events) == list(imported.events)
    command = ["--store", store_url, "import", "claude-code", str(SMALL), "--replace", "--json"]
    rerun = CliRunner().invoke(cli, command, catch_exceptions=False)
    assert rerun.exit_code == 0, rerun.output
    assert stored_ids(store_url) == sorted([imported.header.id, "cc-small-agent-s1"])
    with open_store(store_url) as store:
        assert list(store.load(imported.header.id).events) == list(imported.events)
