"""Every request-format export (openai-chat, openai-responses, anthropic) is one the SDK types accept.

Property tests over generated sessions (``tests.strategies.conversations``): the request body,
with a model added, validates against the SDK's TypedDicts (pydantic, extra keys forbidden),
and the API rules that types cannot express hold: every tool call answered right after it,
no orphan tool results, Anthropic's alternating roles with tool results leading the user turn.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from hypothesis import HealthCheck, given, settings
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import ConfigDict, TypeAdapter

from agentlog import Session
from agentlog.io.exporters import export
from tests.strategies import conversations

FORBID = ConfigDict(extra="forbid")
# a list around the body: TypeAdapter takes a config (extra keys forbidden) only for a container
OPENAI_BODY = TypeAdapter(list[CompletionCreateParamsNonStreaming], config=FORBID)
ANTHROPIC_BODY = TypeAdapter(list[MessageCreateParamsNonStreaming], config=FORBID)
RESPONSES_BODY = TypeAdapter(list[ResponseCreateParamsNonStreaming], config=FORBID)


def consumed(value: Any) -> Any:
    """Walk a validated value, draining pydantic's lazy ``Iterable`` validators (they check on read)."""
    if isinstance(value, Mapping):
        return {key: consumed(member) for key, member in value.items()}
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, Iterable):
        return [consumed(member) for member in value]
    return value


def openai_rules(messages: list[dict[str, Any]]) -> None:
    """Tool messages answer the calls of the assistant message just before them, each exactly once."""
    pending: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, (message, pending)
            pending.remove(message["tool_call_id"])
            continue
        assert not pending, f"calls {pending} unanswered before a {message['role']} message"
        if message["role"] == "assistant":
            assert message.get("content") or message.get("tool_calls") or message.get("reasoning_content")
            pending = [call["id"] for call in message.get("tool_calls", ())]
            assert len(set(pending)) == len(pending)
            if "reasoning_content" in message:
                assert isinstance(message["reasoning_content"], str)
    assert not pending


def anthropic_rules(messages: list[dict[str, Any]]) -> None:
    """Roles alternate; tool results lead the next user turn and answer exactly the previous tool_use."""
    for before, after in itertools.pairwise(messages):
        assert before["role"] != after["role"], "consecutive turns of one role"
    pending: set[str] = set()
    for message in messages:
        blocks = message["content"]
        assert blocks, "empty content"
        kinds = [block["type"] for block in blocks]
        if message["role"] == "user":
            results = [block["tool_use_id"] for block in blocks if block["type"] == "tool_result"]
            assert kinds[: len(results)] == ["tool_result"] * len(results), "tool results must come first"
            assert set(results) == pending and len(results) == len(pending), (results, pending)
            pending = set()
        else:
            assert not pending
            pending = {block["id"] for block in blocks if block["type"] == "tool_use"}
            assert all(b.get("signature") for b in blocks if b["type"] == "thinking")
        for block in blocks:
            if block["type"] == "text":
                assert block["text"].strip(), "text blocks must hold non-whitespace text"
    assert not pending


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_openai_chat_exports_are_valid_requests(session: Session) -> None:
    for view in ("surface", "log"):
        body = orjson.loads(export(session.header, session.events, "openai-chat", view=view))
        standard = [{k: v for k, v in m.items() if k != "reasoning_content"} for m in body["messages"]]
        plain = {"model": "gpt-4o", **body, "messages": standard}  # reasoning_content is DeepSeek's
        consumed(OPENAI_BODY.validate_python([plain]))
        openai_rules(body["messages"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_anthropic_exports_are_valid_requests(session: Session) -> None:
    for view in ("surface", "log"):
        body = orjson.loads(export(session.header, session.events, "anthropic", view=view))
        if not body["messages"]:
            continue  # nothing to send: the caller adds the next user message
        consumed(ANTHROPIC_BODY.validate_python([{"model": "claude-sonnet-4-5", "max_tokens": 1024, **body}]))
        anthropic_rules(body["messages"])


def responses_rules(items: list[dict[str, Any]]) -> None:
    """Every call has exactly one output after it, and no output comes without its call before it."""
    pending: set[str] = set()
    for item in items:
        kind = item.get("type", "message")
        if kind.endswith("_call_output"):
            assert item["call_id"] in pending, (item, pending)
            pending.remove(item["call_id"])
        elif kind.endswith("_call") and "call_id" in item:
            assert item["call_id"] not in pending, f"call {item['call_id']} repeated before its output"
            pending.add(item["call_id"])
    assert not pending, f"calls {pending} unanswered"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_openai_responses_exports_are_valid_requests(session: Session) -> None:
    for view in ("surface", "log"):
        body = orjson.loads(export(session.header, session.events, "openai-responses", view=view))
        consumed(RESPONSES_BODY.validate_python([{"model": "gpt-5", **body}]))
        responses_rules(body["input"])
