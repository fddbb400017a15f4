"""How a SQLite reader opens the database (``database_uri``), and that a reader opened beside a live
writer's WAL keeps seeing what the writer commits, from another process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from agentlog import Recorder, SessionHeader, open_store
from agentlog.store.sqlite.connection import database_uri

REPO = Path(__file__).resolve().parents[3]

_WRITER = """
import sys, time
from agentlog import Recorder, open_store
with open_store(sys.argv[1]) as store, store.open("s") as live:
    recorder = Recorder(live)
    for number in range(8):
        with recorder.turn() as turn:
            turn.user_message(f"message {number}")
        live.flush()
        print("FLUSHED", flush=True)
        time.sleep(0.1)
    sys.stdin.readline()  # stays open (its WAL beside the database) until the test is done
"""


def test_the_uri_follows_what_lies_beside_the_database(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    assert database_uri(db, write=True).endswith("?mode=rw")
    assert database_uri(db, write=False).endswith("?mode=rw")  # -wal/-shm only while it reads
    Path(f"{db}-wal").write_bytes(b"")
    Path(f"{db}-shm").write_bytes(b"")
    assert database_uri(db, write=False).endswith("?mode=ro&readonly_shm=1")
    assert database_uri(db, write=True).endswith("?mode=rw")
    os.unlink(f"{db}-wal")
    os.unlink(f"{db}-shm")
    os.chmod(tmp_path, 0o500)
    try:
        if not os.access(tmp_path, os.W_OK):  # root writes anyway: the read-only mount test covers it
            assert database_uri(db, write=False).endswith("?mode=ro&immutable=1")
    finally:
        os.chmod(tmp_path, 0o700)


def test_a_reader_beside_a_live_writer_sees_every_commit(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/s.db"
    with open_store(url) as store, store.start(SessionHeader(id="s")) as live, Recorder(live).turn() as turn:
        turn.user_message("first")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen([sys.executable, "-c", _WRITER, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True, env=env) as writer:
        assert writer.stdin is not None and writer.stdout is not None
        assert writer.stdout.readline().strip() == "FLUSHED"
        assert (tmp_path / "s.db-wal").exists()  # the writer's WAL: the reader reads it read-only
        with open_store(url, create=False) as reader:
            counts = [len(reader.read_from("s", 0).events)]
            for _ in range(7):
                assert writer.stdout.readline().strip() == "FLUSHED"
                time.sleep(0.02)
                counts.append(len(reader.read_from("s", 0).events))
        writer.stdin.write("\n")
        writer.stdin.close()
        writer.wait(timeout=30)
    assert counts == sorted(counts) and len(set(counts)) == len(counts)  # every commit seen, in order
    with open_store(url, create=False) as reader:
        assert len(reader.read_from("s", 0).events) == counts[-1]
