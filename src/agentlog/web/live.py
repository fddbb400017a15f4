"""The live feed of a session: batches of newly stored events, for server-sent events.

JSONL and SQLite are polled (``read_from`` at the cursor twice a second: a file stat and an
index seek when nothing changed); PostgreSQL is followed through ``LISTEN``/``NOTIFY``
(``PostgresStore.atail``). Each event is sent as the little the page shows of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from starlette.concurrency import run_in_threadpool

from agentlog.core.events import Event
from agentlog.core.messages import event_message
from agentlog.errors import AgentlogError
from agentlog.web.scan import SessionIndex
from agentlog.web.viewer import Viewer
from agentlog.web.views import message_item

__all__ = ["POLL_SECONDS", "live_events", "shown"]

POLL_SECONDS: Final = 0.5


def shown(event: Event) -> dict[str, Any]:
    """What the page shows of a new event: seq, type, time, and a message's role and text."""
    row: dict[str, Any] = {"seq": event.seq, "type": event.type, "time": event.time}
    message = event_message(event)
    if message is not None and event.surface_op is not None:
        item = message_item(event, message, SessionIndex(0, 0))
        row["role"] = item.role
        row["text"] = "\n".join(f"{block.label}({block.text})" if block.kind == "tool-call" else block.text
                                for block in item.blocks if block.kind != "reasoning")[:4000]
    return row


async def live_events(viewer: Viewer, session_id: str, start: int,
                      disconnected: Callable[[], Awaitable[bool]]) -> AsyncIterator[list[dict[str, Any]]]:
    """Batches of events stored from ``start`` on, until the client goes away or the session
    cannot be read any more (deleted, damaged, the store closed): then one ``{"gone": why}``."""
    try:
        async for batch in _follow(viewer, session_id, start, disconnected):
            yield batch
    except (AgentlogError, OSError) as exc:
        yield [{"gone": f"{type(exc).__name__}: {exc}"}]


async def _follow(viewer: Viewer, session_id: str, start: int,
                  disconnected: Callable[[], Awaitable[bool]]) -> AsyncIterator[list[dict[str, Any]]]:
    tail = getattr(viewer.store, "atail", None)
    if tail is not None:
        async for event in tail(session_id, start, idle_timeout=None, poll_interval=POLL_SECONDS * 4):
            if await disconnected():
                return
            yield [shown(event)]
        return
    cursor = start
    while not await disconnected():
        events = await run_in_threadpool(viewer.new_events, session_id, cursor)
        if events:
            cursor = events[-1].seq + 1
            yield [shown(event) for event in events if event.type != "assistant/chunk"] or [
                {"seq": events[-1].seq, "type": "assistant/chunk", "time": events[-1].time}]
        await asyncio.sleep(POLL_SECONDS)
