"""The SQLite store's search index: folded message text beside the rows, FTS5 trigrams over it.

``search_rows`` holds one row per searchable event of a session's own rows (``fold`` of its
message text, see ``agentlog.core.search_text``). Since schema 4 it is written off the write path:
an append only sets the session's watermark (``sessions.unindexed``, the first seq not indexed),
and ``catch_up`` indexes the rows behind it when a live session closes or a writer's store
searches; a session whose index is behind is scanned, so the hits are the scan's. Rows are
deleted from the index in the transaction that deletes them (the watermark lowered with them).
``search_fts`` is a contentless FTS5 table (schema 4; external-content over ``search_rows`` in
schema 2 and 3) with the trigram tokenizer (case-sensitive: the text is folded already), its
rowids those of ``search_rows``, which then holds no text: the index keeps no second copy of the
messages. Without FTS5 in the ``sqlite3`` module the database has no ``search_fts``,
``search_rows`` keeps the folded text and ``instr`` over it does the same pre-filtering. Every
candidate is then confirmed by the exact scan of its event.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

from agentlog.core.events import Event
from agentlog.core.search_text import SEARCHED_TYPES, indexed_texts
from agentlog.store.sqlite.rows import Row, try_decode

__all__ = [
    "CONTENTLESS_SCHEMA",
    "FTS_SCHEMA",
    "SEARCH_SCHEMA",
    "candidates",
    "catch_up",
    "decode_candidates",
    "fill_index",
    "fts5_available",
    "index_events",
    "unindex_from",
]

SEARCH_SCHEMA: Final = (
    """CREATE TABLE search_rows (
  id INTEGER PRIMARY KEY,
  session INTEGER NOT NULL REFERENCES sessions (key),
  seq INTEGER NOT NULL,
  folded TEXT NOT NULL,
  UNIQUE (session, seq)
) STRICT""",
)
"""The folded text table (schema version 2); no cascade: a session's index rows go first, explicitly."""

FTS_SCHEMA: Final = (
    "CREATE VIRTUAL TABLE search_fts USING fts5(folded, content='search_rows', content_rowid='id', "
    "tokenize='trigram case_sensitive 1', detail=none)",
)
"""The trigram index, when the ``sqlite3`` module has FTS5 (created with the schema or migration).

``detail=none`` keeps only which rows hold each trigram, not where (a smaller index, fewer
writes); a row holding every trigram of the query is a candidate, and the scan confirms it."""

TRIGRAM: Final = 3
"""FTS5 trigrams answer queries of at least three characters; shorter ones use ``instr``."""
MAX_TRIGRAMS: Final = 16
"""Trigrams of a long query looked up (any subset still names every row that holds the query)."""

CONTENTLESS_SCHEMA: Final = (
    "DROP TABLE search_fts",
    "CREATE VIRTUAL TABLE search_fts USING fts5(folded, content='', tokenize='trigram case_sensitive 1', "
    "detail=none)",
    "INSERT INTO search_fts (rowid, folded) SELECT id, folded FROM search_rows",
    "ALTER TABLE search_rows DROP COLUMN folded",
)
"""Schema 4 with FTS5: the trigram index holds no copy of the text (contentless) and ``search_rows``
only maps its rowids to (session, seq); schema 3's folded copy was a third of the file. Run after
schema 3's statements, in a new file too, so a migrated file's schema text is a new one's. A
deletion gives FTS5 the text again, folded anew from the event rows (``unindex_from``)."""

_INSERT: Final = "INSERT INTO search_rows (session, seq, folded) VALUES (?, ?, ?)"
_INSERT_KEY: Final = "INSERT INTO search_rows (session, seq) VALUES (?, ?)"
_IDS: Final = "SELECT seq, id FROM search_rows WHERE session = ? AND seq BETWEEN ? AND ?"
_FTS_ADD: Final = "INSERT INTO search_fts (rowid, folded) VALUES (?, ?)"
_FTS_REMOVE: Final = "INSERT INTO search_fts (search_fts, rowid, folded) VALUES ('delete', ?, ?)"
_DELETE: Final = "DELETE FROM search_rows WHERE session = ? AND seq >= ?"
_ALL_BEHIND: Final = "UPDATE sessions SET unindexed = 0"
_MATCH_FTS: Final = (
    "SELECT r.session, r.seq FROM search_fts JOIN search_rows AS r ON r.id = search_fts.rowid "
    "WHERE search_fts MATCH ?"
)
_MATCH_SCAN: Final = "SELECT session, seq FROM search_rows WHERE instr(folded, ?) > 0"
_SESSION: Final = "SELECT key, base_key, base_length FROM sessions WHERE id = ?"
_PARENT: Final = "SELECT base_key, base_length FROM sessions WHERE key = ?"
_LAST_TYPE: Final = (
    "SELECT type FROM events WHERE session = ? AND seq >= ? AND seq < ? ORDER BY seq DESC LIMIT 1"
)
_ROW: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable, op_first FROM events "
    "WHERE session = ? AND seq = ?"
)
_BEHIND: Final = "SELECT key, unindexed FROM sessions WHERE unindexed IS NOT NULL ORDER BY key"
_BEHIND_ONE: Final = "SELECT key, unindexed FROM sessions WHERE id = ? AND unindexed IS NOT NULL"
_IS_BEHIND: Final = "SELECT 1 FROM sessions WHERE key = ? AND unindexed IS NOT NULL"
_UNINDEXED_ROWS: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable, op_first FROM events "
    "WHERE session = ? AND seq >= ? AND type IN ('user/message', 'assistant/message', 'tool/result', "
    "'steering/message') AND ignorable IS NOT 0 ORDER BY seq"
)
_CAUGHT_UP: Final = "UPDATE sessions SET unindexed = NULL WHERE key = ?"
_LOWER: Final = (
    "UPDATE sessions SET unindexed = CASE WHEN unindexed IS NULL OR unindexed > ?1 THEN ?1 "
    "ELSE unindexed END WHERE key = ?2"
)
_UNBOUNDED: Final = 1 << 62
_FILL_BATCH: Final = 1000


