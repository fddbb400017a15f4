"""Session: append, seeds and restore, snapshots, observers and validators (spec §4, §5, §8 P6)."""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

import pytest

from agentlog import (
    AgentlogError,
    Event,
    FrozenDict,
    InvalidEventError,
    Replace,
    Session,
    SurfaceError,
    UsageError,
    thaw,
)
from agentlog.core.jsonvalue import FrozenList, dumps, loads
from tests.strategies import (
    DictSubclass,
    assert_unchanged,
    assistant_data,
    fixed_clock,
    header_wire,
    snapshot,
    tool_result_data,
    user_message,
)

LOGGER = "agentlog"


def restore(events: list[Any], session_id: str = "s") -> Session:
    return Session.restore(session_id, events, header_wire(session_id), clock=lambda: 42)


def wire(seq: int, kind: str, data: Any, **markers: Any) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": seq, "data": data, **markers}


def header_event_data(**config: Any) -> dict[str, Any]:
    return {"header": {"config": {"provider": "p", "model": "m", **config}}, "reason": "initial"}


def full_turn(session: Session) -> None:
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("user/message", user_message("u1", "read it"), surface_op="append")
    chunk = session.append(
        "assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "ok"}}
    )
    session.append(
        "assistant/message",
        assistant_data("a1", "ok", calls=("call-1",)),
        surface_op="append",
        source_event_seqs=[chunk.seq],
    )
    call = session.append(
        "tool/call", {"turn": 1, "step": 1, "callId": "call-1", "name": "read", "arguments": "{}"}
    )
    session.append(
        "tool/result",
        tool_result_data("call-1", "contents"),
        surface_op="append",
        source_event_seqs=[call.seq],
    )
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


# -- appending --------------------------------------------------------------------------


def test_full_turn_derives_user_assistant_user_without_chunks() -> None:
    session = Session.create("s", clock=fixed_clock())
    full_turn(session)
    messages = session.derive_messages()
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [m["id"] for m in messages] == ["u1", "a1", "result-call-1"]
    assert messages[2]["content"][0]["toolCallId"] == "call-1"
    assert messages[1]["content"][1]["type"] == "tool-call"


def test_append_numbers_events_and_stamps_the_clock() -> None:
    session = Session.create("s", clock=fixed_clock(500))
    first = session.append("turn/start", {"turn": 1})
    second = session.append("plugin/event", None)
    assert (first.seq, first.time, second.seq, second.time) == (0, 500, 1, 501)
    assert session.seq == 2 == len(session.events)
    assert session.events[-1] is second


def test_append_returns_the_logged_frozen_event() -> None:
    session = Session.create("s")
    data = {"turn": 1, "nested": {"list": [1, {"x": "y"}]}}
    event = session.append("turn/start", data)
    assert session.events[0] is event
    assert type(event) is Event and type(event.data) is FrozenDict
    assert event.data == {"turn": 1, "nested": {"list": (1, {"x": "y"})}}


@pytest.mark.parametrize(
    "reason",
    [
        {"kind": "max-tokens"},
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "aborted", "reason": {"kind": "hook", "reason": "policy"}},
        {"kind": "blocked"},
        {"kind": "error", "error": {"message": "boom", "code": "UNKNOWN"}},
        {"kind": "interrupted"},
    ],
)
def test_turn_end_reasons_survive_deep_copy_and_replay(reason: dict[str, Any]) -> None:
    session = Session.create("s", clock=fixed_clock())
    session.append("turn/start", {"turn": 1})
    event = session.append("turn/end", {"turn": 1, "reason": reason})
    assert thaw(event.data)["reason"] == reason
    assert copy.deepcopy(event.data) == event.data
    replay = Session.create("s", seed=session.events)
    assert len(replay.events) == 3 and replay.events[1] == event
    assert thaw(replay.events[1].data["reason"]) == reason
    reloaded = restore([copy.deepcopy(thaw(e.to_wire())) for e in session.events])
    assert reloaded.events[1] == event


def test_user_and_plugin_sourced_messages_derive_verbatim_as_user_role() -> None:
    session = Session.create("s")
    plugin = user_message("ctx", "context", {"kind": "plugin", "plugin": "agents", "form": "instructions"})
    plugin["extra"] = {"kept": True}
    session.append("user/message", user_message("u", "hello"), surface_op="append")
    event = session.append("user/message", plugin, surface_op="append")
    messages = session.derive_messages()
    assert [m["role"] for m in messages] == ["user", "user"]
    assert messages[1] is event.data
    assert thaw(messages[1]) == plugin


