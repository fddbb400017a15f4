"""Pydantic AI ``ModelMessage``s <-> agentlog messages: the pure half of the drop-in (no I/O).

Every agentlog message recorded from a ``ModelMessage`` keeps that message's JSON (pydantic-ai's
own ``ModelMessagesTypeAdapter`` form) under ``REPLAY_KEY``: a model reply whole, in its
assistant message's ``source.replayState``; a request's parts one per surface node (a tool result's
``meta``, a user message's ``source.replayState``), with the request's other fields and the part's
index, so ``history_of`` puts the request back together exactly. A surface node without that
record (a compaction checkpoint, a message another tool wrote) maps by its agentlog content: a user
message becomes ``ModelRequest([UserPromptPart(text)])``, an assistant message a ``ModelResponse``
of text, thinking and tool-call parts, a tool result a ``ToolReturnPart``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import orjson
from pydantic_core import PydanticSerializationError

from agentlog.core.events import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE, Event
from agentlog.core.messages import derive_event_message
from agentlog.core.session import Session
from agentlog.errors import InvalidEventError, MissingExtraError

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
        ModelResponsePart,
        RetryFeedbackPart,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "agentlog.integrations.pydantic_ai needs Pydantic AI: pip install 'agentlog[pydantic-ai]'"
    ) from exc

__all__ = ["REPLAY_KEY", "assistant_blocks", "dump_message", "history_of", "is_failed_return",
           "load_message", "part_blocks",
           "usage_of"]

REPLAY_KEY: Final = "pydanticAI"
"""The key under which a recorded message keeps pydantic-ai's JSON of what it was made from."""


def dump_message(message: object, where: str) -> dict[str, Any]:
    """``message`` as pydantic-ai's JSON object; anything else (or unserializable content) is refused."""
    if not isinstance(message, ModelRequest | ModelResponse):
        raise InvalidEventError(f"{where} is a {type(message).__name__}, not a pydantic-ai ModelRequest "
                                "or ModelResponse")
    try:
        dumped: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python([message], mode="json")
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise InvalidEventError(f"{where} cannot be serialized as JSON: {exc}") from exc
    return dumped[0]


def load_message(data: Any) -> ModelMessage:
    """The ``ModelMessage`` that ``dump_message`` gave ``data`` for (frozen tuples read as lists)."""
    loaded: list[ModelMessage] = ModelMessagesTypeAdapter.validate_json(orjson.dumps([data]))
    return loaded[0]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value, default=str).decode()


def part_blocks(part: ModelRequestPart) -> list[dict[str, Any]]:
    """The agentlog content blocks a request part shows as (its text; a file as a named placeholder)."""
    if isinstance(part, UserPromptPart):
        items = [part.content] if isinstance(part.content, str) else list(part.content)
        return [{"type": "text", "text": item if isinstance(item, str) else f"[{type(item).__name__}]"}
                for item in items]
    if isinstance(part, SystemPromptPart):
        return []  # the system prompt is request state: it goes in the request header
    if isinstance(part, RetryPromptPart | RetryFeedbackPart):
        return [{"type": "text", "text": part.model_response()}]
    if isinstance(part, ToolReturnPart):
        return [{"type": "text", "text": part.model_response_str()}]
    return []


def is_failed_return(part: ModelRequestPart) -> bool:
    """A part answering a tool call with a failure: a retried/failed/denied/interrupted return, a retry."""
    if isinstance(part, ToolReturnPart):
        return part.outcome != "success"
    return isinstance(part, RetryPromptPart)


def assistant_blocks(response: ModelResponse) -> list[dict[str, Any]]:
    """A reply's text, thinking and tool-call parts as agentlog blocks (other parts live in its JSON)."""
    blocks: list[dict[str, Any]] = []
    for part in response.parts:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.content})
        elif isinstance(part, ThinkingPart):
            blocks.append({"type": "reasoning", "text": part.content})
        elif isinstance(part, ToolCallPart):
            blocks.append({"type": "tool-call", "id": part.tool_call_id, "name": part.tool_name,
                           "arguments": part.args_as_json_str()})
    return blocks


