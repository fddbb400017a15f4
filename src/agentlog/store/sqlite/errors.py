"""How ``sqlite3`` errors become agentlog errors: the most specific one, by SQLite's primary code."""

from __future__ import annotations

import sqlite3
from typing import Final

from agentlog.errors import AgentlogError, PersistenceIOError, SessionCorruptionError, StoreError
from agentlog.store.sqlite.rows import CORRUPT

__all__ = ["SQLITE_BUSY", "primary_code", "translate_error"]

SQLITE_BUSY: Final = 5
_SQLITE_LOCKED: Final = 6
_SQLITE_CORRUPT: Final = 11
_SQLITE_NOTADB: Final = 26
_IO_CODES: Final = frozenset({3, 8, 9, 10, 13, 14, 15, 22, 23})
"""PERM, READONLY, INTERRUPT, IOERR, FULL, CANTOPEN, PROTOCOL, NOLFS, AUTH."""


def primary_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code of ``exc`` (the low byte of the extended one), if it has one."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if type(code) is int else None


def translate_error(exc: sqlite3.Error, *, session_id: str | None, file: str | None,
               busy_ms: int) -> AgentlogError:
    """The most specific agentlog error for a ``sqlite3`` error (callers chain the original)."""
    primary = primary_code(exc)
    code = getattr(exc, "sqlite_errorname", None)
    if primary in (SQLITE_BUSY, _SQLITE_LOCKED):
        return PersistenceIOError(
            f"the database stayed locked by another connection for longer than busy_timeout_ms={busy_ms} "
            f"({exc}); retry, or raise busy_timeout_ms", session_id=session_id, file=file, code=code)
    if primary in _IO_CODES:
        return PersistenceIOError(f"database I/O failed: {exc}", session_id=session_id, file=file, code=code)
    if primary == _SQLITE_CORRUPT:
        return SessionCorruptionError(f"{CORRUPT}: the database file is damaged ({exc})",
                                      session_id=session_id, file=file, code=code)
    if primary == _SQLITE_NOTADB:
        return StoreError(f"not an agentlog SQLite database ({exc})", session_id=session_id, file=file,
                          code=code)
    return StoreError(f"SQLite failed: {exc}", session_id=session_id, file=file, code=code)
