"""``agentlog import`` reads regular files only, in chunks, up to a size cap: a FIFO, a device or an
oversized file is named and refused, and the other files of the run still import."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentlog import SourceFormatError, open_store
from tests.io.importers.helpers import FIXTURES

CHAT = FIXTURES / "openai-chat" / "small.json"


def _import(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentlog.cli", "--store", url, "import", *args],
                          capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_is_refused_at_once_and_the_other_files_import(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        source = tmp_path / "feed.json"
        os.mkfifo(source)
    else:
        source = Path(kind)
    url = f"jsonl://{tmp_path / 'store'}"
    done = _import(url, "openai-chat", str(source), str(CHAT))  # before: read forever, or until OOM
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    [named] = [line for line in done.stderr.splitlines() if str(source) in line]
    assert "not a regular file" in named and ("FIFO" in named or "device" in named), named
    with open_store(url) as store:
        assert len(store.list()) == 1


def test_a_file_over_the_size_cap_is_refused_unread_and_the_cap_can_be_raised(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    size = CHAT.stat().st_size
    done = _import(url, "openai-chat", "--max-size", str(size - 1), str(CHAT))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(CHAT) in done.stderr and "--max-size" in done.stderr and str(size) in done.stderr
    assert _import(url, "openai-chat", "--max-size", "1M", str(CHAT)).returncode == 0
    with open_store(url) as store:
        assert len(store.list()) == 1


def test_read_source_streams_a_regular_file_and_refuses_what_grows_past_the_cap(tmp_path: Path) -> None:
    from agentlog.io.importers.source import read_source

    path = tmp_path / "a.json"
    path.write_bytes(b"x" * 3_000_000)
    assert read_source(path).data == b"x" * 3_000_000
    with pytest.raises(SourceFormatError, match="larger than") as refused:
        read_source(path, max_bytes=2_999_999)
    assert refused.value.file == str(path)
    with pytest.raises(SourceFormatError, match="a directory"):
        read_source(tmp_path)


@pytest.mark.parametrize(("text", "value"), [("1024", 1024), ("2K", 2048), ("3m", 3 << 20), ("1G", 1 << 30)])
def test_max_size_takes_bytes_or_a_binary_suffix(tmp_path: Path, text: str, value: int) -> None:
    from agentlog.cli.importing import parse_size

    assert parse_size(text) == value


def test_ctrl_c_stops_after_the_current_file_and_says_what_was_stored(tmp_path: Path) -> None:
    """A first Ctrl-C finishes the file being stored, prints what was done and exits 130; the same
    import run again resumes (what was stored is skipped) and stores the rest."""
    import json
    import signal
    import time

    source = tmp_path / "conversations"
    source.mkdir()
    conversation = json.loads((FIXTURES / "openai-chat" / "small.json").read_text())
    total = 1500
    for number in range(total):
        conversation[1]["content"] = f"Cancel reservation {number:05d}."
        (source / f"c{number:05d}.json").write_text(json.dumps(conversation))
    root = tmp_path / "store"
    command = [sys.executable, "-m", "agentlog.cli", "import", "openai-chat", str(source)]
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{root}"}

    def stored() -> int:
        return sum(1 for path in root.rglob("session.jsonl*") if path.suffix in (".zstd", ".jsonl"))

    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        deadline = time.monotonic() + 60
        while stored() < 3 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Aborted" not in err and "Traceback" not in err
    summary = err.strip().splitlines()[-1]
    found = re.findall(r"after (\d+) of 1500 files: (\d+) sessions? stored", summary)
    assert found, err
    done, count = (int(n) for n in found[0])
    assert "re-running the same import resumes" in summary and 3 <= count == done < total
    assert stored() == count  # every file it says it stored is stored whole: nothing half-written
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"{count} sessions already in the store" in again.stdout
    assert stored() == total
