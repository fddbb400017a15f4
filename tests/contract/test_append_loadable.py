"""What append accepts, load must accept (issue 11.2, DESIGN §8 "a store never holds a log it
would refuse"): for random append sequences, valid and invalid mixed, every accepted and flushed
event loads back unchanged from the same store and from a fresh one, on every backend."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog import AgentlogError, Event, InvalidEventError, Replace, Session, SessionHeader
from agentlog.core.repair import last_turn_is_open
from agentlog.legacy.upgrade import upgrade_legacy
from tests.contract.conftest import StoreFactory
from tests.strategies import Op, interleaved, json_values, session_ops, user_message

SURFACE = ("user/message", "assistant/message", "tool/result")

BAD_DATA: dict[str, list[Any]] = {
    "user/message": [
        {"id": "m", "role": "user", "source": {"kind": "user"}, "content": "hi"},  # the issue's example
        {"role": "user", "source": {"kind": "user"}, "content": []},
        {"content": [{"type": "text", "text": "legacy"}], "source": {"kind": "user"}},
        {"id": "m", "role": "assistant", "source": {"kind": "user"}, "content": []},
    ],
    "assistant/message": [
        {"message": {"id": "a", "role": "assistant", "content": [], "source": {"kind": "user"}}},
        {"content": [], "provenance": {"provider": "p", "model": "m"}},
        {"message": {"content": [{"type": "text", "text": "x"}]}},
    ],
    "tool/result": [
        {"callId": "c", "content": [], "isError": False},
        {"message": {"id": "t", "role": "user", "content": [], "source": {"kind": "tool", "callId": "c"}}},
    ],
    "turn/start": [{"turn": 1, "trigger": {"kind": "user"}}, {"turn": 0, "trigger": {}}],
    "turn/end": [
        {"turn": 1, "reason": {"kind": "aborted"}},
        {"turn": 1, "reason": {"kind": "completed"}, "extra": 1},
        {"turn": 1, "reason": {"kind": "completed", "why": "x"}},
        {"turn": 1, "reason": {"kind": "disposed"}},
    ],
    "request/header": [
        {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "fallback"},
        {"header": {"config": {}}, "reason": "initial"},
        {"header": "x", "reason": "initial"},
    ],
    "steering/message": [{"turn": 1, "content": [], "source": {"kind": "user"}}],
    "request/header-delta": [{}],
    "mode/set": [{"mode": "plan"}],
    "plugin/event": [{"any": "thing"}],
    "assistant/chunk": [{"turn": 1, "step": 1, "chunk": {"type": "text", "index": 0, "text": "t"}}],
}


@dataclass(frozen=True)
class HostileOp(Op):
    """An op whose markers are raw seqs (``marker``: none, append or replace)."""

    marker: str = "none"


@st.composite
def hostile_ops(draw: st.DrawFn) -> Op:
    """An append a store might refuse: bad shapes, legacy forms, retired and unknown types,
    random JSON, and random surface markers."""
    kind = draw(st.sampled_from(sorted(BAD_DATA)))
    data = draw(st.sampled_from(BAD_DATA[kind]) | json_values(max_leaves=4, tuples=False))
    if kind == "user/message" and draw(st.booleans()):
        data = user_message(f"h{draw(st.integers(0, 9))}", "ok")  # a valid message, random markers
    marker = draw(st.sampled_from(["none", "append", "replace"]))
    replace = (draw(st.integers(0, 40)), draw(st.integers(0, 40))) if marker == "replace" else None
    cites = tuple(draw(st.lists(st.integers(0, 40), max_size=3))) if draw(st.booleans()) else None
    return HostileOp(kind, data, replace, cites, marker)


@st.composite
def append_attempts(draw: st.DrawFn, max_ops: int = 8) -> list[Op]:
    valid = draw(interleaved(draw(session_ops(max_ops=max_ops))))
    out: list[Op] = []
    for op in valid:
        out.extend(draw(st.lists(hostile_ops(), max_size=2)))
        out.append(op)
    return out


def attempt(session: Any, op: Op, accepted: dict[int, Any], index: int) -> None:
    """Append one op; a refusal must leave the log unchanged. Valid ops reference earlier ops by
    index (``accepted`` maps them to their events); hostile ones carry raw seqs."""
    if not isinstance(op, HostileOp):  # a valid op from session_ops / interleaved
        if op.type in SURFACE:
            refs = [*(op.replace or ()), *(op.cites or ())]
            if any(ref not in accepted for ref in refs):
                return  # it cites an op that was refused: skip it
        surface_op: Any = "append" if op.type in SURFACE else None
        if op.replace is not None:
            surface_op = Replace(accepted[op.replace[0]].seq, accepted[op.replace[1]].seq)
        cites = None if op.cites is None else [accepted[ref].seq for ref in op.cites]
    else:
        surface_op = {"none": None, "append": "append"}.get(op.marker)
        if op.marker == "replace":
            assert op.replace is not None
            surface_op = Replace(*op.replace)
        cites = None if op.cites is None else list(op.cites)
    before = session.seq
    try:
        accepted[index] = session.append(op.type, op.data, surface_op=surface_op, source_event_seqs=cites)
    except AgentlogError:
        assert session.seq == before  # a refused append leaves the log unchanged


def check_round_trip(open_store: StoreFactory, ops: list[Op]) -> None:
    store = open_store()
    session_id = f"prop-{uuid.uuid4().hex[:12]}"
    live = store.start(session_id)
    accepted: dict[int, Any] = {}
    for index, op in enumerate(ops):
        attempt(live.session, op, accepted, index)
    live.flush()
    live.close()
    logged = [event.to_wire() for event in live.session.events]
    if not logged:
        return  # nothing was ever persisted
    for reader in (store, open_store()):
        loaded = [event.to_wire() for event in reader.load(session_id).events]
        assert loaded[: len(logged)] == logged
        if len(loaded) != len(logged):  # only the closers of an interrupted turn may follow
            assert last_turn_is_open(live.session.events)


FAST = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
LONG = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(ops=append_attempts())
def test_every_accepted_append_loads_back_unchanged(open_store: StoreFactory, ops: list[Op]) -> None:
    check_round_trip(open_store, ops)


@pytest.mark.slow
@LONG
@given(ops=append_attempts(max_ops=20))
def test_every_accepted_append_loads_back_unchanged_long(open_store: StoreFactory, ops: list[Op]) -> None:
    check_round_trip(open_store, ops)


def test_the_issue_example_is_refused_and_earlier_events_stay_loadable(open_store: StoreFactory) -> None:
    store = open_store()
    live = store.start("s")
    live.session.append("user/message", user_message("ok"), surface_op="append")
    bad = {"id": "m", "role": "user", "source": {"kind": "user"}, "content": "hi"}
    with pytest.raises(AgentlogError, match="message has invalid content"):
        live.session.append("user/message", bad, surface_op="append")
    live.flush()
    live.close()
    for reader in (store, open_store()):
        assert [event.data["id"] for event in reader.load("s").events] == ["ok"]
        assert reader.inspect("s").events[0].data["id"] == "ok"


@pytest.mark.parametrize(
    ("kind", "data", "fragment"),
    [
        ("plugin/event", {}, "not in the known vocabulary"),
        ("mode/set", {"mode": "plan"}, "unsupported legacy mode/set"),
        ("request/header-delta", {}, "unsupported legacy request/header-delta"),
        ("steering/message", {"turn": 1, "content": [], "source": {"kind": "user"}}, "pre-react-loop shape"),
        ("turn/start", {"turn": 1, "trigger": {"kind": "user"}}, "pre-react-loop shape"),
        ("turn/start", {"turn": 0}, "positive integer turn"),
        ("turn/start", None, "positive integer turn"),
    ],
)
def test_a_store_session_refuses_what_its_load_would_refuse_or_rewrite(
    open_store: StoreFactory, kind: str, data: Any, fragment: str
) -> None:
    live = open_store().start("strict")
    with pytest.raises(AgentlogError, match=fragment) as refused:
        live.session.append(kind, data)
    assert refused.value.session_id == "strict" and refused.value.seq == 0
    assert live.session.seq == 0
    live.close()


def check_cold_round_trip(open_store: StoreFactory, ops: list[Op], sizes: list[int]) -> None:
    """The same attempts through a plain Session (which checks less), then its events stored by
    cold ``Store.append`` in batches: each batch is stored whole or refused with the log unchanged,
    and loads back as stored (legacy shapes, which a cold append takes in, as load upgrades them)."""
    session = Session.create("plain")
    accepted: dict[int, Any] = {}
    for index, op in enumerate(ops):
        attempt(session, op, accepted, index)
    wire = [event.to_wire() for event in session.events]
    session_id = f"cold-{uuid.uuid4().hex[:12]}"
    store = open_store()
    store.create(SessionHeader(id=session_id))
    stored = 0
    for size in sizes:
        batch = wire[stored: stored + size]
        if not batch:
            break
        try:
            store.append(session_id, batch)
        except AgentlogError:
            break  # the rest continues a refused batch: stop
        stored += len(batch)
    if not stored:
        return
    for reader in (store, open_store()):
        loaded = [event.to_wire() for event in reader.load(session_id).events]
        expected = upgrade_legacy(session_id, [Event.from_wire(event) for event in wire[:stored]])
        assert loaded[:stored] == [cast(Event, event).to_wire() for event in expected]  # legacy: upgraded


@FAST
@given(ops=append_attempts(), sizes=st.lists(st.integers(1, 4), min_size=1, max_size=12))
def test_every_batch_a_cold_append_accepts_loads_back_unchanged(
    open_store: StoreFactory, ops: list[Op], sizes: list[int]
) -> None:
    check_cold_round_trip(open_store, ops, sizes)


def test_a_cold_append_refuses_what_a_load_would_refuse_and_leaves_the_log_unchanged(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    store.create(SessionHeader(id="cold"))
    store.append("cold", [{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}])
    bad = {"type": "user/message", "seq": 1, "time": 1, "surfaceOp": "append",
           "data": {"id": "m", "role": "user", "source": {"kind": "user"}, "content": "hi"}}
    with pytest.raises(InvalidEventError, match="message has invalid content") as refused:
        store.append("cold", [bad])
    assert (refused.value.session_id, refused.value.seq) == ("cold", 1)
    for reader in (store, open_store()):
        assert [event.type for event in reader.inspect("cold").events][:1] == ["turn/start"]
        assert len(reader.read_from("cold", 0).events) == 1
