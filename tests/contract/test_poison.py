"""Strings that cannot reach disk are refused where they enter; a batch that can never be
written fails its live session with one clear error instead of wedging the writer (issue 11.3)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from agentlog import (
    AgentlogError,
    InvalidEventError,
    InvalidHeaderError,
    SessionHeader,
    WriteFailedError,
)
from agentlog.core.jsonvalue import frozen_dict
from tests.contract.conftest import StoreFactory

LONE = "\ud800"


def wire_events(events: Any) -> list[dict[str, Any]]:
    return [event.to_wire() for event in events]


@pytest.mark.parametrize("kind", [f"x/{LONE}", f"{LONE}", f"plugin/{LONE}event"])
@pytest.mark.parametrize("frozen", [False, True], ids=["dict", "frozen"])
def test_a_type_with_a_lone_surrogate_is_refused_at_append(
    open_store: StoreFactory, kind: str, frozen: bool
) -> None:
    store = open_store()
    live = store.start("poison-type")
    live.session.append("turn/start", {"turn": 1})
    before = live.session.seq
    data = frozen_dict(()) if frozen else {}
    with pytest.raises(InvalidEventError, match="lone surrogate") as refused:
        live.session.append(kind, data)
    assert refused.value.session_id == "poison-type" and refused.value.seq == before
    str(refused.value).encode("utf-8")  # the message itself is printable
    assert live.session.seq == before
    live.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    live.flush()
    live.close()
    expected = wire_events(live.session.events)
    assert wire_events(open_store().load("poison-type").events) == expected


@pytest.mark.parametrize(
    "fields",
    [
        {"id": f"a{LONE}b"},
        {"id": "h", "cwd": f"/tmp/{LONE}"},
        {"id": "h", "parent_session": f"p{LONE}"},
        {"id": "h", "agent_preset": f"{LONE}"},
        {"id": "h", "extra": {"note": f"n{LONE}"}},
        {"id": "h", "extra": {f"k{LONE}": 1}},
    ],
    ids=["id", "cwd", "parentSession", "agentPreset", "extra-value", "extra-key"],
)
def test_a_header_string_with_a_lone_surrogate_is_refused_when_built(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidHeaderError, match=r"lone surrogate|not a valid string") as refused:
        SessionHeader(**fields)
    str(refused.value).encode("utf-8")


def test_a_session_id_with_a_lone_surrogate_never_starts_a_session(open_store: StoreFactory) -> None:
    store = open_store()
    with pytest.raises(InvalidHeaderError, match="lone surrogate"):
        store.start(f"a{LONE}b")
    live = store.start("fine")  # the store is unharmed
    live.session.append("session/title", {"title": "fine"})
    live.close()
    assert [header.id for header in open_store().list()] == ["fine"]


DURABLE = ["jsonl-raw", "jsonl-zstd", "postgres", "sqlite"]


@pytest.mark.parametrize("backend", DURABLE, indirect=True)
def test_a_batch_that_can_never_be_written_fails_the_live_session_clearly(open_store: StoreFactory) -> None:
    """Data built with the unchecked ``frozen_dict`` bypasses entry validation: the store cannot
    encode it. flush, later appends and close raise one ``WriteFailedError`` naming the session
    and seq; close still releases the writer lock; what was durable before stays loadable."""
    store = open_store()
    live = store.start("wedge")
    live.session.append("session/title", {"title": "one"})
    live.flush()
    poison_seq = live.session.seq
    live.session.append("session/title", frozen_dict({"text": f"bad{LONE}"}))
    live.session.append("session/title", {"title": "two"})
    with pytest.raises(WriteFailedError) as failed:
        live.flush()
    error = failed.value
    assert isinstance(error, AgentlogError) and not isinstance(error, TypeError)
    assert error.session_id == "wedge" and error.seq == poison_seq
    assert "never be written" in str(error)
    str(error).encode("utf-8")
    with pytest.raises(WriteFailedError) as again:
        live.flush()
    assert again.value is error
    seq = live.session.seq
    with pytest.raises(WriteFailedError):
        live.session.append("session/title", {"title": "three"})
    assert live.session.seq == seq  # the refused append left the log unchanged
    with pytest.raises(WriteFailedError) as closing:
        live.close()
    assert closing.value is error
    live.close()  # once: a second close is a no-op
    assert live.durable_seq == poison_seq
    reopened = store.open("wedge")  # the writer lock was released
    assert [event.type for event in reopened.session.events] == ["session/title", "session/end-seed"]
    reopened.close()
    loaded = open_store().load("wedge").events
    assert [event.type for event in loaded] == ["session/title", "session/end-seed"]


@pytest.mark.parametrize("backend", DURABLE, indirect=True)
def test_a_background_write_that_can_never_succeed_fails_the_next_flush(open_store: StoreFactory) -> None:
    store = open_store()
    live = store.start("wedge-bg")
    live.session.append("session/title", frozen_dict({"text": LONE}))
    time.sleep(0.3)  # the write-behind thread tries once its 20 ms window has passed
    with pytest.raises(WriteFailedError, match="seq 0"):
        live.flush()
    with pytest.raises(WriteFailedError):
        live.close()


def test_a_cold_append_of_a_type_with_a_lone_surrogate_is_refused(open_store: StoreFactory) -> None:
    store = open_store()
    store.create(SessionHeader(id="cold", created_at=1))
    wire = {"type": f"session/{LONE}", "seq": 0, "time": 1, "data": {}}
    with pytest.raises(InvalidEventError, match="lone surrogate") as refused:
        store.append("cold", [wire])
    str(refused.value).encode("utf-8")
    store.create(SessionHeader(id="cold", created_at=1))  # a refused first append forgets the creation
    store.append("cold", [{"type": "session/title", "seq": 0, "time": 1, "data": {"title": "t"}}])
    assert [event.type for event in open_store().load("cold").events] == ["session/title"]
