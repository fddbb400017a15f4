"""Fork: a new session seeded with a stable prefix of another (spec session-core §9).

The rules here need no store: boundary resolution, the open-turn refusal and the child's
header. Stores add the existence checks (``SESSION_NOT_FOUND``, ``SESSION_NOT_LIVE``,
``SESSION_ALREADY_EXISTS``) before calling ``check_fork_boundary``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final
from uuid import uuid4

from agentlog.core.events import TURN_END, TURN_START, Event, is_safe_int
from agentlog.core.header import SessionHeader
from agentlog.core.session import Session
from agentlog.errors import ForkError

__all__ = [
    "INVALID_BOUNDARY",
    "OPEN_TURN",
    "SESSION_ALREADY_EXISTS",
    "SESSION_NOT_FOUND",
    "SESSION_NOT_LIVE",
    "check_fork_boundary",
    "turn_end_after",
    "child_header",
    "fork",
]

INVALID_BOUNDARY: Final = "INVALID_BOUNDARY"
"""The boundary is not a seq of the source log."""

OPEN_TURN: Final = "OPEN_TURN"
"""The boundary falls inside a turn that has started but not ended."""

SESSION_NOT_FOUND: Final = "SESSION_NOT_FOUND"
"""The source id is unknown to the store (stores raise it)."""

SESSION_NOT_LIVE: Final = "SESSION_NOT_LIVE"
"""The source object is not the store's live instance for its id (stores raise it)."""

SESSION_ALREADY_EXISTS: Final = "SESSION_ALREADY_EXISTS"
"""The child id is taken; stores check it before the boundary (F1)."""


def check_fork_boundary(events: Sequence[Event], boundary: int | None, session_id: str) -> int:
    """Resolve and check a fork boundary (F2-F4); return the seed length (``boundary + 1``).

    ``None`` means the last event (seed length 0 on an empty log). Raises ``ForkError``
    with code ``INVALID_BOUNDARY`` or ``OPEN_TURN``.
    """
    if boundary is None:
        if not events:
            return 0
        boundary = events[-1].seq
    if not is_safe_int(boundary) or boundary < 0:
        raise ForkError(
            f'fork boundary for session "{session_id}" must be a non-negative safe integer, '
            f"got {boundary!r}",
            session_id=session_id, code=INVALID_BOUNDARY,
        )
    if boundary >= len(events):
        last = str(events[-1].seq) if events else "none"
        raise ForkError(
            f'fork boundary {boundary} does not exist in session "{session_id}" (last seq: {last})',
            session_id=session_id, code=INVALID_BOUNDARY,
        )
    if events[boundary].seq != boundary:
        raise ForkError(
            f'fork boundary {boundary} does not match a contiguous event seq in session "{session_id}"',
            session_id=session_id, code=INVALID_BOUNDARY,
        )
    for index in range(boundary, -1, -1):
        event = events[index]
        if event.type == TURN_END:
            break
        if event.type == TURN_START:
            turn = event.data.get("turn") if isinstance(event.data, dict) else None
            raise ForkError(
                f'fork boundary {boundary} in session "{session_id}" ends inside open turn {turn}'
                f"{_nearest_boundaries(events, index, boundary)}",
                session_id=session_id, code=OPEN_TURN,
            )
    return boundary + 1


def _nearest_boundaries(events: Sequence[Event], turn_start: int, boundary: int) -> str:
    """The valid boundary before an open turn (from the prefix only: cold and warm forks agree)."""
    return f"; the nearest valid boundary before it is seq {turn_start - 1}" if turn_start > 0 else ""


def turn_end_after(events: Sequence[Event], boundary: int) -> int | None:
    """The seq of the ``turn/end`` closing the turn open at ``boundary``, if the log holds it."""
    for event in events[boundary + 1:]:
        if event.type == TURN_END:
            return event.seq
        if event.type == TURN_START:
            return None
    return None


def child_header(source: Session, child_id: str, seed_length: int) -> SessionHeader:
    """The fork child's header: lineage and cwd from the source, nothing else inherited (F5)."""
    return SessionHeader(
        id=child_id,
        cwd=source.header.cwd,
        parent_session=source.id,
        seed_length=seed_length,
    )


def fork(source: Session, boundary: int | None = None, child_id: str | None = None) -> Session:
    """A new session whose seed is ``source``'s events up to ``boundary`` (default: all).

    The boundary must not fall inside an open turn. The child's header names the parent
    and the seed length; the child ends its seed with a ``session/end-seed`` marker unless
    the prefix already ends with one. ``source`` is not changed.
    """
    events = source.events
    seed_length = check_fork_boundary(events, boundary, source.id)
    if child_id is None:
        child_id = f"{source.id}-fork-{uuid4().hex[:12]}"
    header = child_header(source, child_id, seed_length)
    return Session.create(child_id, seed=events[:seed_length], header=header)
