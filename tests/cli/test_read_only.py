"""Read-only commands never create or change a file: every byte of the store is the same after each,
also on a read-only mount."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog import SessionHeader
from agentlog.cli.main import cli
from agentlog.store.urls import open_store
from tests.contract.logs import LogBuilder

READ_ONLY = (("list",), ("list", "--json"), ("show", "s1"), ("inspect", "s1"), ("inspect", "open"),
             ("verify", "s1"), ("verify", "open"))


def _tree(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file and directory under ``root``: mode, and a file's mtime and bytes.

    A directory's mtime is left out: reading a WAL database has SQLite's ``-wal``/``-shm`` beside
    it for the length of the read (removed at close), which touches the directory.
    """
    tree: dict[str, tuple[int, int, bytes]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if path.is_dir():
            tree[str(path.relative_to(root))] = (info.st_mode, 0, b"")
        else:
            tree[str(path.relative_to(root))] = (info.st_mode, info.st_mtime_ns, path.read_bytes())
    return tree


def _cli(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", url, *args])
    return result.exit_code, result.output


@pytest.fixture(params=["jsonl://{tmp}/root", "jsonl://{tmp}/root?compression=none", "sqlite://{tmp}/db/s.db"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(request.param).format(tmp=tmp_path)


def test_read_only_commands_leave_every_file_as_it_was(url: str, tmp_path: Path) -> None:
    closed, interrupted = LogBuilder(), LogBuilder()
    closed.turn(1)
    interrupted.turn(1, close=False)  # an open turn: a writer would repair it
    with open_store(url) as store:
        for sid, log in (("s1", closed), ("open", interrupted)):
            store.create(SessionHeader(id=sid, created_at=1000, cwd="/work"))
            store.append(sid, log.events)
    before = _tree(tmp_path)
    for args in READ_ONLY:
        status, output = _cli(url, *args)
        assert status in (0, 1, 2), output
        assert "Traceback" not in output
        assert _tree(tmp_path) == before, args


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_reading_a_missing_store_says_so_and_creates_nothing(scheme: str, tmp_path: Path) -> None:
    where = tmp_path / "nowhere" / ("s.db" if scheme == "sqlite" else "root")
    for args in READ_ONLY:
        status, output = _cli(f"{scheme}://{where}", *args)
        assert status == 1
        assert f"no store at {where}" in output and "Traceback" not in output
    assert list(tmp_path.iterdir()) == []


def test_reading_an_empty_sqlite_file_does_not_initialise_it(tmp_path: Path) -> None:
    db = tmp_path / "db" / "s.db"
    db.parent.mkdir(mode=0o700)
    db.write_bytes(b"")
    os.chmod(db, 0o600)
    before = _tree(tmp_path)
    for args in READ_ONLY:
        status, output = _cli(f"sqlite://{db}", *args)
        assert status == 1
        assert "empty" in output and "Traceback" not in output
    assert _tree(tmp_path) == before
    assert db.read_bytes() == b""


def test_read_only_commands_on_postgres_neither_create_nor_change_the_schema() -> None:
    from tests.store.pg_worker import Schema

    schema = Schema.new()
    try:
        for args in READ_ONLY:
            status, output = _cli(schema.url, *args)
            assert status == 1
            assert f'no store in PostgreSQL schema "{schema.name}"' in output and "Traceback" not in output
        assert schema.sql("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema.name,)) == []
        closed, interrupted = LogBuilder(), LogBuilder()
        closed.turn(1)
        interrupted.turn(1, close=False)
        with open_store(schema.url) as store:
            for sid, log in (("s1", closed), ("open", interrupted)):
                store.create(SessionHeader(id=sid, created_at=1000, cwd="/work"))
                store.append(sid, log.events)
        dump = "SELECT session_id, seq, type FROM {s}.events ORDER BY session_id, seq"
        before = (schema.sql(dump), schema.sql("SELECT * FROM {s}.sessions ORDER BY id"))
        for args in READ_ONLY:
            assert _cli(schema.url, *args)[0] in (0, 1, 2)
        assert (schema.sql(dump), schema.sql("SELECT * FROM {s}.sessions ORDER BY id")) == before
    finally:
        schema.drop()


EVERY_READ = (("list",), ("list", "--json"), ("show", "s1"), ("show", "open"), ("inspect", "s1"),
              ("inspect", "open"), ("verify", "s1"), ("verify", "open"), ("verify", "dead"),
              ("search", "README"), ("stats",), ("stats", "s1"), ("export", "s1"), ("export", "open"),
              ("audit", "s1"), ("tail", "s1"), ("tail", "open"), ("gc", "--older-than", "1s", "--dry-run"),
              ("gc", "--older-than", "1s", "--by", "last-event", "--dry-run"), ("check-upgrade",))
"""Every command that only reads (``tail`` without ``-f``; ``gc`` and ``check-upgrade`` included)."""

_DEAD_WRITER = """
import sys, time
from agentlog import Recorder, SessionHeader, open_store
store = open_store(sys.argv[1])
live = store.start(SessionHeader(id="dead", cwd="/work"))
with Recorder(live).turn() as turn:
    turn.user_message("written, committed, then the writer was killed: what is in README.md?")
live.flush()
print("ready", flush=True)
time.sleep(600)
"""


def _digest(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file and directory under ``root`` (names, so a new file shows): mode, a file's mtime and
    the sha256 of its bytes."""
    import hashlib

    return {str(path.relative_to(root)): (path.lstat().st_mode, 0, "") if path.is_dir() else
            (path.lstat().st_mode, path.lstat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
            for path in sorted(root.rglob("*"))}


def _killed_writer(url: str) -> None:
    """A writer that committed a session and was SIGKILLed before it closed (SQLite: its WAL stays)."""
    import signal
    import subprocess
    import sys

    command = [sys.executable, "-c", _DEAD_WRITER, url]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)


def test_every_read_only_command_changes_no_byte_of_the_store(url: str, tmp_path: Path) -> None:
    from tests.cli.conftest import crash, record

    record(url, "s1")
    crash(url, "open")
    _killed_writer(url)
    if url.startswith("sqlite"):
        assert (tmp_path / "db" / "s.db-wal").stat().st_size > 0  # the dead writer's commits are there only
    time.sleep(1.1)  # every session is older than gc's 1s
    before = _digest(tmp_path)
    for args in EVERY_READ:
        status, output = _cli(url, *args)
        assert status in (0, 1, 2), (args, output)
        assert "Traceback" not in output, (args, output)
        assert _digest(tmp_path) == before, args
    status, output = _cli(url, "list")
    assert "dead" in output  # what the dead writer committed is read, from its WAL


def test_check_upgrade_leaves_no_wal_or_shm_beside_the_database(tmp_path: Path) -> None:
    from tests.cli.conftest import record

    url = f"sqlite://{tmp_path}/db/s.db"
    record(url, "s1")
    before = _digest(tmp_path)
    status, output = _cli(url, "check-upgrade")
    assert status == 0, output
    assert _digest(tmp_path) == before  # no s.db-wal, no s.db-shm


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """``(writable, read_only)``: one directory, and a read-only bind mount of it (root ignores mode
    bits, not a read-only mount). Skipped where this process may not mount."""
    import subprocess

    writable, mounted = tmp_path / "rw", tmp_path / "ro"
    writable.mkdir()
    mounted.mkdir()
    bound = subprocess.run(["mount", "--bind", str(writable), str(mounted)], capture_output=True, text=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bound.stderr.strip()}")
    try:
        remounted = subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], capture_output=True,
                                   text=True)
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {remounted.stderr.strip()}")
        yield writable, mounted
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


@pytest.mark.parametrize("kind", ["jsonl", "jsonl-raw", "sqlite", "sqlite-dead-writer"])
def test_a_store_on_a_read_only_mount_is_read(read_only_mount: tuple[Path, Path], kind: str) -> None:
    from tests.cli.conftest import crash, record

    writable, mounted = read_only_mount
    url = {"jsonl": "jsonl://{}/root", "jsonl-raw": "jsonl://{}/root?compression=none"}.get(
        kind, "sqlite://{}/db/s.db")
    record(url.format(writable), "s1")
    crash(url.format(writable), "open")
    if kind == "sqlite-dead-writer":
        _killed_writer(url.format(writable))
    with pytest.raises(OSError):
        (mounted / "probe").write_bytes(b"")  # the mount is read-only, even for root
    read_only = url.format(mounted)
    before = _digest(writable)
    status, output = _cli(read_only, "list")
    assert status == 0, output
    assert "s1" in output and "open" in output and ("dead" in output) == (kind == "sqlite-dead-writer")
    for args in EVERY_READ:
        status, output = _cli(read_only, *args)
        assert "Traceback" not in output and "OperationalError" not in output, (args, output)
        assert status in (0, 1, 2), (args, output)
    for args in (("show", "s1"), ("verify", "s1"), ("check-upgrade",), ("search", "README")):
        status, output = _cli(read_only, *args)
        assert status == 0, (args, output)
    assert _digest(writable) == before


def test_check_upgrade_reads_a_database_on_a_read_only_mount(read_only_mount: tuple[Path, Path]) -> None:
    """It raised a raw ``sqlite3.OperationalError`` traceback: the copy's source was opened ``mode=ro``."""
    from tests.cli.conftest import record, run

    writable, mounted = read_only_mount
    record(f"sqlite://{writable}/s.db", "s1")
    done = run(f"sqlite://{mounted}/s.db", "check-upgrade", "--json")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True and [check["id"] for check in report["sessions"]] == ["s1"]
