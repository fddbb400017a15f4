"""Legacy upgrades of stored logs, as a pure function (spec persistence §6.2)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentlog import AgentlogError, Event, FrozenDict, InvalidEventError, Replace, Session, SessionHeader
from agentlog.core.events import KNOWN_EVENT_TYPES
from agentlog.core.jsonvalue import thaw
from agentlog.core.storable import STORED_EVENT_TYPES, first_legacy, is_current
from agentlog.legacy.upgrade import _upgrade_event, legacy_message_id, needs_prefix, upgrade_legacy
from tests.contract.logs import LogBuilder
from tests.legacy_logs import (
    MALFORMED_LEGACY,
    STEERING_MESSAGE_ID,
    UPGRADED_TURN_ENDS,
    legacy_message_log,
    pre_react_loop_log,
)

SID = "s-legacy"


def events(wires: list[dict[str, Any]]) -> list[Event]:
    return [Event.from_wire(wire) for wire in wires]


def one(wire: dict[str, Any]) -> Event:
    return upgrade_legacy(SID, [Event.from_wire(wire)])[0]


def current_log() -> list[Event]:
    """A log with nothing legacy: every current turn/end reason, tool calls, replacements."""
    log = LogBuilder()
    log.turn(1)
    log.add("turn/start", {"turn": 2})
    log.add("step/start", {"turn": 2, "step": 1})
    log.assistant(2, 1, "calling", calls=("c1",))
    call = log.tool_call(2, 1, "c1")
    result = log.tool_result(2, 1, "c1", call["seq"])
    pruned = log.tool_result(2, 1, "c1", result["seq"])
    pruned["data"]["message"]["id"] = result["data"]["message"]["id"]
    pruned["surfaceOp"] = {"op": "replace", "start": result["seq"], "end": result["seq"]}
    pruned["sourceEventSeqs"] = [result["seq"]]
    log.add("step/end", {"turn": 2, "step": 1})
    log.add("turn/end", {"turn": 2, "reason": {"kind": "aborted", "reason": {"kind": "user"}}})
    for turn, reason in enumerate([
        {"kind": "error", "error": {"message": "m", "code": "UNKNOWN"}},
        {"kind": "blocked"}, {"kind": "max-tokens"}, {"kind": "interrupted"}, {"kind": "plugin-kind", "x": 1},
    ], start=3):
        log.add("turn/start", {"turn": turn})
        log.add("turn/end", {"turn": turn, "reason": reason})
    log.add("plugin/thing", None, ignorable=True)
    return events(log.events)


# -- nothing legacy ----------------------------------------------------------------------------------


def test_a_log_without_legacy_shapes_is_returned_as_the_same_list() -> None:
    log = current_log()
    snapshot = list(log)
    upgraded = upgrade_legacy(SID, log)
    assert upgraded is log
    assert all(after is before for after, before in zip(upgraded, snapshot, strict=True))
    assert Session.restore(SID, upgraded, SessionHeader(id=SID)).seq == len(log) + 1


def test_an_immutable_stored_sequence_is_never_changed_in_place() -> None:
    clean = tuple(current_log())
    assert upgrade_legacy(SID, clean) is clean
    legacy = tuple(events(legacy_message_log()))
    upgraded = upgrade_legacy(SID, legacy)
    assert type(upgraded) is list
    assert "id" not in legacy[1].data
    assert upgraded[0] is legacy[0]


@pytest.mark.parametrize("log", [legacy_message_log, pre_react_loop_log])
def test_upgrading_an_upgraded_log_changes_nothing(log: Any) -> None:
    once = upgrade_legacy(SID, events(log()))
    assert upgrade_legacy(SID, once) is once


def test_only_changed_events_are_new_objects() -> None:
    log = events(legacy_message_log())
    upgraded = upgrade_legacy(SID, log)
    assert upgraded is not log
    changed = [before.seq for before, after in zip(log, upgraded, strict=True) if after is not before]
    assert changed == [1, 3, 5, 6]


def test_steering_message_is_a_readable_stored_type_but_not_a_known_one() -> None:
    assert "steering/message" in STORED_EVENT_TYPES
    assert "steering/message" not in KNOWN_EVENT_TYPES
    assert STORED_EVENT_TYPES >= KNOWN_EVENT_TYPES


# -- pre-identity messages ---------------------------------------------------------------------------


def test_pre_identity_user_message_gets_a_legacy_id_and_user_role() -> None:
    event = one({"type": "user/message", "seq": 4, "time": 9, "surfaceOp": "append",
                 "data": {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}})
    assert list(event.data) == ["content", "source", "id", "role"]
    assert event.data["id"] == f"legacy-message:{SID}:4" == legacy_message_id(SID, 4)
    assert event.data["role"] == "user"
    assert (event.type, event.seq, event.time, event.surface_op) == ("user/message", 4, 9, "append")
    assert type(event.data) is FrozenDict


def test_pre_identity_assistant_message_is_wrapped_with_a_model_source() -> None:
    event = one({"type": "assistant/message", "seq": 3, "time": 4, "surfaceOp": "append",
                 "sourceEventSeqs": [2], "data": {
                     "turn": 1, "step": 1, "content": [{"type": "text", "text": "ok"}],
                     "provenance": {"provider": "p", "model": "m"}, "usage": {"inputTokens": 3}}})
    assert thaw(event.data) == {
        "turn": 1, "step": 1, "usage": {"inputTokens": 3},
        "message": {"id": f"legacy-message:{SID}:3", "role": "assistant",
                    "content": [{"type": "text", "text": "ok"}],
                    "source": {"provider": "p", "model": "m", "kind": "model"}},
    }
    assert event.source_event_seqs == (2,)


def test_pre_identity_tool_result_is_wrapped_in_one_tool_result_block() -> None:
    event = one({"type": "tool/result", "seq": 5, "time": 6, "sourceEventSeqs": [4], "surfaceOp": "append",
                 "data": {"turn": 1, "step": 1, "callId": "c", "content": [{"type": "text", "text": "r"}],
                          "isError": True, "meta": {"k": 1}}})
    assert thaw(event.data) == {
        "turn": 1, "step": 1, "meta": {"k": 1},
        "message": {"id": f"legacy-message:{SID}:5", "role": "user",
                    "content": [{"type": "tool-result", "toolCallId": "c",
                                 "content": [{"type": "text", "text": "r"}], "isError": True}],
                    "source": {"kind": "tool", "callId": "c"}},
    }


def test_replacing_tool_result_inherits_the_id_of_the_message_it_replaces() -> None:
    upgraded = upgrade_legacy(SID, events(legacy_message_log()))
    ids = [e.data["message"]["id"] if e.type != "user/message" else e.data["id"]
           for e in upgraded if e.type in ("user/message", "assistant/message", "tool/result")]
    assert ids == [f"legacy-message:{SID}:{seq}" for seq in (1, 3, 5, 5)]
    session = Session.restore(SID, upgraded, SessionHeader(id=SID))
    assert [m["id"] for m in session.derive_messages()] == ids[:3]


def test_legacy_replacement_of_a_current_message_inherits_its_id() -> None:
    log = events(legacy_message_log())
    current = dict(log[5].to_wire())
    current["data"] = {"turn": 1, "step": 1, "message": {
        "id": "current-id", "role": "user", "source": {"kind": "tool", "callId": "call-1"},
        "content": [{"type": "tool-result", "toolCallId": "call-1", "content": [], "isError": False}]}}
    log[5] = Event.from_wire(current)
    upgraded = upgrade_legacy(SID, log)
    assert upgraded[6].data["message"]["id"] == "current-id"


def test_legacy_replacement_inherits_within_a_suffix_that_starts_past_seq_zero() -> None:
    suffix = events(legacy_message_log())[5:]
    assert upgrade_legacy(SID, suffix)[1].data["message"]["id"] == f"legacy-message:{SID}:5"


@pytest.mark.parametrize("start", [6, 9, 0])
def test_legacy_replacement_without_an_identified_target_is_refused(start: int) -> None:
    log = events(legacy_message_log())
    wire = log[6].to_wire()
    wire["surfaceOp"] = {"op": "replace", "start": start, "end": start}
    log[6] = Event.from_wire(wire)  # seq 0 is a turn/start: no message; 6 is itself; 9 is past the end
    with pytest.raises(InvalidEventError, match="tool/result lacks an identified message") as info:
        upgrade_legacy(SID, log)
    assert (info.value.session_id, info.value.seq) == (SID, 6)


def test_only_a_legacy_replacement_needs_the_earlier_log() -> None:
    log = events(legacy_message_log())
    assert needs_prefix(log[6:])
    assert not needs_prefix(log[:6])
    assert not needs_prefix(upgrade_legacy(SID, log))


@pytest.mark.parametrize(("kind", "data"), [
    ("user/message", {}),
    ("user/message", None),
    ("user/message", {"content": [], "source": {"kind": "user"}, "id": ""}),
    ("user/message", {"content": [], "source": {"kind": "user"}, "role": "user"}),
    ("assistant/message", {}),
    ("assistant/message", {"turn": 1, "step": 1, "content": []}),
    ("tool/result", {"message": None}),
    ("tool/result", {"turn": 1, "step": 1, "callId": "c", "content": []}),
])
def test_message_event_without_an_identified_message_is_refused(kind: str, data: Any) -> None:
    wire = {"type": kind, "seq": 2, "time": 1, "surfaceOp": "append", "data": data}
    with pytest.raises(InvalidEventError, match=f"{kind} lacks an identified message") as info:
        one(wire)
    assert (info.value.session_id, info.value.seq) == (SID, 2)
    assert f'session "{SID}"' in str(info.value)


# -- pre-react-loop logs -----------------------------------------------------------------------------


def test_turn_start_trigger_is_dropped() -> None:
    event = one({"type": "turn/start", "seq": 0, "time": 1,
                 "data": {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}})
    assert thaw(event.data) == {"turn": 1}


def test_wrapped_steering_message_becomes_its_user_message() -> None:
    upgraded = upgrade_legacy(SID, events(pre_react_loop_log()))
    steering = upgraded[3]
    assert (steering.type, steering.surface_op) == ("user/message", "append")
    assert steering.data["id"] == STEERING_MESSAGE_ID
    assert not any(e.type == "steering/message" for e in upgraded)


def test_flat_steering_message_gets_a_legacy_id_and_user_role() -> None:
    event = one({"type": "steering/message", "seq": 0, "time": 1, "surfaceOp": "append",
                 "data": {"turn": 1, "content": [{"type": "text", "text": "flat"}],
                          "source": {"kind": "user"}}})
    assert event.type == "user/message"
    assert thaw(event.data) == {"content": [{"type": "text", "text": "flat"}], "source": {"kind": "user"},
                                "id": f"legacy-message:{SID}:0", "role": "user"}


def test_wrapped_steering_of_a_pre_identity_message_gets_a_legacy_id() -> None:
    event = one({"type": "steering/message", "seq": 7, "time": 1, "surfaceOp": "append",
                 "data": {"turn": 1, "message": {"content": [], "source": {"kind": "user"}}}})
    assert (event.type, event.data["id"], event.data["role"]) == ("user/message", f"legacy-message:{SID}:7",
                                                                  "user")


def test_seven_legacy_turn_end_reasons_are_mapped() -> None:
    upgraded = upgrade_legacy(SID, events(pre_react_loop_log()))
    assert [thaw(e.data) for e in upgraded if e.type == "turn/end"] == UPGRADED_TURN_ENDS
    assert [thaw(e.data) for e in upgraded if e.type == "turn/start"] == [{"turn": n} for n in range(1, 8)]
    session = Session.restore(SID, upgraded, SessionHeader(id=SID))
    assert [thaw(m["content"]) for m in session.derive_messages()] == [
        [{"type": "text", "text": "old prompt"}], [{"type": "text", "text": "old steering"}]]


@pytest.mark.parametrize("reason", [
    {"kind": "extension-reason"},
    {"kind": "extension-reason", "detail": {"x": [1, 2]}},
    {"kind": "aborted", "reason": {"kind": "hook", "reason": "stop"}},
    {"kind": "error", "error": {"message": "m", "code": "C"}, "step": 3},
])
def test_current_turn_end_reasons_pass_through_untouched(reason: Any) -> None:
    event = Event.from_wire({"type": "turn/end", "seq": 0, "time": 1, "data": {"turn": 1, "reason": reason}})
    assert upgrade_legacy(SID, [event])[0] is event


def test_turn_end_with_non_object_data_is_left_to_the_restore_validator() -> None:
    event = Event.from_wire({"type": "turn/end", "seq": 0, "time": 1, "data": None})
    assert upgrade_legacy(SID, [event])[0] is event


def test_old_error_failure_keeps_only_its_known_fields() -> None:
    bad = {"kind": "error", "step": 0, "failure": {"message": "m", "code": "C", "status": "429"}}
    with pytest.raises(InvalidEventError, match="malformed pre-react-loop turn/end"):
        one({"type": "turn/end", "seq": 0, "time": 1, "data": {"turn": 1, "reason": bad}})


@pytest.mark.parametrize(("name", "wire", "fragment"), MALFORMED_LEGACY, ids=[m[0] for m in MALFORMED_LEGACY])
def test_malformed_legacy_shape_is_refused_naming_session_seq_and_rule(
    name: str, wire: dict[str, Any], fragment: str,
) -> None:
    with pytest.raises(InvalidEventError, match=fragment) as info:
        one(wire)
    error = info.value
    assert (error.session_id, error.seq) == (SID, 0)
    assert str(error).startswith(f'session "{SID}"')
    assert ": " in error.detail.removeprefix(fragment)  # the broken rule follows the shape's name


def test_malformed_event_after_legacy_upgrades_is_still_refused() -> None:
    log = events(legacy_message_log())
    log.append(Event.from_wire({**MALFORMED_LEGACY[0][1], "seq": 9}))
    with pytest.raises(InvalidEventError, match="malformed pre-react-loop turn/start") as info:
        upgrade_legacy(SID, log)
    assert info.value.seq == 9


# -- decoding --------------------------------------------------------------------------------------


def test_stored_steering_message_decodes_with_its_surface_markers() -> None:
    event = Event.from_wire({"type": "steering/message", "seq": 3, "time": 1, "surfaceOp": "append",
                             "data": {"turn": 1}})
    assert (event.type, event.surface_op) == ("steering/message", "append")
    replaced = Event.from_wire({"type": "steering/message", "seq": 3, "time": 1, "sourceEventSeqs": [1],
                                "surfaceOp": {"op": "replace", "start": 1, "end": 1}, "data": {}})
    assert replaced.surface_op == Replace(1, 1)
    bare = Event.from_wire({"type": "steering/message", "seq": 3, "time": 1, "data": {}})
    assert bare.surface_op is None


def test_a_chain_names_each_segment_after_its_writer_and_drops_nothing() -> None:
    from agentlog.legacy.upgrade import upgrade_legacy_chain

    log = events(legacy_message_log())
    ids = message_ids(upgrade_legacy_chain("kid", log, [(0, "root"), (3, "mid"), (6, "kid")]))
    assert ids == ["legacy-message:root:1", "legacy-message:mid:3", "legacy-message:mid:5",
                   "legacy-message:mid:5"]  # seq 6 replaces seq 5 and inherits its id
    ids = message_ids(upgrade_legacy_chain("kid", log, [(3, "mid"), (6, "kid")]))  # seqs 0-2: the kid's
    assert ids[0] == "legacy-message:kid:1" and ids[1] == "legacy-message:mid:3"
    suffix = upgrade_legacy_chain("kid", log[4:], [(0, "root"), (3, "mid"), (6, "kid")], first_seq=4)
    assert len(suffix) == len(log) - 4 and message_ids(suffix)[0] == "legacy-message:mid:5"


def message_ids(log: Any) -> list[str]:
    out = []
    for event in log:
        if event.type == "user/message":
            out.append(event.data["id"])
        elif event.type in ("assistant/message", "tool/result"):
            out.append(event.data["message"]["id"])
    return out


# -- the current-or-legacy test that keeps current logs out of the upgrade ------------------------

_LEAF = st.one_of(st.sampled_from([None, True, 1, 2, 0, -1, "", "x", "user", "legacy"]), st.integers(-1, 3))
_ANY_KEY = st.sampled_from(["kind", "x", "id", "message"])
_ANY = st.recursive(_LEAF, lambda inner: st.dictionaries(_ANY_KEY, inner, max_size=2), max_leaves=4)


def _near(shape: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects near a known shape: usually all its keys, sometimes one dropped or one stray key."""
    whole = st.fixed_dictionaries(shape)
    return st.one_of(
        whole,
        st.tuples(whole, st.sampled_from(sorted(shape))).map(
            lambda p: {key: value for key, value in p[0].items() if key != p[1]}),
        st.tuples(whole, st.sampled_from(["x", "step", "error", "reason", "trigger"]), _LEAF).map(
            lambda p: {**p[0], p[1]: p[2]}),
    )


