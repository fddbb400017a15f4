"""The sessions page: one summary row per session, its status, and server-side filter, sort, pages."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentlog.core.header import SessionHeader
from agentlog.store.records import Recovery
from agentlog.web.scan import SessionIndex

__all__ = ["LIVE_MS", "PAGE_SIZE", "SORTS", "Row", "RowsPage", "Summary", "select", "status_of", "summarize"]

LIVE_MS: Final = 120_000
"""An open turn whose last event is younger than this is taken as being recorded, not crashed."""
PAGE_SIZE: Final = 50


@dataclass(frozen=True, slots=True)
class Summary:
    """What the sessions page shows of a session beyond its header (needs a read of its log)."""

    title: str
    model: str | None
    turns: int
    events: int
    size: int | None
    last_activity: int | None
    recovery: Recovery | None

    def status(self, now_ms: int) -> tuple[str, str]:
        """``(status, detail)`` now: ``open``, ``ended`` or ``crashed`` (see ``status_of``)."""
        return status_of(self.last_activity, self.recovery, now_ms)


@dataclass(frozen=True, slots=True)
class Row:
    """A session on the sessions page: its header and, once read, its summary."""

    header: SessionHeader
    summary: Summary | None
    error: str | None = None
    """Why its log could not be read (its header could), when it was tried and failed."""


@dataclass(frozen=True, slots=True)
class RowsPage:
    """One page of the filtered, sorted session list."""

    rows: list[Row]
    total: int
    matched: int
    page: int
    pages: int


def status_of(last_time: int | None, recovery: Recovery | None, now_ms: int) -> tuple[str, str]:
    """``(status, detail)``: ``ended`` when every turn is closed; an open turn with recent events
    is ``open`` (being recorded); an older one, or a torn tail, is ``crashed`` (a load repairs it)."""
    if recovery is None:
        return "ended", "every turn is closed"
    age = None if last_time is None else now_ms - last_time
    if recovery.torn:
        where = f" ({recovery.torn_bytes} bytes at offset {recovery.torn_offset})" if recovery.torn_bytes \
            else ""
        return "crashed", f"needs repair: a torn tail is ignored{where}"
    if age is not None and age < LIVE_MS:
        return "open", f"turn {recovery.turn} is being recorded (last event {age // 1000} s ago)"
    return "crashed", (f"needs repair: turn {recovery.turn} was left open; loading it writes "
                       f"{len(recovery.closers)} synthetic events")


def summarize(index: SessionIndex, recovery: Recovery | None, size: int | None) -> Summary:
    """The row summary of an indexed session."""
    turns = sum(1 for span in index.turns if span.number is not None)
    return Summary(index.title, index.model, turns, index.stored, size, index.last_time, recovery)


def _text(row: Row) -> str:
    header, summary = row.header, row.summary
    parts = [header.id, header.cwd or "", header.parent_session or ""]
    if summary is not None:
        parts += [summary.title, summary.model or ""]
    return "\n".join(parts).casefold()


def _summary_key(field_name: str, default: Callable[[SessionHeader], Any]) -> Callable[[Row], Any]:
    def key(row: Row) -> Any:
        if row.summary is None:
            return (0, default(row.header))
        value = getattr(row.summary, field_name)
        return (1, value if value is not None else default(row.header))
    return key


SORTS: Final[dict[str, Callable[[Row], Any]]] = {
    "activity": _summary_key("last_activity", lambda header: header.created_at),
    "created": lambda row: row.header.created_at,
    "id": lambda row: row.header.id,
    "cwd": lambda row: row.header.cwd or "",
    "title": _summary_key("title", lambda header: ""),
    "turns": _summary_key("turns", lambda header: -1),
    "events": _summary_key("events", lambda header: -1),
    "size": _summary_key("size", lambda header: -1),
}
"""Sort keys; a session not read yet sorts before the read ones (ascending) on summary columns."""


def select(rows: Sequence[Row], query: str, sort: str, descending: bool, page: int) -> RowsPage:
    """Filter ``rows`` by text (case-insensitive, in id, cwd, parent and read summaries), sort, page."""
    needle = query.casefold().strip()
    matched = [row for row in rows if needle in _text(row)] if needle else list(rows)
    matched.sort(key=lambda row: row.header.id)
    matched.sort(key=SORTS.get(sort, SORTS["activity"]), reverse=descending)
    pages = max(1, -(-len(matched) // PAGE_SIZE))
    page = min(max(page, 1), pages)
    start = (page - 1) * PAGE_SIZE
    return RowsPage(matched[start : start + PAGE_SIZE], len(rows), len(matched), page, pages)