def usage_of(response: ModelResponse) -> dict[str, int]:
    """agentlog's TokenUsage of a reply's ``RequestUsage``."""
    usage = response.usage
    counts = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}
    if usage.cache_read_tokens:
        counts["cacheReadTokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        counts["cacheWriteTokens"] = usage.cache_write_tokens
    return counts


# -- restore ---------------------------------------------------------------------------------------

def history_of(session: Session) -> list[ModelMessage]:
    """The ``message_history`` the session's surface shows, oldest first (what a resumed agent continues)."""
    events = session.events
    messages: list[ModelMessage] = []
    request_key: str | None = None
    envelope: Mapping[str, Any] = {}
    parts: dict[int, Any] = {}
    tool_names: dict[str, str] = {}

    def close_request() -> None:
        nonlocal request_key
        if request_key is not None:
            messages.append(load_message({**envelope, "parts": [parts[i] for i in sorted(parts)]}))
            request_key = None
            parts.clear()

    for seq in session.surface.nodes:
        event = events[seq]
        record = _record(event)
        if record is not None and "parts" in record:
            if record.get("key") != request_key:
                close_request()
                request_key, envelope = record.get("key"), record.get("message") or {}
            parts.update((int(index), part) for index, part in record["parts"])
            continue
        close_request()
        message = load_message(record["message"]) if record is not None else _mapped(event, tool_names)
        if message is None:
            continue
        if isinstance(message, ModelResponse):
            tool_names.update((part.tool_call_id, part.tool_name) for part in message.parts
                              if isinstance(part, ToolCallPart))
        messages.append(message)
    close_request()
    return messages


def _record(event: Event) -> Mapping[str, Any] | None:
    """The pydantic-ai record an event of ours carries, or None."""
    data = event.data
    if event.type == TOOL_RESULT:
        meta = data.get("meta")
        record = meta.get(REPLAY_KEY) if isinstance(meta, dict) else None
    else:
        message = data if event.type == USER_MESSAGE else data.get("message")
        source = message.get("source") if isinstance(message, dict) else None
        replay = source.get("replayState") if isinstance(source, dict) else None
        record = replay.get(REPLAY_KEY) if isinstance(replay, dict) else None
    return record if isinstance(record, dict) else None


def _mapped(event: Event, tool_names: Mapping[str, str]) -> ModelMessage | None:
    """The ModelMessage a surface node not recorded from pydantic-ai stands for (by its agentlog content)."""
    message = derive_event_message(event)
    if message is None:
        return None
    blocks: Sequence[Any] = message.get("content") or ()
    at = datetime.fromtimestamp(event.time / 1000, UTC)  # the event's time: a restore is the same every time
    if event.type == ASSISTANT_MESSAGE:
        source = message.get("source") or {}
        return ModelResponse(parts=_response_parts(blocks), model_name=source.get("model"),
                             provider_name=source.get("provider"), timestamp=at)
    if event.type == TOOL_RESULT:
        block = blocks[0]
        call_id = str(block.get("toolCallId"))
        return ModelRequest(parts=[ToolReturnPart(tool_name=tool_names.get(call_id, "unknown"),
                                                  content=_joined(block.get("content") or ()),
                                                  tool_call_id=call_id, timestamp=at)], timestamp=at)
    return ModelRequest(parts=[UserPromptPart(content=_joined(blocks), timestamp=at)], timestamp=at)


def _response_parts(blocks: Iterable[Any]) -> list[ModelResponsePart]:
    parts: list[ModelResponsePart] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(content=str(block.get("text", ""))))
        elif kind == "reasoning":
            parts.append(ThinkingPart(content=str(block.get("text", ""))))
        elif kind == "tool-call":
            parts.append(ToolCallPart(tool_name=str(block.get("name")), args=str(block.get("arguments", "")),
                                      tool_call_id=str(block.get("id"))))
    return parts


def _joined(blocks: Iterable[Any]) -> str:
    """The text of content blocks, one paragraph each (a non-text block by its JSON)."""
    return "\n\n".join(str(block["text"]) if block.get("type") == "text" and "text" in block
                       else _text(block) for block in blocks)
