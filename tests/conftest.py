"""Shared fixtures: the ``../shared/data`` corpus beside the repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def shared_data_dir() -> Path:
    """``../shared/data``; skip when absent, but fail under CI where it must exist."""
    if SHARED_DATA.is_dir():
        return SHARED_DATA
    if os.environ.get("CI"):
        pytest.fail(f"shared data corpus missing at {SHARED_DATA} (required under CI)")
    pytest.skip(f"shared data corpus not found at {SHARED_DATA}")


@pytest.fixture
def shared_data() -> Path:
    """The real session files other tools wrote (``../shared/data``)."""
    return shared_data_dir()


@pytest.fixture
def dsh_fixtures(shared_data: Path) -> Path:
    """Session files written by DeepSeek Harness itself, with golden outputs."""
    path = shared_data / "dsh-fixtures"
    if not path.is_dir():
        pytest.fail(f"{path} is missing from the shared corpus")
    return path
