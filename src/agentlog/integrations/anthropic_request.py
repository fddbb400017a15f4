"""The next Anthropic Messages request from a session: ``system``, ``messages`` and ``tools``.

Pure functions of the log (no SDK import). Thinking blocks go back with the signatures the
stream carried (``replayState.anthropic`` of the assistant message), redacted thinking as it
came; tool results become ``tool_result`` blocks at the start of the next user turn, and every
``tool_use`` is answered (a synthetic "never ran" result where the log has none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from agentlog.core.jsonvalue import thaw
from agentlog.core.repair import NOT_STARTED_TEXT
from agentlog.core.session import Session
from agentlog.integrations.openai_messages import _text_of

__all__ = [
    "anthropic_messages", "anthropic_request", "anthropic_system", "anthropic_tools", "to_anthropic_messages",
]


def _input(arguments: Any) -> Any:
    """A tool call's ``arguments`` string as the ``input`` object (``{}`` when empty or not JSON)."""
    if isinstance(arguments, Mapping):
        return thaw(arguments)
    try:
        value = orjson.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _assistant_blocks(message: Any) -> list[dict[str, Any]]:
    """Content blocks of an assistant message; thinking only where a signature makes it replayable."""
    source = message.get("source") or {}
    replay = (source.get("replayState") or {}).get("anthropic") if isinstance(source, Mapping) else None
    signatures = list((replay or {}).get("signatures") or ())
    redacted = {entry["at"]: entry["data"] for entry in (replay or {}).get("redacted") or ()}
    out: list[dict[str, Any]] = []
    thought = 0
    for position, block in enumerate(message.get("content") or ()):
        if position in redacted:
            out.append({"type": "redacted_thinking", "data": redacted[position]})
        kind = block.get("type")
        if kind == "reasoning":
            signature = signatures[thought] if thought < len(signatures) else None
            thought += 1
            if signature:
                out.append({"type": "thinking", "thinking": block.get("text", ""), "signature": signature})
        elif kind == "tool-call":
            out.append({"type": "tool_use", "id": block["id"], "name": block.get("name", ""),
                        "input": _input(block.get("arguments"))})
        else:
            text = _text_of([block])
            if text.strip():  # the API refuses text blocks of whitespace only
                out.append({"type": "text", "text": text})
    tail = len(message.get("content") or ())
    out += [{"type": "redacted_thinking", "data": data}
            for at, data in sorted(redacted.items()) if at >= tail]
    return out


def _user_blocks(message: Any, pending: dict[str, None]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(tool_result blocks, other blocks) of a user message; results not pending become text."""
    results: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    for block in message.get("content") or ():
        if block.get("type") == "tool-result":
            call_id = str(block.get("toolCallId", ""))
            text = _text_of(block.get("content"))
            if call_id in pending:
                del pending[call_id]
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
                if block.get("isError"):
                    result["is_error"] = True
                results.append(result)
            else:  # its tool_use left the surface: the API refuses an orphan tool_result
                other.append({"type": "text", "text": f"[result of tool call {call_id}]\n{text}"})
        else:
            text = _text_of([block])
            if text.strip():  # the API refuses text blocks of whitespace only
                other.append({"type": "text", "text": text})
    return results, other


def to_anthropic_messages(session: Session) -> list[dict[str, Any]]:
    """The next request's ``messages`` from ``derive_messages()`` (consecutive user turns merged)."""
    return anthropic_messages(session.derive_messages())


def anthropic_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Messages API ``messages`` from agentlog messages (any list: a surface or a transcript).

    Roles alternate as the API requires: consecutive user messages, and consecutive assistant
    messages with no tool call between them, each become one turn.
    """
    out: list[dict[str, Any]] = []
    pending: dict[str, None] = {}  # tool_use ids of the last assistant turn not answered yet

    def user_turn() -> list[dict[str, Any]]:
        if not out or out[-1]["role"] != "user":
            out.append({"role": "user", "content": []})
        content: list[dict[str, Any]] = out[-1]["content"]
        return content

    def answer_pending() -> None:
        if pending:
            content = user_turn()
            content[:0] = [{"type": "tool_result", "tool_use_id": call_id, "content": NOT_STARTED_TEXT,
                            "is_error": True} for call_id in pending]
            pending.clear()

    for message in messages:
        if message.get("role") == "assistant":
            answer_pending()
            blocks = _assistant_blocks(message)
            if blocks and out and out[-1]["role"] == "assistant":  # roles alternate: one turn
                out[-1]["content"] += blocks
            elif blocks:
                out.append({"role": "assistant", "content": blocks})
            if blocks:
                pending.update(dict.fromkeys(b["id"] for b in blocks if b["type"] == "tool_use"))
            continue
        results, other = _user_blocks(message, pending)
        if not results and not other:
            continue
        content = user_turn()
        first_text = next((i for i, b in enumerate(content) if b["type"] != "tool_result"), len(content))
        content[first_text:first_text] = results  # tool results lead the user turn
        content += other
        if other:
            answer_pending()
    answer_pending()
    return out


def anthropic_system(session: Session) -> str | None:
    """The latest request header's system prompt (the Messages API takes it apart from messages)."""
    header = session.request_header()
    system = header.get("system") if header is not None else None
    return _text_of(system) if system else None


def anthropic_tools(session: Session) -> list[dict[str, Any]]:
    """The header's tools as Messages API tools ``{name, description, input_schema}``."""
    header = session.request_header()
    tools = header.get("tools") if header is not None else None
    return [{"name": tool["name"], "description": tool.get("description", ""),
             "input_schema": thaw(tool.get("parameters") or {"type": "object", "properties": {}})}
            for tool in tools or ()]


def anthropic_request(session: Session, messages: Sequence[Any] | None = None) -> dict[str, Any]:
    """``messages`` plus ``system`` and ``tools`` when the header has them: ``create(**this, ...)``.

    ``messages`` defaults to ``derive_messages()`` (the next request); an export passes others.
    """
    body: dict[str, Any] = {"messages": anthropic_messages(
        session.derive_messages() if messages is None else messages)}
    system = anthropic_system(session)
    if system:
        body["system"] = system
    tools = anthropic_tools(session)
    if tools:
        body["tools"] = tools
    return body
