"""Every store backend runs the same contract suite: add a backend with one line below."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import pytest

from agentlog.store.base import Store
from agentlog.store.memory import MemoryStore

StoreFactory = Callable[[], Store]


def _memory(tmp: Path) -> StoreFactory:
    first = MemoryStore(write_delay_ms=20)
    return lambda: first.reopen()


def _jsonl(compression: Literal["zstd", "none"]) -> Callable[[Path], StoreFactory]:
    def factory(tmp: Path) -> StoreFactory:
        from agentlog.store.jsonl.store import JsonlStore

        return lambda: JsonlStore(tmp / "root", compression=compression, write_delay_ms=20)

    return factory


_POSTGRES_SCHEMAS: list[Callable[[], None]] = []


def _postgres(tmp: Path) -> StoreFactory:
    """A fresh schema per test on the test server, dropped by ``_drop_postgres_schemas``."""
    from tests.store.pg_worker import Schema

    schema = Schema.new()
    _POSTGRES_SCHEMAS.append(schema.drop)
    return lambda: schema.store(write_delay_ms=20, pool_min=0, pool_max=2)


@pytest.fixture(autouse=True)
def _drop_postgres_schemas() -> Iterator[None]:
    """Drop the test's PostgreSQL schemas after its stores have closed."""
    yield
    while _POSTGRES_SCHEMAS:
        _POSTGRES_SCHEMAS.pop()()


def _sqlite(tmp: Path) -> StoreFactory:
    from agentlog.store.sqlite.store import SqliteStore

    return lambda: SqliteStore(tmp / "db" / "sessions.db", write_delay_ms=20)


BACKENDS: dict[str, Callable[[Path], StoreFactory]] = {
    "memory": _memory,
    "jsonl-raw": _jsonl("none"),
    "jsonl-zstd": _jsonl("zstd"),
    "postgres": _postgres,
    "sqlite": _sqlite,
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_store(backend: str, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory: each call opens a fresh store instance over the same storage (a 'restart')."""
    make = BACKENDS[backend](tmp_path)
    opened: list[Store] = []

    def factory() -> Store:
        opened.append(make())
        return opened[-1]

    yield factory
    for instance in opened:
        instance.close()


@pytest.fixture
def store(open_store: StoreFactory) -> Store:
    return open_store()
