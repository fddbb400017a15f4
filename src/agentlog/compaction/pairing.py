"""Tool-pairing balance of surface cuts (spec compaction §2 "Tool-pairing balance").

Walking the surface in order, an ``assistant/message`` adds its tool-call blocks and a
``tool/result`` subtracts one; a cut is balanced where the running count is 0. Call ids
are not matched. The index is cached per ``replace_generation``: log-only growth reads no
event, appended nodes are folded incrementally, a replace (or a shrink) rebuilds.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agentlog.core.events import ASSISTANT_MESSAGE, TOOL_RESULT, Event
from agentlog.errors import SurfaceError

if TYPE_CHECKING:
    from agentlog.core.session import Session

__all__ = ["PairingIndex", "PairingIndexes", "node_weight"]


def node_weight(event: Event) -> int:
    """+calls for an assistant message, -1 for a tool result, 0 otherwise."""
    if event.type == TOOL_RESULT:
        return -1
    if event.type == ASSISTANT_MESSAGE:
        message = event.data.get("message") if isinstance(event.data, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, (list, tuple)):
            return sum(1 for block in content if isinstance(block, dict) and block.get("type") == "tool-call")
    return 0


class PairingIndex:
    """Running balance after each surface position, and each node's position."""

    __slots__ = ("_after", "_count", "_generation", "_position")

    def __init__(self) -> None:
        self._generation = -1
        self._count = 0
        self._after: list[int] = []
        self._position: dict[int, int] = {}

    def refresh(self, nodes: Sequence[int], generation: int, event_at: Callable[[int], Event]) -> None:
        """Bring the index up to ``nodes`` (same generation: fold only the new tail)."""
        if generation != self._generation or len(nodes) < self._count:
            after, position = self._folded(nodes, 0, 0, event_at)
            self._after, self._position = after, position
            self._generation = generation
            self._count = len(nodes)
        elif len(nodes) > self._count:
            start = self._count
            balance = self._after[-1] if self._after else 0
            after, position = self._folded(nodes, start, balance, event_at)
            self._after.extend(after)
            self._position.update(position)
            self._count = len(nodes)

    @staticmethod
    def _folded(nodes: Sequence[int], start: int, balance: int,
                event_at: Callable[[int], Event]) -> tuple[list[int], dict[int, int]]:
        """Fold ``nodes[start:]`` from ``balance``; raises before anything is committed."""
        after: list[int] = []
        position: dict[int, int] = {}
        for index in range(start, len(nodes)):
            seq = nodes[index]
            try:
                event = event_at(seq)
            except IndexError:
                raise SurfaceError(f"surface seq {seq} has no matching log event") from None
            if event.seq != seq:
                raise SurfaceError(f"surface seq {seq} maps to a log event with seq {event.seq}")
            balance += node_weight(event)
            if balance < 0:
                raise SurfaceError(f"tool/result at surface seq {seq} has no matching tool-call")
            after.append(balance)
            position[seq] = index
        return after, position

    def position(self, seq: int) -> int:
        """The surface position of ``seq``; SurfaceError "not found" otherwise."""
        index = self._position.get(seq)
        if index is None:
            raise SurfaceError(f"seq {seq} not found in surface")
        return index

    def balanced_before(self, seq: int) -> bool:
        """Is the cut just before ``seq`` free of open tool calls?"""
        index = self.position(seq)
        return index == 0 or self._after[index - 1] == 0

    def balanced_after(self, seq: int) -> bool:
        """Is the cut just after ``seq`` free of open tool calls?"""
        return self._after[self.position(seq)] == 0

    def balanced_before_position(self, index: int) -> bool:
        """Is the cut before surface position ``index`` balanced?"""
        return index == 0 or self._after[index - 1] == 0

    def __len__(self) -> int:
        return self._count


class PairingIndexes:
    """One ``PairingIndex`` per session (weakly held), refreshed on each request."""

    __slots__ = ("_indexes",)

    def __init__(self) -> None:
        self._indexes: weakref.WeakKeyDictionary[Session, PairingIndex] = weakref.WeakKeyDictionary()

    def of(self, session: Session) -> PairingIndex:
        """The session's index, current with its surface."""
        index = self._indexes.get(session)
        if index is None:
            index = self._indexes[session] = PairingIndex()
        surface = session.surface
        index.refresh(surface.nodes, surface.replace_generation, session.events.__getitem__)
        return index
