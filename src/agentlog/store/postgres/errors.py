"""psycopg errors turned into the most specific agentlog error, the original chained.

No raw psycopg exception leaves the PostgreSQL store: a duplicate session row is
``SessionExistsError``, a duplicate event row or a serialization conflict is
``ConcurrentWriterError``, a lost connection or an exhausted pool is ``PersistenceIOError``,
anything else a ``StoreError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pg
from psycopg_pool import PoolTimeout, TooManyRequests

from agentlog.errors import (
    AgentlogError,
    ConcurrentWriterError,
    PersistenceIOError,
    SessionExistsError,
    StoreError,
    UsageError,
)

__all__ = ["translate"]


def _error(exc: BaseException, session_id: str | None, where: str | None) -> AgentlogError:
    """The agentlog error for one psycopg or pool failure."""
    server = f" (PostgreSQL at {where})" if where else ""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, (PoolTimeout, TooManyRequests)):
        return PersistenceIOError(f"no PostgreSQL connection available{server}: {detail}",
                                  session_id=session_id)
    constraint = getattr(getattr(exc, "diag", None), "constraint_name", None)
    if isinstance(exc, pg.UniqueViolation):
        if constraint == "sessions_pkey":
            return SessionExistsError("session already has a persisted log", session_id=session_id)
        return ConcurrentWriterError(
            f"append seq mismatch: another writer stored these seqs first ({detail})", session_id=session_id
        )
    if isinstance(exc, pg.ForeignKeyViolation):
        if constraint == "sessions_base_session_fkey":
            return UsageError("cannot delete: fork children reference this session", session_id=session_id)
        return ConcurrentWriterError(f"the session was deleted by another writer ({detail})",
                                     session_id=session_id)
    if isinstance(exc, (pg.SerializationFailure, pg.DeadlockDetected, pg.LockNotAvailable)):
        return ConcurrentWriterError(f"conflicting concurrent write: {detail}", session_id=session_id)
    if isinstance(exc, (pg.UndefinedTable, pg.InvalidSchemaName)):
        return StoreError(f"the agentlog schema is missing{server} (dropped while in use?): {detail}",
                          session_id=session_id)
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return PersistenceIOError(f"PostgreSQL connection failed{server}: {detail}", session_id=session_id)
    return StoreError(f"PostgreSQL error{server}: {detail}", session_id=session_id)


@contextmanager
def translate(session_id: str | None = None, where: str | None = None) -> Iterator[None]:
    """Re-raise psycopg and pool errors as agentlog errors (``raise ... from`` the original)."""
    try:
        yield
    except (psycopg.Error, PoolTimeout, TooManyRequests) as exc:
        raise _error(exc, session_id, where) from exc
