"""The session page's turn outline: one line per turn, with what happened in it marked, and the
transcript window (``?turn=``) that shows it, so every jump link lands on its turn."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agentlog.core.events import USER_MESSAGE, Event
from agentlog.core.packed import ChunkRun
from agentlog.web.scan import SessionIndex, slots, title_of
from agentlog.web.views import TURNS_PAGE

__all__ = ["OutlineEntry", "outline"]

TITLE_LIMIT = 90


@dataclass(frozen=True, slots=True)
class OutlineEntry:
    """One turn in the outline: where it is, its first user message, and its marks."""

    position: int
    """Its place in the session's turns; ``window`` is the ``?turn=`` page that starts at or before it."""
    number: int | None
    start: int
    title: str
    steps: int
    reason: str | None
    marks: tuple[str, ...]
    """Among ``compaction``, ``fork`` (a child forks in it), ``crash`` (left open by a dead
    writer, or closed by crash repair) and ``error`` (it ended in an error)."""

    @property
    def window(self) -> int:
        return self.position - self.position % TURNS_PAGE

    @property
    def anchor(self) -> str:
        return f"turn-{self.number}" if self.number is not None else "turn-prefix"


def _first_user_text(events: Sequence[Event], start: int, stop: int) -> str:
    for _, entry in slots(events, start, stop):
        if isinstance(entry, ChunkRun) or entry.type != USER_MESSAGE:
            continue
        title = title_of(entry.data.get("content") if isinstance(entry.data, dict) else None, TITLE_LIMIT)
        if title:
            return title
    return ""


def outline(events: Sequence[Event], index: SessionIndex, fork_points: Iterable[int], *,
            live: bool = False) -> list[OutlineEntry]:
    """Every turn of ``index``; ``fork_points``: the last shared seq of each child fork; ``live``:
    a writer holds the session, so its open turn is being recorded, not crashed."""
    forks = sorted(fork_points)
    entries: list[OutlineEntry] = []
    for position, span in enumerate(index.turns):
        marks: list[str] = []
        if any(span.start <= bracket.start_seq < span.stop for bracket in index.brackets):
            marks.append("compaction")
        if any(span.start <= seq < span.stop for seq in forks):
            marks.append("fork")
        if span.repair == "committed" or (span.repair == "pending" and not live):
            marks.append("crash")
        if span.reason == "error":
            marks.append("error")
        title = _first_user_text(events, span.start, span.stop)
        entries.append(OutlineEntry(position, span.number, span.start, title, span.steps, span.reason,
                                    tuple(marks)))
    return entries
