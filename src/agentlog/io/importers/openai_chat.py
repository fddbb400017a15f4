"""Chat Completions message lists (``system``/``user``/``assistant`` with ``tool_calls``/``tool``).

Three shapes: a list of messages; a request body ``{"model", "messages", "tools"}``; and a list of
tau-bench results ``[{"task_id", "traj": [messages], "reward", ...}]``, one session each. A user
message opens a turn, an assistant message is a step (its ``tool_calls`` logged as ``tool/call``s),
``tool`` messages are its results, ``system`` goes into the request header. Exporting the result
with ``agentlog.integrations.openai_messages.to_chat_messages`` gives the messages back.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import freeze
from agentlog.io.importers.builder import Imported, LogBuilder, text_blocks
from agentlog.io.importers.source import SourceFile, json_document

__all__ = ["content_id", "import_openai_chat", "message_content", "parse_tools", "tool_call_blocks"]

EXPECTED: Final = ('Chat Completions messages: a JSON list of {"role", "content"} objects, a request body '
                   '{"model", "messages"}, or tau-bench results [{"task_id", "traj": [messages]}]')
PROVIDER: Final = "openai"
_EXPORTED: Final = {"system": {"role", "content"}, "user": {"role", "content"},
                    "assistant": {"role", "content", "tool_calls", "reasoning_content"},
                    "tool": {"role", "content", "tool_call_id", "name"}}
"""The keys of each role that the log keeps (a ``tool`` message's ``name`` is its call's name)."""
_RESULT_KEYS: Final = ("task_id", "trial", "reward")


def content_id(prefix: str, data: bytes) -> str:
    """A deterministic session id: the same file gives the same id, so a second import is a no-op."""
    return f"{prefix}-{hashlib.sha256(data).hexdigest()[:16]}"


def message_content(value: Any, builder: LogBuilder, where: str) -> list[Any]:
    """A message's ``content`` (a string or a list of parts) as text blocks."""
    if value is None:
        return []
    if isinstance(value, str):
        return text_blocks(value)
    blocks: list[Any] = []
    for part in value if isinstance(value, list) else [value]:
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        else:
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            builder.note(f"{where} {kind} part (kept as a placeholder)")
            blocks.append({"type": "text", "text": f"[{kind} part not imported]"})
    return blocks


def tool_call_blocks(message: dict[str, Any], builder: LogBuilder) -> list[Any]:
    """The ``tool_calls`` of an assistant message as ``tool-call`` blocks."""
    blocks = []
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        builder.note("malformed tool calls")
        calls = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str):
            builder.note("malformed tool call")
            continue
        arguments = function.get("arguments")
        blocks.append({"type": "tool-call", "id": call["id"], "name": str(function.get("name", "")),
                       "arguments": arguments if isinstance(arguments, str) else ""})
    return blocks


def parse_tools(tools: Any) -> list[dict[str, Any]] | None:
    """Chat Completions ``tools`` as agentlog tool schemas ``{name, description, parameters}``."""
    schemas = []
    for tool in tools if isinstance(tools, list) else ():
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            schemas.append({"name": function["name"], "description": str(function.get("description", "")),
                            "parameters": function.get("parameters", {"type": "object", "properties": {}})})
    return schemas or None


def _message(builder: LogBuilder, message: Any, index: int, model: str) -> None:
    if not isinstance(message, dict) or message.get("role") not in _EXPORTED:
        role = message.get("role") if isinstance(message, dict) else type(message).__name__
        builder.note(f"message with role {role!r}")
        return
    role = message["role"]
    for key in sorted(set(message) - _EXPORTED[role]):
        if message[key] is not None:
            builder.note(f"{role} message key {key!r}")
    message_id = f"m{index}"
    if role == "system":
        text = message.get("content")
        builder.system(text if isinstance(text, str) else "\n".join(
            block["text"] for block in message_content(text, builder, "system")))
    elif role == "user":
        builder.user(message_content(message.get("content"), builder, "user"), id=message_id)
    elif role == "assistant":
        content = message_content(message.get("content"), builder, "assistant")
        if isinstance(message.get("reasoning_content"), str) and message["reasoning_content"]:
            content.insert(0, {"type": "reasoning", "text": message["reasoning_content"]})
        builder.reply([*content, *tool_call_blocks(message, builder)], id=message_id, provider=PROVIDER,
                      model=model)
    else:
        call_id = message.get("tool_call_id")
        builder.tool_result(call_id if isinstance(call_id, str) else "", message_content(
            message.get("content"), builder, "tool"), id=message_id)


def conversation(messages: list[Any], header: SessionHeader, *, model: str = "unknown",
                 tools: Any = None) -> Imported:
    """One session from a list of Chat Completions messages (pure)."""
    builder = LogBuilder(header.created_at)
    builder.tools(parse_tools(tools))
    for index, message in enumerate(messages):
        _message(builder, message, index, model)
    return builder.finish(header)


def _header(session_id: str, source: SourceFile, **origin: Any) -> SessionHeader:
    imported = {"format": "openai-chat", "file": source.name, **origin}
    return SessionHeader(id=session_id, created_at=0, extra=freeze({"importedFrom": imported}))


def import_openai_chat(source: SourceFile) -> list[Imported]:
    """The conversations of one file (a message list, a request body, or tau-bench results)."""
    document = json_document(source, EXPECTED)
    base = content_id("openai-chat", source.data)
    if isinstance(document, dict) and isinstance(document.get("messages"), list):
        model = document.get("model") if isinstance(document.get("model"), str) else "unknown"
        return [conversation(document["messages"], _header(base, source), model=model or "unknown",
                             tools=document.get("tools"))]
    if not isinstance(document, list) or not document or not all(isinstance(item, dict) for item in document):
        raise source.error(f"a JSON {type(document).__name__} of another shape; expected {EXPECTED}")
    if all(isinstance(item.get("traj"), list) for item in document):
        sessions = []
        for index, result in enumerate(document):
            origin = {key: result[key] for key in _RESULT_KEYS if key in result}
            imported = conversation(result["traj"], _header(f"{base}-{index}", source, index=index, **origin))
            extra = set(result) - {"traj", *_RESULT_KEYS}
            unmapped = {**imported.unmapped, **{f"result key {key!r}": 1 for key in sorted(extra)}}
            sessions.append(Imported(imported.header, imported.events, unmapped))
        return sessions
    if not all(isinstance(item.get("role"), str) for item in document):
        raise source.error(f"a list whose items are not all messages with a role; expected {EXPECTED}")
    return [conversation(document, _header(base, source))]
