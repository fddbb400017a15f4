"""Fixtures: a scripted provider on 127.0.0.1 per test; the store contract suite's ``open_store``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.server import Provider, serve
from tests.contract.conftest import _drop_postgres_schemas, open_store  # noqa: F401 (store fixtures, by backend)


@pytest.fixture
def provider() -> Iterator[Provider]:
    yield from serve()
