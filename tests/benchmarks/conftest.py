"""Fixtures of the benchmark tests: the loopback OpenAI-compatible endpoint of the compaction tests."""

from __future__ import annotations

from tests.compaction.conftest import server

__all__ = ["server"]
