"""The storage codec: packed chunk rows (spec session-core §12, checklist chunk-rows.spec.ts)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.core.events import Event, make_event
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER, FrozenDict, freeze
from agentlog.errors import InvalidEventError, SessionCorruptionError
from agentlog.store.codec import (
    SQLITE_MAX_BYTES,
    SQLITE_MAX_MEMBERS,
    decode_line,
    decode_row,
    decode_storage_record,
    encode_batch,
    encode_records,
    pack_chunk_runs,
)

MAX = MAX_SAFE_INTEGER


def wire_chunk(seq: int, time: int, chunk: Any, turn: Any = 1, step: Any = 1) -> dict[str, Any]:
    return {"type": "assistant/chunk", "seq": seq, "time": time,
            "data": {"turn": turn, "step": step, "chunk": chunk}}


def chunk_event(seq: int, time: int, chunk: Any, turn: Any = 1, step: Any = 1) -> Event:
    return Event.from_wire(wire_chunk(seq, time, chunk, turn, step))


def delta_run(kind: str, count: int, seq0: int = 0, index: int = 0) -> list[Event]:
    return [chunk_event(seq0 + k, 1000 + 10 * k, {"type": kind, "index": index, "text": f"t{k}"})
            for k in range(count)]


def call(seq: int, call_id: str, name: str | None = None, time: int = 1000) -> Event:
    chunk: dict[str, Any] = {"type": "tool-call-delta", "index": 0, "id": call_id}
    if name is not None:
        chunk["name"] = name
    chunk["argumentsDelta"] = f"a{seq}"
    return chunk_event(seq, time, chunk)


def decode_all(records: list[Any]) -> list[Event]:
    """Serialize records as JSONL and decode every line back (the store's round trip)."""
    data = encode_records(records)
    return [event for line in data.split(b"\n")[:-1] for event in decode_line(line)]


def assert_same_events(decoded: list[Event], events: list[Event]) -> None:
    """Equal as events and byte for byte on the wire (catches 1 vs 1.0 and key order)."""
    assert decoded == events
    assert [event.to_json() for event in decoded] == [event.to_json() for event in events]


# -- packing ----------------------------------------------------------------------------


def test_text_run_of_five_packs_into_one_row_and_round_trips() -> None:
    events = delta_run("text-delta", 5)
    packed = pack_chunk_runs(events)
    assert packed == [{
        "type": "text-chunks", "seq0": 0, "time0": 1000,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [10, 10, 10, 10],
                 "texts": ["t0", "t1", "t2", "t3", "t4"]},
    }]
    assert encode_records(packed) == (
        b'{"type":"text-chunks","seq0":0,"time0":1000,"data":{"turn":1,"step":1,"index":0,'
        b'"dt":[10,10,10,10],"texts":["t0","t1","t2","t3","t4"]}}\n'
    )
    assert_same_events(decode_all(packed), events)


def test_reasoning_and_tool_call_runs_pack_under_their_own_tags() -> None:
    reasoning = delta_run("reasoning-delta", 3)
    calls = [call(seq, "c1", "write", time=1000 + seq) for seq in (3, 4, 5)]
    packed = pack_chunk_runs(reasoning + calls)
    assert [row["type"] for row in packed] == ["reasoning-chunks", "tool-call-chunks"]
    tool_row = packed[1]
    assert list(tool_row) == ["type", "seq0", "time0", "data"]
    assert list(tool_row["data"]) == ["turn", "step", "index", "dt", "id", "name", "args"]
    assert tool_row["data"] == {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "id": "c1",
                                "name": "write", "args": ["a3", "a4", "a5"]}
    assert_same_events(decode_all(packed), reasoning + calls)


def test_nameless_tool_call_run_preserves_name_absence() -> None:
    events = [call(seq, "c1") for seq in range(3)]
    packed = pack_chunk_runs(events)
    assert len(packed) == 1
    assert "name" not in packed[0]["data"]
    decoded = decode_all(packed)
    assert_same_events(decoded, events)
    assert all("name" not in event.data["chunk"] for event in decoded)


def test_runs_shorter_than_three_stay_verbatim() -> None:
    events = delta_run("text-delta", 2)
    packed = pack_chunk_runs(events)
    assert len(packed) == 2
    assert all(record is event for record, event in zip(packed, events, strict=True))


