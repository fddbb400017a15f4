"""Where a JSONL store saw each transcript end: a stale cursor is refused, a stale read is not."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agentlog import ConcurrentWriterError, SessionHeader
from agentlog.store.jsonl.ends import TranscriptEnds
from agentlog.store.jsonl.store import JsonlStore


def test_a_read_that_raced_the_stores_own_write_never_moves_the_end_back() -> None:
    ends = TranscriptEnds()
    ends.saw("s", 10, 1000)  # this store wrote up to seq 10
    ends.saw("s", 6, 600, read=True)  # a read that started before that write finished
    ends.check("s", 10, 1000, "f")  # the next write continues where this store wrote
    ends.saw("s", 14, 1400, read=True)  # another writer appended: a read learns it
    with pytest.raises(ConcurrentWriterError, match="expected the transcript to end at seq 14") as info:
        ends.check("s", 10, 1400, "f")
    assert (info.value.session_id, info.value.seq, info.value.file, info.value.offset) == ("s", 10, "f", 1400)
    ends.check("s", 10, 1400, "f")  # refused once, then forgotten: the next read learns the file


def test_reads_of_a_live_session_while_it_records_never_fail_its_writes(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    live = store.start(SessionHeader(id="s1"))
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            store.read_from("s1", 0)

    reader = threading.Thread(target=read)
    try:
        for turn in range(1, 41):
            if turn == 2:
                reader.start()
            live.session.append("turn/start", {"turn": turn})
            live.session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            live.flush()
    finally:
        stop.set()
        if reader.is_alive():
            reader.join()
        live.close()
    assert len(JsonlStore(tmp_path).load("s1").events) == 80
