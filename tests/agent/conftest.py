"""Fixtures: the scripted provider of the adapter tests, and a small project for the agent's tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.conftest import provider

__all__ = ["provider", "root"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A project directory holding ``a.txt`` ("hello"), what the scripted model asks to read."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("hello\n")
    return project
