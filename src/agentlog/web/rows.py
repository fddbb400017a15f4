"""The sessions page: one summary row per session, its status, and server-side filter, sort, pages."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentlog.core.header import SessionHeader
from agentlog.store.records import Recovery
from agentlog.web.scan import SessionIndex

__all__ = ["PAGE_SIZE", "SORTS", "Row", "RowsPage", "Summary", "select", "last_end", "status_of", "summarize"]

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
    last_end: str | None = None
    """How the last closed turn ended (its ``reason.kind``), None when no turn ended."""

    def status(self, writer: int | None) -> tuple[str, str]:
        """``(status, detail)`` given the pid holding the writer lock (see ``status_of``)."""
        return status_of(self.recovery, writer, self.last_end)


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


def status_of(recovery: Recovery | None, writer: int | None, last_end: str | None) -> tuple[str, str]:
    """``(status, detail)`` from the truth, as ``verify`` tells it: ``open`` while a process holds
    the writer lock (``writer``, its pid); else ``interrupted`` when a load would repair the log
    (an unclosed turn, a torn tail); else ``error`` when the last turn ended in an error or was
    closed by crash repair, and ``ended`` otherwise."""
    if writer is not None:
        if recovery is not None and recovery.turn is not None:
            return "open", f"turn {recovery.turn} is being recorded by process {writer}"
        return "open", f"process {writer} holds the writer lock (between turns)"
    if recovery is not None and recovery.torn:
        where = f" ({recovery.torn_bytes} bytes at offset {recovery.torn_offset})" if recovery.torn_bytes \
            else ""
        return "interrupted", f"needs repair: a torn tail is ignored{where}"
    if recovery is not None:
        count = len(recovery.closers)
        return "interrupted", (f"needs repair: turn {recovery.turn} was left open; loading it writes "
                               f"{count} synthetic event{'' if count == 1 else 's'}")
    if last_end == "error":
        return "error", "the last turn ended in an error"
    if last_end == "interrupted":
        return "error", "the last turn was interrupted (closed by crash repair)"
    return "ended", "every turn is closed"


def summarize(index: SessionIndex, recovery: Recovery | None, size: int | None) -> Summary:
    """The row summary of an indexed session."""
    turns = sum(1 for span in index.turns if span.number is not None)
    return Summary(index.title, index.model, turns, index.stored, size, index.last_time, recovery,
                   last_end(index))


def last_end(index: SessionIndex) -> str | None:
    """The ``reason.kind`` of the last stored turn that ended (closers a load would write excluded)."""
    for span in reversed(index.turns):
        if span.number is not None and span.ended is not None and span.repair != "pending":
            return span.reason
    return None


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