_KIND = st.sampled_from(["completed", "blocked", "max-tokens", "interrupted", "aborted", "disposed",
                         "error", "handoff", 3])
_TURN = st.sampled_from([1, 2, 0, -1, "1", None])
_MESSAGE = _near({"id": st.sampled_from(["m1", "", 7, None]), "role": _LEAF, "content": _LEAF})
_CASES = st.one_of(
    st.tuples(st.just("turn/end"), _near({"turn": _TURN, "reason": _near({"kind": _KIND})})),
    st.tuples(st.just("turn/end"), _near({"turn": _TURN, "reason": _near(
        {"kind": _KIND, "reason": _ANY, "error": _ANY, "step": _LEAF, "message": _LEAF})})),
    st.tuples(st.just("turn/start"), _near({"turn": _TURN, "trigger": _ANY})),
    st.tuples(st.just("user/message"), st.one_of(_MESSAGE, _near({"content": _LEAF, "source": _ANY}))),
    st.tuples(st.sampled_from(["assistant/message", "tool/result"]), st.one_of(
        _near({"message": _MESSAGE}), _near({"callId": _LEAF, "content": _LEAF, "isError": _LEAF}),
        _near({"content": _LEAF, "provenance": _ANY}))),
    st.tuples(st.just("steering/message"), st.one_of(_near({"turn": _TURN, "message": _MESSAGE}), _ANY)),
    st.tuples(st.sampled_from(["turn/end", "user/message", "assistant/message"]), _ANY),
)


