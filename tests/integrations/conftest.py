"""Fixtures: a scripted provider on 127.0.0.1 per test; the store contract suite's ``open_store``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.contract.conftest import _drop_postgres_schemas, open_store  # noqa: F401 (store fixtures, by backend)
from tests.integrations.server import Provider, serve


@pytest.fixture
def provider() -> Iterator[Provider]:
    yield from serve()
