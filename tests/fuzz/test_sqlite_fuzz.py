"""Fuzz the SQLite store's readers with damaged event and session rows (random values, bytes, bad UTF-8)."""

from __future__ import annotations

import functools
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from benchmarks.workload import record_workload
from hypothesis import assume, given
from hypothesis import strategies as st

from agentlog.store.sqlite.store import SqliteStore
from tests.fuzz.harness import LONG, SHORT, check_loaded, outcome, read_only_readers
from tests.fuzz.mutations import mutated

SESSION = "fz"
_EVENT_COLUMNS = ("seq", "type", "time", "data", "source_event_seqs", "surface_op", "ignorable", "op_first")
_SESSION_COLUMNS = ("id", "version", "created_at", "cwd", "parent_session", "seed_length", "origin",
                    "delegation_depth", "agent_preset", "extra", "base_key", "base_length", "revision")


@functools.cache
def _seed_database() -> bytes:
    """A closed two-turn session and a third, interrupted turn (packed rows included)."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "seed.db")
        store = SqliteStore(path)
        live = store.start(SESSION)
        record_workload(live.session, 2, seed=3)
        live.session.append("turn/start", {"turn": 3})
        live.flush()
        live.close()
        store.close()
        assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
        return path.read_bytes()


@functools.cache
def _rows() -> list[tuple[Any, ...]]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "seed.db")
        path.write_bytes(_seed_database())
        conn = sqlite3.connect(path)
        try:
            query = f"SELECT rowid, {', '.join(_EVENT_COLUMNS)} FROM events ORDER BY seq"
            return conn.execute(query).fetchall()
        finally:
            conn.close()


_SCALARS = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(), st.text(max_size=20),
                     st.binary(max_size=20))


@st.composite
def _damage(draw: st.DrawFn) -> tuple[str, tuple[Any, ...]]:
    """One UPDATE/DELETE (SQL text, parameters) that damages the seed database."""
    rows = _rows()
    row = draw(st.sampled_from(rows))
    kind = draw(st.sampled_from(["event", "event", "event", "bytes", "delete", "session"]))
    if kind == "delete":
        return "DELETE FROM events WHERE rowid = ?", (row[0],)
    if kind == "session":
        column = draw(st.sampled_from(_SESSION_COLUMNS))
        return f"UPDATE sessions SET {column} = ?", (draw(_SCALARS),)
    index = draw(st.integers(1, len(_EVENT_COLUMNS)))
    column = _EVENT_COLUMNS[index - 1]
    if kind == "event":
        return f"UPDATE events SET {column} = ? WHERE rowid = ?", (draw(_SCALARS), row[0])
    current = row[index]
    raw = current.encode("utf-8") if isinstance(current, str) else current if type(current) is bytes else b""
    damaged = draw(mutated(raw))
    if isinstance(current, str):  # TEXT holding arbitrary bytes, invalid UTF-8 included
        return f"UPDATE events SET {column} = CAST(? AS TEXT) WHERE rowid = ?", (damaged, row[0])
    return f"UPDATE events SET {column} = ? WHERE rowid = ?", (damaged, row[0])


def _check_damaged_database(damage: tuple[str, tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "fuzz.db")
        path.write_bytes(_seed_database())
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA ignore_check_constraints = ON")
        try:
            conn.execute(*damage)
        except sqlite3.Error:
            assume(False)  # STRICT typing refused the value: not a reachable state
        finally:
            conn.close()
        path.chmod(0o600)
        damaged = path.read_bytes()
        store = SqliteStore(path)
        try:
            for read, named in read_only_readers(store, SESSION, raw=False):
                outcome(read, named)
                assert path.read_bytes() == damaged, "a read-only reader changed the database"
        finally:
            store.close()
        copy = Path(directory, "copy.db")
        shutil.copyfile(path, copy)
        copy.chmod(0o600)
        store = SqliteStore(copy)
        try:
            loaded = outcome(lambda: store.load(SESSION), SESSION)
            if loaded is not None:
                check_loaded(loaded)
        finally:
            store.close()


def test_damaged_rows_load_or_refuse_with_a_location() -> None:
    SHORT(given(_damage())(_check_damaged_database))()


@pytest.mark.slow
def test_damaged_rows_long_run() -> None:
    LONG(given(_damage())(_check_damaged_database))()
