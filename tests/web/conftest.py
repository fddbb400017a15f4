"""One store of every kind of session, built once for the viewer tests, and an HTTP client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agentlog import open_store
from agentlog.store.base import Store
from agentlog.web import create_app
from tests.web.stores import build_all


@pytest.fixture(scope="session")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_all(f"jsonl://{tmp_path_factory.mktemp('viewer') / 'store'}")


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with open_store(store_url, create=False) as opened:
        yield opened


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store, index_in_background=False), base_url="http://127.0.0.1") as http:
        yield http


def root_of(url: str) -> Path:
    return Path(url.removeprefix("jsonl://"))
