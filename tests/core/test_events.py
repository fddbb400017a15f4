"""Events: the immutable record, its wire form and the envelope/marker rules (spec §1, §3.1-3.2, C4)."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from hypothesis import given, settings

from agentlog import (
    KNOWN_EVENT_TYPES,
    SURFACE_TYPES,
    Event,
    FrozenDict,
    InvalidEventError,
    Replace,
    Session,
    SurfaceError,
    freeze,
)
from agentlog.core.events import CORE_EVENT_TYPES, check_envelope, is_safe_int, make_event
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER, FrozenList, json_equal
from tests.strategies import wire_events

TYPICAL_TURN = [
    b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}',
    b'{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}',
    b'{"type":"user/message","seq":2,"time":1,"data":{"id":"m1","role":"user","content":[{"type":"text",'
    b'"text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}',
    b'{"type":"request/header","seq":3,"time":1,"data":{"header":{"config":{"provider":"p","model":"m"}},'
    b'"reason":"initial"}}',
    b'{"type":"assistant/chunk","seq":4,"time":2,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta",'
    b'"index":0,"text":"ok"}}}',
    b'{"type":"assistant/message","seq":5,"time":2,"data":{"turn":1,"step":1,"message":{"id":"m2",'
    b'"role":"assistant","content":[{"type":"text","text":"ok"}],"source":{"kind":"model","provider":"p",'
    b'"model":"m"}}},"sourceEventSeqs":[4],"surfaceOp":"append"}',
    b'{"type":"step/end","seq":6,"time":2,"data":{"turn":1,"step":1}}',
    b'{"type":"turn/end","seq":7,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}',
    b'{"type":"user/message","seq":9,"time":5,"data":{"id":"c1","role":"user","content":[{"type":"text",'
    b'"text":"summary"}],"source":{"kind":"plugin","plugin":"compact","compactionId":"k1"}},'
    b'"sourceEventSeqs":[7,8,1,2],"surfaceOp":{"op":"replace","start":1,"end":2}}',
    b'{"type":"plugin/thing","seq":3,"time":-5,"data":null,"ignorable":true}',
    b'{"type":"tool/result","seq":4,"time":3,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user",'
    b'"source":{"kind":"tool","callId":"c"},"content":[{"type":"tool-result","toolCallId":"c","isError":true,'
    b'"content":[{"type":"text","text":"x"}]}]}},"surfaceOp":"append","sourceEventSeqs":[3]}',
]


def wire(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"type": "plugin/event", "seq": 3, "time": 10, "data": {"a": 1}}
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not _ABSENT}


_ABSENT = object()


# -- the record -------------------------------------------------------------------------


def test_events_cannot_be_constructed_directly() -> None:
    with pytest.raises(TypeError, match=r"made by Session\.append"):
        Event("turn/start", 0, 1, {}, None, None, False)


def test_event_attributes_read_the_wire_fields() -> None:
    event = Event.from_json(TYPICAL_TURN[5])
    assert event.type == "assistant/message"
    assert event.seq == 5
    assert event.time == 2
    assert event.data["message"]["id"] == "m2"
    assert event.surface_op == "append"
    assert event.source_event_seqs == (4,)
    assert event.ignorable is False


def test_events_and_their_data_are_immutable() -> None:
    event = Event.from_json(TYPICAL_TURN[2])
    with pytest.raises(AttributeError):
        event.seq = 9  # type: ignore[misc]
    with pytest.raises(AttributeError):
        event.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        event.data["id"] = "x"
    with pytest.raises(TypeError):
        event.data["content"][0] = {}
    with pytest.raises(TypeError):
        event.data["content"][0]["text"] = "changed"
    assert type(event.data) is FrozenDict and type(event.data["content"]) is tuple


def test_replace_is_a_frozen_value() -> None:
    op = Replace(1, 2)
    assert op == Replace(1, 2) and hash(op) == hash(Replace(1, 2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.start = 5  # type: ignore[misc]


def test_make_event_builds_from_ready_parts_without_checks() -> None:
    data = freeze({"turn": 1})
    event = make_event("turn/start", 0, 5, data)
    assert (event.type, event.seq, event.time, event.surface_op, event.source_event_seqs) == (
        "turn/start",
        0,
        5,
        None,
        None,
    )
    assert event.data is data and event.ignorable is False


def test_is_safe_int_excludes_booleans_floats_and_unsafe_magnitudes() -> None:
    assert is_safe_int(0) and is_safe_int(MAX_SAFE_INTEGER) and is_safe_int(-MAX_SAFE_INTEGER)
    for value in (True, False, 1.0, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, "1", None):
        assert not is_safe_int(value)


def test_vocabulary_sizes_match_the_generated_dsh_list() -> None:
    assert len(CORE_EVENT_TYPES) == 13
    assert len(KNOWN_EVENT_TYPES) == 48
    assert {"user/message", "assistant/message", "tool/result"} == SURFACE_TYPES
    assert SURFACE_TYPES <= CORE_EVENT_TYPES <= KNOWN_EVENT_TYPES


# -- wire form --------------------------------------------------------------------------


@pytest.mark.parametrize("line", TYPICAL_TURN)
def test_wire_lines_round_trip_byte_for_byte(line: bytes) -> None:
    event = Event.from_json(line)
    assert event.to_json() == line
    assert Event.from_json(line.decode()) == event


@pytest.mark.parametrize("op_first", [False, True])
def test_to_wire_uses_dsh_envelope_order_and_keeps_a_stored_marker_order(op_first: bool) -> None:
    markers = [("surfaceOp", "append"), ("sourceEventSeqs", [0])]
    if not op_first:
        markers.reverse()
    scrambled = dict(
        [
            ("ignorable", True),
            ("data", {"z": 1, "a": 2}),
            markers[0],
            ("time", 1),
            markers[1],
            ("seq", 1),
            ("type", "user/message"),
        ]
    )
    event = Event.from_wire(scrambled)
    expected = ["sourceEventSeqs", "surfaceOp"][:: -1 if op_first else 1]
    assert list(event.to_wire()) == ["type", "seq", "time", "data", *expected, "ignorable"]
    assert list(event.to_wire()["data"]) == ["z", "a"]
    assert Event.from_json(event.to_json()).to_json() == event.to_json()


def test_appended_events_write_citations_before_the_op() -> None:
    session = Session.create("s", clock=lambda: 1)
    session.append("plugin/event", None)
    message = {"z": 1, "id": "m", "role": "user", "source": {"kind": "user"}, "content": []}
    event = session.append("user/message", message, surface_op="append", source_event_seqs=[0])
    assert event.to_json() == (
        b'{"type":"user/message","seq":1,"time":1,'
        b'"data":{"z":1,"id":"m","role":"user","source":{"kind":"user"},"content":[]},'
        b'"sourceEventSeqs":[0],"surfaceOp":"append"}'
    )


def test_to_json_keeps_non_ascii_unescaped() -> None:
    event = Event.from_wire(wire(data={"text": "héllo 中文 𝄞"}))
    assert "héllo 中文 𝄞".encode() in event.to_json()


def test_ignorable_true_is_accepted_and_preserved() -> None:
    event = Event.from_wire(wire(ignorable=True))
    assert event.ignorable is True
    assert event.to_wire()["ignorable"] is True


def test_replace_op_is_parsed_into_a_replace_and_written_back() -> None:
    event = Event.from_json(TYPICAL_TURN[8])
    assert event.surface_op == Replace(1, 2)
    assert event.to_wire()["surfaceOp"] == {"op": "replace", "start": 1, "end": 2}


# -- envelope refusals ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (wire(extra=1), "invalid event envelope"),
        (wire(type=5), "invalid event envelope"),
        (wire(type=_ABSENT), "invalid event envelope"),
        (wire(seq="3"), "invalid event envelope"),
        (wire(seq=1.5), "invalid event envelope"),
        (wire(seq=3.0), "invalid event envelope"),
        (wire(seq=-1), "invalid event envelope"),
        (wire(seq=True), "invalid event envelope"),
        (wire(seq=MAX_SAFE_INTEGER + 1), "invalid event envelope"),
        (wire(seq=_ABSENT), "invalid event envelope"),
        (wire(time="1"), "invalid event envelope"),
        (wire(time=1.5), "invalid event envelope"),
        (wire(time=False), "invalid event envelope"),
        (wire(time=-MAX_SAFE_INTEGER - 1), "invalid event envelope"),
        (wire(data=_ABSENT), "invalid event envelope"),
        (wire(ignorable=False), "invalid event envelope"),
        (wire(ignorable="yes"), "invalid event envelope"),
        (wire(ignorable=1), "invalid event envelope"),
        (wire(ignorable=None), "invalid event envelope"),
        ([1, 2], "invalid event envelope"),
        ("event", "invalid event envelope"),
        (None, "invalid event envelope"),
        (wire(type="request/header-delta"), "unsupported legacy request/header-delta"),
    ],
)
def test_malformed_envelopes_are_refused(raw: Any, fragment: str) -> None:
    with pytest.raises(InvalidEventError, match=fragment):
        Event.from_wire(raw)
    with pytest.raises(InvalidEventError, match=fragment):
        Event.from_json(orjson.dumps(raw))


def test_time_may_be_zero_or_negative() -> None:
    assert Event.from_wire(wire(time=0)).time == 0
    assert Event.from_wire(wire(time=-MAX_SAFE_INTEGER)).time == -MAX_SAFE_INTEGER


def test_plugin_event_with_null_data_is_accepted() -> None:
    assert Event.from_wire(wire(data=None)).data is None


def test_invalid_json_is_refused() -> None:
    with pytest.raises(InvalidEventError, match="event is not valid JSON"):
        Event.from_json(b'{"type":')
    with pytest.raises(InvalidEventError, match="event is not valid JSON"):
        Event.from_json(b'{"type":"x","seq":0,"time":0,"data":"\\ud800"}')


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"a": [1, -0.0]}, "data.a[1]"),
        ({"n": 9007199254740992}, "data.n"),
        ({"x": {"y": "\ud800"}}, "data.x.y"),
    ],
)
def test_non_lossless_payloads_are_refused_with_their_path(data: Any, path: str) -> None:
    with pytest.raises(InvalidEventError, match="not losslessly JSON-serializable") as caught:
        Event.from_wire(wire(data=data))
    assert caught.value.path == path


def test_check_envelope_names_the_event_it_checks() -> None:
    with pytest.raises(InvalidEventError, match="seed event at index 4 has unknown key 'x'"):
        check_envelope(wire(x=1), "seed event at index 4")


# -- marker refusals --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (wire(type="turn/start", surfaceOp="append"), "not surface-eligible and cannot carry surfaceOp"),
        (wire(type="turn/start", sourceEventSeqs=[0]), "cannot carry sourceEventSeqs"),
        (wire(type="tool/call", sourceEventSeqs=[]), "cannot carry sourceEventSeqs"),
        (wire(type="user/message"), "requires a surfaceOp marker"),
        (wire(type="tool/result", sourceEventSeqs=[0]), "requires a surfaceOp marker"),
        (wire(type="user/message", surfaceOp="invalid"), "invalid surfaceOp"),
        (wire(type="user/message", surfaceOp=None), "invalid surfaceOp"),
        (wire(type="user/message", surfaceOp=1), "invalid surfaceOp"),
        (wire(type="user/message", surfaceOp=["append"]), "invalid surfaceOp"),
        (
            wire(type="user/message", surfaceOp={"op": "replace", "start": 0, "end": 0, "x": 1}),
            "invalid replace surfaceOp",
        ),
        (wire(type="user/message", surfaceOp={"op": "replace", "start": 0}), "invalid replace surfaceOp"),
        (
            wire(type="user/message", surfaceOp={"op": "append", "start": 0, "end": 0}),
            "invalid replace surfaceOp",
        ),
        (
            wire(type="user/message", surfaceOp={"op": "replace", "start": -1, "end": 0}),
            "invalid replace surfaceOp",
        ),
        (
            wire(type="user/message", surfaceOp={"op": "replace", "start": 0, "end": 0.5}),
            "invalid replace surfaceOp",
        ),
        (
            wire(type="user/message", surfaceOp={"op": "replace", "start": True, "end": 0}),
            "invalid replace surfaceOp",
        ),
        (wire(type="user/message", surfaceOp="append", sourceEventSeqs="0"), "must be an array"),
        (wire(type="user/message", surfaceOp="append", sourceEventSeqs={"0": 0}), "must be an array"),
        (wire(type="user/message", surfaceOp="append", sourceEventSeqs=None), "must be an array"),
        (wire(type="user/message", surfaceOp="append", sourceEventSeqs=[]), "must not be empty"),
        (wire(type="tool/result", surfaceOp="append", sourceEventSeqs=[]), "must not be empty"),
        (
            wire(type="user/message", surfaceOp="append", sourceEventSeqs=[1, 1]),
            "must not contain duplicates",
        ),
        (
            wire(type="user/message", surfaceOp="append", sourceEventSeqs=[0, -1]),
            "non-negative safe integers",
        ),
        (wire(type="user/message", surfaceOp="append", sourceEventSeqs=[0.5]), "non-negative safe integers"),
        (wire(type="user/message", surfaceOp="append", sourceEventSeqs=["1"]), "non-negative safe integers"),
        (wire(type="user/message", surfaceOp="append", sourceEventSeqs=[True]), "non-negative safe integers"),
        (wire(type="user/message", surfaceOp="append", sourceEventSeqs=[None]), "non-negative safe integers"),
        (wire(type="user/message", surfaceOp="append", sourceEventSeqs=[3]), "must reference earlier events"),
        (
            wire(type="user/message", surfaceOp="append", sourceEventSeqs=[0, 7, 5]),
            "must reference earlier events: 7",
        ),
    ],
)
def test_malformed_surface_markers_are_refused(raw: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SurfaceError, match=fragment):
        Event.from_wire(raw)


def test_empty_citations_are_allowed_on_assistant_messages_only() -> None:
    event = Event.from_wire(wire(type="assistant/message", surfaceOp="append", sourceEventSeqs=[]))
    assert event.source_event_seqs == ()


def test_duplicates_are_reported_before_forward_references() -> None:
    with pytest.raises(SurfaceError, match="duplicates"):
        Event.from_wire(wire(type="user/message", surfaceOp="append", sourceEventSeqs=[9, 9]))


# -- properties and depth ---------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(wire_events())
def test_to_json_from_json_is_the_identity(raw: dict[str, Any]) -> None:
    event = Event.from_wire(raw)
    line = event.to_json()
    again = Event.from_json(line)
    assert again == event
    assert again.to_json() == line
    assert json_equal(orjson.loads(line), raw)


def test_twenty_thousand_deep_event_round_trips_through_json() -> None:
    value: Any = "leaf"
    for level in range(20_000):
        value = [value] if level % 3 else {"k": value}
    event = Event.from_wire(wire(data=value))
    line = event.to_json()
    again = Event.from_json(line)
    assert again.to_json() == line
    node = again.data
    depth = 0
    while not isinstance(node, str):
        assert type(node) in (FrozenDict, tuple, FrozenList)
        node = node["k"] if isinstance(node, dict) else node[0]
        depth += 1
    assert depth == 20_000


def test_event_equality_compares_json_data_strictly() -> None:
    one = Event.from_wire(wire(data={"flag": True, "n": [1]}))
    assert one == Event.from_wire(wire(data={"n": [1.0], "flag": True}))
    assert one != Event.from_wire(wire(data={"flag": 1, "n": [1]}))
    assert one != Event.from_wire(wire(data={"flag": True, "n": [1]}, seq=4))
    assert one != Event.from_wire(wire(data={"flag": True, "n": [1]}, ignorable=True))
    assert (one == ("plugin/event", 3, 10)) is False


def test_event_equality_ignores_only_the_stored_marker_order() -> None:
    base = {"type": "user/message", "seq": 2, "time": 0, "data": "x"}
    op_first = Event.from_wire({**base, "surfaceOp": "append", "sourceEventSeqs": [0]})
    seqs_first = Event.from_wire({**base, "sourceEventSeqs": [0], "surfaceOp": "append"})
    assert op_first.to_json() != seqs_first.to_json()
    assert op_first == seqs_first and hash(op_first) == hash(seqs_first)
    assert op_first != Event.from_wire({**base, "sourceEventSeqs": [1], "surfaceOp": "append"})


def test_events_with_scalar_data_hash_consistently_with_equality() -> None:
    assert hash(Event.from_wire(wire(data=1))) == hash(Event.from_wire(wire(data=1.0)))
    assert len({Event.from_wire(wire(data="x")), Event.from_wire(wire(data="x"))}) == 1


def test_deep_events_compare_and_print_without_recursion_errors() -> None:
    value: Any = 0
    for _ in range(20_000):
        value = [value]
    first = Event.from_wire(wire(data=value))
    second = Event.from_json(first.to_json())
    assert first == second
    assert (first != second) is False
    assert "too deep to show" in repr(first)
