"""Following a live session from any host: ``LISTEN`` on its channel, re-read by seek on each wake-up.

Every committed append notifies the session's channel with the new next seq. The follower
listens *before* its first read, keeps a cursor (the next seq it has not yielded) and, on a
notification past the cursor or a poll tick, reads everything from the cursor by index seek.
Notifications are only wake-up calls, so coalesced or duplicated ones lose or repeat nothing.
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
from agentlog.store.postgres.errors import translate

__all__ = ["afollow", "follow", "wakes"]


def wakes(payload: str, cursor: int) -> bool:
    """True when a notification may announce events at or past ``cursor`` (or a deletion)."""
    try:
        return int(payload) > cursor
    except ValueError:
        return True


def _wait(idle_timeout: float | None, idle_since: float, poll_interval: float) -> float | None:
    """Seconds to wait for a notification, or None when the idle timeout has passed."""
    if idle_timeout is None:
        return poll_interval
    left = idle_since + idle_timeout - time.monotonic()
    return None if left <= 0 else min(poll_interval, left)


def follow(
    read: Callable[[int], list[Event]],
    connect: Callable[[], psycopg.Connection[Any]],
    channel: str,
    from_seq: int,
    *,
    idle_timeout: float | None,
    poll_interval: float,
    where: str,
) -> Iterator[Event]:
    """The blocking follower behind ``PostgresStore.tail``."""
    conn = connect()
    try:
        with translate(where=where):
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        cursor = from_seq
        idle_since = time.monotonic()
        while True:
            events = read(cursor)
            if events:
                idle_since = time.monotonic()
                for event in events:
                    yield event
                    cursor = event.seq + 1
                continue
            while True:
                timeout = _wait(idle_timeout, idle_since, poll_interval)
                if timeout is None:
                    return
                woke = False
                with translate(where=where), closing(conn.notifies(timeout=timeout)) as notifies:
                    for notify in notifies:
                        if wakes(notify.payload, cursor):
                            woke = True
                            break
                if woke or timeout >= poll_interval:
                    break
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
) -> AsyncIterator[Event]:
    """The async follower behind ``PostgresStore.atail``: ``connect`` (blocking: it may create the
    schema) gives the connection's DSN and arguments; it and every read run in a worker thread."""
    dsn, kwargs = await asyncio.to_thread(connect)
    with translate(where=where):
        conn = await psycopg.AsyncConnection.connect(dsn, **kwargs)
    try:
        with translate(where=where):
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        cursor = from_seq
        idle_since = time.monotonic()
        while True:
            events = await asyncio.to_thread(read, cursor)
            if events:
                idle_since = time.monotonic()
                for event in events:
                    yield event
                    cursor = event.seq + 1
                continue
            while True:
                timeout = _wait(idle_timeout, idle_since, poll_interval)
                if timeout is None:
                    return
                woke = False
                with translate(where=where):
                    async with aclosing(conn.notifies(timeout=timeout)) as notifies:
                        async for notify in notifies:
                            if wakes(notify.payload, cursor):
                                woke = True
                                break
                if woke or timeout >= poll_interval:
                    break
    finally:
        await conn.close()