def test_append_accepts_dense_nested_payloads_but_not_partial_messages() -> None:
    """Append checks restore's message shapes (DESIGN §8): a partial message is refused."""
    session = Session.create("s")
    session.append("plugin/event", {"a": [[1, 2], [3, [4, {"b": []}]]], "c": {}})
    before = snapshot(session)
    with pytest.raises(InvalidEventError, match="seq 1: user/message lacks an identified message"):
        session.append("user/message", {"content": [{"type": "text", "text": "no id"}]}, surface_op="append")
    assert_unchanged(session, before)
    with pytest.raises(InvalidEventError, match="request/header lacks provider/model"):
        session.append("request/header", {"header": {"config": {}}, "reason": "initial"})
    header = session.append("request/header", {"header": {"config": {"provider": "p", "model": "m"}},
                                                "reason": "initial"})
    assert session.derive_messages() == []
    assert header.seq == 1


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (2**64, "data"),
        (len, "data"),
        (object(), "data"),
        (DictSubclass(a=1), "data"),
        ({1, 2}, "data"),
        (Ellipsis, "data"),
        (float("inf"), "data"),
        ([1, 2**60], "data[1]"),
        ({"a": {"f": len}}, "data.a.f"),
        (
            {"message": {"content": [{"text": "a"}, {"text": "b"}, {"text": float("nan")}]}},
            "data.message.content[2].text",
        ),
        ({"k": "\udc00"}, "data.k"),
        ({"k": -0.0}, "data.k"),
    ],
)
def test_append_refuses_non_lossless_data_and_names_everything(data: Any, path: str) -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    before = snapshot(session)
    with pytest.raises(InvalidEventError, match="non-JSON-serializable data") as caught:
        session.append("plugin/event", data)
    error = caught.value
    assert (error.session_id, error.event_type, error.seq, error.path) == ("s", "plugin/event", 1, path)
    assert str(error).startswith('session "s", plugin/event, seq 1: non-JSON-serializable data')
    assert str(error).endswith(f"(at {path})")
    assert_unchanged(session, before)


def test_append_refuses_a_cycle_and_the_log_stays_empty() -> None:
    session = Session.create("s")
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    before = snapshot(session)
    with pytest.raises(InvalidEventError, match="cycle") as caught:
        session.append("plugin/event", {"c": cyclic})
    assert caught.value.path == "data.c.self"
    assert_unchanged(session, before)
    assert session.events == []


@pytest.mark.parametrize("event_type", ["", 5, None])
def test_append_refuses_a_type_that_is_not_a_non_empty_string(event_type: Any) -> None:
    session = Session.create("s")
    with pytest.raises(InvalidEventError, match="event type must be a non-empty string") as caught:
        session.append(event_type, {})
    assert caught.value.session_id == "s" and caught.value.seq == 0
    assert session.seq == 0


@pytest.mark.parametrize(
    ("kind", "data", "fragment"),
    [
        ("request/header-delta", {"delta": {}}, "unsupported legacy request/header-delta"),
        (
            "request/header",
            {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "fallback"},
            'unsupported legacy request/header reason "fallback"',
        ),
    ],
)
def test_append_refuses_legacy_request_header_forms(kind: str, data: Any, fragment: str) -> None:
    session = Session.create("s")
    before = snapshot(session)
    with pytest.raises(InvalidEventError, match=fragment) as caught:
        session.append(kind, data)
    assert caught.value.event_type == kind and caught.value.seq == 0
    assert_unchanged(session, before)


@pytest.mark.parametrize("kind", ["user/message", "assistant/message", "tool/result"])
def test_append_of_a_surface_type_without_a_marker_is_refused(kind: str) -> None:
    session = Session.create("s")
    before = snapshot(session)
    with pytest.raises(SurfaceError, match="requires a surfaceOp marker") as caught:
        session.append(kind, user_message("u"))
    assert (caught.value.session_id, caught.value.event_type, caught.value.seq) == ("s", kind, 0)
    assert_unchanged(session, before)


