"""Fixtures: a scripted provider on 127.0.0.1 per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.server import Provider, serve


@pytest.fixture
def provider() -> Iterator[Provider]:
    yield from serve()
