"""Search through a store's index gives exactly the scan's hits, whatever the text and the query."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.store.base import Store
from agentlog.store.sqlite import search as sqlite_search
from agentlog.store.sqlite.store import SqliteStore
from tests.search_sessions import TRICKY, assert_index_equals_scan, record, texts


@contextmanager
def _sqlite() -> Iterator[Store]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "db" / "sessions.db", write_delay_ms=1)
        try:
            yield store
        finally:
            store.close()


@contextmanager
def _postgres() -> Iterator[Store]:
    from tests.store.pg_worker import Schema

    schema = Schema.new()
    store = schema.store(write_delay_ms=1, pool_min=0, pool_max=2)
    try:
        yield store
    finally:
        store.close()
        schema.drop()


BACKENDS = {"sqlite": _sqlite, "sqlite-no-fts5": _sqlite, "postgres": _postgres}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "sqlite-no-fts5":
        monkeypatch.setattr(sqlite_search, "fts5_available", lambda: False)
    return str(request.param)


sessions = st.lists(st.tuples(st.lists(texts, min_size=1, max_size=5), st.booleans()), min_size=1, max_size=3)
queries = st.lists(texts.filter(lambda text: bool(text.strip())) | st.sampled_from(TRICKY).filter(str.strip),
                   min_size=1, max_size=4)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stored=sessions, asked=queries, picks=st.lists(st.integers(0, 10_000), max_size=4))
def test_index_hits_equal_scan_hits(backend: str, stored: list[tuple[list[str], bool]], asked: list[str],
                                    picks: list[int]) -> None:
    with BACKENDS[backend]() as store:
        for number, (parts, ended) in enumerate(stored):
            record(store, f"s{number}", parts, ended=ended)
        everything = " ".join(part for parts, _ in stored for part in parts)
        for pick in picks:  # substrings of stored text, so that most queries hit something
            start = pick % max(1, len(everything))
            asked.append(everything[start:start + 1 + pick % 7])
        for text in asked:
            if text.strip():
                assert_index_equals_scan(store, text)
                assert_index_equals_scan(store, text, session_ids=["s0", "missing"][: 1 + len(text) % 2])