@pytest.mark.parametrize(
    ("op", "seqs", "error", "fragment"),
    [
        (
            {"op": "replace", "start": 2**60, "end": 0},
            None,
            InvalidEventError,
            "non-JSON-serializable surface metadata",
        ),
        (object(), None, InvalidEventError, "non-JSON-serializable surface metadata"),
        (
            {"op": "replace", "start": {1}, "end": 0},
            None,
            InvalidEventError,
            "non-JSON-serializable surface metadata",
        ),
        ("append", [2**60], InvalidEventError, "non-JSON-serializable surface metadata"),
        ("append", {1, 2}, InvalidEventError, "non-JSON-serializable surface metadata"),
        ("append", (x for x in [0]), InvalidEventError, "non-JSON-serializable surface metadata"),
        ("invalid", None, SurfaceError, "invalid surfaceOp"),
        (Replace(-1, 0), [0], SurfaceError, "invalid replace surfaceOp"),
        (Replace(True, 0), [0], SurfaceError, "invalid replace surfaceOp"),
        ({"op": "replace", "start": -1, "end": 0}, [0], SurfaceError, "invalid replace surfaceOp"),
        ({"op": "replace", "start": 0}, [0], SurfaceError, "invalid replace surfaceOp"),
        ("append", [0, -1], SurfaceError, "non-negative safe integers"),
        ("append", [1], SurfaceError, "must reference earlier events"),
        ("append", [], SurfaceError, "must not be empty"),
        ("append", "0", SurfaceError, "must be an array"),
    ],
)
def test_append_refuses_bad_surface_metadata_and_changes_nothing(
    op: Any, seqs: Any, error: type[Exception], fragment: str
) -> None:
    session = Session.create("s")
    session.append("user/message", user_message("a"), surface_op="append")
    before = snapshot(session)
    with pytest.raises(error, match=fragment) as caught:
        session.append("user/message", user_message("b"), surface_op=op, source_event_seqs=seqs)
    assert isinstance(caught.value, AgentlogError)
    assert (caught.value.session_id, caught.value.event_type, caught.value.seq) == ("s", "user/message", 1)
    assert_unchanged(session, before)


def test_surface_metadata_path_is_named() -> None:
    session = Session.create("s")
    session.append("user/message", user_message("a"), surface_op="append")
    with pytest.raises(InvalidEventError) as caught:
        session.append("user/message", user_message("b"), surface_op="append", source_event_seqs=[0, 2**60])
    assert caught.value.path == "sourceEventSeqs[1]"


@pytest.mark.parametrize(("op", "seqs"), [("append", None), (None, [0]), (Replace(0, 0), [0])])
def test_surface_metadata_on_a_log_only_type_is_refused(op: Any, seqs: Any) -> None:
    session = Session.create("s")
    session.append("user/message", user_message("a"), surface_op="append")
    before = snapshot(session)
    with pytest.raises(SurfaceError, match="not surface-eligible and cannot carry"):
        session.append("turn/start", {"turn": 1}, surface_op=op, source_event_seqs=seqs)
    assert_unchanged(session, before)


def test_append_data_is_snapshotted_from_later_caller_mutation() -> None:
    session = Session.create("s")
    data = {
        "id": "u",
        "role": "user",
        "content": [{"type": "text", "text": "before"}],
        "source": {"kind": "user"},
    }
    event = session.append("user/message", data, surface_op="append")
    data["content"][0]["text"] = "after"
    data["content"].append({"type": "text", "text": "more"})
    data["id"] = "changed"
    assert event.data["content"] == ({"type": "text", "text": "before"},)
    assert session.events[0].data["id"] == "u"
    assert session.derive_messages()[0]["content"][0]["text"] == "before"


def test_appended_and_seeded_events_are_deep_frozen() -> None:
    seeded = restore([wire(0, "plugin/event", {"a": [{"b": [1]}]})])
    appended = seeded.append("plugin/event", {"a": [{"b": [1]}]})
    for event in (seeded.events[0], appended):
        with pytest.raises(TypeError):
            event.data["a"] = 1
        with pytest.raises(TypeError):
            event.data["a"][0] = 1
        with pytest.raises(TypeError):
            event.data["a"][0]["b"] = 1
        with pytest.raises(TypeError):
            event.data["a"][0]["b"][0] = 2
        with pytest.raises(AttributeError):
            event.data["a"].append(1)


def test_a_clock_that_is_not_epoch_milliseconds_is_refused() -> None:
    session = Session.create("s", clock=lambda: 1.5)  # type: ignore[arg-type,return-value]
    with pytest.raises(UsageError, match=r"session clock returned 1\.5") as caught:
        session.append("turn/start", {"turn": 1})
    assert caught.value.session_id == "s"
    assert session.seq == 0


