"""The standard workload generator (bench/WORKLOAD.md) against DSH's own recording of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from benchmarks.workload import EVENTS_PER_TURN, record_workload, workload_events, workload_header

from agentlog import Session, thaw
from agentlog.core.events import Event
from agentlog.core.invariants import check_invariants


def skeleton(wire: dict[str, Any]) -> tuple[Any, ...]:
    """What an event's shape is, without its text: type, seq, markers, keys, block types, sizes."""
    data = wire["data"]
    message = data if wire["type"] == "user/message" else data.get("message")
    blocks = tuple(block["type"] for block in message["content"]) if isinstance(message, dict) else ()
    sizes: tuple[int, ...] = ()
    if wire["type"] == "assistant/chunk":
        sizes = (len(data["chunk"]["text"]),)
    elif wire["type"] in ("user/message", "assistant/message"):
        sizes = (len(message["content"][0]["text"]),)
    elif wire["type"] == "tool/result":
        sizes = (len(message["content"][0]["content"][0]["text"]),)
    elif wire["type"] == "request/header":
        sizes = (len(data["header"]["system"]), len(data["header"]["tools"]))
    return (wire["type"], wire["seq"], wire.get("surfaceOp"), wire.get("sourceEventSeqs"),
            sorted(data), sorted(message) if isinstance(message, dict) else None, blocks, sizes)


def test_five_turns_have_the_shape_dsh_wrote(dsh_fixtures: Path) -> None:
    expected = [json.loads(line) for line in
                (dsh_fixtures / "basic-T5.expected-events.jsonl").read_text().splitlines()]
    ours = [thaw(event.to_wire()) for event in workload_events(5)]
    assert len(ours) == len(expected) == 906
    assert [e["type"] for e in ours] == [e["type"] for e in expected]
    for mine, theirs in zip(ours, expected, strict=True):
        assert skeleton(mine) == skeleton(theirs), mine["seq"]
    usage = [e["data"]["usage"] for e in ours if e["type"] == "assistant/message"]
    assert usage == [e["data"]["usage"] for e in expected if e["type"] == "assistant/message"]


@pytest.mark.parametrize("turns", [0, 1, 3])
def test_a_session_of_t_turns_has_181_events_a_turn_plus_the_header(turns: int) -> None:
    events = workload_events(turns)
    assert len(events) == (EVENTS_PER_TURN * turns + 1 if turns else 0)
    check_invariants(events)


def test_sizes_follow_the_workload() -> None:
    events = workload_events(2)
    header = workload_header()
    assert header["config"] == {"provider": "deepseek", "model": "deepseek-chat", "maxTokens": 8192}
    assert len(header["system"]) == 2000
    assert [tool["name"] for tool in header["tools"]] == ["read_file", "write_file", "run"]
    messages = [e for e in events if e.type == "assistant/message"]
    assert len(messages) == 8
    for index, event in enumerate(messages):
        content = event.data["message"]["content"]
        assert len(content[0]["text"]) == 320
        chunks = [events[seq].data["chunk"]["text"] for seq in event.source_event_seqs or ()]
        assert len(chunks) == 40 and {len(c) for c in chunks} == {8}
        assert "".join(chunks) == content[0]["text"]
        if index % 4 == 3:
            assert len(content) == 1
        else:
            call = content[1]
            assert (call["type"], call["name"], len(call["arguments"])) == ("tool-call", "read_file", 60)
            assert set(orjson.loads(call["arguments"])) == {"path"}
    assert {len(e.data["content"][0]["text"]) for e in events if e.type == "user/message"} == {300}
    results = [e for e in events if e.type == "tool/result"]
    assert {len(e.data["message"]["content"][0]["content"][0]["text"]) for e in results} == {2000}
    assert len({e.data["message"]["content"][0]["toolCallId"] for e in results}) == 6


def test_a_seed_always_gives_the_same_session() -> None:
    first = [event.to_json() for event in workload_events(2, seed=7)]
    assert first == [event.to_json() for event in workload_events(2, seed=7)]
    assert first != [event.to_json() for event in workload_events(2, seed=8)]


def test_text_is_drawn_words_not_a_repeated_filler() -> None:
    texts = [e.data["message"]["content"][0]["content"][0]["text"]
             for e in workload_events(3) if e.type == "tool/result"]
    assert len(set(texts)) == len(texts)
    assert len(set(texts[0].split())) > 50


def test_the_recorded_session_restores_and_derives_eight_messages_a_turn() -> None:
    events = workload_events(3)
    restored = Session.restore("workload", events, {"version": 0, "id": "workload", "createdAt": 0})
    assert len(restored.derive_messages()) == 24
    assert [m["role"] for m in restored.derive_messages()[:8]] == [
        "user", "assistant", "user", "assistant", "user", "assistant", "user", "assistant"]


def test_flush_runs_per_turn_and_checkpoint_per_request_and_tool_call() -> None:
    session = Session.create("flushes")
    turn_ends: list[str] = []
    checkpoints: list[str] = []
    record_workload(session, 2, flush=lambda: turn_ends.append(session.events[-1].type),
                    checkpoint=lambda: checkpoints.append(session.events[-1].type))
    assert turn_ends == ["turn/end", "turn/end"]
    assert len(checkpoints) == 2 * 7
    assert checkpoints.count("tool/call") == 6


def test_recording_more_turns_continues_the_log_and_resumes_the_header() -> None:
    session = Session.create("continued")
    record_workload(session, 1)
    record_workload(session, 1, seed=1)
    events: list[Event] = list(session.events)
    assert len(events) == 2 * EVENTS_PER_TURN + 2
    assert [e.data["reason"] for e in events if e.type == "request/header"] == ["initial", "resume"]
    assert [e.data["turn"] for e in events if e.type == "turn/start"] == [1, 2]
    check_invariants(events)
