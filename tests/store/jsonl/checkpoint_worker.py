"""A process that keeps closing and reopening one JSONL session, each close writing a checkpoint:
the checkpoint tests SIGKILL it at random moments, often inside a checkpoint write.

Usage: python -m tests.store.jsonl.checkpoint_worker ROOT COMPRESSION
"""

from __future__ import annotations

import sys
from typing import Literal, cast

from benchmarks.workload import record_workload

from agentlog.core.header import SessionHeader
from agentlog.store.jsonl.store import JsonlStore


def main(root: str, compression: str) -> None:
    header = SessionHeader(id="s1", created_at=1000, cwd="/home/user/project")
    mode = cast(Literal["zstd", "none"], compression)
    rounds = 0
    while True:
        store = JsonlStore(root, compression=mode, write_delay_ms=60_000, checkpoint_bytes=0)
        live = store.start(header) if rounds == 0 else store.open(header.id)
        record_workload(live.session, 1, flush=live.flush, seed=rounds)
        live.close()  # writes the checkpoint
        store.close()
        rounds += 1
        sys.stdout.write(f"CLOSED {rounds}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