def test_todo_write_is_log_only_isolated_and_survives_replay() -> None:
    session = Session.create("s")
    todos = [{"content": "write tests", "status": "pending"}]
    first = session.append("todo/write", {"todos": todos})
    todos[0]["status"] = "completed"
    todos.append({"content": "x", "status": "pending"})
    second = session.append("todo/write", {"todos": todos})
    assert thaw(first.data) == {"todos": [{"content": "write tests", "status": "pending"}]}
    assert len(second.data["todos"]) == 2
    assert list(session.surface.nodes) == [] and session.derive_messages() == []
    replay = Session.create("s", seed=[thaw(e.to_wire()) for e in session.events])
    assert replay.events[:2] == [first, second]
    assert replay.events[1].surface_op is None


# -- events snapshot --------------------------------------------------------------------


def test_events_snapshot_is_cached_frozen_and_never_grows() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    held = session.events
    assert session.events is held
    with pytest.raises(TypeError):
        held[0] = held[0]  # type: ignore[index]
    with pytest.raises(AttributeError):
        held.append(held[0])  # type: ignore[attr-defined]
    session.append("plugin/event", None)
    assert len(held) == 1 and list(held) == [session.events[0]]
    with pytest.raises(IndexError):
        held[1]
    assert held[-1].seq == 0 and held[0:5] == [session.events[0]]
    fresh = session.events
    assert fresh is not held and len(fresh) == 2 and session.events is fresh


def test_fresh_session_has_no_events_and_no_seed_boundary() -> None:
    session = Session.create("s")
    assert list(session.events) == [] and session.seq == 0 and session.first_live_seq == 0


# -- seeds and restore ------------------------------------------------------------------


def test_empty_seed_gets_a_single_end_seed_marker_and_reseeding_adds_none() -> None:
    session = Session.create("s", seed=[])
    assert [(e.type, e.seq) for e in session.events] == [("session/end-seed", 0)]
    assert session.events[0].data == {} and session.first_live_seq == 0
    again = Session.create("s", seed=session.events)
    assert list(again.events) == list(session.events)
    assert again.first_live_seq == 1


def test_seeded_replay_keeps_events_and_derivation_and_marks_the_seam() -> None:
    session = Session.create("s", clock=fixed_clock())
    full_turn(session)
    count = len(session.events)
    replay = Session.create("s", seed=session.events)
    assert list(replay.events[:count]) == list(session.events)
    assert replay.events[count].type == "session/end-seed"
    assert replay.seq == count + 1 and replay.first_live_seq == count
    assert replay.derive_messages() == session.derive_messages()
    replay_of_replay = Session.create("s", seed=replay.events)
    assert list(replay_of_replay.events) == list(replay.events)


def test_well_formed_wire_seed_is_accepted_verbatim() -> None:
    seed = [
        wire(0, "turn/start", {"turn": 1}),
        wire(1, "user/message", user_message("u1"), surfaceOp="append"),
        wire(2, "plugin/event", None, ignorable=True),
    ]
    session = restore(seed)
    assert session.first_live_seq == 3
    assert [thaw(e.to_wire()) for e in session.events[:3]] == seed
    assert session.events[2].ignorable is True
    assert session.events[3].type == "session/end-seed" and session.seq == 4


def test_seed_may_be_any_iterable_read_once() -> None:
    seed = (wire(index, "plugin/event", {"i": index}) for index in range(3))
    assert restore(list(seed)).first_live_seq == 3
    assert restore(iter([wire(0, "plugin/event", {})])).first_live_seq == 1


def test_mutating_seed_objects_after_construction_changes_nothing() -> None:
    seed = [wire(0, "user/message", user_message("u1"), surfaceOp="append", sourceEventSeqs=None)]
    del seed[0]["sourceEventSeqs"]
    session = restore(seed)
    seed[0]["data"]["content"][0]["text"] = "changed"
    seed[0]["seq"] = 5
    assert session.events[0].data["content"][0]["text"] == "hi" and session.events[0].seq == 0


def test_restore_accepts_events_and_frozen_wire_objects() -> None:
    source = Session.create("s")
    full_turn(source)
    by_event = restore(list(source.events))
    by_wire = restore([e.to_wire() for e in source.events])
    assert list(by_event.events) == list(by_wire.events)
    assert all(a is b for a, b in zip(by_event.events, source.events, strict=False))


