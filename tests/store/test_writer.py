"""Write-behind semantics (spec persistence §3, write-behind.spec.ts), on a store that records batches."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import pytest

from agentlog import Event, MemoryStore, PersistenceIOError, SessionHeader
from agentlog.store.writer import LiveSession


class RecordingStore(MemoryStore):
    """A MemoryStore that records each durable batch and can be told to fail writes."""

    def __init__(self, write_delay_ms: int) -> None:
        super().__init__(write_delay_ms=write_delay_ms)
        self.batches: list[list[int]] = []
        self.failures = 0
        self.gate: threading.Event | None = None
        self.written = threading.Condition()

    def _append_batch(self, header: SessionHeader, events: Sequence[Event], *, materialize: bool) -> None:
        if self.gate is not None:
            self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise OSError(28, "No space left on device")
        super()._append_batch(header, events, materialize=materialize)
        with self.written:
            self.batches.append([event.seq for event in events])
            self.written.notify_all()

    def wait_batches(self, count: int, timeout: float = 5.0) -> None:
        with self.written:
            assert self.written.wait_for(lambda: len(self.batches) >= count, timeout), self.batches


def turn(live: LiveSession, number: int) -> None:
    """One event per call; the sessions these tests start opt out of the invariants (they test batching)."""
    live.session.append("turn/start", {"turn": number})


def test_one_fixed_window_from_the_first_event_is_not_a_debounce() -> None:
    store = RecordingStore(write_delay_ms=200)
    live = store.start("s", check_invariants=False)
    started = time.monotonic()
    for number in range(1, 21):  # 20 events 10 ms apart: one batch at ~200 ms
        turn(live, number)
        time.sleep(0.01)
    store.wait_batches(1)
    elapsed = time.monotonic() - started
    assert store.batches[0][0] == 0
    assert 0.15 <= elapsed < 0.6
    live.close()
    assert sum(len(batch) for batch in store.batches) == 20
    assert len(store.batches) <= 2


def test_concurrent_flushes_drain_everything_once() -> None:
    store = RecordingStore(write_delay_ms=60_000)
    live = store.start("s", check_invariants=False)
    for number in range(1, 6):
        turn(live, number)
    threads = [threading.Thread(target=live.flush) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [seq for batch in store.batches for seq in batch] == [0, 1, 2, 3, 4]
    live.close()


def test_an_event_admitted_during_a_write_gets_its_own_batch() -> None:
    store = RecordingStore(write_delay_ms=30)
    store.gate = threading.Event()
    live = store.start("s", check_invariants=False)
    turn(live, 1)
    time.sleep(0.1)  # the window expired; the write is blocked on the gate
    turn(live, 2)
    store.gate.set()
    store.wait_batches(2)
    assert store.batches == [[0], [1]]
    live.close()


def test_background_failure_is_reported_once_pauses_and_retries_with_the_next_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = RecordingStore(write_delay_ms=20)
    live = store.start("s", check_invariants=False)
    store.failures = 1
    with caplog.at_level(logging.WARNING, logger="agentlog"):
        turn(live, 1)
        time.sleep(0.3)
    assert store.batches == []
    failures = [r for r in caplog.records if "buffered events retained" in r.getMessage()]
    assert len(failures) == 1
    time.sleep(0.2)
    assert store.batches == [], "retried without a new event"
    turn(live, 2)
    store.wait_batches(1)
    assert store.batches == [[0, 1]]
    live.close()


def test_a_failed_flush_raises_keeps_the_batch_and_a_later_flush_writes_it() -> None:
    store = RecordingStore(write_delay_ms=60_000)
    live = store.start("s", check_invariants=False)
    turn(live, 1)
    store.failures = 1
    with pytest.raises(PersistenceIOError):
        live.flush()
    assert live.durable_seq == 0
    turn(live, 2)
    live.flush()
    assert store.batches == [[0, 1]]
    live.close()


def test_a_huge_failed_batch_is_retained_whole() -> None:
    store = RecordingStore(write_delay_ms=60_000)
    live = store.start("s", check_invariants=False)
    for number in range(1, 150_001):
        live.session.append("session/title", {"n": number})  # a store refuses unknown types
    store.failures = 1
    with pytest.raises(PersistenceIOError):
        live.flush()
    live.flush()
    assert len(store.batches) == 1 and len(store.batches[0]) == 150_000
    live.close()


def test_append_never_waits_for_a_slow_write() -> None:
    store = RecordingStore(write_delay_ms=1)
    store.gate = threading.Event()
    live = store.start("s", check_invariants=False)
    turn(live, 1)
    time.sleep(0.05)  # the writer is now blocked inside the backend
    started = time.monotonic()
    for number in range(2, 2002):
        turn(live, number)
    assert time.monotonic() - started < 1.0
    store.gate.set()
    live.close()
    assert sum(len(batch) for batch in store.batches) == 2001