def test_non_delta_and_non_chunk_events_stay_verbatim_between_runs() -> None:
    events = [
        chunk_event(0, 1000, {"type": "block-start", "index": 0, "blockType": "text"}),
        *delta_run("text-delta", 3, seq0=1),
        chunk_event(4, 1040, {"type": "block-end", "index": 0, "block": {"type": "text", "text": "t0t1t2"}}),
        Event.from_wire({"type": "step/end", "seq": 5, "time": 1050, "data": {"turn": 1, "step": 1}}),
    ]
    packed = pack_chunk_runs(events)
    assert len(packed) == 4
    assert packed[0] is events[0] and packed[2] is events[4] and packed[3] is events[5]
    assert packed[1]["type"] == "text-chunks"
    assert_same_events(decode_all(packed), events)


def _with_seq(event: Event, seq: int) -> Event:
    return make_event(event.type, seq, event.time, event.data, event.surface_op,
                      event.source_event_seqs, event.ignorable)


BREAKS: dict[str, list[Event]] = {
    "seq gap": [*delta_run("text-delta", 2), _with_seq(delta_run("text-delta", 3)[2], 9)],
    "kind switch": [*delta_run("text-delta", 2), *delta_run("reasoning-delta", 1, seq0=2)],
    "block-index switch": [*delta_run("text-delta", 2), *delta_run("text-delta", 1, seq0=2, index=7)],
    "step switch": [*delta_run("text-delta", 2),
                    chunk_event(2, 1020, {"type": "text-delta", "index": 0, "text": "t2"}, step=2)],
    "turn switch": [*delta_run("text-delta", 2),
                    chunk_event(2, 1020, {"type": "text-delta", "index": 0, "text": "t2"}, turn=2)],
    "number type switch": [*delta_run("text-delta", 2),
                           chunk_event(2, 1020, {"type": "text-delta", "index": 0, "text": "t2"}, turn=1.0)],
    "call-id switch": [call(0, "c1", "w"), call(1, "c1", "w"), call(2, "c2", "w")],
    "name-presence switch": [call(0, "c1", "w"), call(1, "c1", "w"), call(2, "c1")],
    "name value switch": [call(0, "c1", "w"), call(1, "c1", "w"), call(2, "c1", "r")],
}


@pytest.mark.parametrize("label", list(BREAKS))
def test_run_breaks_and_both_halves_stay_verbatim(label: str) -> None:
    events = BREAKS[label]
    packed = pack_chunk_runs(events)
    assert len(packed) == len(events)
    assert all(record is event for record, event in zip(packed, events, strict=True))
    assert_same_events(decode_all(packed), events)


def test_off_whitelist_deltas_stay_verbatim() -> None:
    ignorable = Event.from_wire({**wire_chunk(0, 1000, {"type": "text-delta", "index": 0, "text": "x"}),
                                 "ignorable": True})
    non_string_text = chunk_event(1, 1001, {"type": "text-delta", "index": 0, "text": 7})
    fractional_time = make_event("assistant/chunk", 2, 1001.5,  # type: ignore[arg-type]
                                 freeze({"turn": 1, "step": 1,
                                         "chunk": {"type": "text-delta", "index": 0, "text": "y"}}))
    extra_chunk_key = chunk_event(3, 1002, {"type": "text-delta", "index": 0, "text": "z", "x": 1})
    reordered_keys = chunk_event(4, 1003, {"index": 0, "type": "text-delta", "text": "w"})
    events = [ignorable, non_string_text, fractional_time, extra_chunk_key, reordered_keys]
    assert pack_chunk_runs(events) == events
    # Each alone is off-whitelist: surrounded by valid members they still break the run.
    for odd in (ignorable, non_string_text, extra_chunk_key, reordered_keys):
        batch = [*delta_run("text-delta", 2), _with_seq(odd, 2), *delta_run("text-delta", 2, seq0=3)]
        packed = pack_chunk_runs(batch)
        assert all(type(record) is Event for record in packed)
        assert_same_events(decode_all(packed), batch)


def test_run_breaks_on_time_gap_beyond_safe_range() -> None:
    low, high = -MAX, MAX - 1
    events = [
        chunk_event(0, low, {"type": "text-delta", "index": 0, "text": "x"}),
        chunk_event(1, high, {"type": "text-delta", "index": 0, "text": "y"}),
        chunk_event(2, high + 1, {"type": "text-delta", "index": 0, "text": "z"}),
    ]
    assert pack_chunk_runs(events) == events
    assert_same_events(decode_all(pack_chunk_runs(events)), events)


