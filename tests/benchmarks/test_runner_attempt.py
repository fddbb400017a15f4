"""A failing bench phase is recorded and reported, whatever its error message holds."""

from __future__ import annotations

import io
from pathlib import Path

from benchmarks.runner import Context, Options, SuiteResult
from rich.console import Console

from agentlog.errors import StoreError


def test_an_error_naming_a_path_in_brackets_is_reported_not_raised(tmp_path: Path) -> None:
    out = io.StringIO()
    ctx = Context(Options(), SuiteResult("store"), tmp_path, Console(file=out, width=200))

    def fail() -> None:
        raise StoreError("database is locked", file="/tmp/a [b]/sessions.db")

    assert ctx.attempt("persist [x]", fail) is None
    assert "database is locked" in ctx.result.errors[0]["error"]
    assert "persist [x] failed: StoreError: database is locked [/tmp/a [b]/sessions.db]" in out.getvalue()
