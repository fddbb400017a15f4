"""Fixtures of the compaction tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.compaction.fake_openai import FakeServer


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.stop.set()
        fake.httpd.shutdown()
        fake.httpd.server_close()
        fake.thread.join(5)
