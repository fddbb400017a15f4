"""Exact inputs the fuzzers found, pinned: each failed before its fix."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentlog import AgentlogError, SessionCorruptionError, SessionFormatUnsupportedError
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.sqlite.store import SqliteStore


def _one_turn_database(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    store = SqliteStore(path)
    live = store.start("fz")
    live.session.append("turn/start", {"turn": 1})
    live.flush()
    live.close()
    store.close()
    return path


@pytest.mark.parametrize(("column", "value", "error"), [
    ("extra", 0, SessionCorruptionError),
    ("origin", 0, SessionCorruptionError),
    ("created_at", -1, SessionCorruptionError),
    ("version", 1, SessionFormatUnsupportedError),
])
def test_a_damaged_sqlite_session_row_is_refused_naming_the_database_file(
    tmp_path: Path, column: str, value: object, error: type[Exception],
) -> None:
    path = _one_turn_database(tmp_path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"UPDATE sessions SET {column} = ?", (value,))
    conn.close()
    store = SqliteStore(path)
    try:
        reads = (lambda: store.inspect("fz"), lambda: store.read_from("fz", 0), lambda: store.load("fz"),
                 store.list)
        for read in reads:
            with pytest.raises(error) as caught:
                read()
            assert caught.value.session_id == "fz"
            assert caught.value.file == str(path)
    finally:
        store.close()


def test_a_dangling_sqlite_fork_reference_is_refused_naming_the_database_file(tmp_path: Path) -> None:
    path = _one_turn_database(tmp_path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE sessions SET base_key = 0, base_length = 0")
    conn.close()
    store = SqliteStore(path)
    try:
        with pytest.raises(SessionCorruptionError, match="fork parent reference is missing") as caught:
            store.inspect("fz")
        assert (caught.value.session_id, caught.value.file) == ("fz", str(path))
    finally:
        store.close()


def test_a_load_that_succeeds_never_commits_a_repair_the_next_load_refuses(tmp_path: Path) -> None:
    """Found by the raw JSONL fuzzer (a flipped byte in DSH's basic-T5 fixture, then a truncation)."""
    header = b'{"type":"session","version":0,"id":"fx-basic-t5","createdAt":1767225600000,' \
             b'"cwd":"/home/user/project","delegationDepth":0}\n'
    path = tmp_path / "--home-user-project--" / "fx-basic-t5" / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(header + b'{"type":"turn/start","seq":0,"time":1767225601500,"data":{"uurn":1}}\n')
    store = JsonlStore(tmp_path, compression="none")
    try:
        first = store.load("fx-basic-t5")
    except AgentlogError:
        return  # refusing the damaged log outright is fine
    finally:
        store.close()
    again = JsonlStore(tmp_path, compression="none")
    try:
        assert list(again.load("fx-basic-t5").events) == list(first.events)
    finally:
        again.close()
