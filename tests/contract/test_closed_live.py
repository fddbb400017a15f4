"""A closed live session refuses every write instead of dropping it (silent data loss),
and stays readable. Runs once per backend in ``conftest.BACKENDS``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentlog import Recorder, SessionHeader, UsageError, WriteFailedError
from agentlog.store.base import Store
from tests.contract.conftest import StoreFactory

HEADER = SessionHeader(id="closed-1", created_at=1000, cwd="/work/project")
END = {"turn": 1, "reason": {"kind": "completed"}}


def wire(events: Any) -> list[dict[str, Any]]:
    return [event.to_wire() for event in events]


def one_turn(store: Store) -> Any:
    live = store.start(HEADER)
    live.session.append("turn/start", {"turn": 1})
    message = {"id": "m1", "role": "user", "content": [{"type": "text", "text": "hi"}],
               "source": {"kind": "user"}}
    live.session.append("user/message", message, surface_op="append")
    live.session.append("turn/end", END)
    return live


def assert_refused_as_closed(refused: pytest.ExceptionInfo[UsageError]) -> None:
    assert refused.value.session_id == HEADER.id
    assert "closed" in str(refused.value) and HEADER.id in str(refused.value)


def test_append_after_close_is_refused_and_the_log_is_unchanged(open_store: StoreFactory) -> None:
    live = one_turn(open_store())
    live.close()
    before = wire(live.session.events)
    with pytest.raises(UsageError, match="closed") as refused:
        live.session.append("turn/start", {"turn": 2})
    assert_refused_as_closed(refused)
    assert wire(live.session.events) == before
    assert wire(open_store().load(HEADER.id).events) == before


def test_reading_a_closed_live_session_keeps_working(open_store: StoreFactory) -> None:
    live = one_turn(open_store())
    live.close()
    assert [e.type for e in live.session.events] == ["turn/start", "user/message", "turn/end"]
    assert len(live.session.derive_messages()) == 1
    assert live.durable_seq == 3


def test_a_recorder_turn_on_a_closed_live_session_is_refused(open_store: StoreFactory) -> None:
    live = one_turn(open_store())
    live.close()
    with pytest.raises(UsageError, match="closed") as refused, Recorder(live).turn():
        pass
    assert_refused_as_closed(refused)
    assert live.session.seq == 3
    assert len(open_store().load(HEADER.id).events) == 3


def test_flush_and_aflush_after_close_are_refused(open_store: StoreFactory) -> None:
    live = one_turn(open_store())
    live.close()
    with pytest.raises(UsageError, match="closed") as refused:
        live.flush()
    assert_refused_as_closed(refused)
    with pytest.raises(UsageError, match="closed"):
        asyncio.run(live.aflush())
    live.close()  # close stays idempotent


def test_appends_after_the_store_closed_are_refused(open_store: StoreFactory) -> None:
    store = open_store()
    live = one_turn(store)
    store.close()
    with pytest.raises(UsageError, match="closed"):
        live.session.append("turn/start", {"turn": 2})
    assert len(open_store().load(HEADER.id).events) == 3


def test_appends_after_abandon_are_refused(open_store: StoreFactory) -> None:
    live = one_turn(open_store())
    live.flush()
    live.abandon()
    with pytest.raises(UsageError, match="closed"):
        live.session.append("turn/start", {"turn": 2})
    assert live.session.seq == 3


def test_a_failed_live_session_keeps_refusing_after_close(open_store: StoreFactory) -> None:
    store = open_store()
    live = one_turn(store)
    live.flush()
    failure = WriteFailedError("planted", session_id=HEADER.id)
    live._fail(failure)
    with pytest.raises(WriteFailedError):
        live.close()
    with pytest.raises((WriteFailedError, UsageError)):
        live.session.append("turn/start", {"turn": 2})
    with pytest.raises((WriteFailedError, UsageError)):
        live.flush()
    assert live.session.seq == 3
    assert len(open_store().load(HEADER.id).events) == 3
