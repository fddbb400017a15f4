"""AgentlogSaver's payloads and flushes: serde msgpack logged as exact JSON, and which calls flush
under LangGraph's ``durability`` modes (a task's writes ride with the next checkpoint in ``async``).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from agentlog import freeze
from agentlog.integrations.langgraph import AgentlogSaver
from agentlog.integrations.langgraph_records import MSGPACK_JSON, WRITES, decode_payload, encode_payload
from agentlog.store.writer import LiveSession
from tests.integrations.langgraph_graphs import approval_graph, chat_graph, config, user

SERDE = JsonPlusSerializer()

scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text() | st.binary() | st.floats()
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    | st.dictionaries(st.integers(0, 9), inner, max_size=2),
    max_leaves=20,
)


def round_trip(value: Any) -> tuple[list[Any], Any]:
    """The payload logged for ``value`` (as the log holds it: frozen) and what the serde reads back."""
    payload = encode_payload(SERDE.dumps_typed(value))
    stored = freeze(payload)  # what an append keeps; it must not refuse the payload
    return payload, SERDE.loads_typed(decode_payload(stored))


def same(left: Any, right: Any) -> bool:
    """Equality that tells NaN from NaN-less values apart the way the serde's round trip does."""
    return SERDE.dumps_typed(left) == SERDE.dumps_typed(right)


@settings(max_examples=300, deadline=None)
@given(values)
def test_any_serde_value_round_trips_through_the_logged_payload(value: Any) -> None:
    payload, back = round_trip(value)
    assert same(back, SERDE.loads_typed(SERDE.dumps_typed(value)))
    if payload[-1] == MSGPACK_JSON:  # the JSON form is only used when it packs back to the same bytes
        assert decode_payload(freeze(payload)) == SERDE.dumps_typed(value)


def test_messages_are_logged_as_readable_json() -> None:
    messages = [HumanMessage(content="hi", id="u1"),
                AIMessage(content="", id="a1", tool_calls=[{"id": "c1", "name": "f", "args": {"x": 1}}]),
                ToolMessage(content="ok", tool_call_id="c1", id="t1")]
    payload, back = round_trip(messages)
    assert payload[0] == "msgpack" and payload[2] == MSGPACK_JSON
    assert "hi" in str(payload[1]) and back == messages


@pytest.mark.parametrize("value", [
    {1: "int key"}, {"$ext": "a key like the markers"}, 2**60, float("nan"), -0.0, [[[[[[[[[[[[[[[[[[[[
        [[[[[[[[[[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
    datetime.datetime(2026, 12, 3, 10, 0)])
def test_values_without_an_exact_json_form_stay_base64_and_round_trip(value: Any) -> None:
    payload, back = round_trip(value)
    if not isinstance(value, datetime.datetime):  # a datetime is an extension of plain data: JSON holds it
        assert len(payload) == 2
    assert same(back, SERDE.loads_typed(SERDE.dumps_typed(value)))


# -- flushes under LangGraph's durability modes -------------------------------------------------


def count_flushes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    flushes = [0]
    real = LiveSession.flush

    def counted(live: LiveSession) -> None:
        flushes[0] += 1
        real(live)

    monkeypatch.setattr(LiveSession, "flush", counted)
    return flushes


def writes_on_disk(url: str, thread: str) -> int:
    with AgentlogSaver(url) as reader:  # a second saver reads what is on disk (the thread is held)
        return sum(event.type == WRITES for event in reader.store.inspect(thread).events)


@pytest.mark.parametrize("durability", ["sync", "async", None])
def test_each_checkpoint_flushes_and_task_writes_wait_for_it_only_in_async(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str | None) -> None:
    url = f"jsonl://{tmp_path / 'root'}?write_delay_ms=60000"
    with AgentlogSaver(url) as saver:
        graph = chat_graph(saver)
        graph.invoke(user(1), config("t1"))
        puts = sum(1 for _ in saver.list(config("t1")))
        flushes = count_flushes(monkeypatch)
        extra = {} if durability is None else {"durability": durability}
        graph.invoke(user(2), config("t1"), **extra)
        flushed = flushes[0]
        added = sum(1 for _ in saver.list(config("t1"))) - puts
        writes = writes_on_disk(url, "t1")
    # a turn: 3 checkpoints (input, the step applying it, the reply) and 2 tasks' writes
    assert added == 3 and writes == 4
    assert flushed == (5 if durability == "sync" else 3)  # LangGraph's default is async


def test_writes_outside_a_run_and_an_interrupt_are_durable_on_return(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'root'}?write_delay_ms=60000"
    with AgentlogSaver(url) as saver:
        stored = saver.put(config("t2") | {"configurable": {"thread_id": "t2", "checkpoint_ns": ""}},
                           {"v": 4, "id": "1f0", "ts": "2026-12-03T10:00:00+00:00", "channel_values": {},
                            "channel_versions": {}, "versions_seen": {}, "updated_channels": None},
                           {"source": "input", "step": -1, "parents": {}}, {})
        saver.put_writes(stored, [("messages", ["direct"])], "task-1")  # a direct call: no run follows it
        assert writes_on_disk(url, "t2") == 1
        graph = approval_graph(saver)
        graph.invoke(user(1), config("t1"), durability="async")  # stops at the interrupt
        events = list(saver.store.inspect("t1").events)
        on_disk = writes_on_disk(url, "t1")
    assert on_disk == sum(event.type == WRITES for event in events)
    assert any(write[1] == "__interrupt__" for event in events if event.type == WRITES
               for write in event.data["writes"])
