"""``follow`` and ``afollow`` on every backend, and the pure step both drive (``follow_step``).

A writer on its own store instance (another "process" over the same storage) appends while the
follower reads: a tail that grows, a session that ends (the follower stops after its idle
timeout), a torn JSONL tail (not yielded, not an error; yielded once whole), a session or a
whole store that vanishes (``SessionNotFoundError``, never a raw ``OSError``).
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentlog import Recorder, SessionNotFoundError, UsageError, afollow, follow
from agentlog.core.events import Event
from agentlog.errors import SessionCorruptionError
from agentlog.store.base import Store
from agentlog.store.following import Following, follow_step, start_following
from tests.contract.conftest import StoreFactory

MODES = ["sync", "async"]


def record_turns(store: Store, session_id: str, count: int, *, start: int = 0, pause: float = 0.0) -> None:
    """``count`` whole turns appended to ``session_id`` (created if new), each flushed."""
    known = session_id in {header.id for header in store.list()}
    with (store.open(session_id) if known else store.start(session_id)) as live:
        recorder = Recorder(live)
        for number in range(start, start + count):
            with recorder.turn() as turn:
                turn.user_message(f"turn {number}")
            live.flush()
            time.sleep(pause)


def collect(mode: str, store: Store, session_id: str, from_seq: int, *, idle_timeout: float = 1.5,
            poll_interval: float = 0.05, seen: list[Event] | None = None) -> list[Event]:
    """Everything ``follow`` (``mode`` sync) or ``afollow`` (async) yields until it ends."""
    got: list[Event] = [] if seen is None else seen
    options: dict[str, Any] = {"idle_timeout": idle_timeout, "poll_interval": poll_interval}
    if mode == "sync":
        got.extend(follow(store, session_id, from_seq, **options))
        return got

    async def main() -> None:
        async for event in afollow(store, session_id, from_seq, **options):
            got.append(event)  # noqa: PERF401 (kept as they come: a test reads them after a raise)

    asyncio.run(main())
    return got


def in_thread(work: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # re-raised by the test
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, failures


@pytest.mark.parametrize("mode", MODES)
def test_a_growing_tail_is_yielded_in_order_each_event_once_then_the_follower_ends(
    open_store: StoreFactory, mode: str,
) -> None:
    writer, reader = open_store(), open_store()
    record_turns(writer, "s", 1)
    stored = len(reader.read_from("s", 0).events)
    thread, failures = in_thread(lambda: record_turns(writer, "s", 4, start=1, pause=0.15))
    started = time.monotonic()
    got = collect(mode, reader, "s", 2)
    took = time.monotonic() - started
    thread.join(30)
    assert not failures
    final = writer.read_from("s", 0).events
    assert len(final) > stored
    assert [e.seq for e in got] == list(range(2, len(final)))
    assert [(e.type, e.data) for e in got] == [(e.type, e.data) for e in final[2:]]
    assert took < 30  # the session ended: the follower stopped after its idle timeout


@pytest.mark.parametrize("mode", MODES)
def test_a_follower_of_an_idle_session_ends_after_its_idle_timeout(open_store: StoreFactory,
                                                                   mode: str) -> None:
    store = open_store()
    record_turns(store, "s", 1)
    started = time.monotonic()
    got = collect(mode, store, "s", 0, idle_timeout=0.3)
    took = time.monotonic() - started
    assert [e.seq for e in got] == list(range(len(store.read_from("s", 0).events)))
    assert 0.25 <= took < 10


@pytest.mark.parametrize("mode", MODES)
def test_a_session_deleted_while_followed_is_a_clear_error(open_store: StoreFactory, mode: str) -> None:
    writer, reader = open_store(), open_store()
    record_turns(writer, "s", 1)
    seen: list[Event] = []

    def delete_soon() -> None:
        time.sleep(0.3)
        writer.delete("s")

    thread, failures = in_thread(delete_soon)
    with pytest.raises(SessionNotFoundError) as caught:
        collect(mode, reader, "s", 0, idle_timeout=20, seen=seen)
    thread.join(30)
    assert not failures
    assert caught.value.session_id == "s"
    assert [e.seq for e in seen] == list(range(len(seen))) and seen  # what was there came first


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_store_whose_files_vanish_while_followed_is_a_clear_error(tmp_path: Path, kind: str,
                                                                    mode: str) -> None:
    from agentlog import open_store as open_url

    url = f"jsonl://{tmp_path}/root" if kind == "jsonl" else f"sqlite://{tmp_path}/db/sessions.db"
    with open_url(url) as writer:
        record_turns(writer, "s", 1)
    with open_url(url) as reader:
        def remove_soon() -> None:
            time.sleep(0.3)
            shutil.rmtree(tmp_path / ("root" if kind == "jsonl" else "db"))

        thread, failures = in_thread(remove_soon)
        with pytest.raises(SessionNotFoundError) as caught:
            collect(mode, reader, "s", 0, idle_timeout=20)
        thread.join(30)
    assert not failures
    assert caught.value.session_id == "s"


@pytest.mark.parametrize("mode", MODES)
def test_a_session_replaced_under_the_same_id_is_not_followed_into(tmp_path: Path, mode: str) -> None:
    from agentlog import open_store as open_url

    url = f"jsonl://{tmp_path}/root"
    with open_url(url) as writer, open_url(url) as reader:
        record_turns(writer, "s", 3)
        stored = len(reader.read_from("s", 0).events)

        def replace() -> None:  # while the follower is paused at a yield: it reads nothing meanwhile
            writer.delete("s")
            time.sleep(0.01)  # a later created_at
            record_turns(writer, "s", 6)  # longer than what the follower saw: seqs past its cursor

        options: dict[str, Any] = {"idle_timeout": 20, "poll_interval": 0.02}
        with pytest.raises(SessionNotFoundError, match="new one of the same id"):
            if mode == "sync":
                followed = follow(reader, "s", 0, **options)
                assert [next(followed).seq for _ in range(stored)] == list(range(stored))
                replace()
                next(followed)
            else:
                async def main() -> None:
                    followed = afollow(reader, "s", 0, **options)
                    assert [(await anext(followed)).seq for _ in range(stored)] == list(range(stored))
                    replace()
                    await anext(followed)

                asyncio.run(main())


@pytest.mark.parametrize("mode", MODES)
def test_a_torn_jsonl_tail_is_not_yielded_until_it_is_whole(tmp_path: Path, mode: str) -> None:
    from agentlog import open_store as open_url

    url = f"jsonl://{tmp_path}/root?compression=none"
    with open_url(url) as writer:
        record_turns(writer, "s", 1)
        transcript = Path(writer.locate(writer.read_from("s", 0).header) or "")
        before = transcript.read_bytes()
        record_turns(writer, "s", 1, start=1)
        whole = transcript.read_bytes()
        count = len(writer.read_from("s", 0).events)
    assert whole.startswith(before)
    transcript.write_bytes(whole[: len(before) + (len(whole) - len(before)) // 2])  # a write half done
    with open_url(url) as reader:
        first = len(reader.read_from("s", 0).events)
        assert first < count

        def finish_the_write() -> None:
            time.sleep(0.4)
            transcript.write_bytes(whole)

        thread, failures = in_thread(finish_the_write)
        got = collect(mode, reader, "s", 0, idle_timeout=1.5)
        thread.join(30)
    assert not failures
    assert [e.seq for e in got] == list(range(count))  # the torn line came once, when whole


# -- the pure step ---------------------------------------------------------------------------


def events(seqs: list[int]) -> list[Event]:
    return [Event.from_json(json.dumps({"type": "todo/write", "seq": seq, "time": 1, "data": {"todos": []}}))
            for seq in seqs]


def state(cursor: int = 0, *, idle_timeout: float | None = 10.0, poll_interval: float = 1.0) -> Following:
    return start_following("s", cursor, 100.0, idle_timeout=idle_timeout, poll_interval=poll_interval)


def test_events_move_the_cursor_and_the_next_read_comes_at_once() -> None:
    after, wait = follow_step(state(3), events([3, 4, 5]), 104.0)
    assert (after.cursor, after.idle_since, wait) == (6, 104.0, 0.0)


def test_nothing_new_waits_a_poll_interval_then_what_is_left_of_the_idle_timeout_then_stops() -> None:
    assert follow_step(state(), [], 101.0)[1] == 1.0
    assert follow_step(state(), [], 109.5)[1] == pytest.approx(0.5)
    assert follow_step(state(), [], 110.0)[1] is None
    assert follow_step(state(idle_timeout=None), [], 10.0**9)[1] == 1.0  # never stops


@pytest.mark.parametrize("seqs", [[4, 5], [2, 3], [3, 5], [3, 4, 4]])
def test_a_read_that_does_not_continue_the_cursor_is_refused(seqs: list[int]) -> None:
    with pytest.raises(SessionCorruptionError) as caught:
        follow_step(state(3), events(seqs), 101.0)
    assert caught.value.session_id == "s" and caught.value.seq == 3


@pytest.mark.parametrize("options", [{"idle_timeout": math.nan}, {"idle_timeout": -1.0},
                                     {"poll_interval": 0.0}, {"poll_interval": math.nan},
                                     {"poll_interval": math.inf}])
def test_a_follower_that_would_never_stop_or_would_spin_is_refused(options: dict[str, float]) -> None:
    settings: dict[str, Any] = {"idle_timeout": 1.0, "poll_interval": 1.0, **options}
    with pytest.raises(UsageError):
        start_following("s", 0, 0.0, **settings)


@given(st.integers(0, 1000), st.lists(st.integers(0, 5), max_size=20))
def test_batches_that_continue_the_log_end_at_its_end(start: int, sizes: list[int]) -> None:
    current, now = state(start, idle_timeout=None), 100.0
    for size in sizes:
        now += 1
        current, wait = follow_step(current, events(list(range(current.cursor, current.cursor + size))), now)
        assert wait == (0.0 if size else 1.0)
    assert current.cursor == start + sum(sizes)
    assert current.idle_since == (100.0 + max((i + 1 for i, n in enumerate(sizes) if n), default=0))


def test_postgres_tail_refuses_a_nan_idle_timeout_instead_of_following_forever(
    backend: str, open_store: StoreFactory,
) -> None:
    if backend != "postgres":
        pytest.skip("PostgresStore.tail/atail only")
    store = open_store()
    record_turns(store, "s", 1)
    with pytest.raises(UsageError, match="idle_timeout"):
        next(store.tail("s", 0, idle_timeout=math.nan))  # type: ignore[attr-defined]

    async def first() -> Event:
        return await anext(store.atail("s", 0, poll_interval=math.nan))  # type: ignore[attr-defined]

    with pytest.raises(UsageError, match="poll_interval"):
        asyncio.run(first())