def test_time_gap_of_exactly_the_safe_limit_still_packs() -> None:
    events = [
        chunk_event(0, 0, {"type": "text-delta", "index": 0, "text": "x"}),
        chunk_event(1, MAX, {"type": "text-delta", "index": 0, "text": "y"}),
        chunk_event(2, 0, {"type": "text-delta", "index": 0, "text": "z"}),
    ]
    packed = pack_chunk_runs(events)
    assert packed[0]["data"]["dt"] == [MAX, -MAX]
    assert_same_events(decode_all(packed), events)


@pytest.mark.parametrize("data", [
    "not-an-object",
    {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a"}, "extra": 1},
    {"turn": "x", "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a"}},
    {"turn": True, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a"}},
    {"step": 1, "turn": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a"}},
    {"turn": 1, "step": 1, "chunk": "not-an-object"},
    {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": "x", "text": "a"}},
    {"turn": 1, "step": 1, "chunk": {"type": "tool-call-delta", "index": 0, "id": 7, "argumentsDelta": "a"}},
    {"turn": 1, "step": 1,
     "chunk": {"type": "tool-call-delta", "index": 0, "id": "c", "name": 7, "argumentsDelta": "a"}},
], ids=["string", "extra-key", "string-turn", "bool-turn", "key-order", "string-chunk", "string-index",
        "numeric-id", "numeric-name"])
def test_delta_with_off_whitelist_data_envelope_stays_verbatim(data: Any) -> None:
    def make(seq: int, payload: Any) -> Event:
        return Event.from_wire({"type": "assistant/chunk", "seq": seq, "time": 1000, "data": payload})

    good = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a"}}
    events = [make(0, good), make(1, good), make(2, data), make(3, good), make(4, good)]
    packed = pack_chunk_runs(events)
    assert packed == events
    assert_same_events(decode_all(packed), events)


def test_float_turn_and_index_pack_and_keep_their_type() -> None:
    events = [chunk_event(k, 1000, {"type": "text-delta", "index": 0.5, "text": "a"}, turn=1.0)
              for k in range(3)]
    packed = pack_chunk_runs(events)
    assert len(packed) == 1
    assert_same_events(decode_all(packed), events)


def test_each_batch_packs_separately() -> None:
    events = delta_run("text-delta", 6)
    whole = encode_batch(events)
    split = encode_batch(events[:3]) + encode_batch(events[3:])
    assert whole.count(b"\n") == 1 and split.count(b"\n") == 2
    lines = split.split(b"\n")[:-1]
    assert [event for line in lines for event in decode_line(line)] == events


def test_unpacked_batch_is_one_event_per_line() -> None:
    events = delta_run("text-delta", 4)
    assert encode_batch(events, pack=False) == b"".join(event.to_json() + b"\n" for event in events)


def test_encode_of_an_empty_batch_is_empty() -> None:
    assert encode_records([]) == b""
    assert pack_chunk_runs([]) == []


def test_encode_refuses_an_event_typed_like_a_row() -> None:
    event = Event.from_wire({"type": "text-chunks", "seq": 0, "time": 1, "data": {}, "ignorable": True})
    with pytest.raises(InvalidEventError, match="reserved for packed storage rows"):
        encode_records([event])


# -- SQLite row caps ----------------------------------------------------------------------


def test_max_members_splits_a_run_greedily() -> None:
    events = delta_run("text-delta", 10)
    packed = pack_chunk_runs(events, max_members=4)
    assert [len(record["data"]["texts"]) if type(record) is dict else 1 for record in packed] == [4, 4, 1, 1]
    assert_same_events(decode_all(packed), events)


def test_max_bytes_caps_each_row_and_a_member_too_big_to_share_stays_scalar() -> None:
    texts = ["a" * 10, "b" * 10, "c" * 500, "d" * 10, "e" * 10, "f" * 10, "g" * 10, "h" * 10]
    events = [chunk_event(k, 1000 + k, {"type": "text-delta", "index": 0, "text": text})
              for k, text in enumerate(texts)]
    cap = len(orjson.dumps(pack_chunk_runs(events[3:6])[0]["data"]))
    packed = pack_chunk_runs(events, max_bytes=cap)
    shapes = [record["data"]["texts"] if type(record) is dict else record.data["chunk"]["text"]
              for record in packed]
    assert shapes == ["a" * 10, "b" * 10, "c" * 500, ["d" * 10, "e" * 10, "f" * 10],
                      "g" * 10, "h" * 10]
    for record in packed:
        if type(record) is dict:
            assert len(orjson.dumps(record["data"])) <= cap
    assert_same_events(decode_all(packed), events)


def test_binary_search_finds_the_largest_prefix_that_fits() -> None:
    events = delta_run("text-delta", 50)
    one_row = orjson.dumps(pack_chunk_runs(events[:17])[0]["data"])
    packed = pack_chunk_runs(events, max_bytes=len(one_row))
    assert len(packed[0]["data"]["texts"]) == 17
    assert_same_events(decode_all(packed), events)


def test_max_members_below_three_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        pack_chunk_runs([], max_members=2)


def test_decode_row_enforces_sqlite_member_bounds() -> None:
    data = {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]}
    assert len(decode_row("text-chunks", 0, 1, data)) == 2
    with pytest.raises(SessionCorruptionError, match=r"2 members is outside 3\.\.1024"):
        decode_row("text-chunks", 0, 1, data, min_members=3, max_members=SQLITE_MAX_MEMBERS)
    big = {"turn": 1, "step": 1, "index": 0, "dt": [0] * 1024, "texts": ["a"] * 1025}
    with pytest.raises(SessionCorruptionError, match="1025 members"):
        decode_row("text-chunks", 0, 1, big, min_members=3, max_members=SQLITE_MAX_MEMBERS)
    assert SQLITE_MAX_BYTES == 1_048_576


# -- decoding ---------------------------------------------------------------------------


def test_decode_passes_an_event_through_as_one_validated_event() -> None:
    wire = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}
    [event] = decode_storage_record(wire)
    assert type(event) is Event and event.to_wire() == wire
    assert type(event.data) is FrozenDict


@pytest.mark.parametrize("value", ["junk", None, 42, [1]])
def test_decode_refuses_a_non_object_record_as_an_invalid_event(value: Any) -> None:
    # DSH passes these through unvalidated and its restore then refuses them; agentlog
    # validates at decode, with the same envelope error.
    with pytest.raises(InvalidEventError, match="invalid event envelope"):
        decode_storage_record(value)


def test_decode_line_reports_unparsable_json_as_corruption() -> None:
    with pytest.raises(SessionCorruptionError, match="unparsable storage record"):
        decode_line(b'{"type":"turn/start","seq":0')


def test_negative_dt_round_trips() -> None:
    events = [
        chunk_event(0, 1000, {"type": "text-delta", "index": 0, "text": "a"}),
        chunk_event(1, 990, {"type": "text-delta", "index": 0, "text": "b"}),
        chunk_event(2, 995, {"type": "text-delta", "index": 0, "text": "c"}),
    ]
    packed = pack_chunk_runs(events)
    assert packed[0]["data"]["dt"] == [-10, 5]
    assert_same_events(decode_all(packed), events)


def test_decoded_members_are_frozen_events_in_canonical_key_order() -> None:
    [first, second] = decode_line(
        b'{"type":"tool-call-chunks","seq0":7,"time0":5,"data":{"turn":2,"step":3,"index":1,'
        b'"dt":[-2],"id":"c","name":"n","args":["{","}"]}}'
    )
    assert second.to_json() == (
        b'{"type":"assistant/chunk","seq":8,"time":3,"data":{"turn":2,"step":3,"chunk":'
        b'{"type":"tool-call-delta","index":1,"id":"c","name":"n","argumentsDelta":"}"}}}'
    )
    assert type(first.data) is FrozenDict and type(first.data["chunk"]) is FrozenDict
    with pytest.raises(TypeError):
        first.data["chunk"]["id"] = "x"
    assert (first.surface_op, first.source_event_seqs, first.ignorable) == (None, None, False)


def _text_row(**data: Any) -> dict[str, Any]:
    base = {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"]}
    base.update(data)
    return {"type": "text-chunks", "seq0": 0, "time0": 1, "data": base}


MALFORMED: dict[str, Any] = {
    # the 17 cases of DSH's chunk-rows.spec.ts
    "a non-object data": {"type": "text-chunks", "seq0": 0, "time0": 1, "data": "x"},
    "an envelope with extra keys": {**_text_row(), "extra": 1},
    "a negative seq0": {**_text_row(), "seq0": -1},
    "a non-finite time0": {**_text_row(), "time0": float("inf")},
    "a fractional time0": {**_text_row(), "time0": 1.5},
    "a data shape mismatch": {"type": "text-chunks", "seq0": 0, "time0": 1,
                              "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "args": ["a"]}},
    "a non-string member": _text_row(texts=[7]),
    "an empty member list": _text_row(texts=[]),
    "a dt arity mismatch": _text_row(dt=[1, 2], texts=["a", "b"]),
    "a non-finite dt gap": _text_row(dt=[float("nan")], texts=["a", "b"]),
    "a fractional dt gap": _text_row(dt=[0.5], texts=["a", "b"]),
    "a member seq leaving safe range": {**_text_row(dt=[0, 0], texts=["a", "b", "c"]), "seq0": MAX},
    "a member time leaving safe range": {**_text_row(dt=[1], texts=["a", "b"]), "time0": MAX},
    "a non-numeric turn": _text_row(turn="x"),
    "a tool-call row without id": {"type": "tool-call-chunks", "seq0": 0, "time0": 1,
                                   "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "args": ["a"]}},
    "a tool-call row with non-string id": {
        "type": "tool-call-chunks", "seq0": 0, "time0": 1,
        "data": {"turn": 1, "step": 1, "index": 0, "id": 7, "dt": [], "args": ["a"]}},
    "a tool-call row with non-string name": {
        "type": "tool-call-chunks", "seq0": 0, "time0": 1,
        "data": {"turn": 1, "step": 1, "index": 0, "id": "c", "name": 7, "dt": [], "args": ["a"]}},
    # agentlog's stricter lossless-JSON rules
    "an envelope without time0": {"type": "text-chunks", "seq0": 0, "data": _text_row()["data"]},
    "a boolean seq0": {**_text_row(), "seq0": True},
    "an integral float time0": {**_text_row(), "time0": 1.0},
    "an unsafe seq0": {**_text_row(), "seq0": MAX + 1},
    "an unsafe time0": {**_text_row(), "time0": -MAX - 1},
    "a boolean turn": _text_row(turn=True),
    "a negative-zero index": _text_row(index=-0.0),
    "an unsafe integer step": _text_row(step=MAX + 1),
    "an integral float dt gap": _text_row(dt=[1.0], texts=["a", "b"]),
    "a boolean dt gap": _text_row(dt=[True], texts=["a", "b"]),
    "an unsafe dt gap": _text_row(dt=[MAX + 1, -MAX - 1], texts=["a", "b", "c"]),
    "a member list that is not a list": _text_row(texts="a"),
    "a dt that is not a list": _text_row(dt=None),
    "a lone surrogate in a member": _text_row(texts=["\ud800"]),
    "a lone surrogate in a call id": {
        "type": "tool-call-chunks", "seq0": 0, "time0": 1,
        "data": {"turn": 1, "step": 1, "index": 0, "id": "\udc00", "dt": [], "args": ["a"]}},
    "a member time leaving safe range downwards": {**_text_row(dt=[-2], texts=["a", "b"]),
                                                   "time0": -MAX + 1},
    "a text row with tool-call keys": {"type": "reasoning-chunks", "seq0": 0, "time0": 1,
                                       "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "id": "c",
                                                "args": ["a"]}},
}


@pytest.mark.parametrize("label", list(MALFORMED))
def test_malformed_row_is_refused(label: str) -> None:
    row = MALFORMED[label]
    with pytest.raises(SessionCorruptionError, match=rf"malformed {row['type']} storage row: "):
        decode_storage_record(row)


def test_malformed_row_error_names_the_row_seq() -> None:
    with pytest.raises(SessionCorruptionError) as caught:
        decode_storage_record(_text_row(texts=[]))
    assert caught.value.seq == 0
    assert str(caught.value).startswith("seq 0: malformed text-chunks storage row: texts must be")


def test_decode_accepts_a_one_member_row_and_frozen_input() -> None:
    [event] = decode_storage_record(freeze(_text_row()))
    assert event.to_json() == (b'{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":1,"step":1,'
                               b'"chunk":{"type":"text-delta","index":0,"text":"a"}}}')


# -- property -----------------------------------------------------------------------------

_index = st.integers(0, 2)
_call_id = st.sampled_from(["c1", "c2"])
_name = st.sampled_from([None, "write", "read"])


def _delta(kind: str, index: int, call_id: str, name: str | None, text: str) -> dict[str, Any]:
    """A delta chunk in DSH's canonical key order (hypothesis' dictionaries shuffle keys)."""
    if kind != "tool-call-delta":
        return {"type": kind, "index": index, "text": text}
    chunk: dict[str, Any] = {"type": kind, "index": index, "id": call_id}
    if name is not None:
        chunk["name"] = name
    chunk["argumentsDelta"] = text
    return chunk


_KIND = st.sampled_from(["text-delta", "reasoning-delta", "tool-call-delta"])
_DELTA = st.builds(_delta, _KIND, _index, _call_id, _name, st.text(max_size=4))
_ODD_CHUNK = st.one_of(
    st.builds(lambda index: {"type": "block-start", "index": index, "blockType": "text"}, _index),
    st.just({"type": "finish", "reason": {"kind": "stop"}}),
    st.builds(lambda index, text: {"index": index, "type": "text-delta", "text": text}, _index, st.text()),
    st.builds(lambda number: {"type": "text-delta", "index": 0, "text": number}, st.integers(-MAX, MAX)),
)
_TIME = st.one_of(st.integers(995, 1100), st.integers(995, 1100), st.integers(995, 1100),
                  st.integers(-MAX, MAX))
_STEP = st.integers(-5, 50)
_NUMBER = st.one_of(st.integers(0, 1), st.integers(0, 1), st.integers(0, 1), st.just(1.0))


@st.composite
def _segment(draw: st.DrawFn, seq: int) -> list[Event]:
    """A would-be run: one delta shape repeated with fresh payloads, or one odd event."""
    shape = draw(st.integers(0, 9))
    time = draw(_TIME)
    if shape == 7:
        return [Event.from_wire(wire_chunk(seq, time, draw(_ODD_CHUNK), draw(_NUMBER), draw(_NUMBER)))]
    if shape == 8:
        return [Event.from_wire({"type": "step/end", "seq": seq, "time": time,
                                 "data": {"turn": 1, "step": 1}})]
    if shape == 9:
        return [Event.from_wire({**wire_chunk(seq, time, draw(_DELTA)), "ignorable": True})]
    shape_args = (draw(_KIND), draw(_index), draw(_call_id), draw(_name))
    turn, step = draw(_NUMBER), draw(_NUMBER)
    events = []
    for offset in range(draw(st.sampled_from([3, 1, 2, 4, 6]))):
        chunk = _delta(*shape_args, draw(st.text(max_size=4)))
        events.append(Event.from_wire(wire_chunk(seq + offset, time, chunk, turn, step)))
        time = draw(_TIME) if draw(st.integers(0, 9)) == 0 else max(-MAX, min(MAX, time + draw(_STEP)))
    return events


@st.composite
def batches(draw: st.DrawFn) -> list[Event]:
    """Mixed batches: mostly contiguous seqs, any safe times, runs that may or may not pack."""
    seq = draw(st.integers(0, MAX - 400))
    events: list[Event] = []
    for _ in range(draw(st.integers(0, 10))):
        segment = draw(_segment(seq))
        events.extend(segment)
        seq += len(segment) + (0 if draw(st.integers(0, 9)) else draw(st.integers(1, 2)))
    return events


@settings(max_examples=300, deadline=None)
@given(batches())
def test_pack_serialize_decode_is_the_identity(events: list[Event]) -> None:
    packed = pack_chunk_runs(events)
    assert all(len(record["data"].get("texts") or record["data"]["args"]) >= 3
               for record in packed if type(record) is dict)
    assert_same_events(decode_all(packed), events)
    assert_same_events(decode_all(events), events)


@settings(max_examples=150, deadline=None)
@given(batches(), st.integers(3, 6), st.integers(40, 300))
def test_capped_packing_respects_caps_and_is_the_identity(
    events: list[Event], max_members: int, max_bytes: int
) -> None:
    packed = pack_chunk_runs(events, max_members=max_members, max_bytes=max_bytes)
    for record in packed:
        if type(record) is dict:
            members = record["data"].get("texts") or record["data"]["args"]
            assert 3 <= len(members) <= max_members
            assert len(orjson.dumps(record["data"])) <= max_bytes
    decoded = [event for record in packed
               for event in ([record] if type(record) is Event else decode_storage_record(record))]
    assert_same_events(decoded, events)