@functools.cache
def fts5_available() -> bool:
    """Whether this ``sqlite3`` module has FTS5 with the trigram tokenizer (SQLite 3.34+)."""
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.execute(FTS_SCHEMA[0].replace("content='search_rows', content_rowid='id', ", ""))
    except sqlite3.Error:
        return False
    finally:
        scratch.close()
    return True


# -- writes (inside the caller's write transaction) --------------------------------------------------


def _add(conn: sqlite3.Connection, key: int, texts: Sequence[tuple[int, str]], fts: bool) -> None:
    """Index rows of session ``key`` (seq order): the folded text in ``search_rows`` without FTS5,
    else its rowid there and the text in the contentless FTS5 table."""
    if not texts:
        return
    if not fts:
        conn.executemany(_INSERT, [(key, seq, text) for seq, text in texts])
        return
    conn.executemany(_INSERT_KEY, [(key, seq) for seq, _text in texts])
    ids = dict(conn.execute(_IDS, (key, texts[0][0], texts[-1][0])).fetchall())
    conn.executemany(_FTS_ADD, [(ids[seq], text) for seq, text in texts])


def _stored_texts(conn: sqlite3.Connection, key: int, first: int) -> Iterator[list[tuple[int, str]]]:
    """The folded texts of session ``key``'s message rows from seq ``first`` on, in batches; rows
    that do not decode are left out (search scans a session whose candidate does not decode)."""
    cursor = conn.execute(_UNINDEXED_ROWS, (key, first))
    while rows := cursor.fetchmany(_FILL_BATCH):  # bounded memory: the rows are read as they are indexed
        batch: list[tuple[int, str]] = []
        for row in rows:
            decoded = try_decode(tuple(row))
            if not isinstance(decoded, str):
                batch.extend(indexed_texts(decoded))
        yield batch


def index_events(conn: sqlite3.Connection, key: int, events: Iterable[Event], fts: bool) -> None:
    """Index the searchable events of a batch just inserted as session ``key``'s rows."""
    _add(conn, key, list(indexed_texts(events)), fts)


def unindex_from(conn: sqlite3.Connection, key: int, seq: int, fts: bool) -> None:
    """Drop the index rows of session ``key`` from ``seq`` on (before its event rows go); rows
    written there later wait for the indexer (schema 4). FTS5 is given each row's text, folded
    again from its event row; one that no longer decodes leaves its trigrams behind, naming a
    rowid that is gone or reused: a candidate at worst, which the exact scan refutes."""
    if fts:
        ids = dict(conn.execute(_IDS, (key, seq, _UNBOUNDED)).fetchall())
        for batch in _stored_texts(conn, key, seq) if ids else ():
            conn.executemany(_FTS_REMOVE, [(ids[at], text) for at, text in batch if at in ids])
    conn.execute(_DELETE, (key, seq))
    conn.execute(_LOWER, (seq, key))


def catch_up(conn: sqlite3.Connection, fts: bool, session_id: str | None = None) -> int:
    """Index the rows behind the watermark of every session (or of ``session_id``), inside the
    caller's write transaction; returns how many index rows were added. A row that does not decode
    is left out, as ``fill_index`` does (search scans a session whose candidate does not decode)."""
    behind = (conn.execute(_BEHIND).fetchall() if session_id is None
              else conn.execute(_BEHIND_ONE, (session_id,)).fetchall())
    added = 0
    for key, first in behind:
        for batch in _stored_texts(conn, key, first):
            _add(conn, key, batch, fts)
            added += len(batch)
        conn.execute(_CAUGHT_UP, (key,))
    return added


