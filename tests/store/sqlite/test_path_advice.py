"""The SQLite store's advice for an unsafe directory: never chmod a shared one such as /tmp."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from agentlog.errors import StoreError
from agentlog.store.sqlite.store import SqliteStore


def test_a_database_in_the_shared_temp_dir_is_told_to_use_a_private_directory() -> None:
    shared = tempfile.gettempdir()
    info = os.stat(shared)
    if info.st_uid == os.geteuid() and not info.st_mode & 0o022:
        pytest.skip(f"{shared} is private to this user here")
    path = os.path.join(shared, f"agentlog-advice-{os.getpid()}.db")
    with pytest.raises(StoreError) as caught:
        SqliteStore(path)
    message = str(caught.value)
    assert "private directory" in message and "mkdir -m 700" in message
    assert "chmod 700 " + shared not in message and f"chmod go-w {shared}" not in message
    assert not os.path.exists(path)  # refused before anything was created


def test_a_sticky_shared_directory_of_ones_own_is_not_chmodded_either(tmp_path: Path) -> None:
    shared = tmp_path / "drop"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(StoreError, match="private directory instead"):
        SqliteStore(str(shared / "s.db"))


def test_an_own_group_writable_directory_is_told_to_drop_group_write(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o775)
    with pytest.raises(StoreError, match=f"chmod go-w {loose}"):
        SqliteStore(str(loose / "s.db"))
    assert stat.S_IMODE(loose.stat().st_mode) == 0o775  # advice only: nothing changed


def test_a_database_under_a_directory_name_that_is_not_utf8_opens(tmp_path: Path) -> None:
    from agentlog import Recorder, open_store

    directory = os.fsencode(tmp_path) + b"/st\xff"
    os.mkdir(directory, 0o700)
    path = os.fsdecode(directory + b"/s.db")  # "st\udcff": as a shell-given argument arrives
    with open_store(f"sqlite://{path}") as store, store.start("s") as live, Recorder(live).turn() as turn:
        turn.user_message("hi")
    assert os.path.isfile(directory + b"/s.db")  # that very file, not a re-encoded name
    with open_store(f"sqlite://{path}") as store:
        assert [event.type for event in store.load("s").events][:2] == ["turn/start", "user/message"]
