"""The next Chat Completions request from a session: ``messages``, ``tools`` and the header.

Pure functions of the log (no SDK import): the system prompt comes from the latest request
header, tool calls become ``tool_calls``, tool results ``tool`` messages, and every tool
call is answered (a synthetic "never ran" result where the log has none), as the API requires.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from agentlog.core.jsonvalue import dumps, thaw
from agentlog.core.openai_wire import to_openai_tools, tool_arguments
from agentlog.core.repair import NOT_STARTED_TEXT
from agentlog.core.session import Session

__all__ = ["ReasoningReplay", "chat_header", "chat_messages", "chat_tools", "to_chat_messages"]

ReasoningReplay = Literal["deepseek", "all", "none"]
"""Which assistant messages carry ``reasoning_content`` back to the provider."""


def _text_of(blocks: Any) -> str:
    """Text blocks joined with newlines; images and unknown blocks as short placeholders."""
    if isinstance(blocks, str):
        return blocks
    parts: list[str] = []
    for block in blocks if isinstance(blocks, (list, tuple)) else ():
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "image":
            attachment = block.get("attachment") or {}
            parts.append(f"[image {attachment.get('name') or attachment.get('attachmentId', '')} "
                         f"({attachment.get('mediaType', 'unknown type')}) not replayed]")
        elif kind not in ("reasoning", "tool-call", "tool-result"):
            parts.append(dumps(block).decode())
    return "\n".join(parts)


def _is_human_turn(message: Any) -> bool:
    """A user message that is not a tool result: DeepSeek's reasoning segments end here."""
    source = message.get("source")
    is_tool = isinstance(source, Mapping) and source.get("kind") == "tool"
    return message.get("role") == "user" and not is_tool


def _segments_with_tools(messages: Sequence[Any]) -> set[int]:
    """Indexes of assistant messages whose user-to-user segment made tool calls."""
    keep: set[int] = set()
    segment: list[int] = []
    called = False
    for index, message in enumerate([*messages, None]):
        if message is None or _is_human_turn(message):
            if called:
                keep.update(segment)
            segment, called = [], False
        elif message.get("role") == "assistant":
            segment.append(index)
            called = called or any(isinstance(b, Mapping) and b.get("type") == "tool-call"
                                   for b in message.get("content") or ())
    return keep


class _Builder:
    """Chat messages in order, answering every tool call before the next non-tool message."""

    __slots__ = ("out", "pending")

    def __init__(self) -> None:
        self.out: list[dict[str, Any]] = []
        self.pending: dict[str, None] = {}  # unanswered call ids of the last assistant message

    def answer_pending(self) -> None:
        for call_id in self.pending:
            self.out.append({"role": "tool", "tool_call_id": call_id, "content": NOT_STARTED_TEXT})
        self.pending = {}

    def assistant(self, message: Any, reasoning: bool) -> None:
        self.answer_pending()
        blocks = message.get("content") or ()
        calls = [{"id": block["id"], "type": "function",
                  "function": {"name": block.get("name", ""), "arguments": tool_arguments(block)}}
                 for block in blocks if isinstance(block, Mapping) and block.get("type") == "tool-call"]
        text = _text_of(blocks)
        thought = "".join(str(block.get("text", "")) for block in blocks
                          if isinstance(block, Mapping) and block.get("type") == "reasoning")
        if not (text or calls or (reasoning and thought)):
            return
        out: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
        if reasoning and thought:
            out["reasoning_content"] = thought
        if calls:
            out["tool_calls"] = calls
            self.pending = dict.fromkeys(call["id"] for call in calls)
        self.out.append(out)

    def tool_result(self, block: Any) -> None:
        call_id = str(block.get("toolCallId", ""))
        content = _text_of(block.get("content"))
        if call_id in self.pending:
            del self.pending[call_id]
            self.out.append({"role": "tool", "tool_call_id": call_id, "content": content})
        else:  # its tool call is gone from the surface: the API refuses an orphan tool message
            self.answer_pending()
            self.out.append({"role": "user", "content": f"[result of tool call {call_id}]\n{content}"})

    def plain(self, role: str, content: Any) -> None:
        self.answer_pending()
        self.out.append({"role": role, "content": _text_of(content)})


def to_chat_messages(session: Session, *, reasoning: ReasoningReplay = "deepseek") -> list[dict[str, Any]]:
    """The next request's ``messages``: the header's system prompt, then ``derive_messages()``.

    ``reasoning`` picks which assistant messages carry ``reasoning_content``: ``"deepseek"``
    (thinking mode: those between two user messages that made tool calls, which the API
    requires back; others are dropped), ``"all"`` or ``"none"``.
    """
    header = session.request_header()
    system = header.get("system") if header is not None else None
    return chat_messages(session.derive_messages(), system=system, reasoning=reasoning)


def chat_messages(messages: Sequence[Any], *, system: Any = None,
                  reasoning: ReasoningReplay = "deepseek") -> list[dict[str, Any]]:
    """Chat Completions ``messages`` from agentlog messages (any list: a surface or a transcript)."""
    builder = _Builder()
    if system:
        builder.plain("system", system)
    keep = _segments_with_tools(messages) if reasoning == "deepseek" else set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            builder.assistant(message, reasoning == "all" or index in keep)
            continue
        blocks = message.get("content") or ()
        results = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool-result"]
        for block in results:
            builder.tool_result(block)
        if len(results) < len(blocks) or not blocks:
            builder.plain("system" if role == "system" else "user",
                          [b for b in blocks if b not in results])
    builder.answer_pending()
    return builder.out


def chat_tools(session: Session) -> list[dict[str, Any]]:
    """The latest request header's tools as Chat Completions ``tools`` (``[]`` when none)."""
    header = session.request_header()
    tools = header.get("tools") if header is not None else None
    return to_openai_tools(tools) if tools else []


def chat_header(model: str, *, provider: str = "openai", system: str | None = None,
                tools: Sequence[Mapping[str, Any]] | None = None, **config: Any) -> dict[str, Any]:
    """A request header for ``step.request_header``: ``tools`` in Chat Completions or agentlog form.

    ``config`` adds ``reasoningEffort``, ``temperature``, ``maxTokens`` or ``stop``.
    """
    header: dict[str, Any] = {"config": {"provider": provider, "model": model, **config}}
    if system:
        header["system"] = system
    if tools:
        converted = []
        for tool in tools:
            plain = thaw(tool)
            function = plain.get("function", plain) if plain.get("type") == "function" else plain
            entry = {"name": function["name"], "description": function.get("description", ""),
                     "parameters": function.get("parameters", {"type": "object", "properties": {}})}
            converted.append(entry)
        header["tools"] = converted
    return header
