"""Reading agentlog messages as a compaction sees them: texts, tool calls and results, requests.

Shared by the fact extraction (``fidelity.py``), the fidelity scores and the summarizers; pure
functions over message dicts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "CHECKPOINT_CLOSE",
    "CHECKPOINT_OPEN",
    "NOTICE_PREFIXES",
    "ToolCall",
    "command_text",
    "find_checkpoint_summary",
    "is_checkpoint",
    "is_tool_result",
    "is_user_request",
    "message_texts",
    "normalize",
    "slash_command",
    "tool_calls",
    "tool_result_call_id",
    "tool_result_is_error",
]

CHECKPOINT_OPEN = "<compacted-summary>"
CHECKPOINT_CLOSE = "</compacted-summary>"

NOTICE_PREFIXES: tuple[str, ...] = (
    "<task-notification>", "<agent-notification>", "<command-", "<local-command", "<system-reminder>",
    "[Request interrupted", "Caveat:", "<environment_context>", "<permissions instructions>",
    "<collaboration_mode>", "<skills_instructions>", "<plugins_instructions>")
"""How texts a harness (not the user) put in a user message begin."""
_COMMAND_NAME = re.compile(r"<command-name>\s*(/?[^<\s]+)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
_SESSION_COMMANDS = frozenset({"/clear", "/compact", "/help", "/cost", "/status", "/model", "/config",
                               "/login", "/logout", "/exit", "/resume", "/context", "/usage"})
_COMMAND_KEYS = ("command", "cmd", "script")
_WS = re.compile(r"\s+")
_MARKUP = re.compile("[`*\"'\u201c\u201d\u2018\u2019]|(?<!\\w)_|_(?!\\w)")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an assistant message, with its parsed arguments (``{}`` when not JSON)."""

    id: str
    name: str
    arguments: str
    args: dict[str, Any]


def _blocks(message: Any) -> Sequence[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return ({"type": "text", "text": content},)
    return content if isinstance(content, (list, tuple)) else ()


def message_texts(message: Any) -> list[str]:
    """The text of a message's text blocks, including text nested in a tool-result block."""
    texts: list[str] = []
    for block in _blocks(message):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool-result":
            inner = block.get("content")
            if isinstance(inner, str):
                texts.append(inner)
            elif isinstance(inner, (list, tuple)):
                texts.extend(
                    b["text"] for b in inner
                    if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
                )
    return texts


def _source_kind(message: Any) -> str | None:
    source = message.get("source") if isinstance(message, dict) else None
    kind = source.get("kind") if isinstance(source, dict) else None
    return kind if isinstance(kind, str) else None


def is_tool_result(message: Any) -> bool:
    return _source_kind(message) == "tool" or any(
        isinstance(b, dict) and b.get("type") == "tool-result" for b in _blocks(message)
    )


def is_checkpoint(message: Any) -> bool:
    source = message.get("source") if isinstance(message, dict) else None
    if isinstance(source, dict) and source.get("kind") == "plugin" and source.get("plugin") == "compact":
        return True
    return any(CHECKPOINT_OPEN in text for text in message_texts(message))


def is_user_request(message: Any) -> bool:
    """A message the user typed: role user, not a tool result, notice, plugin text or checkpoint."""
    if not isinstance(message, dict) or message.get("role") != "user" or is_tool_result(message):
        return False
    kind = _source_kind(message)
    if kind not in (None, "user") or is_checkpoint(message):
        return False
    text = "\n".join(message_texts(message)).lstrip()
    return bool(text) and not text.startswith(NOTICE_PREFIXES)


def tool_calls(message: Any) -> list[ToolCall]:
    """The tool calls of an assistant message, arguments parsed when they are a JSON object."""
    calls: list[ToolCall] = []
    for block in _blocks(message):
        if not isinstance(block, dict) or block.get("type") != "tool-call":
            continue
        raw = block.get("arguments")
        if isinstance(raw, str):
            arguments = raw
            try:
                parsed = orjson.loads(raw) if raw else {}
            except orjson.JSONDecodeError:
                parsed = {}
        else:
            parsed = raw if raw is not None else {}
            arguments = orjson.dumps(parsed).decode() if raw is not None else ""
        calls.append(ToolCall(
            id=str(block.get("id", "")),
            name=str(block.get("name", "")),
            arguments=arguments,
            args=dict(parsed) if isinstance(parsed, dict) else {},
        ))
    return calls


def tool_result_call_id(message: Any) -> str | None:
    source = message.get("source") if isinstance(message, dict) else None
    if isinstance(source, dict) and isinstance(source.get("callId"), str):
        return str(source["callId"])
    for block in _blocks(message):
        if isinstance(block, dict) and block.get("type") == "tool-result":
            call_id = block.get("toolCallId")
            return call_id if isinstance(call_id, str) else None
    return None


def tool_result_is_error(message: Any) -> bool:
    return any(
        isinstance(b, dict) and b.get("type") == "tool-result" and b.get("isError") is True
        for b in _blocks(message)
    )


def find_checkpoint_summary(messages: Iterable[Any]) -> str | None:
    """The text inside the last ``<compacted-summary>`` block of the messages (a prior checkpoint)."""
    found: str | None = None
    for message in messages:
        if not isinstance(message, dict) or not is_checkpoint(message):
            continue
        text = "\n".join(message_texts(message))
        start = text.find(CHECKPOINT_OPEN)
        if start < 0:
            continue
        end = text.find(CHECKPOINT_CLOSE, start)
        found = text[start + len(CHECKPOINT_OPEN): end if end >= 0 else len(text)].strip()
    return found


def command_text(args: dict[str, Any]) -> str | None:
    for key in _COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
            parts = list(value)
            if len(parts) >= 3 and parts[0] in ("bash", "sh", "zsh") and parts[1] in ("-lc", "-c"):
                return " ".join(parts[2:])
            return " ".join(parts)
    return None


def normalize(text: str) -> str:
    """Case-folded text with markdown emphasis and quotes removed and whitespace collapsed."""
    return _WS.sub(" ", _MARKUP.sub("", text.casefold())).strip().rstrip(".;:,")


def slash_command(message: Any) -> str | None:
    """The command the user ran (``/erk:plan-implement 8107``) when a message records one; None
    for other messages and for commands that only manage the session (``/clear``, ``/model``)."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return None
    text = "\n".join(message_texts(message))
    name = _COMMAND_NAME.search(text)
    if name is None:
        return None
    command = name.group(1) if name.group(1).startswith("/") else "/" + name.group(1)
    if command in _SESSION_COMMANDS:
        return None
    args = _COMMAND_ARGS.search(text)
    return f"{command} {args.group(1).strip()}".strip() if args else command
