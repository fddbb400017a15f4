"""The store-wide passes (search, stats, gc, check-upgrade) stop between two sessions when their
``stop`` callable turns true: what they return is what was done, marked ``stopped``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentlog import open_store
from agentlog.ops.gc import collect_garbage
from agentlog.ops.search import search_store
from agentlog.ops.stats import store_stats
from agentlog.ops.upgrade import check_upgrade
from tests.cli.conftest import record

SESSIONS = 6


@pytest.fixture
def url(tmp_path: Path) -> str:
    made = f"jsonl://{tmp_path / 'store'}"
    for number in range(SESSIONS):
        record(made, f"s{number}")
    return made


def after(calls: int) -> Callable[[], bool]:
    """A ``stop`` that turns true at its ``calls + 1``-th question."""
    asked: list[None] = []

    def stop() -> bool:
        asked.append(None)
        return len(asked) > calls
    return stop


@pytest.mark.parametrize("calls", [0, 2, SESSIONS])
def test_search_and_stats_return_what_they_read_before_the_stop(url: str, calls: int) -> None:
    with open_store(url, create=False) as store:
        found = search_store(store, "README", stop=after(calls))
        figures = store_stats(store, stop=after(calls))
    done = min(calls, SESSIONS)
    assert found.stopped == figures.stopped == (calls < SESSIONS)
    assert sorted({hit.session_id for hit in found.hits}) == [f"s{n}" for n in range(done)]
    assert [each.session_id for each in figures.sessions] == [f"s{n}" for n in range(done)]
    assert figures.total.sessions == done


def test_gc_stopped_while_reading_removes_nothing_and_while_removing_removes_whole_sessions(url: str) -> None:
    with open_store(url) as store:
        reading = collect_garbage(store, 1, now=2**62, stop=after(2))
        assert reading.stopped and reading.deleted == [] and len(store.list()) == SESSIONS
        removing = collect_garbage(store, 1, now=2**62, stop=after(SESSIONS + 2))  # reads all, removes 2
        assert removing.stopped and len(removing.deleted) == 2
        left = {header.id for header in store.list()}
        assert left == {f"s{n}" for n in range(SESSIONS)} - set(removing.deleted)
        for sid in left:
            assert store.inspect(sid, trust_checkpoint=False).recovery is None
        rest = collect_garbage(store, 1, now=2**62, stop=after(10 * SESSIONS))
        assert not rest.stopped and len(store.list()) == 0


def test_check_upgrade_stops_and_still_removes_its_copy(url: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    report = check_upgrade(url, stop=after(3))
    assert report.stopped and [check.session_id for check in report.sessions] == ["s0", "s1", "s2"]
    assert list(scratch.iterdir()) == []
