"""The surface: the ordered seqs the model sees, folded from the log (spec session-core §3).

Message events either ``append`` themselves or ``Replace`` a contiguous run of current
surface positions. The same rules serve live appends, restore and offline folds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from agentlog.core.events import (
    SURFACE_TYPES,
    TOOL_RESULT,
    Event,
    Replace,
    parse_source_seqs,
)
from agentlog.core.jsonvalue import json_equal
from agentlog.errors import SurfaceError

__all__ = [
    "Replacement",
    "Surface",
    "SurfaceFold",
    "SurfaceManager",
    "fold_surface",
    "is_append_surface_event",
    "is_replacement_surface_event",
    "is_surface_eligible_type",
    "is_surface_event",
]


def is_surface_eligible_type(event_type: str) -> bool:
    """True for the three types that may join the surface."""
    return event_type in SURFACE_TYPES


def is_surface_event(event: Event) -> bool:
    """An eligible event that carries a surface op."""
    return event.type in SURFACE_TYPES and event.surface_op is not None


def is_append_surface_event(event: Event) -> bool:
    """A surface event whose op is ``append`` (the human transcript is made of these)."""
    return event.type in SURFACE_TYPES and event.surface_op == "append"


def is_replacement_surface_event(event: Event) -> bool:
    """A surface event whose op is a ``Replace``."""
    return event.type in SURFACE_TYPES and isinstance(event.surface_op, Replace)


@dataclass(frozen=True, slots=True)
class Replacement:
    """One committed replace: the replacing seq, its op bounds and the seqs it shadowed."""

    seq: int
    start: int
    end: int
    shadowed_seqs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SurfaceFold:
    """The result of folding a whole log: surface nodes and every replacement in log order."""

    nodes: tuple[int, ...]
    replacements: tuple[Replacement, ...]


class NodesView(Sequence[int]):
    """A read-only live view of the surface's node list."""

    __slots__ = ("_nodes",)

    def __init__(self, nodes: list[int]) -> None:
        self._nodes = nodes

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        return self._nodes[index]

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[int]:
        return iter(self._nodes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NodesView):
            return self._nodes == other._nodes
        if isinstance(other, (list, tuple)):
            return self._nodes == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"NodesView({self._nodes!r})"


class Surface:
    """The live surface of a session: ``nodes`` (read-only) and ``replace_generation``."""

    __slots__ = ("_manager", "_view")

    def __init__(self, manager: SurfaceManager) -> None:
        self._manager = manager
        self._view = NodesView(manager.nodes)

    @property
    def nodes(self) -> NodesView:
        return self._view

    @property
    def replace_generation(self) -> int:
        return self._manager.replace_generation


@dataclass(frozen=True, slots=True)
class _Plan:
    event: Event
    start_index: int  # -1 for append
    end_index: int
    shadowed: tuple[int, ...]


