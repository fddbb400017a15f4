"""A JSONL store never writes, truncates or unlinks through a symlink planted below its root:
``.agentlog``, ``.agentlog/locks``, a session's ``forks`` directory, or a project directory linked
by someone else (or to a directory others may write) is refused, naming it, and the files it
points at stay as they were. (The root itself may be a symlink: the user names it; a project
directory this user moved and linked back is followed, as DSH does: tests/store/jsonl/test_store.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentlog import SessionHeader, StoreError
from agentlog.store.jsonl.store import JsonlStore
from tests.io.importers.helpers import FIXTURES
from tests.store.jsonl.test_store import HEADER, jsonl, make_log, put


def _victims(outside: Path, names: list[str]) -> dict[str, bytes | None]:
    outside.mkdir(exist_ok=True)
    for name in names:
        (outside / name).write_bytes(b"precious " + name.encode())
    return snapshot(outside)


def snapshot(directory: Path) -> dict[str, bytes | None]:
    """Every entry under ``directory``: a file's bytes, None for a directory."""
    return {str(p.relative_to(directory)): p.read_bytes() if p.is_file() else None
            for p in sorted(directory.rglob("*"))}


@pytest.mark.parametrize("link", [".agentlog", ".agentlog/locks"])
def test_a_symlinked_lock_directory_is_refused_by_writes_and_deletes(tmp_path: Path, link: str) -> None:
    root = tmp_path / "root"
    store = jsonl(root)
    put(store, HEADER, make_log(1).events)
    planted = root / link
    outside = tmp_path / "outside"
    before = _victims(outside, ["s1.lock", "s1.refs", "s2.lock"] if link.endswith("locks") else ["s1"])
    if link == ".agentlog/locks":
        for entry in planted.iterdir():
            entry.unlink()
        planted.rmdir()
    else:
        for entry in (planted / "locks").iterdir():
            entry.unlink()
        (planted / "locks").rmdir()
        planted.rmdir()
    planted.symlink_to(outside, target_is_directory=True)
    fresh = jsonl(root)
    attempts = [lambda: fresh.start(SessionHeader(id="s2", cwd="/p")), lambda: fresh.open("s1"),
                lambda: fresh.delete("s1")]
    for attempt in attempts:
        with pytest.raises(StoreError, match="symlink") as refused:
            attempt()
        assert str(planted) in str(refused.value)
    assert snapshot(outside) == before
    assert [h.id for h in fresh.list()] == ["s1"]  # reading needs no lock: still listed


@pytest.mark.parametrize("planted", ["another user's link", "a directory others may write"])
def test_a_planted_project_link_is_refused_and_nothing_outside_changes(tmp_path: Path, planted: str) -> None:
    root = tmp_path / "root"
    store = jsonl(root)
    put(store, HEADER, make_log(1).events)
    project = Path(store.locate(HEADER)).parent.parent
    outside = tmp_path / "outside"
    project.rename(outside)  # the session now lives outside the root, reached through the link
    project.symlink_to(outside, target_is_directory=True)
    if planted == "another user's link":
        os.lchown(project, 65534, 65534)  # nobody's (the tests run as root, which may give it away)
    else:
        outside.chmod(0o777)
    before = snapshot(outside)
    fresh = jsonl(root)
    other = SessionHeader(id="s2", cwd=HEADER.cwd)
    attempts = [lambda: put(fresh, other, make_log(1).events), lambda: fresh.delete("s1"),
                lambda: fresh.load("s1"), lambda: fresh.append("s1", make_log(1, start=0).events),
                fresh.list]
    for attempt in attempts:
        with pytest.raises(StoreError, match="symlink") as refused:
            attempt()
        assert str(project) in str(refused.value)
    assert snapshot(outside) == before
    unrelated = SessionHeader(id="s3", cwd="/elsewhere")
    put(fresh, unrelated, make_log(1).events)  # the rest of the root is still usable
    assert len(fresh.load("s3").events) == len(make_log(1).events)


def test_a_symlinked_forks_directory_is_never_written_through(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = jsonl(root)
    put(store, HEADER, make_log(1).events)
    outside = tmp_path / "outside"
    before = _victims(outside, ["child"])
    forks = Path(store.locate(HEADER)).parent / "forks"
    forks.symlink_to(outside, target_is_directory=True)
    with pytest.raises(StoreError, match="symlink") as refused:
        live = store.fork("s1", child_id="child")
        try:
            live.flush()
        finally:
            live.close()
    assert str(forks) in str(refused.value)
    assert snapshot(outside) == before


def test_a_symlinked_root_is_the_users_choice_and_works(tmp_path: Path) -> None:
    real = tmp_path / "disk" / "sessions"
    real.mkdir(parents=True)
    (tmp_path / "root").symlink_to(real, target_is_directory=True)
    store = jsonl(tmp_path / "root")
    put(store, HEADER, make_log(1).events)
    assert len(JsonlStore(tmp_path / "root").load("s1").events) == len(make_log(1).events)
    store.delete("s1")
    assert store.list() == []


def test_the_cli_import_refuses_a_symlinked_lock_directory(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / ".agentlog").mkdir(parents=True)
    outside = tmp_path / "outside"
    before = _victims(outside, ["x"])
    (root / ".agentlog" / "locks").symlink_to(outside, target_is_directory=True)
    done = subprocess.run([sys.executable, "-m", "agentlog.cli", "--store", f"jsonl://{root}", "import",
                           "openai-chat", str(FIXTURES / "openai-chat" / "small.json")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "symlink" in done.stderr and str(root / ".agentlog" / "locks") in done.stderr
    assert snapshot(outside) == before
