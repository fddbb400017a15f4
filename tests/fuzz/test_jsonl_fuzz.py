"""Fuzz the JSONL readers (raw and zstd) with damaged transcripts of agentlog's and DSH's writing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import (
    LONG,
    SHORT,
    Compression,
    Damaged,
    check_jsonl_readers,
    jsonl_seeds,
    keep_failure,
)
from tests.fuzz.mutations import mutated

REPO = Path(__file__).resolve().parents[2]


@st.composite
def _case(draw: st.DrawFn, compression: Compression) -> tuple[int, bytes]:
    seeds = jsonl_seeds(compression)
    index = draw(st.integers(0, len(seeds) - 1))
    return index, Damaged(draw(mutated(seeds[index].data, tuple(s.data for s in seeds))))


def _run(compression: Compression, case: tuple[int, bytes]) -> None:
    index, data = case
    try:
        check_jsonl_readers(compression, jsonl_seeds(compression)[index], Damaged(data))
    except BaseException:
        keep_failure(data, f"jsonl-{compression}-seed{index}")
        raise


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_damaged_transcripts_load_or_refuse_with_a_location(compression: Compression) -> None:
    SHORT(given(_case(compression))(lambda case: _run(compression, case)))()


@pytest.mark.slow
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_damaged_transcripts_long_run(compression: Compression) -> None:
    LONG(given(_case(compression))(lambda case: _run(compression, case)))()


@pytest.mark.slow
def test_coverage_guided_fuzzing_with_atheris(tmp_path: Path) -> None:
    """``tests.fuzz.atheris_main`` for ``AGENTLOG_ATHERIS_RUNS`` inputs (atheris is optional)."""
    pytest.importorskip("atheris")
    runs = os.environ.get("AGENTLOG_ATHERIS_RUNS", "20000")
    result = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.atheris_main", f"-runs={runs}", f"-artifact_prefix={tmp_path}/"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])},
        capture_output=True, text=True, timeout=3600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
