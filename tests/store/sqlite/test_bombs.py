"""A zstd row that expands to hundreds of MiB is refused with bounded memory (issue 29).

The bomb is real: a committed message row's data replaced by a 50 KB frame that declares (and
holds) 768 MiB of zero bytes, read by a child process that reports its own peak RSS (``VmHWM``).
The error is a ``SessionCorruptionError`` naming the session, the seq and the database file; a
seek read stops before the row, as at any defective row.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import zstandard

from agentlog.store.jsonl.zstd_frames import MAX_RECORD_BYTES
from agentlog.store.sqlite.store import SqliteStore
from tests.search_sessions import record

REPO = Path(__file__).resolve().parents[3]
PEAK_RSS_MB = 200
BOMB_BYTES = 768 << 20

CHILD = """
import json, sys
from agentlog.errors import AgentlogError
from agentlog.store.sqlite.store import SqliteStore
store = SqliteStore(sys.argv[1], create=False)
reads = {"inspect": lambda: store.inspect("bomb"), "load": lambda: store.load("bomb"),
         "read_from": lambda: store.read_from("bomb", 0)}
errors = {}
for name, read in reads.items():
    try:
        errors[name] = "read " + str(len(read().events))
    except AgentlogError as exc:
        errors[name] = f"error: {type(exc).__name__}: {exc}"
with open("/proc/self/status") as status:
    peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"errors": errors, "peak_mb": peak_kb / 1024}))
"""


def declared_bomb(size: int) -> bytes:
    """One frame that declares ``size`` bytes of content and decodes to that many zero bytes."""
    compressor = zstandard.ZstdCompressor(level=3).compressobj(size=size)
    piece = b"\0" * (16 << 20)
    frame = b"".join(compressor.compress(piece) for _ in range(size // len(piece))) + compressor.flush()
    assert zstandard.frame_content_size(frame) == size
    return frame


def test_a_row_expanding_to_768_mib_is_a_corruption_error_naming_session_and_seq_in_bounded_memory(
        tmp_path: Path) -> None:
    db = tmp_path / "db" / "sessions.db"
    store = SqliteStore(db, write_delay_ms=5)
    record(store, "bomb", ["needle"])
    store.close()
    conn = sqlite3.connect(db)
    (seq,) = conn.execute("SELECT min(seq) FROM events WHERE type = 'user/message'").fetchone()
    bomb = declared_bomb(BOMB_BYTES)
    assert len(bomb) < 100_000
    conn.execute("UPDATE events SET data = ? WHERE seq = ?", (bomb, seq))
    conn.commit()
    conn.close()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", CHILD, str(db)], capture_output=True, text=True, env=env,
                          timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    for name in ("inspect", "load"):
        error = report["errors"][name]
        assert error.startswith("error: SessionCorruptionError"), (name, error)
        assert f"seq {seq}" in error and "bomb" in error and str(db) in error, (name, error)
        assert f"more than {MAX_RECORD_BYTES} bytes" in error, (name, error)
    assert report["errors"]["read_from"] == f"read {seq}"  # a seek read stops at the first bad row (§5.9)
    peak = report["peak_mb"]
    print(f"peak RSS {peak:.0f} MB")
    assert peak <= PEAK_RSS_MB, f"peak RSS {peak:.0f} MB"


def test_an_event_longer_than_the_record_cap_is_refused_on_write(tmp_path: Path) -> None:
    from agentlog.core.events import Event
    from agentlog.errors import InvalidEventError
    from agentlog.store.sqlite.rows import encode_rows

    event = Event.from_wire({"type": "session/title", "seq": 0, "time": 0,
                             "data": {"title": "x" * (MAX_RECORD_BYTES + 1)}})
    try:
        encode_rows([event])
    except InvalidEventError as exc:
        assert f"more than {MAX_RECORD_BYTES} bytes" in str(exc) and "seq 0" in str(exc)
    else:
        raise AssertionError("an event over the record cap was encoded")
