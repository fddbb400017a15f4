"""The viewer's read side: one store, read under one lock, with caches keyed by what changes.

The listing is re-read at most every ``listing_ttl`` seconds (and when an unknown id is asked
for); a session's inspection and index are kept until its stored log grows or changes; row
summaries are kept per listing revision and filled by a background indexer, so sorting and
filtering by title or size see every session once it has been read once. Nothing here writes:
every read is ``listing``, ``inspect`` or ``read_from``.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import valid_text
from agentlog.errors import SessionNotFoundError
from agentlog.ops.search import SearchResult, find_in_events, search_store
from agentlog.store.base import Store
from agentlog.store.records import Inspection, Listing
from agentlog.store.writer_probe import writer_pid
from agentlog.web.rows import Row, Summary, summarize
from agentlog.web.scan import SessionIndex, index_session

__all__ = ["MAX_ID_LENGTH", "SEARCH_HITS", "ForkNode", "Loaded", "Viewer"]

MAX_ID_LENGTH: Final = 4096
FAMILY_LIMIT: Final = 200
"""Sessions drawn in one fork tree at most."""
SEARCH_HITS: Final = 200
"""Hits the search page lists (it says how many more it found)."""
OPEN_SESSIONS: Final = 4
"""Inspected sessions kept in memory (the T = 1000 session holds about 100 MB)."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """A session as the pages read it: the inspection (closers included) and its index."""

    inspection: Inspection
    index: SessionIndex

    @property
    def header(self) -> SessionHeader:
        return self.inspection.header


@dataclass(frozen=True, slots=True)
class ForkNode:
    """A session in a fork tree, with its forks."""

    header: SessionHeader
    children: tuple[ForkNode, ...]


class Viewer:
    """Reads one store for the web pages; safe to share between request threads."""

    def __init__(self, store: Store, *, listing_ttl: float = 2.0) -> None:
        self.store = store
        self._lock = threading.RLock()  # the caches; store reads run outside it (stores are thread-safe)
        self._loading = threading.Lock()  # one page load at a time: two tabs never read a log twice
        self._listing_ttl = listing_ttl
        self._listing: Listing | None = None
        self._listed_at = 0.0
        self._headers: dict[str, tuple[SessionHeader, str]] = {}
        self._children: dict[str, list[SessionHeader]] = {}
        self._summaries: dict[str, tuple[str, Summary | str]] = {}
        """id -> (listing revision, its summary, or why its log could not be read)."""
        self._loaded: OrderedDict[str, Loaded] = OrderedDict()
        self._stop = threading.Event()
        self._indexer: threading.Thread | None = None

    # -- the listing ------------------------------------------------------------------------

    def listing(self, *, fresh: bool = False) -> Listing:
        """The store's listing, at most ``listing_ttl`` seconds old (``fresh``: re-read now)."""
        with self._lock:
            if self._listing is None or fresh or time.monotonic() - self._listed_at > self._listing_ttl:
                listing = self.store.listing()
                self._headers = {snap.header.id: (snap.header, snap.revision) for snap in listing.snapshots}
                children: dict[str, list[SessionHeader]] = {}
                for snap in listing.snapshots:
                    if snap.header.parent_session is not None:
                        children.setdefault(snap.header.parent_session, []).append(snap.header)
                self._children = children
                self._listing, self._listed_at = listing, time.monotonic()
            return self._listing

    def rows(self) -> list[Row]:
        """Every readable session with its summary when one has been read."""
        listing = self.listing()
        with self._lock:
            rows = []
            for snap in listing.snapshots:
                cached = self._summaries.get(snap.header.id)
                found = cached[1] if cached and cached[0] == snap.revision else None
                rows.append(Row(snap.header, None, found) if isinstance(found, str)
                            else Row(snap.header, found))
            return rows

    def known(self, session_id: str) -> SessionHeader:
        """The header of a listed session; the id is checked against the listing before any
        other read, so an id from a URL never reaches the store unless the store listed it."""
        if not isinstance(session_id, str) or not 0 < len(session_id) <= MAX_ID_LENGTH or (
            not valid_text(session_id)
        ):
            raise SessionNotFoundError("not a session id of this store")
        self.listing()
        with self._lock:
            found = self._headers.get(session_id)
        if found is None:
            self.listing(fresh=True)
            with self._lock:
                found = self._headers.get(session_id)
        if found is None:
            raise SessionNotFoundError("session not found", session_id=session_id)
        return found[0]

    def lineage(self, header: SessionHeader) -> tuple[list[SessionHeader], list[SessionHeader]]:
        """``(ancestors, root first; children)`` of a session, from the listing."""
        self.listing()
        with self._lock:
            ancestors: list[SessionHeader] = []
            parent, seen = header.parent_session, {header.id}
            while parent is not None and parent not in seen and parent in self._headers:
                seen.add(parent)
                ancestors.insert(0, self._headers[parent][0])
                parent = self._headers[parent][0].parent_session
            children = sorted(self._children.get(header.id, []),
                              key=lambda child: (child.created_at, child.id))
            return ancestors, children

    def family(self, header: SessionHeader, *, limit: int = FAMILY_LIMIT) -> ForkNode:
        """The fork tree the session belongs to, from its topmost listed ancestor down (at most
        ``limit`` sessions, children by creation time)."""
        ancestors, _ = self.lineage(header)
        root = ancestors[0] if ancestors else header
        budget = [limit]
        with self._lock:
            return self._subtree(root, set(), budget)

    def _subtree(self, header: SessionHeader, seen: set[str], budget: list[int]) -> ForkNode:
        seen.add(header.id)
        budget[0] -= 1
        nodes = []
        children = sorted(self._children.get(header.id, []), key=lambda child: (child.created_at, child.id))
        for child in children:
            if budget[0] <= 0:
                break
            if child.id not in seen:
                nodes.append(self._subtree(child, seen, budget))
        return ForkNode(header, tuple(nodes))

    # -- sessions ---------------------------------------------------------------------------

    def load(self, session_id: str) -> Loaded:
        """The session's inspection and index, re-read only when its stored log changed."""
        header = self.known(session_id)
        with self._loading:
            with self._lock:
                cached = self._loaded.get(session_id)
            if cached is not None and not self._changed(session_id, cached):
                with self._lock:
                    self._loaded.move_to_end(session_id)
                return cached
            inspection = self.store.inspect(session_id)
            loaded = Loaded(inspection, _index(inspection))
            summary = summarize(loaded.index, inspection.recovery, self._size(header))
            with self._lock:
                self._loaded[session_id] = loaded
                while len(self._loaded) > OPEN_SESSIONS:
                    self._loaded.popitem(last=False)
                self._summaries[header.id] = (self._headers.get(header.id, (header, ""))[1], summary)
            return loaded

    def _changed(self, session_id: str, loaded: Loaded) -> bool:
        try:
            return len(self.store.read_from(session_id, loaded.index.stored).events) > 0
        except SessionNotFoundError:
            raise
        except Exception:  # a changed or damaged tail: read the session afresh (and report that)
            return True

    def _size(self, header: SessionHeader) -> int | None:
        try:
            where = self.store.locate(header)
        except Exception:
            return None
        return os.stat(where).st_size if where and os.path.isfile(where) else None

    def writer(self, session_id: str) -> int | None:
        """The pid of the process holding the session's writer lock (``verify``'s check, which never
        takes the lock), None when none does or the backend cannot tell."""
        try:
            return writer_pid(self.store, session_id)
        except OSError:
            return None

    def statuses(self, rows: list[Row]) -> list[tuple[str, str] | None]:
        """Each row's ``(status, detail)`` now (None for a row not read yet)."""
        return [None if row.summary is None else row.summary.status(self.writer(row.header.id))
                for row in rows]

    def search(self, text: str, session_id: str | None = None) -> SearchResult:
        """Messages containing ``text`` (any case): in one listed session (its cached log), or in
        every session through the store's search index where it has one (``ops.search``)."""
        if session_id is None:
            return search_store(self.store, text)
        loaded = self.load(session_id)
        stored = loaded.inspection.events[: loaded.index.stored]
        return SearchResult(find_in_events(session_id, stored, text))

    def new_events(self, session_id: str, from_seq: int) -> list[Event]:
        """Stored events from ``from_seq`` on (the live feed polls this)."""
        self.known(session_id)
        return list(self.store.read_from(session_id, from_seq).events)

    def summarize(self, headers: list[SessionHeader]) -> None:
        """Read the row summaries of these listed sessions (a page's unread rows)."""
        for header in headers:
            with self._lock:
                revision = self._headers.get(header.id, (header, ""))[1]
            self.summarize_one(header, revision)

    def summarize_one(self, header: SessionHeader, revision: str) -> None:
        """Read one session for its row summary (the indexer; a failure leaves it unread)."""
        with self._lock:
            cached = self._summaries.get(header.id)
        if cached is not None and cached[0] == revision:
            return
        summary: Summary | str
        try:
            inspection = self.store.inspect(header.id)
        except Exception as exc:  # listed (its header reads) but its log does not: the row says why
            summary = f"{type(exc).__name__}: {exc}"
        else:
            summary = summarize(_index(inspection), inspection.recovery, self._size(header))
        with self._lock:
            self._summaries[header.id] = (revision, summary)

    # -- the background indexer -------------------------------------------------------------

    def start_indexer(self, pause: float = 10.0) -> None:
        """Read every listed session's summary in the background, then keep up with changes."""
        if self._indexer is None:
            self._indexer = threading.Thread(target=self._index_loop, args=(pause,),
                                             name="agentlog-web-index", daemon=True)
            self._indexer.start()

    def _index_loop(self, pause: float) -> None:
        while not self._stop.is_set():
            try:
                snapshots = list(self.listing().snapshots)
            except Exception:
                snapshots = []
            for snap in snapshots:
                if self._stop.is_set():
                    return
                self.summarize_one(snap.header, snap.revision)
            self._stop.wait(pause)

    def close(self) -> None:
        """Stop the indexer (the store is the caller's to close)."""
        self._stop.set()
        if self._indexer is not None:
            self._indexer.join(timeout=5)


def _index(inspection: Inspection) -> SessionIndex:
    closers = len(inspection.recovery.closers) if inspection.recovery else 0
    return index_session(inspection.events, len(inspection.events) - closers)
