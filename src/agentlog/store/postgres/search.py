"""The PostgreSQL store's search index: folded message text beside the rows, trigrams over it.

``search_text`` holds one row per searchable event of a session's own rows (``fold`` of its
message text, see ``agentlog.core.search_text``; the text, never the ``data_zstd`` bytes), deleted
with them by a cascading foreign key. It is kept off the write path (schema 4): an append writes
no index, and ``sessions.indexed_to`` is the watermark below which a session's own rows are
indexed (NULL: all of them, as schemas 2 and 3 wrote it). A search first indexes the sessions it
reads up to their next seq (``catch_up``); a session whose rows are still past its watermark (a
reader without write access) is left to the scan. ``folded LIKE '%query%'`` finds the
candidates; when ``pg_trgm`` can be installed a GIN trigram index answers it, otherwise it is a
sequential scan of the folded text. Every candidate is then confirmed by the exact scan of its
event, so the hits are the scan's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import psycopg
from psycopg import sql

from agentlog.core.events import Event
from agentlog.core.search_text import SEARCHED_TYPES, Candidates, indexed_texts
from agentlog.errors import AgentlogError
from agentlog.store.postgres.rows import ROW_COLUMNS, decode_physical_row

__all__ = ["SEARCH_TABLE", "SearchStatements", "candidates", "fill_index", "search_columns"]

SEARCH_TABLE: Final = (
    """CREATE TABLE {schema}.search_text (
        session_id text NOT NULL,
        seq bigint NOT NULL,
        folded text NOT NULL,
        PRIMARY KEY (session_id, seq),
        FOREIGN KEY (session_id, seq) REFERENCES {schema}.events (session_id, seq) ON DELETE CASCADE)"""
)
"""Migration 2's table: deleting event rows (truncation, session deletion) deletes their text."""

SEARCH_INSERT: Final = (
    "INSERT INTO {schema}.search_text (session_id, seq, folded) SELECT %(id)s, s.seq, s.folded "
    "FROM unnest(%(search_seq)b::bigint[], %(search_folded)b::text[]) AS s(seq, folded) "
    "ON CONFLICT DO NOTHING"
)
"""The batch's folded text as two array parameters (``search_columns``); a row indexed already
(past a watermark that an earlier catch-up did not advance) is kept."""

_TRIGRAMS: Final = "CREATE INDEX search_text_trigrams ON {schema}.search_text USING gin (folded {ops})"
_MESSAGE_TYPES: Final = "type IN ('user/message', 'assistant/message', 'tool/result', 'steering/message')"
_MESSAGE_ROWS: Final = (f"SELECT session_id, {', '.join(ROW_COLUMNS)} FROM {{schema}}.events "
                         f"WHERE {_MESSAGE_TYPES}")
_TEMPLATES: Final = {
    "match": "SELECT session_id, seq FROM {schema}.search_text WHERE folded LIKE %s",
    "sessions": "SELECT {columns}, (SELECT e.type FROM {schema}.events AS e WHERE e.session_id = s.id "
                "AND e.seq >= s.base_length AND e.seq < s.next_seq ORDER BY e.seq DESC LIMIT 1) "
                "FROM {schema}.sessions AS s WHERE s.id = ANY(%s)",
    "last_type": "SELECT type FROM {schema}.events WHERE session_id = %s AND seq >= %s AND seq < %s "
                 "ORDER BY seq DESC LIMIT 1",
    "lagging": "SELECT id FROM {schema}.sessions WHERE indexed_to < next_seq AND (id = ANY(%(ids)s) OR id IN "
               "(SELECT base_session FROM {schema}.sessions WHERE id = ANY(%(ids)s))) ORDER BY id",
    "hold": "SELECT indexed_to, next_seq FROM {schema}.sessions WHERE id = %s FOR KEY SHARE",
    "unindexed": f"SELECT {', '.join(ROW_COLUMNS)} FROM {{schema}}.events WHERE session_id = %s "
                 f"AND seq >= %s AND seq < %s AND {_MESSAGE_TYPES} ORDER BY seq",
    "advance": "UPDATE {schema}.sessions SET indexed_to = %s WHERE id = %s AND indexed_to < %s",
    "watermarks": "SELECT id, COALESCE(indexed_to, next_seq) FROM {schema}.sessions WHERE id = ANY(%s)",
    "rows": f"SELECT e.session_id, {', '.join('e.' + name for name in ROW_COLUMNS)} "
            "FROM {schema}.events AS e JOIN unnest(%s::text[], %s::bigint[]) AS wanted(session_id, seq) "
            "ON e.session_id = wanted.session_id AND e.seq = wanted.seq",
}
_FILL_BATCH: Final = 1000

