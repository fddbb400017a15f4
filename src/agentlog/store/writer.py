"""Write-behind: a live session whose appends reach the store in batches (spec persistence §3).

Appends only queue the (immutable) event and never wait for I/O. A background thread
writes the queue once a fixed window has passed since the first queued event (a bounded
coalescing window, not a debounce). ``flush()`` writes everything queued before it and
returns only when that is durable. A background write that fails on I/O keeps its batch,
pauses automatic writing and is reported once; the next event or ``flush()`` retries it.
A batch the store refuses for any other reason can never be written: the live session
fails, and every later flush, append and close raises that one ``WriteFailedError``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from agentlog.core.aio import in_thread
from agentlog.core.events import Event
from agentlog.core.invariants import InvariantChecker
from agentlog.core.jsonvalue import valid_text
from agentlog.core.packed import LogSlice
from agentlog.core.repair import last_turn_is_open
from agentlog.core.session import Session
from agentlog.errors import (
    AgentlogError,
    InvalidEventError,
    InvalidHeaderError,
    PersistenceIOError,
    UsageError,
    WriteFailedError,
)
from agentlog.store.records import Inspection

if TYPE_CHECKING:
    from agentlog.store.hooks import StoreHooks, _State
    from agentlog.store.records import WriterLock

__all__ = ["LiveSession"]

logger = logging.getLogger("agentlog")


class LiveSession:
    """A ``Session`` bound to a store: every append is persisted by write-behind.

    Use ``session`` to append and read, ``flush()`` for a durable checkpoint and ``close()``
    (or a ``with`` block) to drain and release the session's writer lock. Appends are checked
    against the turn/step/tool invariants (spec §11) unless ``check_invariants=False``.
    """

    def __init__(self, store: StoreHooks, session: Session, state: _State, lock: WriterLock, *,
                 check_invariants: bool = True) -> None:
        if check_invariants and not InvariantChecker.attached(session):  # primed from the last turn
            InvariantChecker.attach(session, replay="last-turn")
        self.checks_invariants = check_invariants
        self.store = store
        self.session = session
        session._stored = True  # appends refuse what this store's load would refuse
        self._state = state
        self._lock = lock
        self._delay = store.write_delay_ms / 1000.0
        # The queue is the session's log from ``_next`` on (appends only grow the log, so a
        # write takes a slice of it: packed stream deltas stay packed); the condition guards
        # the timer state.
        self._log = session._log
        self._next = state.cursor
        self._cond = threading.Condition(threading.Lock())
        self._io = threading.Lock()
        self._deadline: float | None = None
        self._paused = False
        self._barriers = 0
        self._closed = False
        self._failure: WriteFailedError | None = None  # set once a batch can never be written
        self._thread: threading.Thread | None = None
        self._unsubscribe = session._subscribe(self._admit, self._admit)
        store._attach_live(self)
        if self._queued():
            with self._cond:
                self._arm()
            self._ensure_thread()

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def durable_seq(self) -> int:
        """Number of events known durable."""
        return self._state.cursor

    def flush(self) -> None:
        """Return once every event appended before this call is durable; raise if it is not."""
        if self._closed:
            raise self._closed_error()
        with self._cond:
            self._barriers += 1
            self._deadline = None
            self._paused = False
        try:
            with self._io:
                while True:
                    if self._failure is not None:
                        raise self._failure
                    batch = self._drain()
                    if not batch:
                        return
                    try:
                        self._write(batch)
                    except WriteFailedError as failure:
                        self._fail(failure)
                        raise
                    except BaseException:
                        self._retain(batch)
                        raise
        finally:
            with self._cond:
                self._barriers -= 1
                if not self._paused:
                    self._arm()

    def close(self) -> None:
        """Flush, stop the writer and release the writer lock (idempotent)."""
        if self._closed:
            return
        self._refuse_appends()  # before the drain: nothing can slip in behind it
        try:
            self.flush()
        finally:
            self._closed = True
            self._unsubscribe()
            with self._cond:
                self._cond.notify_all()
            if self._thread is not None and self._thread is not threading.current_thread():
                self._thread.join()
            self._lock.release()
            self.store._detach_live(self)

    def abandon(self) -> None:
        """Stop without flushing (what a crash does); queued events are dropped."""
        if not self._closed:
            self._refuse_appends()
        self._closed = True
        self._unsubscribe()
        with self._cond:
            self._next = len(self._log)  # queued events are dropped
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        self._lock.release()
        self.store._detach_live(self)

    def durable_view(self) -> Inspection:
        """The live log for ``Store.load``: flushed first, refused while a turn is open."""
        from agentlog.errors import SessionNotFoundError

        events = self.session.events  # a snapshot: it never grows
        self.flush()
        if not events:
            raise SessionNotFoundError("session not found (nothing persisted yet)", session_id=self.id)
        if last_turn_is_open(events):
            raise UsageError("cannot load: the live turn is open", session_id=self.id)
        return Inspection(self.session.header, events)

    async def aflush(self) -> None:
        """``flush()`` without blocking the event loop."""
        await in_thread(self.flush)

    async def aclose(self) -> None:
        """``close()`` without blocking the event loop."""
        await in_thread(self.close)

    def __enter__(self) -> LiveSession:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> LiveSession:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"LiveSession(id={self.id!r}, events={self.session.seq}, durable={self.durable_seq})"

    # -- write-behind machinery ----------------------------------------------------------------

    def _admit(self, event: Event | int) -> None:
        """Session observer (also of packed deltas, given their seq): the committed event is
        queued in the log already; start the window if none runs (no lock otherwise)."""
        if self._closed:
            return
        if self._deadline is None or self._paused:
            with self._cond:
                self._paused = False
                self._arm()
        if self._thread is None:
            self._ensure_thread()

    def _arm(self) -> None:
        """Start the batching window if events wait and none runs (caller holds ``_cond``)."""
        if self._queued() and self._deadline is None and self._barriers == 0 and not self._paused:
            self._deadline = time.monotonic() + self._delay
            self._cond.notify_all()

    def _queued(self) -> bool:
        return self._next < len(self._log)

    def _drain(self) -> LogSlice:
        """Everything queued, as one batch (the log slots, packed runs unexpanded)."""
        stop = len(self._log)
        batch = LogSlice(self._log, self._next, stop)
        self._next = stop
        return batch

    def _retain(self, batch: LogSlice) -> None:
        """Put a failed batch back in front of newer events and pause automatic writing."""
        with self._cond:
            self._next = batch.start
            self._paused = True
            self._deadline = None

    def _fail(self, failure: WriteFailedError) -> None:
        """A batch can never be written: drop the queue (nothing in it can follow the batch)
        and refuse every later append, flush and close with ``failure``."""
        with self._cond:
            self._failure = failure
            self._next = len(self._log)  # nothing queued can follow the batch
            self._deadline = None

        def refuse(event: Event) -> None:
            raise failure

        self.session.add_validator(refuse)

    def _closed_error(self) -> UsageError:
        return UsageError("the live session was closed: nothing more can be written to it; "
                          "reopen the session to go on", session_id=self.id)

    def _refuse_appends(self) -> None:
        """Veto every later append (a validator costs open sessions nothing; a closed
        session's queue is never written, so an accepted append would be lost silently)."""

        def refuse(event: Event) -> None:
            raise self._closed_error()

        self.session.add_validator(refuse)

    def _ensure_thread(self) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"agentlog-writer-{self.id}",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        """The background writer: wait for the deadline, then write the whole queue."""
        while True:
            with self._cond:
                while not self._closed and (self._deadline is None or self._paused):
                    self._cond.wait()
                if self._closed:
                    return
                assert self._deadline is not None
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                self._deadline = None
            self._background_write()

    def _background_write(self) -> None:
        with self._io:
            batch = self._drain()
            if not batch:
                return
            try:
                self._write(batch)
            except WriteFailedError as failure:
                self._fail(failure)
                logger.warning('session "%s": %s', self.id, failure.detail)
                return
            except Exception as exc:
                self._retain(batch)
                logger.warning('session "%s": background write of %d events failed '
                               "(buffered events retained): %s", self.id, len(batch), exc)
                return
            with self._cond:
                self._arm()

    def _write(self, batch: LogSlice) -> None:
        store = self.store
        try:
            with store._serialized(self.id):
                store._check_writer_lock(self._lock, self._state, batch)
                store._persist(self._state, batch)
        except PersistenceIOError:
            raise
        except (InvalidEventError, InvalidHeaderError) as exc:  # the store refused the data itself
            raise _never_written(self.id, batch, exc) from exc
        except AgentlogError:
            raise  # lock and concurrency refusals: the batch is kept for the caller to retry
        except OSError as exc:
            raise PersistenceIOError(f"write failed: {exc}", session_id=self.id, seq=batch[0].seq) from exc
        except Exception as exc:  # an encoder or driver refusal: retrying cannot help
            raise _never_written(self.id, batch, exc) from exc


def _never_written(session_id: str, batch: Sequence[Event], exc: Exception) -> WriteFailedError:
    """The error of a batch the store refused for a reason other than I/O."""
    first, last = batch[0], batch[-1]
    cause = f"{type(exc).__name__}: {exc}".encode("utf-8", "backslashreplace").decode("utf-8")
    return WriteFailedError(
        f"events seq {first.seq}..{last.seq} can never be written ({cause}); the live session "
        f"is failed: nothing from seq {first.seq} on is durable, reopen the session to go on",
        session_id=session_id, seq=first.seq, event_type=first.type if valid_text(first.type) else None,
    )
