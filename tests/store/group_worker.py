"""A process of many recording sessions for group-commit crash tests: one thread per session,
each recording the standard workload with a flush per turn and printing each durable ack.

Usage: python -m tests.store.group_worker STORE_URL SESSIONS TURNS

Prints ``START`` once every session is live, then ``ACK <session> <durable seq> <groups>
<batches>`` after each flush returned (``groups``/``batches``: the store's group-commit counters
then, so a test can tell that flushes were being grouped when it killed the process).
"""

from __future__ import annotations

import sys
import threading

from benchmarks.workload import record_workload

from agentlog.core.header import SessionHeader
from agentlog.store.group_commit import GroupCommitStore
from agentlog.store.urls import open_store
from agentlog.store.writer import LiveSession

_PRINT = threading.Lock()


def say(line: str) -> None:
    with _PRINT:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main(url: str, sessions: int, turns: int) -> None:
    store = open_store(url)
    assert isinstance(store, GroupCommitStore)
    counters = store.group_commit
    lives = [store.start(SessionHeader(id=f"group-{index}", created_at=1, cwd="/work/crash"))
             for index in range(sessions)]

    def record(index: int, live: LiveSession) -> None:
        def checkpoint() -> None:
            live.flush()
            say(f"ACK {live.id} {live.durable_seq} {counters.groups} {counters.batches}")

        record_workload(live.session, turns, seed=index, flush=checkpoint)
        live.close()

    threads = [threading.Thread(target=record, args=(index, live)) for index, live in enumerate(lives)]
    say("START")
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    say("DONE")
    store.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