@given(case=_CASES)
@example(case=("turn/end", {"turn": 1, "reason": {"kind": "aborted"}}))
@example(case=("turn/end", {"turn": 1, "reason": {"kind": "disposed"}}))
@example(case=("turn/end", {"turn": 1, "reason": {"kind": "error", "step": 0, "message": "m"}}))
@example(case=("turn/end", {"turn": 1, "reason": {"kind": "completed", "x": 1}}))
@example(case=("turn/end", {"turn": 1, "reason": {"kind": "handoff", "x": 1}}))
@example(case=("turn/start", {"turn": 1, "trigger": {"kind": "user"}}))
@example(case=("user/message", {"content": "hi", "source": {"kind": "user"}}))
@example(case=("tool/result", {"callId": "c", "content": "out", "isError": False}))
@settings(max_examples=600, deadline=None)
def test_an_event_the_kernel_calls_current_is_left_alone_by_the_upgrade(case: tuple[str, Any]) -> None:
    """``is_current`` is the gate of every store read: whatever it lets past must be an event the
    upgrade would neither rewrite nor refuse, or a legacy log could load un-upgraded."""
    kind, data = case
    try:
        event = Event.from_wire({"type": kind, "seq": 0, "time": 1, "data": data,
                                 **({"surfaceOp": "append"} if kind in SURFACE_KINDS else {})})
    except AgentlogError:
        return  # not an event at all
    if is_current(event):  # the upgrade's own rules, without its is_current fast path
        assert _upgrade_event(SID, event, (), 0) is event
    else:
        assert first_legacy([event]) == 0


SURFACE_KINDS = frozenset({"user/message", "assistant/message", "tool/result"})
