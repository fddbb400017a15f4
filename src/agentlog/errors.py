"""The agentlog error hierarchy: every refusal names what was wrong and where.

::

    AgentlogError
    ├── InvalidEventError (ValueError)      an event, payload or seed refused
    │   └── SurfaceError                    surface metadata or transition refused
    ├── InvalidHeaderError (ValueError)     a session header refused
    ├── InvariantError (ValueError)         turn/step/tool-pairing rule broken
    ├── ForkError (ValueError)              .code: INVALID_BOUNDARY, OPEN_TURN, ...
    ├── UsageError (RuntimeError)           a call made in the wrong state
    ├── SessionNotFoundError (LookupError)
    ├── SessionExistsError
    ├── StoreError                          persistence failed or refused
    │   ├── PersistenceIOError (OSError)    the backend's write or read failed
    │   ├── WriteFailedError                a batch can never be written: live session failed
    │   ├── ConcurrentWriterError           another writer appended first
    │   ├── SessionLockedError              another process holds the writer lock
    │   ├── SessionFormatUnsupportedError   intact log this build cannot read
    │   └── SessionCorruptionError          stored log is damaged
    ├── CompactionError                     .code: busy, cancelled, changed, ...
    ├── CompactionConfigError (ValueError)  a compaction or pruner setting refused
    │   └── TargetPressureConfigError       the pressure policy cannot apply to a target
    ├── SummarizerError (RuntimeError)      .code: MAX_TOKENS, UNSUPPORTED_CONTENT, ...
    ├── SourceFormatError (ValueError)      a file to import is not the format it was named as
    └── MissingExtraError (ImportError)     an optional dependency is not installed

Errors carry structured fields (``session_id``, ``seq``, ``event_type``, ``path``,
``file``, ``offset``, ``code``) and render them into the message.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentlogError",
    "CompactionConfigError",
    "CompactionError",
    "ConcurrentWriterError",
    "ForkError",
    "InvalidEventError",
    "InvalidHeaderError",
    "InvariantError",
    "MissingExtraError",
    "PersistenceIOError",
    "SessionCorruptionError",
    "SessionExistsError",
    "SessionFormatUnsupportedError",
    "SessionLockedError",
    "SessionNotFoundError",
    "SourceFormatError",
    "StoreError",
    "SummarizerError",
    "SurfaceError",
    "TargetPressureConfigError",
    "UsageError",
    "WriteFailedError",
]


class AgentlogError(Exception):
    """Root of every error agentlog raises on purpose."""

    def __init__(
        self,
        detail: str,
        *,
        session_id: str | None = None,
        seq: int | None = None,
        event_type: str | None = None,
        path: str | None = None,
        file: str | None = None,
        offset: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.session_id = session_id
        self.seq = seq
        self.event_type = event_type
        self.path = path
        self.file = file
        self.offset = offset
        self.code = code

    def locate(
        self,
        *,
        session_id: str | None = None,
        seq: int | None = None,
        event_type: str | None = None,
        file: str | None = None,
        offset: int | None = None,
    ) -> AgentlogError:
        """Fill in location fields that are still unknown; return self for ``raise``."""
        if self.session_id is None:
            self.session_id = session_id
        if self.seq is None:
            self.seq = seq
        if self.event_type is None:
            self.event_type = event_type
        if self.file is None:
            self.file = file
        if self.offset is None:
            self.offset = offset
        return self

    def __str__(self) -> str:
        where: list[str] = []
        if self.session_id is not None:
            where.append(f'session "{self.session_id}"')
        if self.event_type is not None:
            where.append(self.event_type)
        if self.seq is not None:
            where.append(f"seq {self.seq}")
        text = self.detail
        if where:
            text = f"{', '.join(where)}: {text}"
        if self.path is not None:
            text = f"{text} (at {self.path})"
        if self.file is not None and (self.offset is not None or self.file not in self.detail):
            loc = self.file if self.offset is None else f"{self.file} at byte {self.offset}"
            text = f"{text} [{loc}]"  # a detail that names the file already says where, once
        return text


class InvalidEventError(AgentlogError, ValueError):
    """An appended or restored event, its payload or its envelope was refused."""


class SurfaceError(InvalidEventError):
    """Surface metadata (``surfaceOp``, ``sourceEventSeqs``) or a surface transition was refused."""


class InvalidHeaderError(AgentlogError, ValueError):
    """A session header does not satisfy the header rules."""


class InvariantError(AgentlogError, ValueError):
    """An event breaks the turn/step/tool-pairing invariants."""


class ForkError(AgentlogError, ValueError):
    """A fork was refused; ``code`` says why (INVALID_BOUNDARY, OPEN_TURN, ...)."""


class UsageError(AgentlogError, RuntimeError):
    """A call was made in a state that does not allow it (re-entrant append, closed session...)."""


class SessionNotFoundError(AgentlogError, LookupError):
    """No session with that id exists in the store."""


class SessionExistsError(AgentlogError):
    """A session with that id already exists."""


class StoreError(AgentlogError):
    """Persistence failed or refused an operation."""


class PersistenceIOError(StoreError, OSError):
    """The backend could not write or read; the original ``OSError`` is chained."""


class WriteFailedError(StoreError):
    """A batch can never be written (not an I/O failure): its live session is failed, and every
    later flush, append and close raises this error; nothing from its ``seq`` on is durable."""


class ConcurrentWriterError(StoreError):
    """Another writer appended to the session first (the stored next seq moved)."""


class SessionLockedError(StoreError):
    """Another process or live session holds the session's writer lock."""

    def __init__(self, detail: str, *, pid: int | None = None, **fields: Any) -> None:
        super().__init__(detail, **fields)
        self.pid = pid


class SessionFormatUnsupportedError(StoreError):
    """The stored log is intact but written in a format this build cannot read."""


class SessionCorruptionError(StoreError):
    """The stored log is damaged in its committed region."""


class CompactionError(AgentlogError):
    """A compaction did not commit; ``code`` says why (busy, cancelled, changed, summary, ...)."""


class CompactionConfigError(AgentlogError, ValueError):
    """A compaction or pruner setting is unknown, out of range or contradicts another."""


class TargetPressureConfigError(CompactionConfigError):
    """The pressure policy cannot be applied to one target (no capacity, retain >= threshold)."""


class SummarizerError(AgentlogError, RuntimeError):
    """A summarization failed; ``code`` says why (MAX_TOKENS, UNSUPPORTED_CONTENT, RATE_LIMITED, ...).

    ``status`` is the HTTP status when the provider answered with an error, ``retry_after_ms``
    the delay it asked for, ``retryable`` whether a later attempt may succeed.
    """

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        retry_after_ms: int | None = None,
        retryable: bool = False,
        **fields: Any,
    ) -> None:
        super().__init__(detail, **fields)
        self.status = status
        self.retry_after_ms = retry_after_ms
        self.retryable = retryable


class SourceFormatError(AgentlogError, ValueError):
    """A file handed to an importer is malformed or not the format it was named as; ``file`` and
    ``offset`` say where, and the message names the line and the shape that was expected."""


class MissingExtraError(AgentlogError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""
