"""Follow a session as it grows, on every backend: ``follow(store, id)`` yields each new event once.

PostgreSQL wakes on ``NOTIFY`` (``PostgresStore.tail``); the file backends poll ``read_from``,
re-reading only when a watched file (the JSONL transcript, the SQLite database and its WAL)
changed size or time, so an idle follower costs a few ``stat`` calls per interval.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator

from agentlog.core.events import Event
from agentlog.errors import UsageError
from agentlog.store.base import Store

__all__ = ["follow", "last_events"]


def last_events(store: Store, session_id: str, count: int) -> list[Event]:
    """The last ``count`` stored events (no repair, no closers: what ``read_from`` returns)."""
    events = store.read_from(session_id, 0).events
    return list(events[max(0, len(events) - count):]) if count > 0 else []


def follow(store: Store, session_id: str, from_seq: int, *, idle_timeout: float | None = None,
           poll_interval: float = 0.25) -> Iterator[Event]:
    """Events with ``seq >= from_seq`` as they are stored, in order, each once.

    Ends after ``idle_timeout`` seconds without a new event (None: never); raises
    ``SessionNotFoundError`` if the session is (or becomes) absent. A NaN or negative
    ``idle_timeout`` and a ``poll_interval`` that is not a positive number are refused
    (``UsageError``): NaN compares false, so the follower would never stop (or spin).
    """
    if idle_timeout is not None and not idle_timeout >= 0:
        raise UsageError(f"idle_timeout must be None or a number of seconds >= 0, got {idle_timeout!r}",
                         session_id=session_id)
    if not 0 < poll_interval < math.inf:
        raise UsageError(f"poll_interval must be a positive number of seconds, got {poll_interval!r}",
                         session_id=session_id)
    tail = getattr(store, "tail", None)
    if tail is not None:  # PostgreSQL: LISTEN/NOTIFY
        yield from tail(session_id, from_seq, idle_timeout=idle_timeout,
                        poll_interval=max(poll_interval, 1.0))
        return
    first = store.read_from(session_id, from_seq)
    watched = _watched(store, store.locate(first.header))
    cursor, seen = from_seq, None  # a mark taken after the first read could hide a write in between
    events = first.events
    idle_since = time.monotonic()
    while True:
        for event in events:
            yield event
            cursor = event.seq + 1
        if events:
            idle_since = time.monotonic()
        elif idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
            return
        else:
            time.sleep(poll_interval)
        mark = _signature(watched)
        if mark is None or mark != seen:
            seen = mark
            events = store.read_from(session_id, cursor).events
        else:
            events = ()


def _watched(store: Store, transcript: str | None) -> list[str]:
    """The files a new event changes: the JSONL transcript, or the SQLite database and its WAL."""
    if transcript is not None:
        return [transcript]
    database = getattr(store, "path", None)
    return [database, database + "-wal"] if isinstance(database, str) else []


def _signature(paths: list[str]) -> tuple[tuple[int, int], ...] | None:
    """Size and mtime of each watched file, or None when nothing is watched (always re-read)."""
    if not paths:
        return None
    marks: list[tuple[int, int]] = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            marks.append((-1, -1))
        else:
            marks.append((info.st_size, info.st_mtime_ns))
    return tuple(marks)
