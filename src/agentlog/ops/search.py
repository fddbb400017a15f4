"""Find text in sessions' messages: every hit with its session id, seq and a snippet.

``find_in_events`` is the pure scan over one log; ``search_store`` runs it over every session a
store lists (read-only: ``inspect`` never writes) and reports the sessions it could not read.
A store with a search index (SQLite, PostgreSQL) first names the few stored events that may
match; only those are scanned, so the hits are the scan's (see ``agentlog.core.search_text``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentlog.core.events import Event
from agentlog.core.message_text import text_of
from agentlog.core.messages import derive_event_message
from agentlog.core.search_text import SEARCHED_TYPES, Candidates, fold, folding_available
from agentlog.errors import AgentlogError, UsageError
from agentlog.store.base import Store
from agentlog.store.records import Unreadable

__all__ = ["Hit", "IndexedStore", "SearchResult", "find_in_events", "search_store", "snippet"]

SNIPPET_CONTEXT = 40
"""Characters of context each side of a match in a snippet."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One message that contains the text."""

    session_id: str
    seq: int
    type: str
    role: str
    snippet: str

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session_id, "seq": self.seq, "type": self.type, "role": self.role,
                "snippet": self.snippet}


@dataclass(slots=True)
class SearchResult:
    """Every hit in store order, and each session that could not be read."""

    hits: list[Hit] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    stopped: bool = False
    """True when ``stop`` ended the search early: the hits are those of the sessions read so far."""


@runtime_checkable
class IndexedStore(Protocol):
    """A store with a search index: the stored events that may contain folded text, per session."""

    def search_candidates(self, folded: str, session_ids: Sequence[str]) -> Candidates | None:
        """Per session, a superset (in seq order) of its events containing ``folded`` once folded,
        or None where only a scan can answer; None when the store has no index."""


def snippet(text: str, start: int, length: int, context: int = SNIPPET_CONTEXT) -> str:
    """The match at ``start`` with ``context`` characters each side, whitespace collapsed."""
    end = start + length
    left = "…" if start > context else ""
    right = "…" if end + context < len(text) else ""
    return " ".join((left + text[max(0, start - context):end + context] + right).split())


def find_in_events(session_id: str, events: Iterable[Event], text: str) -> list[Hit]:
    """Messages (user, assistant, tool results) of ``events`` containing ``text``, ignoring case."""
    needle = re.compile(re.escape(text), re.IGNORECASE)
    hits: list[Hit] = []
    for event in events:
        if event.type not in SEARCHED_TYPES:
            continue
        message = derive_event_message(event)
        if message is None:
            continue
        body = text_of(message.get("content"))
        found = needle.search(body)
        if found is None:
            continue
        role = "tool" if event.type == "tool/result" else str(message.get("role"))
        hits.append(Hit(session_id, event.seq, event.type, role,
                        snippet(body, found.start(), found.end() - found.start())))
    return hits


def search_store(store: Store, text: str, *, session_ids: Sequence[str] | None = None,
                 progress: Callable[[int, int], None] | None = None, scan: bool = False,
                 stop: Callable[[], bool] | None = None) -> SearchResult:
    """Hits in every listed session (or only ``session_ids``); ``progress(done, total)`` after each.

    The store's search index, if any, narrows what is read; ``scan=True`` reads every session.
    ``stop`` is asked before each session (a Ctrl-C in the CLI): once true, the hits so far are
    returned, ``stopped``.
    """
    if not text or not text.strip():
        raise UsageError("the search text is empty")
    result = SearchResult()
    if session_ids is None:
        listing = store.listing()
        result.unreadable.extend(listing.unreadable)
        session_ids = sorted(snapshot.header.id for snapshot in listing.snapshots)
    indexed = None
    if not scan and isinstance(store, IndexedStore) and folding_available():
        indexed = store.search_candidates(fold(text), session_ids)
    for done, session_id in enumerate(session_ids, 1):
        if stop is not None and stop():
            result.stopped = True
            break
        candidates = None if indexed is None else indexed.get(session_id)
        try:
            events = store.inspect(session_id).events if candidates is None else candidates
        except AgentlogError as exc:  # one damaged session never hides the hits of the others
            result.unreadable.append(Unreadable(session_id, session_id, exc))
        else:
            result.hits.extend(find_in_events(session_id, events, text))
        if progress is not None:
            progress(done, len(session_ids))
    return result
