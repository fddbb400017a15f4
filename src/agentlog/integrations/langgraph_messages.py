"""LangChain messages in a LangGraph state -> agentlog turns, so a thread reads like any session.

The messages a checkpoint adds to a list channel of the root namespace are logged once more as
well-formed turns (``user/message``, ``assistant/message`` with ``tool/call``, ``tool/result``)
through the Responses item mapping of ``agentlog.integrations.responses_events``: ``agentlog
show``, search, export and audit read a LangGraph thread like any session. The checkpoints stay
the source of truth; a message edited or removed later stays in the transcript as first logged.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from langchain_core.messages import BaseMessage

from agentlog.core.repair import interrupted_turn_closers
from agentlog.core.session import Session
from agentlog.errors import AgentlogError
from agentlog.integrations.responses_events import (
    append_events,
    next_turn,
    responses_events,
    unanswered_calls,
)

__all__ = ["DEFAULT_MODEL", "DEFAULT_PROVIDER", "OpenCalls", "log_messages", "message_items", "new_messages",
           "source_of"]

OpenCalls = dict[str, tuple[str, str]]
"""Tool calls logged and not answered yet: call id -> (name, arguments)."""

DEFAULT_PROVIDER: Final = "langgraph"
DEFAULT_MODEL: Final = "unknown"
"""The source of assistant messages whose ``response_metadata`` names no provider or model."""


def new_messages(items: Iterable[Any], logged: set[str]) -> list[BaseMessage]:
    """The LangChain messages among ``items`` whose id is not in ``logged`` yet."""
    return [item for item in items
            if isinstance(item, BaseMessage) and (item.id is None or item.id not in logged)]


def _parts(content: Any, text_type: str) -> Any:
    """LangChain content (a string or blocks) as Responses content parts."""
    if isinstance(content, str):
        return content
    parts: list[Any] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append({"type": text_type, "text": block})
        elif isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"),
                                                                                          str):
            parts.append({"type": text_type, "text": block["text"]})
        elif isinstance(block, Mapping):
            parts.append(dict(block))
        else:
            parts.append({"type": text_type, "text": str(block)})
    return parts


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in _parts(content, "output_text")
                     if isinstance(part, Mapping) and isinstance(part.get("text"), str))


def message_items(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Responses API items for LangChain messages: inputs, outputs with function calls, tool outputs."""
    items: list[dict[str, Any]] = []
    for message in messages:
        kind = message.type
        if kind == "ai":
            parts = _parts(message.content, "output_text")
            if parts if isinstance(parts, list) else parts != "":
                content = [{"type": "output_text", "text": parts}] if isinstance(parts, str) else parts
                items.append({"type": "message", "role": "assistant", "content": content})
            items.extend({"type": "function_call", "call_id": call.get("id") or f"call_{uuid.uuid4().hex}",
                          "name": call["name"], "arguments": json.dumps(call.get("args", {}))}
                         for call in getattr(message, "tool_calls", None) or ())
        elif kind == "tool":
            items.append({"type": "function_call_output", "call_id": getattr(message, "tool_call_id", ""),
                          "output": _text(message.content)})
        else:
            role = "system" if kind == "system" else "user"
            items.append({"type": "message", "role": role, "content": _parts(message.content, "input_text")})
    return items


def source_of(messages: Sequence[BaseMessage]) -> tuple[str, str]:
    """The provider and model the first assistant message's ``response_metadata`` names."""
    for message in messages:
        if message.type == "ai":
            metadata = message.response_metadata or {}
            provider = metadata.get("model_provider") or DEFAULT_PROVIDER
            model = metadata.get("model_name") or metadata.get("model") or DEFAULT_MODEL
            return str(provider), str(model)
    return DEFAULT_PROVIDER, DEFAULT_MODEL


def log_messages(session: Session, messages: Sequence[BaseMessage],
                 open_calls: OpenCalls | None) -> OpenCalls:
    """Append ``messages`` as closed turns; return the calls still unanswered after them.

    ``open_calls`` None: read them from the surface. A refused batch leaves no turn open (the
    turn it opened is closed as interrupted) and raises.
    """
    calls = unanswered_calls(session.derive_messages()) if open_calls is None else dict(open_calls)
    items = message_items(messages)
    if not items:
        return calls
    provider, model = source_of(messages)
    events = responses_events(items, seq=session.seq, turn=next_turn(session), provider=provider, model=model,
                              open_calls=calls)
    try:
        append_events(session, events)
    except AgentlogError:
        for closer in interrupted_turn_closers(session.events):
            session.append(closer.type, closer.data, surface_op=closer.surface_op,
                           source_event_seqs=closer.source_event_seqs)
        raise
    for item in items:
        if item["type"] == "function_call":
            calls[item["call_id"]] = (item["name"], item["arguments"])
        elif item["type"] == "function_call_output":
            calls.pop(item["call_id"], None)
    return calls