def test_restore_accepts_boundary_events_and_unknown_block_and_source_kinds() -> None:
    message = user_message("u", source={"kind": "team-message", "from": "lead"})
    message["content"] = [{"type": "plugin-block", "payload": {"x": 1}}]
    seed = [wire(0, "session/end-seed", {}), wire(1, "user/message", message, surfaceOp="append")]
    session = restore(seed)
    assert thaw(session.events[1].data) == message
    assert session.events[-1].type == "session/end-seed" and session.seq == 3


def test_restore_freezes_a_twenty_thousand_level_payload_at_every_level() -> None:
    value: Any = 0
    for level in range(20_000):
        value = {"k": value} if level % 2 else [value]
    session = restore([wire(0, "plugin/event", value)])
    node = session.events[0].data
    depth = 0
    while node != 0:
        assert type(node) in (FrozenDict, tuple, FrozenList)
        node = node["k"] if isinstance(node, dict) else node[0]
        depth += 1
    assert depth == 20_000
    appended = session.append("plugin/event", thaw(session.events[0].data))
    assert dumps(appended.data) == dumps(session.events[0].data)


def test_append_of_twenty_thousand_deep_data_serializes_and_restores() -> None:
    value: Any = "leaf"
    for level in range(20_000):
        value = (value,) if level % 3 == 0 else ([value] if level % 3 == 1 else {"k": value})
    session = Session.create("s", clock=fixed_clock())
    event = session.append("user/message", {**user_message("u"), "deep": value}, surface_op="append")
    line = event.to_json()
    assert line.count(b"[") == 13_334 + 1 and line.count(b'{"k":') == 6_666
    assert Event.from_json(line).to_json() == line
    restored = restore([loads(line)])
    assert restored.events[0].to_json() == line
    assert dumps(restored.derive_messages()[0]) == dumps(event.data)


def test_plugin_event_with_null_data_is_accepted_in_a_seed() -> None:
    assert restore([wire(0, "plugin/event", None)]).events[0].data is None


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        (wire(0, "plugin/event", {"n": 2**60}), "seed event at index 0 is not losslessly JSON-serializable"),
        (
            wire(1, "plugin/event", {}),
            "seed event at index 0 has seq 1 \\(expected 0\\); seed must be contiguous",
        ),
        (
            wire(0, "user/message", user_message("u")),
            "invalid seed event at index 0: user/message requires a",
        ),
        (
            wire(0, "turn/start", {}, surfaceOp="append"),
            "invalid seed event at index 0: turn/start is not surface",
        ),
        (
            wire(0, "user/message", user_message("u"), surfaceOp={"op": "replace", "start": 2**60, "end": 0}),
            "invalid seed event at index 0: invalid replace surfaceOp",
        ),
        (
            wire(0, "user/message", user_message("u"), surfaceOp=["append"]),
            "invalid seed event at index 0: invalid",
        ),
        ({**wire(0, "plugin/event", {}), "extra": 1}, "invalid event envelope"),
        ({"type": 5, "seq": 0, "time": 0, "data": {}}, "invalid event envelope"),
        ({"type": "x", "seq": "0", "time": 0, "data": {}}, "invalid event envelope"),
        ({"type": "x", "seq": 0.5, "time": 0, "data": {}}, "invalid event envelope"),
        ({"type": "x", "seq": -1, "time": 0, "data": {}}, "invalid event envelope"),
        ({"type": "x", "seq": 0, "time": "0", "data": {}}, "invalid event envelope"),
        ({"type": "x", "seq": 0, "time": 0.5, "data": {}}, "invalid event envelope"),
        ({"type": "x", "seq": 0, "time": 0}, "invalid event envelope"),
        ({**wire(0, "x", {}), "ignorable": False}, "invalid event envelope"),
        ({**wire(0, "x", {}), "ignorable": "yes"}, "invalid event envelope"),
        (DictSubclass(wire(0, "x", {})), "invalid event envelope"),
        (object(), "invalid event envelope"),
        (wire(0, "request/header-delta", {}), "unsupported legacy request/header-delta"),
        (
            wire(0, "request/header", {**header_event_data(), "reason": "fallback"}),
            'unsupported legacy request/header reason "fallback"',
        ),
    ],
)
def test_restore_refuses_a_bad_seed_entry(entry: Any, fragment: str) -> None:
    with pytest.raises(InvalidEventError, match=fragment) as caught:
        restore([entry])
    assert caught.value.session_id == "s" and caught.value.seq == 0