Segments = list[tuple[str, int, int]]
"""A session's ``(owner id, first seq, end seq)`` row ranges, own rows first."""
Chain = Callable[[psycopg.Connection[Any], Sequence[Any]], "Segments | None"]
"""The row ranges of a ``sessions`` row; None if the row or its fork chain is damaged."""


class SearchStatements:
    """The search SQL with the schema name filled in (rendered once per store)."""

    def __init__(self, schema: str, session_columns: str) -> None:
        name, columns = sql.Identifier(schema), sql.SQL(", ".join(f"s.{column.strip()}"
                                                                   for column in session_columns.split(",")))
        rendered = {key: sql.SQL(text).format(schema=name, columns=columns).as_string()
                    for key, text in _TEMPLATES.items()}
        self.match = rendered["match"]
        self.sessions = rendered["sessions"]
        self.last_type = rendered["last_type"]
        self.rows = rendered["rows"]
        self.lagging = rendered["lagging"]
        self.hold = rendered["hold"]
        self.unindexed = rendered["unindexed"]
        self.advance = rendered["advance"]
        self.watermarks = rendered["watermarks"]
        self.insert = sql.SQL(SEARCH_INSERT).format(schema=name).as_string()


def search_columns(events: Iterable[Event]) -> dict[str, list[Any]]:
    """``SEARCH_INSERT``'s parameters for a batch of events."""
    found = list(indexed_texts(events))
    return {"search_seq": [seq for seq, _ in found], "search_folded": [text for _, text in found]}


def _indexable(rows: Iterable[Sequence[Any]]) -> list[Event]:
    """The events of the rows that decode (one that does not is never a hit of the scan either:
    its session is unreadable, or it is a torn tail and search scans such a session)."""
    events: list[Event] = []
    for row in rows:
        try:
            events.extend(decode_physical_row(row))
        except (AgentlogError, ValueError, TypeError):
            continue
    return events


def catch_up(conn: psycopg.Connection[Any], statements: SearchStatements, session_ids: Sequence[str]) -> None:
    """Index the rows past the watermark of ``session_ids`` (and of the parents they fork from),
    one transaction per session, and advance it to the session's next seq.

    The session row is held ``FOR KEY SHARE`` meanwhile: appends go on (their rows land past the
    new watermark), a repair's truncation or a deletion waits, so no indexed row is stale. A
    refused write (a read-only role or standby) stops the catch-up: those sessions are scanned.
    """
    try:
        lagging = [row[0] for row in conn.execute(statements.lagging, {"ids": list(session_ids)})]
        for session_id in lagging:
            with conn.transaction():
                row = conn.execute(statements.hold, (session_id,)).fetchone()
                if row is None or row[0] is None or row[0] >= row[1]:
                    continue
                start, end = row
                events = _indexable(conn.execute(statements.unindexed, (session_id, start, end)))
                conn.execute(statements.insert, {"id": session_id, **search_columns(events)})
                conn.execute(statements.advance, (end, session_id, end))
    except (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege):
        return


def fill_index(conn: psycopg.Connection[Any], schema: str) -> None:
    """Migration 2's data step: index every stored message row, then add the trigram index if possible.

    A row that does not decode is left out (``_indexable``).
    """
    name = sql.Identifier(schema)
    insert = sql.SQL(SEARCH_INSERT).format(schema=name).as_string()
    with conn.cursor(name="agentlog_search_fill") as cursor:
        cursor.execute(sql.SQL(_MESSAGE_ROWS).format(schema=name).as_string())
        while batch := cursor.fetchmany(_FILL_BATCH):
            by_session: dict[str, list[Sequence[Any]]] = {}
            for session_id, *row in batch:
                by_session.setdefault(session_id, []).append(row)
            for session_id, rows in by_session.items():
                conn.execute(insert, {"id": session_id, **search_columns(_indexable(rows))})
    _add_trigrams(conn, name)


