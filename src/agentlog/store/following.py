"""The step every session follower takes after a read (pure): where it stands, how long to wait.

``agentlog.ops.follow``'s pollers (blocking and async) and PostgreSQL's ``LISTEN`` followers
(``agentlog.store.postgres.follow``) differ only in how they read and wait: each hands those to
``drive`` (or ``adrive``), which feeds ``follow_step`` what a read returned and the time, so the
cursor, the idle timeout and the refusal of a read that does not continue the cursor are the
same everywhere.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from agentlog.core.events import Event
from agentlog.errors import SessionCorruptionError, UsageError

__all__ = ["Following", "adrive", "drive", "follow_step", "start_following"]


@dataclass(frozen=True, slots=True)
class Following:
    """A follower's state: the next seq it has not yielded and when it last saw a new event."""

    session_id: str | None
    cursor: int
    idle_since: float  # time.monotonic() of the start or of the last read that found events
    idle_timeout: float | None  # None: follow forever
    poll_interval: float


def start_following(session_id: str | None, from_seq: int, now: float, *, idle_timeout: float | None,
                    poll_interval: float) -> Following:
    """The state before the first read; refuses a NaN or negative ``idle_timeout`` and a
    ``poll_interval`` that is not a positive number (``UsageError``): NaN compares false, so the
    follower would never stop (or spin)."""
    if idle_timeout is not None and not idle_timeout >= 0:
        raise UsageError(f"idle_timeout must be None or a number of seconds >= 0, got {idle_timeout!r}",
                         session_id=session_id)
    if not 0 < poll_interval < math.inf:
        raise UsageError(f"poll_interval must be a positive number of seconds, got {poll_interval!r}",
                         session_id=session_id)
    return Following(session_id, from_seq, now, idle_timeout, poll_interval)


def follow_step(state: Following, events: Sequence[Event], now: float) -> tuple[Following, float | None]:
    """After a read from ``state.cursor`` returned ``events`` (at ``now``): the next state and the
    seconds to wait before the next read (0.0: read again at once; None: stop, idle too long).

    Events that do not continue the cursor (a gap, or seqs already yielded) are refused with
    ``SessionCorruptionError`` naming the seq expected, before any of them is yielded.
    """
    if events:
        first, last = events[0].seq, events[-1].seq
        if first != state.cursor or last - first != len(events) - 1:
            raise SessionCorruptionError(
                f"a follower read seqs {first}..{last} ({len(events)} events) where seq {state.cursor} "
                "and the ones after it should continue the log: the stored log changed under it",
                session_id=state.session_id, seq=state.cursor)
        return replace(state, cursor=last + 1, idle_since=now), 0.0
    if state.idle_timeout is None:
        return state, state.poll_interval
    left = state.idle_since + state.idle_timeout - now
    return state, (None if left <= 0 else min(state.poll_interval, left))


def drive(state: Following, read: Callable[[int], Sequence[Event]],
          wait: Callable[[float, int], object]) -> Iterator[Event]:
    """Follow with blocking I/O: ``read(cursor)`` the events from the cursor on, ``wait(seconds,
    cursor)`` until it is worth reading again (a sleep, a notification)."""
    while True:
        events = read(state.cursor)
        state, pause = follow_step(state, events, time.monotonic())
        yield from events
        if pause is None:
            return
        if pause:
            wait(pause, state.cursor)


async def adrive(state: Following, read: Callable[[int], Awaitable[Sequence[Event]]],
                 wait: Callable[[float, int], Awaitable[object]]) -> AsyncIterator[Event]:
    """``drive`` for async I/O."""
    while True:
        events = await read(state.cursor)
        state, pause = follow_step(state, events, time.monotonic())
        for event in events:
            yield event
        if pause is None:
            return
        if pause:
            await wait(pause, state.cursor)
