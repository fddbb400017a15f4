"""A process that dies inside a compaction: it prints STARTED once ``compaction/start`` is durable.

Usage: python -m tests.compaction.crash_worker ROOT MODE   (MODE: standalone | in-turn)
"""

from __future__ import annotations

import asyncio
import sys

from agentlog.compaction.engine import Compactor
from agentlog.core.header import SessionHeader
from agentlog.recording.recorder import Recorder
from agentlog.store.jsonl.store import JsonlStore
from tests.compaction.helpers import BlockingSummarizer, fill, record_turn


async def main(root: str, mode: str) -> None:
    store = JsonlStore(root, compression="none", write_delay_ms=5)
    live = store.start(SessionHeader(id="crash", created_at=1, cwd="/work/crash"))
    recorder = Recorder(live)
    for index in range(1, 4):
        record_turn(recorder, index)
    summarizer = BlockingSummarizer()  # never released: the process is killed while it waits
    compactor = Compactor(summarizer)
    if mode == "in-turn":
        turn = recorder.turn().start()
        fill(turn, 4)
        region = compactor.select_range(live.session, 0)
        assert region is not None
        task = asyncio.ensure_future(compactor.acompact_region(live.session, region.start, region.end))
    else:
        task = asyncio.ensure_future(compactor.acompact_now(live))
    await summarizer.entered.wait()
    await live.aflush()
    sys.stdout.write(f"STARTED {live.durable_seq}\n")
    sys.stdout.flush()
    await asyncio.sleep(3600)
    task.cancel()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
