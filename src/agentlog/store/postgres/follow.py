"""Following a live session from any host: ``LISTEN`` on its channel, re-read by seek on each wake-up.

Every committed append notifies the session's channel with the new next seq. The follower
listens *before* its first read, keeps a cursor (the next seq it has not yielded) and, on a
notification past the cursor or a poll tick, reads everything from the cursor by index seek.
Notifications are only wake-up calls, so coalesced or duplicated ones lose or repeat nothing.
Both followers (blocking and async) hand their read and their wait for a notification to
``agentlog.store.following.drive``/``adrive``, whose pure ``follow_step`` moves the cursor and
says how long to wait before reading again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing, closing
from typing import Any

import psycopg
from psycopg import sql

from agentlog.core.events import Event
from agentlog.store.following import adrive, drive, start_following
from agentlog.store.postgres.errors import translate

__all__ = ["afollow", "follow", "wakes"]


def wakes(payload: str, cursor: int) -> bool:
    """True when a notification may announce events at or past ``cursor`` (or a deletion)."""
    try:
        return int(payload) > cursor
    except ValueError:
        return True


def follow(
    read: Callable[[int], list[Event]],
    connect: Callable[[], psycopg.Connection[Any]],
    channel: str,
    from_seq: int,
    *,
    idle_timeout: float | None,
    poll_interval: float,
    where: str,
    session_id: str | None = None,
) -> Iterator[Event]:
    """The blocking follower behind ``PostgresStore.tail`` (``follow_step`` decides, see
    ``agentlog.store.following``)."""
    state = start_following(session_id, from_seq, time.monotonic(), idle_timeout=idle_timeout,
                            poll_interval=poll_interval)
    conn = connect()
    try:
        with translate(where=where):
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

        def wait(seconds: float, cursor: int) -> None:
            with translate(where=where), closing(conn.notifies(timeout=seconds)) as notifies:
                for notify in notifies:
                    if wakes(notify.payload, cursor):
                        return

        yield from drive(state, read, wait)
    finally:
        conn.close()


async def afollow(
    read: Callable[[int], list[Event]],
    connect: Callable[[], tuple[str, dict[str, Any]]],
    channel: str,
    from_seq: int,
    *,
    idle_timeout: float | None,
    poll_interval: float,
    where: str,
    session_id: str | None = None,
) -> AsyncIterator[Event]:
    """The async follower behind ``PostgresStore.atail``: ``connect`` (blocking: it may create the
    schema) gives the connection's DSN and arguments; it and every read run in a worker thread."""
    state = start_following(session_id, from_seq, time.monotonic(), idle_timeout=idle_timeout,
                            poll_interval=poll_interval)
    dsn, kwargs = await asyncio.to_thread(connect)
    with translate(where=where):
        conn = await psycopg.AsyncConnection.connect(dsn, **kwargs)
    try:
        with translate(where=where):
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

        async def aread(cursor: int) -> list[Event]:
            return await asyncio.to_thread(read, cursor)

        async def wait(seconds: float, cursor: int) -> None:
            with translate(where=where):
                async with aclosing(conn.notifies(timeout=seconds)) as notifies:
                    async for notify in notifies:
                        if wakes(notify.payload, cursor):
                            return

        async for event in adrive(state, aread, wait):
            yield event
    finally:
        await conn.close()
