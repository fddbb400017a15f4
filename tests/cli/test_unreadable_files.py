"""A transcript or database that cannot be read is named with what is wrong with it: a directory
or a FIFO in a transcript's place, a file the user may not read, a foreign schema version, a
damaged byte burst. One line on stderr, exit 1, never "not found" or an empty message.

Tests run as root, for whom ``chmod 000`` blocks nothing: the permission case drops the
capabilities that let root read anything (``setpriv --bounding-set -dac_override,-dac_read_search``),
so that the file's mode applies to its owner."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agentlog.store.sqlite.schema import USER_VERSION
from tests.cli.conftest import REPO, record

_NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]
_READERS = (["list"], ["show", "s1"], ["verify", "s1"], ["inspect", "s1"])


def _cli(url: str, *args: str, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTLOG_STORE": url, "COLUMNS": "300", "PYTHONPATH": str(REPO)}
    return subprocess.run([*(prefix or []), sys.executable, "-m", "agentlog.cli", *args], capture_output=True,
                          text=True, env=env, timeout=60, cwd=REPO, check=False)


def _one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in done.stderr and "not found" not in output, output
    for needle in needles:
        assert needle in output, (needle, output)


def _transcript(tmp_path: Path) -> tuple[str, Path]:
    url = f"jsonl://{tmp_path / 'store'}"
    record(url, "s1")
    [path] = (tmp_path / "store").rglob("session.jsonl.zstd")
    return url, path


@pytest.mark.parametrize("kind", ["directory", "FIFO"])
def test_a_directory_or_a_fifo_in_place_of_a_transcript_is_named(tmp_path: Path, kind: str) -> None:
    url, path = _transcript(tmp_path)
    path.unlink()
    path.mkdir() if kind == "directory" else os.mkfifo(path)
    for args in _READERS:
        _one_line_error(_cli(url, *args), str(path), f"the transcript is a {kind}, not a regular file")


def _unreadable(path: Path) -> list[str]:
    """Make ``path`` unreadable to this process's children; the command prefix that makes it so."""
    path.chmod(0)
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: chmod 000 cannot stop root reading")
    return _NO_DAC


def test_an_unreadable_transcript_is_named_with_the_reason(tmp_path: Path) -> None:
    url, path = _transcript(tmp_path)
    prefix = _unreadable(path)
    for args in _READERS:
        _one_line_error(_cli(url, *args, prefix=prefix), str(path),
                        "cannot read the transcript: Permission denied")


def test_an_unreadable_sqlite_file_is_named_with_the_reason(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 's.db'}"
    record(url, "s1")
    prefix = _unreadable(tmp_path / "s.db")
    for args in _READERS:
        _one_line_error(_cli(url, *args, prefix=prefix), str(tmp_path / "s.db"),
                        "cannot read the database file: Permission denied")


def test_a_directory_in_place_of_a_sqlite_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "s.db").mkdir()
    for args in _READERS:
        _one_line_error(_cli(f"sqlite://{tmp_path / 's.db'}", *args), str(tmp_path / "s.db"),
                        "is a directory, not a regular file")


@pytest.mark.parametrize("version", [USER_VERSION + 1, 99, -1])
def test_a_sqlite_store_of_another_schema_version_is_refused_by_every_reader(tmp_path: Path,
                                                                             version: int) -> None:
    url = f"sqlite://{tmp_path / 's.db'}"
    record(url, "s1")
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute(f"PRAGMA user_version = {version}")
    for args in _READERS:
        _one_line_error(_cli(url, *args), str(tmp_path / "s.db"), f"schema version {version}, which is "
                        "incompatible")


def test_a_damaged_byte_burst_in_a_sqlite_file_is_named(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 's.db'}"
    record(url, "s1", turns=40, output="x" * 3000)
    intact = (tmp_path / "s.db").read_bytes()
    rng = random.Random(25)
    for offset in (0, 100, 4096, len(intact) // 2):
        damaged = bytearray(intact)
        damaged[offset:offset + 512] = rng.randbytes(512)
        (tmp_path / "s.db").write_bytes(bytes(damaged))
        for args in _READERS:
            done = _cli(url, *args)
            if done.returncode == 0:
                continue  # the burst hit bytes this command does not read
            _one_line_error(done, str(tmp_path / "s.db"))
            [line] = done.stderr.strip().splitlines()
            assert line.startswith("error: ") and len(line) > 40, line
