"""Group commit: the flushes of a store's concurrent live sessions share one commit.

A flushing session queues its batch; a flusher that finds a group writer free leads: it takes
every queued batch and writes them as one group through the backend's ``_append_group``
(SQLite: one transaction, a savepoint per batch; PostgreSQL: one transaction in one pipeline),
while the others wait. Batches queued while every writer is busy form the next group, led by
one of their own flushers. SQLite has one writer (one connection, one write lock); PostgreSQL
as many as its pool has connections, since the server commits connections in parallel. No
thread is added and no batch waits for a window: a lone flusher writes at once, and groups form
only while every writer is busy. Each batch succeeds or fails alone: the
backend reports an error per batch, and a ``flush()`` returns only once its own batch is
durable (the group's commit returned).
"""

from __future__ import annotations

import copy
import threading
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.errors import AgentlogError, PersistenceIOError
from agentlog.store.base import DEFAULT_WRITE_DELAY_MS, Store
from agentlog.store.hooks import _State

__all__ = ["GroupCommit", "GroupCommitStore", "Pending", "fail_all"]


@dataclass(slots=True, eq=False)
class Pending:
    """One session's batch waiting in a group; ``error`` is set when that batch was not written."""

    header: SessionHeader
    events: Sequence[Event]
    materialize: bool
    error: BaseException | None = None
    taken: bool = field(default=False, repr=False)
    done: bool = field(default=False, repr=False)


class GroupCommit:
    """Leader/follower queue of pending batches in front of at most ``parallel`` group writers."""

    def __init__(self, write_group: Callable[[Sequence[Pending]], None], parallel: int = 1) -> None:
        self._write_group = write_group
        self._parallel = parallel
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[Pending] = []
        self._leaders = 0
        self.groups = 0
        """Groups written so far (for benchmarks and tests)."""
        self.batches = 0
        """Batches written or refused in those groups."""

    def submit(self, pending: Pending) -> None:
        """Return once ``pending`` was written in some group; raise its own error if it was not."""
        group: list[Pending] = []
        with self._cond:
            self._queue.append(pending)
            while not pending.taken and self._leaders >= self._parallel:
                self._cond.wait()
            if not pending.taken:  # lead: take every queued batch, this one included
                self._leaders += 1
                group, self._queue = self._queue, []
                for item in group:
                    item.taken = True
            else:
                while not pending.done:
                    self._cond.wait()
        if group:
            self._lead(group)
        if pending.error is not None:
            raise pending.error

    def _lead(self, group: list[Pending]) -> None:
        try:
            self._write_group(group)
        except BaseException as exc:  # the backend failed as a whole: no batch of it is known durable
            failure = exc if isinstance(exc, Exception) else PersistenceIOError(
                f"the group commit was interrupted ({type(exc).__name__}); the batch may not be durable")
            fail_all([item for item in group if item.error is None], failure)
            if failure is not exc:
                raise
        finally:
            with self._cond:
                for item in group:
                    item.done = True
                self.groups += 1
                self.batches += len(group)
                self._leaders -= 1
                self._cond.notify_all()


def fail_all(group: Sequence[Pending], failure: Exception) -> None:
    """Give each batch of ``group`` its own copy of ``failure``, located at its session and first seq
    (the threads that raise them must not share one exception object)."""
    for item in group:
        error = copy.copy(failure)
        if isinstance(error, AgentlogError):
            error.locate(session_id=item.header.id, seq=item.events[0].seq)
        error.__cause__ = failure
        item.error = error


class GroupCommitStore(Store):
    """A store whose live sessions' flushes are written in groups (see the module docstring)."""

    def __init__(self, *, write_delay_ms: int = DEFAULT_WRITE_DELAY_MS, group_writers: int = 1) -> None:
        """``group_writers``: groups written at once (one per connection that commits in parallel)."""
        super().__init__(write_delay_ms=write_delay_ms)
        self.group_commit = GroupCommit(self._append_group, group_writers)
        self.grouping = True
        """False: each flush is written alone, as before group commit (benchmarks compare both)."""

    @abstractmethod
    def _append_group(self, group: Sequence[Pending]) -> None:
        """Durably append every batch of ``group`` it can; set ``error`` on each one it cannot.

        A batch's failure must leave the others written; raise only when nothing is known
        durable (then every batch of the group gets that error).
        """

    def _persist(self, state: _State, batch: Sequence[Event]) -> None:
        """``_write`` through the group commit (the caller holds the session's serialization)."""
        if not self.grouping or batch[0].seq != state.cursor:
            self._write(state, batch)  # a stale cursor: refused as a concurrent write, as alone
            return
        self.group_commit.submit(Pending(state.header, batch, materialize=not state.materialized))
        state.materialized = True
        state.cursor += len(batch)
