"""Fixtures: the scripted provider of the adapter tests, one per test."""

from __future__ import annotations

from tests.adapters.conftest import provider

__all__ = ["provider"]