def test_seed_errors_name_the_index_type_and_session() -> None:
    seed = [
        wire(0, "user/message", user_message("u"), surfaceOp="append"),
        wire(
            1,
            "user/message",
            user_message("v"),
            surfaceOp={"op": "replace", "start": 7, "end": 7},
            sourceEventSeqs=[0],
        ),
    ]
    with pytest.raises(SurfaceError) as caught:
        restore(seed, "sess")
    assert str(caught.value) == (
        'session "sess", user/message, seq 1: invalid seed event at index 1: '
        "replace start seq 7 not found in surface"
    )


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"header": {"config": {"model": "m"}}, "reason": "initial"}, "lacks provider/model"),
        ({"header": {"config": {"provider": "p", "model": ""}}, "reason": "initial"}, "lacks provider/model"),
        ({"header": "header", "reason": "initial"}, "lacks provider/model"),
        ({"reason": "initial"}, "lacks provider/model"),
        (header_event_data(reasoningEffort=""), "has an invalid reasoningEffort"),
        (header_event_data(reasoningEffort=1), "has an invalid reasoningEffort"),
    ],
)
def test_seed_refuses_malformed_request_headers(data: Any, fragment: str) -> None:
    with pytest.raises(InvalidEventError, match=f"seed request/header at index 0 {fragment}"):
        restore([wire(0, "request/header", data)])


@pytest.mark.parametrize(
    "defaults",
    [None, [], {"temperature": True}, {"maxTokens": False}, {"reasoningEffort": True}, {"maxTokens": 1}],
)
def test_seed_refuses_invalid_adapter_defaults(defaults: Any) -> None:
    data = header_event_data(maxTokens=100)
    data["header"]["adapterDefaults"] = defaults
    with pytest.raises(InvalidEventError, match="has invalid adapterDefaults"):
        restore([wire(0, "request/header", data)])


def test_seed_accepts_valid_reasoning_effort_and_adapter_defaults() -> None:
    data = header_event_data(reasoningEffort="high", maxTokens=100)
    data["header"]["adapterDefaults"] = {"maxTokens": True, "reasoningEffort": True}
    session = restore(
        [wire(0, "request/header", data), wire(1, "request/header", {**data, "reason": "other"})]
    )
    assert session.request_header()["config"]["reasoningEffort"] == "high"


def _tool_result(**changes: Any) -> Any:
    data: Any = tool_result_data("c1")
    message = data["message"]
    for key, value in changes.items():
        if key == "block":
            message["content"] = value
        elif key == "source":
            message["source"] = value
        else:
            message[key] = value
    return data


@pytest.mark.parametrize(
    ("kind", "data", "fragment"),
    [
        ("user/message", None, "seed user/message at index 0 lacks an identified message"),
        ("user/message", {**user_message("u"), "id": ""}, "lacks an identified message"),
        ("user/message", {**user_message("u"), "role": "assistant"}, 'message must have role "user"'),
        ("user/message", {**user_message("u"), "source": None}, "message has invalid source"),
        ("user/message", {**user_message("u"), "source": {"kind": ""}}, "message has invalid source"),
        ("user/message", {**user_message("u"), "content": "text"}, "message has invalid content"),
        (
            "assistant/message",
            {"turn": 1, "step": 1},
            "seed assistant/message at index 0 lacks an identified",
        ),
        (
            "assistant/message",
            {"message": {**assistant_data("a")["message"], "role": "user"}},
            'message must have role "assistant"',
        ),
        (
            "assistant/message",
            {"message": {**assistant_data("a")["message"], "source": {"kind": "user"}}},
            "message must have model source",
        ),
        (
            "assistant/message",
            {"message": {**assistant_data("a")["message"], "source": {"kind": "model", "provider": "p"}}},
            "message must have model source",
        ),
        ("tool/result", _tool_result(source={"kind": "user"}), "message must have tool source"),
        ("tool/result", _tool_result(role="assistant"), 'message must have role "user"'),
        (
            "tool/result",
            _tool_result(block=[{"type": "text", "text": "x"}]),
            "message must contain one tool-result block",
        ),
        ("tool/result", _tool_result(block=[]), "message must contain one tool-result block"),
        (
            "tool/result",
            _tool_result(block=[{"type": "tool-result", "toolCallId": "c2", "content": []}]),
            "message has mismatched tool call ids",
        ),
    ],
)
def test_seed_refuses_malformed_messages(kind: str, data: Any, fragment: str) -> None:
    with pytest.raises(InvalidEventError, match=fragment) as caught:
        restore([wire(0, kind, data, surfaceOp="append")])
    assert caught.value.event_type == kind


