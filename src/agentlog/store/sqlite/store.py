"""SqliteStore: every session in one SQLite database (spec persistence §5), on agentlog's own schema.

DSH's schema 17 is the reference and its rules are kept: STRICT tables, ``application_id`` and
``user_version`` checked at open and inside every write transaction (version 1 migrated once),
every schema object compared with the reference (an extra index or column is refused),
``synchronous=FULL``, WAL by default, packed chunk rows of 3..1,024 members and at most 1 MiB
of JSON recognized by ``ignorable = 0``, row JSON of 4 KiB or more zstd-compressed only when
that is strictly smaller, provenance as a varint/ZigZag blob, a seek-based ``read_from``, the
stale-writer guard (``stored next seq is N``) inside ``BEGIN IMMEDIATE``, and the torn-tail rule
(a bad row after the last committed ``turn/end`` is a torn tail, before it corruption).

The schema differs from DSH's, so the file carries its own identity (application id
``0x41474C47`` "AGLG", user_version 4) and refuses DSH's and any other foreign file:

- sessions have an integer ``key`` that event rows reference: smaller rows and primary-key
  index than a repeated TEXT id, and a deleted-then-recreated id never meets old rows;
- ``extra`` keeps a header's unknown keys, so headers round-trip as they do in JSONL;
- ``base_key``/``base_length``: a fork child references its parent's immutable prefix instead
  of copying it (O(1) bytes); the foreign key makes SQLite itself refuse to delete a parent
  that a child references, and ``materialize`` copies the prefix;
- ``op_first`` keeps the wire order of events that write ``surfaceOp`` before
  ``sourceEventSeqs`` (DSH's repair closers), so they re-encode byte for byte;
- ``search_rows``/``search_fts``: the search index (``sqlite_search``), written off the write path:
  an append moves the session's watermark (``unindexed``), and the rows behind it are indexed when
  the live session closes or a writer's store searches (schema 4; a session behind is scanned).

Writer locks are ``flock``s on ``<db>.locks/<sha256(id)>``: the kernel drops them when the
holder dies, even by SIGKILL, with no pid reuse to misjudge and no stale row to clean up; the
holder's pid is written in the file only for the error message. Readers take no lock and, in
WAL mode, never wait for a writer. A ``:memory:`` database is private to this process and
locks in memory.

Threads: one connection (``check_same_thread=False``) serialized by a lock; LiveSession
writers and readers of this process take turns on it (rows are decoded outside the lock),
other processes get their own. Concurrent flushes of live sessions are committed in groups, one
transaction with a savepoint per session's batch (``store/group_commit.py``). The last five
full reads are cached, keyed by revision. Every ``sqlite3`` error is mapped to the most specific
agentlog error, the original chained.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.packed import resolve_entries
from agentlog.core.search_text import Candidates
from agentlog.errors import (
    AgentlogError,
    ConcurrentWriterError,
    SessionCorruptionError,
    SessionExistsError,
    SessionNotFoundError,
    StoreError,
    UsageError,
)
from agentlog.store.base import DEFAULT_WRITE_DELAY_MS
from agentlog.store.codec import SQLITE_MAX_MEMBERS
from agentlog.store.filelock import discard_lock_file, flock_holder, lock_in_process, lock_session_file
from agentlog.store.group_commit import Pending, fail_all
from agentlog.store.hooks import LiveHandle, _State
from agentlog.store.incarnation import new_incarnation, stored_at
from agentlog.store.integrity import Integrity, torn_seq
from agentlog.store.records import Listing, Recovery, Snapshot, StoredLog, Unreadable, WriterLock
from agentlog.store.sqlite.connection import SqliteConnection
from agentlog.store.sqlite.integrity import check_session, digested_rows, header_digest
from agentlog.store.sqlite.rows import (
    CORRUPT,
    Segment,
    encode_rows,
    fork_writers,
    refuse_unknown,
    scan_prefix,
    scan_rows,
    scan_suffix,
    try_decode,
)
from agentlog.store.sqlite.schema import (
    BUMP_REVISION,
    BUMP_UNINDEXED,
    CHILDREN,
    CLEAR_BASE,
    DELETE_ROWS_FROM,
    DELETE_SESSION,
    INSERT_ROW,
    INSERT_SESSION,
    JOURNAL_MODES,
    LIST_SESSIONS,
    PACKED_BEFORE,
    ROWS_FROM,
    ROWS_RANGE,
    SELECT_SESSION,
    SELECT_SESSION_BY_KEY,
    SESSION_EXISTS,
    TAIL,
    SessionInfo,
    check_path,
    has_watermark,
    header_values,
    session_info,
)
from agentlog.store.sqlite.search import (
    TRIGRAM,
    candidates,
    catch_up,
    decode_candidates,
    index_events,
    unindex_from,
)
from agentlog.store.validate import current_log

__all__ = ["SqliteStore"]

logger = logging.getLogger("agentlog")

_MAX_BUSY_MS: Final = 2_147_483_647
_CACHE_SIZE: Final = 5


# -- the store -------------------------------------------------------------------------------------------


class SqliteStore(SqliteConnection):
    """Sessions in one SQLite database file (or ``:memory:``).

    The path is checked when the store is constructed (§5.2), the file opened on first use
    (§5.3). ``create=False`` (readers): the file must exist and hold an agentlog store; it is
    never created, initialised or switched to another journal mode.
    """

    name = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        write_delay_ms: int = DEFAULT_WRITE_DELAY_MS,
        busy_timeout_ms: int = 5000,
        journal_mode: str = "wal",
        create: bool = True,
    ) -> None:
        super().__init__(write_delay_ms=write_delay_ms)
        raw = os.fspath(path)
        if type(raw) is not str or not raw:
            raise ValueError(f"path must be a non-empty str or os.PathLike[str], got {path!r}")
        if "\0" in raw:
            raise ValueError("the database path contains a NUL character")
        if type(busy_timeout_ms) is not int or not 0 <= busy_timeout_ms <= _MAX_BUSY_MS:
            raise ValueError(f"busy_timeout_ms must be an integer between 0 and {_MAX_BUSY_MS}, "
                             f"got {busy_timeout_ms!r}")
        if journal_mode not in JOURNAL_MODES:
            raise ValueError(f"journal_mode must be one of {', '.join(JOURNAL_MODES)}, got {journal_mode!r}")
        self.memory = raw == ":memory:"
        self.path = raw if self.memory else os.path.abspath(raw)
        self.busy_timeout_ms = busy_timeout_ms
        self.journal_mode = journal_mode
        self.may_create = create
        """False: a reader's store, which never creates, initialises or reconfigures the file."""
        self._db_lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._schema_cookie: int | None = None
        self._fts: bool | None = None
        """The file's search index: None (schema 1, read as is), False (no FTS5) or True."""
        self._revision_prefix = ""
        self._cache: OrderedDict[str, tuple[str, StoredLog]] = OrderedDict()
        self._memory_locks: set[str] = set()
        self._memory_guard = threading.Lock()
        if not self.memory:
            check_path(self.path, create=create)

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r}, journal_mode={self.journal_mode!r})"

    # -- reading ---------------------------------------------------------------------------------------

    def _info(self, conn: sqlite3.Connection, session_id: str) -> SessionInfo | None:
        row = conn.execute(SELECT_SESSION, (session_id,)).fetchone()
        try:
            return None if row is None else session_info(row)
        except AgentlogError as exc:  # a damaged session row: name the database it is in
            raise exc.locate(file=self._file) from None

    def _prefix_rows(self, conn: sqlite3.Connection, info: SessionInfo) -> list[Segment]:
        """Rows of the parent prefixes a fork chain shares, oldest first: (start, limit, rows, writer id)."""
        segments: list[Segment] = []
        limit = info.start
        base_key = info.base_key
        seen = {info.key}
        while base_key is not None:
            row = conn.execute(SELECT_SESSION_BY_KEY, (base_key,)).fetchone()
            if row is None or base_key in seen:
                raise SessionCorruptionError("fork parent reference is missing or circular",
                                             session_id=info.header.id, file=self._file)
            seen.add(base_key)
            parent = session_info(row)
            start = parent.start
            if start < limit:
                rows = conn.execute(ROWS_RANGE, (base_key, start, limit)).fetchall()
                segments.append((start, limit, rows, parent.header.id))
            limit = min(limit, start)
            base_key = parent.base_key
        segments.reverse()
        return segments

    def _load_stored(self, session_id: str) -> StoredLog | None:
        with self._reading(session_id) as conn:
            info = self._info(conn, session_id)
            if info is None:
                return None
            revision = self._revision(info)
            cached = self._cache.get(session_id)
            if cached is not None and cached[0] == revision:
                self._cache.move_to_end(session_id)
                stored = cached[1]
                return StoredLog(stored.header, stored.events, revision, stored.torn,
                                 writers=list(stored.writers))  # events: an immutable tuple, shared
            segments = self._prefix_rows(conn, info)
            rows = conn.execute(ROWS_FROM, (info.key, info.start)).fetchall()
        events: list[Event] = []
        writers = fork_writers(segments, info.start, session_id)
        try:
            for start, limit, prefix, _writer in segments:
                events.extend(scan_prefix(prefix, start, limit))
            scan = scan_rows(rows, info.start)
        except SessionCorruptionError as exc:
            raise exc.locate(session_id=session_id, file=self._file) from None
        events.extend(scan.events)
        torn = None if scan.torn is None else (scan.torn, revision)
        stored = StoredLog(info.header, tuple(events), revision, torn, writers=writers)
        with self._db_lock:
            self._cache[session_id] = (revision, stored)
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return StoredLog(info.header, stored.events, revision, torn, writers=list(writers))

    def _load_stored_from(self, session_id: str, from_seq: int) -> StoredLog | None:
        """Seek read (§5.9): only rows from the one holding ``from_seq`` on are read and decoded."""
        with self._reading(session_id) as conn:
            info = self._info(conn, session_id)
            if info is None:
                return None
            if from_seq < info.start:
                segments = self._prefix_rows(conn, info)
                rows = conn.execute(ROWS_FROM, (info.key, info.start)).fetchall()
                base = info.start
            else:
                segments = []
                base = from_seq
                low = max(info.start, from_seq - (SQLITE_MAX_MEMBERS - 1))
                for row in conn.execute(PACKED_BEFORE, (info.key, low, from_seq)).fetchall():
                    result = try_decode(row)
                    if isinstance(result, str) or result[-1][1] >= from_seq:
                        base = row[0]
                        break
                rows = conn.execute(ROWS_FROM, (info.key, base)).fetchall()
        events: list[Event] = []
        try:
            for start, limit, prefix, _writer in segments:
                events.extend(scan_prefix(prefix, start, limit))
        except SessionCorruptionError as exc:
            raise exc.locate(session_id=session_id, file=self._file) from None
        del events[:from_seq]
        events.extend(scan_suffix(rows, base, from_seq))
        refuse_unknown(events, session_id)
        return StoredLog(info.header, events, self._revision(info),
                         writers=fork_writers(segments, info.start, session_id))

    def _check_integrity(self, session_id: str, torn: Recovery | None) -> Integrity:
        with self._reading(session_id) as conn:
            return check_session(conn, session_id, self._file or str(self.path), torn_seq(torn))

    def _stored_exists(self, session_id: str) -> bool:
        with self._reading(session_id) as conn:
            return conn.execute(SESSION_EXISTS, (session_id,)).fetchone() is not None

    def _listing(self) -> Listing:
        with self._reading() as conn:
            rows = conn.execute(LIST_SESSIONS).fetchall()
        listing = Listing([])
        for row in rows:
            try:
                info = session_info(row)
            except AgentlogError as exc:
                sid = row[1] if type(row[1]) is str else None
                listing.unreadable.append(Unreadable(sid, f"{self.path}: sessions row {row[0]}",
                                                     exc.locate(file=self._file)))
                continue
            listing.snapshots.append(Snapshot(info.header, self._revision(info), stored_at(info.incarnation)))
        return listing

    # -- writing ---------------------------------------------------------------------------------------

    def _tail_next(self, conn: sqlite3.Connection, info: SessionInfo) -> int:
        """The stored next seq, from the last two physical rows (a defective tail refuses appends).

        Unlike DSH this does not look further back for a packed row overlapping them: only a
        foreign write can make one, and the full read that precedes any resumed write catches it.
        """
        rows = conn.execute(TAIL, (info.key,)).fetchall()
        if not rows:
            return info.start
        rows.reverse()
        expected = None
        for row in rows:
            result = try_decode(row)
            if isinstance(result, list) and expected is not None and result[0][1] != expected:
                result = f"rows are not contiguous: expected seq {expected}"
            if isinstance(result, str):
                raise SessionCorruptionError(
                    f"{CORRUPT}: invalid physical tail at seq {row[0]}: {result}; load the session to "
                    "repair it", session_id=info.header.id, seq=row[0], file=self._file)
            expected = result[-1][1] + 1
        assert expected is not None
        return int(expected)

    def _insert_session(self, conn: sqlite3.Connection, header: SessionHeader,
                        base_key: int | None = None, base_length: int | None = None) -> int:
        if conn.execute(SESSION_EXISTS, (header.id,)).fetchone() is not None:
            raise SessionExistsError("session already has a persisted log", session_id=header.id)
        values = header_values(header)
        cursor = conn.execute(INSERT_SESSION, (*values, base_key, base_length, str(new_incarnation()),
                                                header_digest(values)))
        key = cursor.lastrowid
        assert key is not None
        return key

    def _append_batch(self, header: SessionHeader, events: Sequence[Event], *, materialize: bool) -> None:
        rows = encode_rows(events)
        with self._writing(header.id) as conn:
            self._append_rows(conn, header, events, rows, materialize=materialize)

    def _append_group(self, group: Sequence[Pending]) -> None:
        """One ``BEGIN IMMEDIATE`` ... ``COMMIT`` (one WAL sync) for every batch; each batch in its
        own savepoint, so a refused one is rolled back alone and the others commit."""
        encoded = []
        for item in group:
            try:
                encoded.append((item, encode_rows(item.events)))
            except Exception as exc:
                item.error = exc
        if not encoded:
            return
        try:
            with self._writing(None) as conn:
                for item, rows in encoded:
                    sid = item.header.id
                    self._cache.pop(sid, None)
                    conn.execute("SAVEPOINT batch")
                    try:
                        with self._translated(sid):
                            self._append_rows(conn, item.header, item.events, rows,
                                              materialize=item.materialize)
                    except Exception as exc:
                        conn.execute("ROLLBACK TO batch")
                        item.error = exc
                    conn.execute("RELEASE batch")
        except AgentlogError as exc:  # the commit (or the transaction) failed: none is durable
            fail_all([item for item, _rows in encoded], exc)

    def _append_rows(self, conn: sqlite3.Connection, header: SessionHeader, events: Sequence[Event],
                     rows: Sequence[Sequence[Any]], *, materialize: bool) -> None:
        sid = header.id
        if materialize:
            key, next_seq = self._insert_session(conn, header), 0
        else:
            info = self._info(conn, sid)
            if info is None:
                raise ConcurrentWriterError("the stored session vanished (another process deleted it)",
                                            session_id=sid)
            key, next_seq = info.key, self._tail_next(conn, info)
        if events[0].seq != next_seq:
            raise ConcurrentWriterError(
                f"append seq mismatch: stored next seq is {next_seq}, batch starts at {events[0].seq} "
                "(another writer appended first)", session_id=sid, seq=events[0].seq)
        conn.executemany(INSERT_ROW, digested_rows(key, sid, rows))
        conn.execute(BUMP_UNINDEXED, (events[0].seq, key))  # indexed later (catch_up), off this path

    def _commit_repair(self, header: SessionHeader, torn: Any, events: Sequence[Event]) -> None:
        """Truncate the torn tail seen by the read, append closers; refused as stale if the log changed.

        The torn marker carries the revision it was read at, so staleness needs no rescan.
        """
        rows = encode_rows(events)
        sid = header.id
        with self._writing(sid) as conn:
            info = self._info(conn, sid)
            if info is None:
                raise SessionCorruptionError("repair refused: the session metadata row is missing",
                                             session_id=sid)
            if torn is not None:
                marker, seen = torn
                if self._revision(info) != seen:
                    raise ConcurrentWriterError(
                        f"repair is stale: the log changed since its torn tail at seq {marker} was read",
                        session_id=sid, seq=marker)
                unindex_from(conn, info.key, marker, bool(self._fts))
                conn.execute(DELETE_ROWS_FROM, (info.key, marker))
            next_seq = self._tail_next(conn, info)
            if events and events[0].seq != next_seq:
                raise ConcurrentWriterError(
                    f"repair is stale: closer starts at seq {events[0].seq}, but the stored log continues at "
                    f"seq {next_seq}", session_id=sid, seq=events[0].seq)
            conn.executemany(INSERT_ROW, digested_rows(info.key, sid, rows))
            if events:
                conn.execute(BUMP_UNINDEXED, (events[0].seq, info.key))
            else:
                conn.execute(BUMP_REVISION, (info.key,))

    def _write_fork_prefix(self, header: SessionHeader, prefix: Sequence[Event], state: _State,
                           suffix: Sequence[Event] = ()) -> None:
        """Materialize the child as a reference to its parent's prefix: one row, whatever the length."""
        if not prefix:
            return
        with self._writing(header.id) as conn:
            parent = self._info(conn, header.parent_session or "")
            if parent is None:
                raise SessionNotFoundError("fork parent has no stored log", session_id=header.parent_session)
            key = self._insert_session(conn, header, parent.key, len(prefix))
            conn.execute(BUMP_REVISION, (key,))
        state.materialized = True
        state.cursor = len(prefix)

    def materialize(self, session_id: str) -> None:
        """Copy a fork child's shared prefix into its own rows (the parent may then be deleted)."""
        self._check_open()
        with self._serialized(session_id):
            if session_id in self._live:
                raise UsageError("cannot materialize a live session; close it first", session_id=session_id)
            with self._writing(session_id) as conn:
                info = self._info(conn, session_id)
                if info is None:
                    raise SessionNotFoundError("session not found", session_id=session_id)
                if info.base_key is None:
                    return
                events: list[Event] = []
                segments = self._prefix_rows(conn, info)
                try:
                    for start, limit, prefix, _writer in segments:
                        events.extend(scan_prefix(prefix, start, limit))
                except SessionCorruptionError as exc:
                    raise exc.locate(session_id=session_id, file=self._file) from None
                # The copy holds the prefix as its writers' sessions read it (legacy ids named after them).
                writers = fork_writers(segments, info.start, session_id)
                copied = resolve_entries(current_log(session_id, events, writers))
                conn.executemany(INSERT_ROW, digested_rows(info.key, session_id, encode_rows(copied)))
                index_events(conn, info.key, copied, bool(self._fts))
                conn.execute(CLEAR_BASE, (info.key,))
                conn.execute(BUMP_REVISION, (info.key,))

    def search_candidates(self, folded: str, session_ids: Sequence[str]) -> Candidates | None:
        """Per session, the events the search index points at (None: scan it); None without an index.

        A writer's store first indexes what is behind the watermark; a reader's leaves it (it never
        writes the file), and the sessions behind are scanned."""
        with self._reading() as conn:
            if self._fts is None:
                return None
            watermark = has_watermark(conn)
        if watermark and self._fts and len(folded) < TRIGRAM:
            return None  # schema 4's contentless FTS5 answers trigrams only: shorter text is scanned
        if watermark and self.may_create:
            self._catch_up(None)
        with self._reading() as conn:
            found = candidates(conn, folded, session_ids, bool(self._fts), list(self._live), watermark)
        return {sid: None if rows is None else decode_candidates(rows) for sid, rows in found.items()}

    def _catch_up(self, session_id: str | None) -> None:
        """Index the rows behind the watermark (of one session, or all), in one write transaction."""
        with self._writing(session_id) as conn:
            catch_up(conn, bool(self._fts), session_id)

    def _detach_live(self, live: LiveHandle) -> None:
        """A closed live session's rows are indexed now, off its write path; a failure leaves them
        behind the watermark (search scans that session, a later writer's search indexes it)."""
        super()._detach_live(live)
        if self._fts is None or self._conn is None or not self.may_create:
            return
        try:
            self._catch_up(live.session.id)
        except AgentlogError as exc:
            logger.debug("search index of %s left behind: %s", live.session.id, exc)

    # -- locks, children, deletion ---------------------------------------------------------------------------

    def _lock_path(self, session_id: str) -> Path:
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]
        return Path(f"{self.path}.locks") / digest

    def _acquire_writer_lock(self, session_id: str) -> WriterLock:
        self._check_open()
        if self.memory:
            return lock_in_process(self._memory_locks, self._memory_guard, session_id)
        return lock_session_file(self._lock_path(session_id), session_id)

    def _writer_pid(self, session_id: str) -> int | None:
        if self.memory:
            with self._memory_guard:
                return os.getpid() if session_id in self._memory_locks else None
        return flock_holder(self._lock_path(session_id))

    def _discard_lock_file(self, session_id: str) -> None:
        if not self.memory:
            discard_lock_file(self._lock_path(session_id), session_id)

    def _children_of(self, session_id: str) -> list[str]:
        with self._reading(session_id) as conn:
            return [row[0] for row in conn.execute(CHILDREN, (session_id,))]

    def _delete_stored(self, session_id: str) -> None:
        try:
            with self._writing(session_id) as conn:
                info = self._info(conn, session_id)
                if info is not None:
                    unindex_from(conn, info.key, 0, bool(self._fts))
                    conn.execute(DELETE_SESSION, (info.key,))
        except StoreError as exc:
            if isinstance(exc.__cause__, sqlite3.IntegrityError):
                raise UsageError("cannot delete: fork children reference this session (a fork was created "
                                 "meanwhile)", session_id=session_id) from exc.__cause__
            raise
        if not self.memory:  # we hold its lock: a waiting opener re-checks the inode and retries
            with contextlib.suppress(OSError):
                os.unlink(self._lock_path(session_id))