class SurfaceManager:
    """Applies surface transitions one event at a time; plans fully before mutating.

    ``event_at(seq)`` returns the logged event with that absolute seq (for the tool-result
    rewrite rule). ``base_seq`` lets a manager fold a window that starts mid-log.
    ``surface_seqs`` lists every committed surface event in log order (an index for refolds);
    ``first_replace_seq`` is the seq of the first committed replacement (None before any):
    up to it, the surface is exactly ``surface_seqs``.
    """

    __slots__ = ("_event_at", "_pending", "base_seq", "first_replace_seq", "next_seq", "nodes",
                 "replace_generation", "surface_seqs")

    def __init__(self, event_at: Callable[[int], Event], base_seq: int = 0) -> None:
        self.surface_seqs: list[int] = []
        self.nodes: list[int] = []
        self.replace_generation = 0
        self.first_replace_seq: int | None = None
        self.base_seq = base_seq
        self.next_seq = base_seq
        self._event_at = event_at
        self._pending: _Plan | None = None

    def validate_next(self, event: Event) -> None:
        """Plan ``event`` as the next log entry; raise ``SurfaceError`` if it is refused."""
        if event.surface_op is None:
            self._check_seq(event)  # markers were checked when the event was built
            self._pending = None
        else:
            self._pending = self._plan(event)

    def commit(self, event: Event) -> None:
        """Apply ``event``; reuses the plan from ``validate_next`` when it is the same event."""
        if event.surface_op is None:
            self.skip(event)
            return
        plan = self._pending
        if plan is None or plan.event is not event:
            plan = self._plan(event)
        self._pending = None
        self.next_seq += 1
        self.surface_seqs.append(event.seq)
        if plan.start_index < 0:
            self.nodes.append(event.seq)
            return
        self.nodes[plan.start_index : plan.end_index + 1] = [event.seq]
        self.replace_generation += 1
        if self.first_replace_seq is None:
            self.first_replace_seq = event.seq

    def skip(self, event: Event) -> None:
        """Advance past a log-only event (it must still be the next seq)."""
        self._check_log_only(event)
        self._pending = None
        self.next_seq += 1

    def apply(self, event: Event) -> _Plan:
        """Validate and apply in one step (restore and folds)."""
        plan = self._plan(event)
        self._pending = plan
        self.commit(event)
        return plan

    def _check_log_only(self, event: Event) -> None:
        if event.type in SURFACE_TYPES:  # only reachable with events from make_event
            raise SurfaceError(f"{event.type} requires a surfaceOp marker")
        self._check_seq(event)

    def _check_seq(self, event: Event) -> None:
        if event.seq != self.next_seq:
            raise SurfaceError(f"seq {event.seq} is not contiguous; expected {self.next_seq}")

    def _plan(self, event: Event) -> _Plan:
        self._check_seq(event)
        op = event.surface_op
        if op is not None and event.type not in SURFACE_TYPES:  # only from make_event
            raise SurfaceError(f"{event.type} is not surface-eligible and cannot carry surfaceOp")
        if not isinstance(op, Replace):
            return _Plan(event, -1, -1, ())
        nodes = self.nodes
        try:
            start_index = nodes.index(op.start)
        except ValueError:
            raise SurfaceError(f"replace start seq {op.start} not found in surface") from None
        try:
            end_index = nodes.index(op.end)
        except ValueError:
            raise SurfaceError(f"replace end seq {op.end} not found in surface") from None
        if start_index > end_index:
            raise SurfaceError(
                f"replace start seq {op.start} (index {start_index}) is after "
                f"end seq {op.end} (index {end_index})"
            )
        if event.source_event_seqs is not None:  # S11: provenance after the range lookup
            parse_source_seqs(event.type, event.seq, event.source_event_seqs)
        shadowed = tuple(nodes[start_index : end_index + 1])
        cited = set(event.source_event_seqs or ())
        missing = [seq for seq in shadowed if seq not in cited]
        if missing:
            listed = ", ".join(str(seq) for seq in missing)
            raise SurfaceError(f"replace sourceEventSeqs must cover shadowed seqs: missing {listed}")
        if event.type == TOOL_RESULT:
            self._check_tool_result_rewrite(event, shadowed)
        return _Plan(event, start_index, end_index, shadowed)

    def _check_tool_result_rewrite(self, event: Event, shadowed: tuple[int, ...]) -> None:
        if len(shadowed) != 1:
            raise SurfaceError("tool/result replacement must rewrite exactly one current node")
        target = self._event_at(shadowed[0])
        if target.type != TOOL_RESULT:
            raise SurfaceError(
                f"tool/result replacement must target a current tool/result, "
                f"not {target.type} at seq {target.seq}"
            )
        if not json_equal(_blank_result_content(event.data), _blank_result_content(target.data)):
            raise SurfaceError(
                f"tool/result replacement of seq {target.seq} may change only content"
            )


def _blank_result_content(data: Any) -> Any:
    """``data`` with ``message.content`` cut to block 0, its inner content blanked (rule S12).

    Only block 0 is compared: blocks after it are ignored, as DSH does.
    """
    if not isinstance(data, dict):
        return data
    message = data.get("message")
    if not isinstance(message, dict):
        return data
    content = message.get("content")
    if not isinstance(content, (list, tuple)) or not content or not isinstance(content[0], dict):
        return data
    block = {**content[0], "content": None}
    return {**data, "message": {**message, "content": (block,)}}


def fold_surface(events: Sequence[Event], base_seq: int = 0) -> SurfaceFold:
    """Fold a log (or a window starting at ``base_seq``) with the live rules."""
    def event_at(seq: int) -> Event:
        return events[seq - base_seq]

    manager = SurfaceManager(event_at, base_seq)
    replacements: list[Replacement] = []
    for event in events:
        plan = manager.apply(event)
        if plan.start_index >= 0:
            op = event.surface_op
            assert isinstance(op, Replace)
            replacements.append(Replacement(event.seq, op.start, op.end, plan.shadowed))
    return SurfaceFold(tuple(manager.nodes), tuple(replacements))