def test_append_applies_the_seed_shape_checks() -> None:
    """What append accepts, restore accepts (DESIGN §8): append refuses what restore would."""
    session = Session.create("s")
    with pytest.raises(InvalidEventError, match="seq 0: assistant/message lacks an identified message"):
        session.append("assistant/message", {"message": {"content": [{"type": "text", "text": "x"}]}},
                       surface_op="append")
    assert session.seq == 0
    with pytest.raises(InvalidEventError, match="user/message message has invalid content"):
        bad = {"id": "m", "role": "user", "source": {"kind": "user"}, "content": "hi"}
        session.append("user/message", bad, surface_op="append")
    with pytest.raises(InvalidEventError, match="request/header lacks provider/model"):
        session.append("request/header", {"header": {"config": {"model": "m"}}, "reason": "initial"})
    config = {"provider": "p", "model": "m"}
    session.append("request/header", {"header": {"config": config}, "reason": "initial"})
    assert Session.create("s", seed=session.events).seq == 2


# -- observers --------------------------------------------------------------------------


def test_observers_see_each_committed_event_once_at_the_log_tail() -> None:
    session = Session.create("s")
    seen: list[tuple[int, bool, int]] = []

    def observer(event: Event) -> None:
        seen.append((event.seq, session.events[-1] is event, session.seq))

    session.subscribe(observer)
    session.append("turn/start", {"turn": 1})
    session.append("plugin/event", None)
    assert seen == [(0, True, 1), (1, True, 2)]


def test_seed_and_end_seed_events_are_not_published() -> None:
    seen: list[Event] = []
    session = Session.create("s", seed=[])
    session.subscribe(seen.append)
    assert seen == []
    session.append("turn/start", {"turn": 1})
    assert [e.seq for e in seen] == [1]


def test_observer_failure_is_contained_logged_and_later_observers_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = Session.create("sess")
    later: list[int] = []

    def failing(event: Event) -> None:
        raise ValueError("boom")

    session.subscribe(failing)
    session.subscribe(lambda event: later.append(event.seq))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        event = session.append("turn/start", {"turn": 1})
    assert session.events[-1] is event and later == [0]
    assert [r.getMessage() for r in caplog.records] == [
        'session "sess": session/event listener threw: ValueError: boom'
    ]


def test_unsubscribe_stops_notifications() -> None:
    session = Session.create("s")
    seen: list[int] = []
    unsubscribe = session.subscribe(lambda event: seen.append(event.seq))
    session.append("turn/start", {"turn": 1})
    unsubscribe()
    unsubscribe()
    session.append("turn/end", {"turn": 1})
    assert seen == [0]


def test_reentrant_append_from_an_observer_is_refused_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    session = Session.create("s")
    errors: list[BaseException] = []

    def reenter(event: Event) -> None:
        try:
            session.append("plugin/echo", {"of": event.seq})
        except UsageError as exc:
            errors.append(exc)
            raise

    session.subscribe(reenter)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        session.append("turn/start", {"turn": 1})
    assert [e.type for e in session.events] == ["turn/start"]
    assert len(errors) == 1
    assert "session append cannot reenter while another append is being published" in str(errors[0])
    message = caplog.records[0].getMessage()
    assert message.startswith('session "s": session/event listener threw: UsageError: ')
    assert "cannot reenter" in message
    session.append("turn/end", {"turn": 1})
    assert session.seq == 2


def test_async_observer_rejection_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> Session:
        session = Session.create("s")
        ran: list[int] = []

        async def observer(event: Event) -> None:
            ran.append(event.seq)
            raise RuntimeError("late")

        session.subscribe(observer)
        session.append("turn/start", {"turn": 1})
        for _ in range(5):
            await asyncio.sleep(0)
        assert ran == [0]
        return session

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        session = asyncio.run(scenario())
    assert session.seq == 1
    assert [r.getMessage() for r in caplog.records] == [
        'session "s": session/event listener rejected: RuntimeError: late'
    ]