def fill_index(conn: sqlite3.Connection, fts: bool) -> None:
    """Index every stored message row (migration from schema 1); rows that do not decode are left out.

    A row that does not decode is never a hit of the scan either: its session is unreadable or
    it is a torn tail, and search scans a session whose candidate row does not decode.
    """
    conn.execute(_ALL_BEHIND)
    catch_up(conn, fts)


# -- reads ---------------------------------------------------------------------------------------------


def _fts_query(folded: str) -> str:
    """Every row holding ``folded`` holds each of its trigrams: an AND of FTS5 strings (``"`` doubled,
    so nothing in the query is ever an operator, column filter or prefix)."""
    trigrams = list(dict.fromkeys(folded[at:at + TRIGRAM] for at in range(len(folded) - TRIGRAM + 1)))
    step = max(1, len(trigrams) // MAX_TRIGRAMS)
    chosen = trigrams[::step][:MAX_TRIGRAMS]
    return " AND ".join('"' + trigram.replace('"', '""') + '"' for trigram in chosen)


def _matches(conn: sqlite3.Connection, folded: str, fts: bool) -> dict[int, set[int]]:
    if fts and len(folded) >= TRIGRAM:
        found = conn.execute(_MATCH_FTS, (_fts_query(folded),)).fetchall()
    else:
        found = conn.execute(_MATCH_SCAN, (folded,)).fetchall()
    matched: dict[int, set[int]] = {}
    for key, seq in found:
        matched.setdefault(key, set()).add(seq)
    return matched


def _segments(conn: sqlite3.Connection, session_id: str) -> list[tuple[int, int, int]] | None:
    """``(key, first seq, end seq)`` of the rows a session reads, own rows first; None if unknown."""
    row = conn.execute(_SESSION, (session_id,)).fetchone()
    if row is None:
        return None
    key, base_key, limit = row
    segments = [(key, limit or 0, _UNBOUNDED)]
    seen = {key}
    while base_key is not None:
        parent = conn.execute(_PARENT, (base_key,)).fetchone()
        if parent is None or base_key in seen or type(limit) is not int:
            return None
        seen.add(base_key)
        start = parent[1] or 0
        if start < limit:
            segments.append((base_key, start, limit))
        limit = min(limit, start)
        base_key = parent[0]
    return segments


def _ended(conn: sqlite3.Connection, segments: Sequence[tuple[int, int, int]]) -> bool:
    """Whether the session's last stored event is a ``turn/end`` (so reading it adds no closers)."""
    for key, start, end in segments:
        row = conn.execute(_LAST_TYPE, (key, start, end)).fetchone()
        if row is not None:
            return bool(row[0] == "turn/end")
    return True


def _behind(conn: sqlite3.Connection, segments: Sequence[tuple[int, int, int]]) -> bool:
    """Whether a session of the chain has rows the index does not hold yet (schema 4)."""
    return any(conn.execute(_IS_BEHIND, (key,)).fetchone() is not None for key, _start, _end in segments)


def candidates(conn: sqlite3.Connection, folded: str, session_ids: Sequence[str], fts: bool,
               live: Iterable[str], watermark: bool = False) -> dict[str, list[Row] | None]:
    """Per session, the stored rows that may hold the text (read transaction held by the caller).

    A session is left to the scan (None) when the index cannot stand for it: unknown or broken
    chain (the scan names the error), open in this process (unflushed events), rows behind the
    ``watermark`` (not indexed yet), or a last event that is not ``turn/end`` (reading it adds
    repair closers that are in no row).
    """
    matched = _matches(conn, folded, fts)
    live_ids = set(live)
    result: dict[str, list[Row] | None] = {}
    for session_id in session_ids:
        segments = None if session_id in live_ids else _segments(conn, session_id)
        if segments is None or (watermark and _behind(conn, segments)) or not _ended(conn, segments):
            result[session_id] = None
            continue
        seqs = sorted(seq for key, start, end in segments for seq in matched.get(key, ())
                      if start <= seq < end)
        rows: list[Row] = []
        for seq in seqs:
            key = next(key for key, start, end in segments if start <= seq < end)
            rows.extend(conn.execute(_ROW, (key, seq)).fetchall())
        result[session_id] = rows
    return result


def decode_candidates(rows: Sequence[Row]) -> list[Event] | None:
    """The events of candidate rows, or None when one does not decode or is a legacy shape (whose
    upgrade on read only the scan applies): then the session is scanned."""
    events: list[Event] = []
    for row in rows:
        decoded = try_decode(row)
        if isinstance(decoded, str) or len(decoded) != 1 or decoded[0].type not in SEARCHED_TYPES:
            return None
        events.extend(decoded)
    return events
