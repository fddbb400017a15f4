"""Fixtures of the PostgreSQL store tests: a fresh schema per test, and a store on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentlog.store.postgres.store import PostgresStore
from tests.store.pg_worker import Schema


@pytest.fixture
def schema() -> Iterator[Schema]:
    created = Schema.new()
    yield created
    created.drop()


@pytest.fixture
def store(schema: Schema) -> Iterator[PostgresStore]:
    opened: PostgresStore = schema.store(write_delay_ms=5, pool_min=0, pool_max=4)
    yield opened
    opened.close()
