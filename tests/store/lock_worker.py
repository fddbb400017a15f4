"""A writer process for the writer-lock tests: holds a session with a turn open at a tool call.

Usage: python -m tests.store.lock_worker STORE_URL SESSION_ID

Records a completed turn 1, then turn 2 up to ``tool_call("c1")`` through a ``Recorder``,
flushes, prints ``READY <pid> <durable seq>`` and waits for a line on stdin; then records
the real tool result, ends the turn, closes and prints ``DONE <durable seq>``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from agentlog import Recorder
from agentlog.core.header import SessionHeader
from agentlog.store.base import Store
from agentlog.store.urls import open_store
from agentlog.store.writer import LiveSession

RESULT = "the real tool result"


def started(store: Store, header: SessionHeader) -> LiveSession:
    """A live session holding one completed turn, durable."""
    live = store.start(header)
    with Recorder(live).turn() as turn, turn.step() as step:
        step.user_message("hi")
        step.request_header({"config": {"provider": "deepseek", "model": "deepseek-chat"}})
        step.text_delta("hello")
        step.assistant()
    live.flush()
    return live


@contextmanager
def tool_running(live: LiveSession) -> Iterator[None]:
    """Record the next turn up to ``tool_call("c1")``, flushed, while the body runs; then finish it."""
    with Recorder(live).turn() as turn, turn.step() as step:
        step.user_message("list the files")
        step.tool_call_delta("c1", "ls", "{}")
        step.assistant()
        step.tool_call("c1", "ls", "{}")
        live.flush()
        yield
        step.tool_result("c1", RESULT)
    live.flush()


def assert_intact(store: Store, session_id: str) -> None:
    """The log loads contiguous, with the real tool result and both turns completed (no closer)."""
    events = store.load(session_id).events
    assert [e.seq for e in events] == list(range(len(events)))
    results = [e for e in events if e.type == "tool/result"]
    assert len(results) == 1 and RESULT.encode() in results[0].to_json()
    assert [e.data["reason"]["kind"] for e in events if e.type == "turn/end"] == ["completed", "completed"]


def main(url: str, session_id: str) -> None:
    store = open_store(url)
    live = started(store, SessionHeader(id=session_id, created_at=1, cwd="/work/locks"))
    with tool_running(live):
        sys.stdout.write(f"READY {os.getpid()} {live.durable_seq}\n")
        sys.stdout.flush()
        sys.stdin.readline()
    live.close()
    store.close()
    sys.stdout.write(f"DONE {live.durable_seq}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
