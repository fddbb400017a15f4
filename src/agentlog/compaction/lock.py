"""The durable compaction lock: an unmatched ``compaction/start`` (spec compaction §1 E8).

There is no in-process mutex. The lock is live when the latest start/end marker is a start
and no ``session/end-seed`` follows it; a start before a newer end-seed belongs to a process
that died and is stale. ``scan_lock`` reads the log backwards (pure); ``LockTracker`` folds
it forwards once and then only reads new events, which gives the same answer in O(new).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from agentlog.compaction.events import COMPACTION_END, COMPACTION_START
from agentlog.core.events import END_SEED, TURN_END, TURN_START, Event

__all__ = ["LockState", "LockTracker", "scan_lock"]

_BRACKET: Final = frozenset({COMPACTION_START, COMPACTION_END})
_TURN: Final = frozenset({TURN_START, TURN_END})


@dataclass(frozen=True, slots=True)
class LockState:
    """The three facts E8 reads: latest bracket marker, latest turn boundary, latest end-seed."""

    bracket: Event | None = None
    turn_boundary: Event | None = None
    end_seed_seq: int | None = None

    @property
    def live(self) -> bool:
        """A start with no end after it and no newer end-seed: every entry point is busy."""
        bracket = self.bracket
        return (bracket is not None and bracket.type == COMPACTION_START
                and (self.end_seed_seq is None or self.end_seed_seq < bracket.seq))

    @property
    def stale_start(self) -> Event | None:
        """An unmatched start that a newer end-seed proved dead (ignored), else None."""
        bracket = self.bracket
        if bracket is not None and bracket.type == COMPACTION_START and not self.live:
            return bracket
        return None

    @property
    def turn_open(self) -> bool:
        """The log's latest turn boundary is a ``turn/start``."""
        return self.turn_boundary is not None and self.turn_boundary.type == TURN_START

    @property
    def open_turn(self) -> int | None:
        """The number of the open turn (None when none is open or its number is not an int)."""
        boundary = self.turn_boundary
        if boundary is None or boundary.type != TURN_START:
            return None
        data = boundary.data
        turn = data.get("turn") if isinstance(data, dict) else None
        return turn if type(turn) is int else None


def scan_lock(events: Sequence[Event]) -> LockState:
    """E8 read backwards: stop as soon as all three facts are found (ignores summaries)."""
    bracket: Event | None = None
    boundary: Event | None = None
    end_seed: int | None = None
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        kind = event.type
        if bracket is None and kind in _BRACKET:
            bracket = event
        elif boundary is None and kind in _TURN:
            boundary = event
        elif end_seed is None and kind == END_SEED:
            end_seed = event.seq
        if bracket is not None and boundary is not None and end_seed is not None:
            break
    return LockState(bracket, boundary, end_seed)


class LockTracker:
    """``scan_lock`` kept current incrementally for one growing log."""

    __slots__ = ("_boundary", "_bracket", "_end_seed", "_scanned")

    def __init__(self) -> None:
        self._scanned = 0
        self._bracket: Event | None = None
        self._boundary: Event | None = None
        self._end_seed: int | None = None

    def state(self, events: Sequence[Event]) -> LockState:
        """The lock state of ``events`` (the same log every call, only ever longer)."""
        for index in range(self._scanned, len(events)):
            event = events[index]
            kind = event.type
            if kind in _BRACKET:
                self._bracket = event
            elif kind in _TURN:
                self._boundary = event
            elif kind == END_SEED:
                self._end_seed = event.seq
        self._scanned = len(events)
        return LockState(self._bracket, self._boundary, self._end_seed)
