"""Follow a session as it grows, on every backend: ``follow(store, id)`` yields each new event once.

PostgreSQL wakes on ``NOTIFY`` (``PostgresStore.tail``/``atail``); the file backends poll
``read_from``, re-reading only when a watched file (the JSONL transcript, the SQLite database and
its WAL) changed size or time, or changed less than 2 s ago (a write within the same timestamp
tick changes neither), so an idle follower costs a few ``stat`` calls per interval.
``follow`` and ``afollow`` (async: reads in a worker thread) drive the same pure step
(``agentlog.store.following``): the cursor, the idle timeout, the refusals.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterator, Sequence

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.errors import SessionNotFoundError
from agentlog.store.base import Store
from agentlog.store.following import adrive, drive, start_following

__all__ = ["afollow", "follow", "last_events"]

_GONE = (-1, -1)  # the signature of a watched file that does not exist
_RACY_NS = 2_000_000_000  # file times can be this coarse (1-2 s on some file systems)


def last_events(store: Store, session_id: str, count: int) -> list[Event]:
    """The last ``count`` stored events (no repair, no closers: what ``read_from`` returns)."""
    events = store.read_from(session_id, 0).events
    return list(events[max(0, len(events) - count):]) if count > 0 else []


def follow(store: Store, session_id: str, from_seq: int, *, idle_timeout: float | None = None,
           poll_interval: float = 0.25) -> Iterator[Event]:
    """Events with ``seq >= from_seq`` as they are stored, in order, each once.

    Ends after ``idle_timeout`` seconds without a new event (None: never); raises
    ``SessionNotFoundError`` if the session is (or becomes) absent or is replaced by a new one of
    the same id, ``SessionCorruptionError`` if a read does not continue the events yielded. A
    NaN or negative ``idle_timeout`` and a ``poll_interval`` that is not a positive number are
    refused (``UsageError``): NaN compares false, so the follower would never stop (or spin).
    """
    state = start_following(session_id, from_seq, time.monotonic(), idle_timeout=idle_timeout,
                            poll_interval=poll_interval)
    tail = getattr(store, "tail", None)
    if tail is not None:  # PostgreSQL: LISTEN/NOTIFY
        yield from tail(session_id, from_seq, idle_timeout=idle_timeout,
                        poll_interval=max(poll_interval, 1.0))
        return
    yield from drive(state, _Poller(store, session_id).read, lambda seconds, _cursor: time.sleep(seconds))


async def afollow(store: Store, session_id: str, from_seq: int, *, idle_timeout: float | None = None,
                  poll_interval: float = 0.25) -> AsyncIterator[Event]:
    """``follow`` as an async iterator: the reads run in a worker thread, the waits never block
    the event loop (PostgreSQL: ``PostgresStore.atail``)."""
    import asyncio  # not at import time: ``import agentlog`` loads no asyncio (tests/test_public_api.py)

    state = start_following(session_id, from_seq, time.monotonic(), idle_timeout=idle_timeout,
                            poll_interval=poll_interval)
    tail = getattr(store, "atail", None)
    if tail is not None:
        async for event in tail(session_id, from_seq, idle_timeout=idle_timeout,
                                poll_interval=max(poll_interval, 1.0)):
            yield event
        return
    poller = _Poller(store, session_id)

    async def read(cursor: int) -> Sequence[Event]:
        return await asyncio.to_thread(poller.read, cursor)

    async for event in adrive(state, read, lambda seconds, _cursor: asyncio.sleep(seconds)):
        yield event


class _Poller:
    """The reads of one followed session from a file or memory store: skipped while its watched
    files are unchanged; a read whose header is not the first one's is a replaced session, a
    SQLite database that is gone a removed one."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self.header: SessionHeader | None = None
        self.watched: list[str] = []
        self.seen: tuple[tuple[int, int], ...] | None = None  # a mark taken after the first read
        # could hide a write in between: the first poll always re-reads
        self.settled = False  # the mark is old enough that any later write changes it

    def read(self, cursor: int) -> Sequence[Event]:
        if self.header is None:  # the first read: it says which files to watch
            inspection = self.store.read_from(self.session_id, cursor)
            self.header = inspection.header
            self.watched = _watched(self.store, self.store.locate(inspection.header))
            return inspection.events
        mark = _signature(self.watched)
        if mark is not None and mark == self.seen and self.settled:
            return ()
        self.seen = mark
        # a write in the same timestamp tick as the mark (a commit after the read saw only its
        # uncommitted WAL frames, say) changes neither size nor mtime: trust only an older mark
        self.settled = mark is not None and time.time_ns() - max(m[1] for m in mark) > _RACY_NS
        database = getattr(self.store, "path", None)
        if isinstance(database, str) and mark is not None and mark[0] == _GONE:
            # an open SQLite connection goes on reading a deleted file: it would wait forever
            raise SessionNotFoundError("the store's database was removed while the session was followed",
                                       session_id=self.session_id, file=database)
        inspection = self.store.read_from(self.session_id, cursor)
        if inspection.header != self.header:
            raise SessionNotFoundError("the followed session was deleted and a new one of the same id "
                                       "took its place", session_id=self.session_id)
        return inspection.events


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
            marks.append(_GONE)
        else:
            marks.append((info.st_size, info.st_mtime_ns))
    return tuple(marks)
