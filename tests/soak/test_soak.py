"""SIGKILL soak on every durable backend: writers killed at random moments while readers in other
processes read the session; after each kill the invariants hold and every acknowledged event survives.

The default run is a few kill cycles per backend; ``-m slow`` runs hundreds. Readers run
``inspect`` and ``read_from`` (which never write); the ``load`` variant also loads the live
session from another process, which must either succeed without repairing or raise
``SessionLockedError`` (it fails until ``load`` takes the writer lock first: issue 11, item 1).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.pg_worker import Schema
from tests.store.test_crash import _check_recovered, _kill_at_random

REPO = Path(__file__).resolve().parents[2]
_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}


@pytest.fixture(params=["jsonl-zstd", "jsonl-raw", "sqlite", "postgres"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    name = request.param
    if name == "postgres":
        schema = Schema.new()
        yield f"{schema.url}&write_delay_ms=50"
        schema.drop()
    elif name == "sqlite":
        yield f"sqlite://{tmp_path / 'soak.db'}?write_delay_ms=50"
    else:
        compression = "zstd" if name == "jsonl-zstd" else "none"
        yield f"jsonl://{tmp_path / 'root'}?compression={compression}&write_delay_ms=50"


def _readers(url: str, session_id: str, reads: str) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-m", "tests.soak.reader_worker", url, session_id, reads],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO, env=_ENV)
            for _ in range(2)]


def _stop(readers: list[subprocess.Popen[bytes]]) -> list[str]:
    reports = []
    for reader in readers:
        assert reader.stdin is not None and reader.stdout is not None
        reader.stdin.close()
        try:
            out = reader.stdout.read().decode()
            reader.wait(timeout=60)
        finally:
            if reader.poll() is None:
                reader.kill()
                reader.wait()
            reader.stdout.close()
        reports.append(out.strip())
    return reports


def _soak(url: str, runs: int, seed: int, reads: str) -> None:
    rng = random.Random(seed)
    for run in range(runs):
        session_id = f"soak-{run}"
        readers = _readers(url, session_id, reads)
        try:
            acked = _kill_at_random(url, session_id, rng, env=_ENV)
        finally:
            reports = _stop(readers)
        failures = [report for report in reports if not report.startswith("OK")]
        assert not failures, f"run {run}: a reader failed during writes: {failures}"
        if acked:
            _check_recovered(url, session_id, acked)


def test_sigkill_with_concurrent_readers_on_every_backend(backend_url: str) -> None:
    _soak(backend_url, runs=2, seed=5, reads="inspect,read_from")


@pytest.mark.slow
def test_sigkill_soak_with_concurrent_readers(backend_url: str) -> None:
    _soak(backend_url, runs=int(os.environ.get("AGENTLOG_SOAK_RUNS", "150")), seed=21,
          reads="inspect,read_from")


@pytest.mark.slow
def test_sigkill_soak_with_concurrent_loads(backend_url: str) -> None:
    """Fails until ``load`` in another process takes the writer lock (branch ``locks``)."""
    _soak(backend_url, runs=int(os.environ.get("AGENTLOG_SOAK_RUNS", "150")), seed=22,
          reads="inspect,read_from,load")
