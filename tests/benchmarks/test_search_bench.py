"""The ``search`` suite: index and scan timed on the same sessions, with the same hits."""

from __future__ import annotations

from pathlib import Path

from benchmarks.runner import Options, run_suites
from benchmarks.search import QUERIES
from rich.console import Console


def test_the_search_suite_times_the_index_against_the_scan(tmp_path: Path) -> None:
    options = Options(turns=2, runs=1, warmup=0, backends=("sqlite",), tmp_dir=tmp_path, quiet=True)
    (result,) = run_suites(["search"], options, Console(quiet=True)).results
    assert result.errors == []
    figures = {figure.key: figure for figure in result.figures}
    assert set(figures) == {f"search.sqlite.{query}.{kind}_ms" for query, _ in QUERIES
                            for kind in ("scan", "index")}
    assert all(figures[f"search.sqlite.{query}.index_ms"].ratio for query, _ in QUERIES)
    assert "(1 hits)" in figures["search.sqlite.rare.scan_ms"].label
    assert list(tmp_path.iterdir()) == []
