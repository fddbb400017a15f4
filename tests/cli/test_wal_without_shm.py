"""A SQLite store whose ``-wal`` lies beside it without its ``-shm`` (copied without it, say).

Opened read-write, SQLite would rebuild the ``-shm``, fold the WAL into the database at close
and delete it: ``agentlog list`` changed the store's bytes (DESIGN 8b). Opened with
``immutable=1`` it would miss what the WAL holds. A read-only command now refuses, naming the
files and what to do, and changes no byte; the first writer folds the WAL in, losing nothing.
An empty WAL without its ``-shm`` holds no commit: it is read, untouched.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from agentlog import open_store
from tests.cli.test_read_only import EVERY_READ, _cli, _digest, _killed_writer


def test_read_only_commands_refuse_a_wal_without_its_shm_and_change_no_byte(tmp_path: Path) -> None:
    from tests.cli.conftest import crash, record

    url = f"sqlite://{tmp_path}/db/s.db"
    record(url, "s1")
    crash(url, "open")
    _killed_writer(url)
    wal, shm = tmp_path / "db" / "s.db-wal", tmp_path / "db" / "s.db-shm"
    assert wal.stat().st_size > 0  # the dead writer's commits are there only
    os.unlink(shm)  # the store copied without its -shm
    time.sleep(1.1)  # every session is older than gc's 1s
    before = _digest(tmp_path)
    for args in EVERY_READ:
        status, output = _cli(url, *args)
        assert status in (1, 2), (args, output)
        assert "Traceback" not in output, (args, output)
        if args[0] != "verify" and status == 1:
            assert "s.db-wal lies beside the database without s.db-shm" in output, (args, output)
        assert _digest(tmp_path) == before, args
    with open_store(url) as store:  # a writer folds the WAL in: nothing the dead writer committed is lost
        assert {header.id for header in store.list()} == {"s1", "open", "dead"}
    status, output = _cli(url, "list")
    assert status == 0 and "dead" in output


def test_an_empty_wal_without_its_shm_is_read_untouched(tmp_path: Path) -> None:
    from tests.cli.conftest import record

    url = f"sqlite://{tmp_path}/db/s.db"
    record(url, "s1")
    (tmp_path / "db" / "s.db-wal").write_bytes(b"")
    before = _digest(tmp_path)
    status, output = _cli(url, "list")
    assert status == 0 and "s1" in output, output
    assert _digest(tmp_path) == before
