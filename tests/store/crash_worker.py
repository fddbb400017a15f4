"""A recorder process for crash tests: records the standard workload, printing each durable ack.

Usage: python -m tests.store.crash_worker STORE_URL SESSION_ID TURNS
"""

from __future__ import annotations

import sys

from benchmarks.workload import record_workload

from agentlog.core.header import SessionHeader
from agentlog.store.urls import open_store


def main(url: str, session_id: str, turns: int) -> None:
    store = open_store(url)
    live = store.start(SessionHeader(id=session_id, created_at=1, cwd="/work/crash"))

    def checkpoint() -> None:
        live.flush()
        sys.stdout.write(f"ACK {live.durable_seq}\n")
        sys.stdout.flush()

    sys.stdout.write("START\n")
    sys.stdout.flush()
    record_workload(live.session, turns, seed=7, flush=checkpoint, checkpoint=checkpoint)
    live.close()
    sys.stdout.write("DONE\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