def test_async_observer_without_a_running_loop_is_closed_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    session = Session.create("s")

    async def observer(event: Event) -> None:
        raise AssertionError("never runs")

    session.subscribe(observer)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        session.append("turn/start", {"turn": 1})
    assert session.seq == 1
    assert "needs a running event loop" in caplog.records[0].getMessage()


# -- validators -------------------------------------------------------------------------


def test_validator_sees_a_frozen_candidate_before_the_log_changes() -> None:
    session = Session.create("s")
    seen: list[tuple[int, int, bool]] = []

    def validator(candidate: Event) -> None:
        seen.append((candidate.seq, session.seq, type(candidate.data) is FrozenDict))
        with pytest.raises(TypeError):
            candidate.data["turn"] = 2

    session.add_validator(validator)
    event = session.append("turn/start", {"turn": 1})
    assert seen == [(0, 0, True)] and session.events[0] is event


def test_validator_veto_leaves_no_trace_and_the_retry_reuses_the_seq() -> None:
    session = Session.create("s")
    observed: list[int] = []
    session.subscribe(lambda event: observed.append(event.seq))
    veto = True

    def validator(candidate: Event) -> None:
        if veto:
            raise InvalidEventError("vetoed by policy")

    session.add_validator(validator)
    before = snapshot(session)
    with pytest.raises(InvalidEventError, match="vetoed by policy") as caught:
        session.append("user/message", user_message("u"), surface_op="append")
    assert (caught.value.session_id, caught.value.event_type, caught.value.seq) == ("s", "user/message", 0)
    assert_unchanged(session, before)
    assert observed == []
    veto = False
    event = session.append("user/message", user_message("u2"), surface_op="append")
    assert event.seq == 0 and list(session.surface.nodes) == [0] and observed == [0]


def test_vetoed_replace_leaves_nodes_and_generation_unchanged() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("user/message", user_message("u"), surface_op="append")
    remove = session.add_validator(lambda candidate: (_ for _ in ()).throw(InvalidEventError("no")))
    before = snapshot(session)
    with pytest.raises(InvalidEventError, match="no"):
        session.append("user/message", user_message("sum"), surface_op=Replace(2, 2), source_event_seqs=[2])
    assert_unchanged(session, before)
    assert list(session.surface.nodes) == [2] and session.surface.replace_generation == 0
    remove()
    session.append("user/message", user_message("next"), surface_op="append")
    assert list(session.surface.nodes) == [2, 3]


def test_validator_failure_of_any_kind_blocks_the_append() -> None:
    session = Session.create("s")

    def broken(candidate: Event) -> None:
        raise RuntimeError("instrumentation failed")

    session.add_validator(broken)
    with pytest.raises(RuntimeError, match="instrumentation failed"):
        session.append("turn/start", {"turn": 1})
    assert session.seq == 0 and list(session.events) == []


def test_reentrant_append_from_a_validator_is_refused() -> None:
    session = Session.create("s")

    def validator(candidate: Event) -> None:
        if candidate.type == "turn/start":
            session.append("plugin/echo", {})

    session.add_validator(validator)
    with pytest.raises(UsageError, match="cannot reenter"):
        session.append("turn/start", {"turn": 1})
    assert session.seq == 0
    session.append("plugin/ok", {})
    assert session.seq == 1


def test_append_marks_a_plugin_event_ignorable_and_the_wire_keeps_it() -> None:
    session = Session.create("s", clock=fixed_clock())
    event = session.append("langgraph/checkpoint", {"id": "c1"}, ignorable=True)
    assert event.ignorable is True
    assert event.to_wire()["ignorable"] is True
    plain = session.append("plugin/event", None)
    assert plain.ignorable is False and "ignorable" not in plain.to_wire()
    assert Session.restore("s", [e.to_wire() for e in session.events], header_wire("s")).events[0] == event


@pytest.mark.parametrize("kind", ["user/message", "turn/start", "compaction/start"])
def test_append_refuses_ignorable_on_a_known_type_and_changes_nothing(kind: str) -> None:
    session = Session.create("s")
    with pytest.raises(InvalidEventError, match="only an event type outside the known vocabulary"):
        session.append(kind, user_message("u1") if kind == "user/message" else {"turn": 1},
                       surface_op="append" if kind == "user/message" else None, ignorable=True)
    assert session.seq == 0
