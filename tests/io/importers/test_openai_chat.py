"""Chat Completions message lists: import then export with ``to_chat_messages`` gives them back."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import Session
from agentlog.integrations.openai_messages import to_chat_messages
from agentlog.io.importers import SourceFile
from agentlog.io.importers.openai_chat import import_openai_chat
from tests.conftest import shared_data_dir
from tests.io.importers.corpus import real_files
from tests.io.importers.helpers import FIXTURES, assert_golden, checked, import_file

REAL = real_files("openai-chat")
_EXPORTED = ("role", "content", "tool_calls", "tool_call_id")


def exported(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the export carries of each message: a ``tool`` message's ``name`` is its call's, and
    ``"content": ""`` beside ``tool_calls`` comes back as ``null`` (the API reads both the same)."""
    out = []
    for message in messages:
        kept = {key: message[key] for key in _EXPORTED if message.get(key) is not None or key == "content"}
        if not kept.get("tool_calls"):
            kept.pop("tool_calls", None)
        elif kept.get("content") == "":
            kept["content"] = None
        out.append(kept)
    return out


def round_trip(data: bytes) -> list[list[dict[str, Any]]]:
    """Import ``data`` and export every session as Chat Completions messages."""
    sessions = import_openai_chat(SourceFile("m.json", data))
    result = []
    for imported in sessions:
        session = checked(imported)
        result.append(to_chat_messages(session, reasoning="all"))
    return result


def test_the_real_corpus_is_covered() -> None:
    shared_data_dir()
    assert len(REAL) == 2


@pytest.mark.parametrize("relative", REAL)
def test_tau_bench_conversations_round_trip(relative: str) -> None:
    path = shared_data_dir() / relative
    results = orjson.loads(path.read_bytes())
    exports = round_trip(path.read_bytes())
    assert len(exports) == len(results) > 100
    for result, messages in zip(results, exports, strict=True):
        assert messages == exported(result["traj"])
    (first, *_) = import_file("openai-chat", path)
    assert first.unmapped == {"result key 'info'": 1}
    assert first.header.extra["importedFrom"]["task_id"] == results[0]["task_id"]


def test_golden_small_list() -> None:
    sessions = import_file("openai-chat", FIXTURES / "openai-chat" / "small.json")
    (imported,) = sessions
    checked(imported)
    assert imported.unmapped == {"assistant message key 'refusal'": 1,
                                 "user image_url part (kept as a placeholder)": 1}
    assert_golden(sessions, "openai-chat-small")


def test_a_request_body_keeps_model_and_tools() -> None:
    body = {"model": "gpt-4o", "tools": [{"type": "function", "function": {
        "name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}}],
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    (imported,) = import_openai_chat(SourceFile("b.json", orjson.dumps(body)))
    header = checked(imported).request_header()
    assert header is not None
    assert header["config"]["model"] == "gpt-4o" and header["tools"][0]["name"] == "f"


def test_importing_the_same_content_gives_the_same_id() -> None:
    data = (FIXTURES / "openai-chat" / "small.json").read_bytes()
    first = import_openai_chat(SourceFile("a.json", data))[0].header.id
    assert import_openai_chat(SourceFile("b.json", data))[0].header.id == first
    assert import_openai_chat(SourceFile("a.json", data + b" "))[0].header.id != first


text = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20)
call_ids = st.uuids().map(lambda u: f"call_{u.hex[:12]}")


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Valid Chat Completions lists: user turns, assistant replies, each tool call answered in order."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(text)})
    for _ in range(draw(st.integers(1, 4))):
        messages.append({"role": "user", "content": draw(text)})
        for _ in range(draw(st.integers(0, 3))):
            ids = draw(st.lists(call_ids, max_size=3, unique=True))
            calls = [{"id": call_id, "type": "function",
                      "function": {"name": draw(st.sampled_from(["read", "write"])),
                                   "arguments": orjson.dumps({"x": draw(text)}).decode()}} for call_id in ids]
            reply: dict[str, Any] = {"role": "assistant", "content": draw(text) if not ids or draw(
                st.booleans()) else None}
            if calls:
                reply["tool_calls"] = calls
            messages.append(reply)
            messages.extend({"role": "tool", "tool_call_id": call_id, "content": draw(text)}
                            for call_id in ids)
        messages.append({"role": "assistant", "content": draw(text)})
    return messages


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_any_valid_message_list_round_trips(messages: list[dict[str, Any]]) -> None:
    (exported_messages,) = round_trip(orjson.dumps(messages))
    assert exported_messages == exported(messages)


def test_a_round_trip_session_restores_from_its_own_wire_events() -> None:
    (imported,) = import_file("openai-chat", FIXTURES / "openai-chat" / "small.json")
    session = Session.restore(imported.header.id, [e.to_wire() for e in imported.events], imported.header)
    assert [m["role"] for m in to_chat_messages(session)][:3] == ["system", "user", "assistant"]
