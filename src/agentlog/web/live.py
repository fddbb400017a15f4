"""The live feeds of a session: batches of stored events, for server-sent events.

A client's catch-up (``from`` behind the stored end) is sent in pages of ``CATCH_UP_SLOTS``
log slots, read from the viewer's one cached inspection of the session; each page is built
once and shared by every client that asks for it, and the work of many clients asking at once
is done once (``Feeds._shared``), so 150 clients catching up on a long session cost about what
one does. Then the tail: JSONL and SQLite are polled (``read_from`` at the cursor twice a
second: a file stat and an index seek when nothing changed), one poll per session and cursor
for all clients; PostgreSQL is followed through ``LISTEN``/``NOTIFY`` (``PostgresStore.atail``).
Each event is sent as the little the page shows of it.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from typing import Any, Final, TypeVar

import orjson
from starlette.concurrency import run_in_threadpool

from agentlog.core.events import ASSISTANT_CHUNK, Event
from agentlog.core.messages import event_message
from agentlog.core.packed import ChunkRun
from agentlog.errors import AgentlogError
from agentlog.web.scan import SessionIndex, slots
from agentlog.web.viewer import Loaded, Viewer
from agentlog.web.views import message_item

__all__ = ["CATCH_UP_SLOTS", "POLL_SECONDS", "Feeds", "catch_up_page", "frame", "shown"]

POLL_SECONDS: Final = 0.5
CATCH_UP_SLOTS: Final = 1000
"""Log slots (an event, or a packed run of stream chunks) per catch-up message."""
PAGES_KEPT: Final = 256
"""Catch-up pages kept for the next client (a few MB: shown rows are small)."""

T = TypeVar("T")
Batch = list[dict[str, Any]]


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


def catch_up_page(loaded: Loaded, start: int) -> tuple[Batch, int]:
    """``(rows, next seq)`` of the stored slots from ``start`` on, at most ``CATCH_UP_SLOTS``;
    stream chunks are left out, and a page that ends in them says how far it reached."""
    rows: Batch = []
    following, reached = start, -1
    for number, (seq, entry) in enumerate(slots(loaded.inspection.events, start, loaded.index.stored)):
        if number == CATCH_UP_SLOTS:
            break
        if isinstance(entry, ChunkRun) or entry.type == ASSISTANT_CHUNK:
            following = entry.seq0 + entry.count if isinstance(entry, ChunkRun) else seq + 1
            reached = following - 1
            continue
        rows.append(shown(entry))
        following = seq + 1
    if reached > (rows[-1]["seq"] if rows else -1):
        rows.append({"seq": reached, "type": ASSISTANT_CHUNK})
    return rows, following


def frame(rows: Batch) -> bytes:
    """One server-sent ``events`` message."""
    return b"event: events\ndata: " + orjson.dumps(rows) + b"\n\n"


def _tail_batch(events: list[Event]) -> Batch:
    return [shown(event) for event in events if event.type != ASSISTANT_CHUNK] or [
        {"seq": events[-1].seq, "type": ASSISTANT_CHUNK, "time": events[-1].time}]


class Feeds:
    """Every live feed of one viewer: shared catch-up pages and shared tail polls."""

    def __init__(self, viewer: Viewer) -> None:
        self.viewer = viewer
        self._flights: dict[Hashable, asyncio.Future[Any]] = {}
        self._pages: OrderedDict[tuple[int, int], tuple[bytes | None, int]] = OrderedDict()
        self._loaded: dict[str, tuple[float, Loaded]] = {}
        self._polls: dict[tuple[str, int], tuple[float, bytes | None, int]] = {}

    async def _shared(self, key: Hashable, work: Callable[[], T]) -> T:
        """``work()`` in a thread, run once for every caller that asks for ``key`` meanwhile; a
        caller that goes away does not cancel it for the others."""
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(run_in_threadpool(work))
            self._flights[key] = flight
            flight.add_done_callback(lambda _: self._flights.pop(key, None))
        result: T = await asyncio.shield(flight)
        return result

    async def _load(self, session_id: str) -> Loaded:
        """The viewer's inspection of the session, asked for at most once per ``POLL_SECONDS``."""
        cached = self._loaded.get(session_id)
        if cached is not None and time.monotonic() - cached[0] < POLL_SECONDS:
            return cached[1]
        loaded = await self._shared(("load", session_id), lambda: self.viewer.load(session_id))
        self._loaded[session_id] = (time.monotonic(), loaded)
        return loaded

    async def _page(self, session_id: str, start: int) -> tuple[bytes | None, int, int]:
        """``(message or None, next seq, stored)`` of the catch-up page at ``start``."""
        loaded = await self._load(session_id)
        key = (id(loaded), start)
        page = self._pages.get(key)
        if page is None:
            rows, following = await self._shared(("page", *key), lambda: catch_up_page(loaded, start))
            page = self._pages[key] = (frame(rows) if rows else None, following)
            while len(self._pages) > PAGES_KEPT:
                self._pages.popitem(last=False)
        else:
            self._pages.move_to_end(key)
        return page[0], page[1], loaded.index.stored

    async def _poll(self, session_id: str, cursor: int) -> tuple[bytes | None, int]:
        """``(message or None, next cursor)`` of what was stored from ``cursor`` on, read at most
        once per ``POLL_SECONDS`` for every client at this cursor."""
        key = (session_id, cursor)
        cached = self._polls.get(key)
        now = time.monotonic()
        if cached is not None and now - cached[0] < POLL_SECONDS:
            return cached[1], cached[2]
        events = await self._shared(("poll", *key), lambda: self.viewer.new_events(session_id, cursor))
        found = (frame(_tail_batch(events)), events[-1].seq + 1) if events else (None, cursor)
        self._polls = {k: v for k, v in self._polls.items() if now - v[0] < 4 * POLL_SECONDS}
        self._polls[key] = (now, *found)
        return found

    async def follow(self, session_id: str, start: int,
                     disconnected: Callable[[], Awaitable[bool]]) -> AsyncIterator[bytes]:
        """Messages of the events stored from ``start`` on, until the client goes away or the
        session cannot be read any more (deleted, damaged, the store closed): then one
        ``{"gone": why}``."""
        try:
            async for message in self._follow(session_id, start, disconnected):
                yield message
        except (AgentlogError, OSError) as exc:
            yield frame([{"gone": f"{type(exc).__name__}: {exc}"}])

    async def _follow(self, session_id: str, start: int,
                      disconnected: Callable[[], Awaitable[bool]]) -> AsyncIterator[bytes]:
        cursor = start
        while not await disconnected():  # the catch-up, a page at a time
            message, following, stored = await self._page(session_id, cursor)
            if following <= cursor:
                break
            cursor = following
            if message is not None:
                yield message
            if cursor >= stored:
                break
        tail = getattr(self.viewer.store, "atail", None)
        if tail is not None:
            async for event in tail(session_id, cursor, idle_timeout=None, poll_interval=POLL_SECONDS * 4):
                if await disconnected():
                    return
                yield frame([shown(event)])
            return
        while not await disconnected():
            message, cursor = await self._poll(session_id, cursor)
            if message is not None:
                yield message
            await asyncio.sleep(POLL_SECONDS)
