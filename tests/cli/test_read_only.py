"""Read-only commands (``list``, ``show``, ``inspect``, ``verify``) never create or change a file."""

from __future__ import annotations

import os
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