def _add_trigrams(conn: psycopg.Connection[Any], name: sql.Identifier) -> None:
    """A GIN trigram index when ``pg_trgm`` is installed or installable here (else LIKE scans)."""
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            row = conn.execute("SELECT extnamespace::regnamespace::text FROM pg_extension "
                               "WHERE extname = 'pg_trgm'").fetchone()
            if row is None:
                return
            ops = sql.SQL("{}.gin_trgm_ops").format(sql.Identifier(row[0]))
            conn.execute(sql.SQL(_TRIGRAMS).format(schema=name, ops=ops))
    except psycopg.Error:
        return


def _like(folded: str) -> str:
    """``folded`` as a LIKE pattern matching it anywhere, its ``%``, ``_`` and ``\\`` literal."""
    escaped = folded.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def candidates(conn: psycopg.Connection[Any], statements: SearchStatements, folded: str,
               session_ids: Sequence[str], chain: Chain, live: Iterable[str]) -> Candidates:
    """Per session, the stored events that may hold ``folded`` (one read-only snapshot, caller's).

    A session is left to the scan (None) when unknown or damaged, open in this process, when
    its last stored event is not ``turn/end`` (reading it adds repair closers that are in no
    row), or when a candidate row does not decode. A few statements whatever the session count.
    """
    matched: dict[str, set[int]] = {}
    for session_id, seq in conn.execute(statements.match, (_like(folded),)):
        matched.setdefault(session_id, set()).add(seq)
    live_ids = set(live)
    plans: dict[str, Segments] = {}
    for *row, last in conn.execute(statements.sessions, (list(session_ids),)).fetchall():
        segments = None if row[0] in live_ids else chain(conn, row)
        if segments is not None and (last == "turn/end" if last is not None
                                     else _ended(conn, statements, segments[1:])):
            plans[row[0]] = segments
    owners = sorted({owner for segments in plans.values() for owner, _start, _end in segments})
    marks = dict(conn.execute(statements.watermarks, (owners,)).fetchall()) if owners else {}
    plans = {sid: segments for sid, segments in plans.items()
             if all(end <= marks.get(owner, -1) for owner, _start, end in segments)}
    wanted = sorted({(owner, seq) for segments in plans.values() for owner, start, end in segments
                     for seq in matched.get(owner, ()) if start <= seq < end})
    rows = {}
    if wanted:
        owners, seqs = [owner for owner, _ in wanted], [seq for _, seq in wanted]
        rows = {(row[0], row[1]): row[1:] for row in conn.execute(statements.rows, (owners, seqs))}
    result: Candidates = {}
    for session_id in session_ids:
        segments = plans.get(session_id)
        if segments is None:
            result[session_id] = None
            continue
        found = [rows[key] for key in sorted((owner, seq) for owner, start, end in segments
                                             for seq in matched.get(owner, ()) if start <= seq < end)
                 if key in rows]
        found.sort(key=lambda row: int(row[0]))
        result[session_id] = _decoded(found, [])
    return result


def _ended(conn: psycopg.Connection[Any], statements: SearchStatements,
           segments: Sequence[tuple[str, int, int]]) -> bool:
    """Whether the session's last stored event is a ``turn/end``."""
    for owner, start, end in segments:
        row = conn.execute(statements.last_type, (owner, start, end)).fetchone()
        if row is not None:
            return bool(row[0] == "turn/end")
    return True


def _decoded(rows: Sequence[Sequence[Any]], into: list[Event]) -> list[Event] | None:
    """``into`` extended with the events of ``rows``, or None when one does not decode."""
    for row in rows:
        try:
            decoded = decode_physical_row(row)
        except (AgentlogError, ValueError, TypeError):
            return None
        if len(decoded) != 1 or decoded[0].type not in SEARCHED_TYPES:  # a legacy shape: scan it
            return None
        into.extend(decoded)
    return into
