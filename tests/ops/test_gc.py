"""``collect_garbage``: never an open session, never a parent a remaining fork references."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentlog import JsonlStore, Recorder, SessionHeader
from agentlog.errors import UsageError
from agentlog.ops.gc import collect_garbage, parse_age

DAY = 86_400_000


def _session(store: JsonlStore, sid: str) -> None:
    with store.start(SessionHeader(id=sid)) as live, Recorder(live).turn() as turn:
        turn.user_message("hello")


def test_an_open_session_is_kept_even_when_old(tmp_path: Path) -> None:
    writer = JsonlStore(tmp_path / "root")
    _session(writer, "idle")
    _session(writer, "open")
    live = writer.open("open")  # another store object: as another process would hold it
    try:
        collector = JsonlStore(tmp_path / "root")
        later = 40 * DAY + live.session.events[-1].time
        planned = collect_garbage(collector, 30 * DAY, dry_run=True, now=later)
        assert planned.deleted == ["idle"] and planned.kept == [("open", "open: a writer holds it")]
        done = collect_garbage(collector, 30 * DAY, now=later)
        assert done.deleted == ["idle"] and done.kept == [("open", "open: a writer holds it")]
        assert [header.id for header in collector.list()] == ["open"]
        collector.close()
    finally:
        live.close()
        writer.close()


def test_a_chain_of_forks_is_kept_up_to_the_first_recent_descendant(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root")
    _session(store, "a")
    store.fork("a", None, "b").close()
    store.fork("b", None, "c").close()
    newest = max(event.time for event in store.read_from("c", 0).events)
    everything = collect_garbage(store, DAY, dry_run=True, now=newest + 2 * DAY)
    assert everything.deleted == ["c", "b", "a"]
    none = collect_garbage(store, DAY, dry_run=True, now=newest)
    assert none.deleted == [] and none.kept == []
    store.close()


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from("smhdw"))
def test_parse_age_reads_a_number_and_a_unit(number: int, unit: str) -> None:
    factor = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": DAY, "w": 7 * DAY}[unit]
    assert parse_age(f"{number}{unit}") == number * factor
    assert parse_age(f"{number}{unit.upper()}") == number * factor


@pytest.mark.parametrize("text", ["", "d", "30", "30x", "-1d", "1.5d", "thirty days"])
def test_parse_age_refuses_anything_else(text: str) -> None:
    with pytest.raises(UsageError, match="like 30d"):
        parse_age(text)


def test_a_dry_run_takes_no_lock_and_writes_no_file(tmp_path: Path) -> None:
    writer = JsonlStore(tmp_path / "root")
    _session(writer, "idle")
    writer.close()
    shutil.rmtree(tmp_path / "root" / ".agentlog")  # as in a store DSH wrote, or a copied one
    before = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*"))
    reader = JsonlStore(tmp_path / "root", create=False)
    planned = collect_garbage(reader, DAY, dry_run=True, now=10**15)
    reader.close()
    assert planned.deleted == ["idle"]
    assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")) == before


def test_only_the_confirmed_sessions_are_deleted(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root")
    for sid in ("a", "b", "parent"):
        _session(store, sid)
    store.fork("parent", None, "kid").close()
    later = 10**15
    done = collect_garbage(store, DAY, now=later, only=["a", "parent"])
    assert done.deleted == ["a"]
    assert sorted(done.kept) == [("b", "not on the list that was confirmed"),
                                 ("kid", "not on the list that was confirmed"),
                                 ("parent", "a fork of it could not be removed")]
    assert sorted(header.id for header in store.list()) == ["b", "kid", "parent"]
    store.close()


def test_an_import_stored_before_store_times_were_recorded_is_kept(tmp_path: Path) -> None:
    """A SQLite row from before UUIDv7 incarnations has no stored time: its source's event times
    (1970 here) say nothing about when it was imported, so it stays unless asked by last event."""
    import sqlite3
    import uuid

    from agentlog import open_store
    from agentlog.core.jsonvalue import freeze
    from tests.contract.logs import LogBuilder

    url = f"sqlite://{tmp_path}/s.db"
    log = LogBuilder(time=0)
    log.turn(1)
    with open_store(url) as store:
        origin = freeze({"importedFrom": {"format": "openai-chat"}})
        store.create(SessionHeader(id="imported", created_at=0, extra=origin))
        store.append("imported", log.events)
        store.create(SessionHeader(id="recorded", created_at=0))
        store.append("recorded", log.events)
    with sqlite3.connect(tmp_path / "s.db") as conn:  # as an older agentlog wrote them: UUIDv4
        for sid in ("imported", "recorded"):
            conn.execute("UPDATE sessions SET incarnation = ? WHERE id = ?", (str(uuid.uuid4()), sid))
    with open_store(url) as store:
        stored = collect_garbage(store, DAY, dry_run=True)
        assert stored.deleted == ["recorded"]
        assert stored.kept == [("imported", "imported before agentlog recorded when it stored a session: "
                                            "its age is unknown (--by last-event judges it by its events)")]
        assert collect_garbage(store, DAY, dry_run=True, by="last-event").deleted == ["imported", "recorded"]
