"""``openai-chat``: a Chat Completions request body, ``client.chat.completions.create(model=..., **body)``.

``messages`` (the header's system prompt, ``tool_calls``, ``tool`` messages with every call
answered, DeepSeek's ``reasoning_content`` rule) and ``tools`` from the latest request header,
as the adapter builds them. Default view: ``surface`` (the next request).
"""

from __future__ import annotations

from typing import Any

from agentlog.core.jsonvalue import dumps_indented
from agentlog.integrations.openai_messages import chat_messages, chat_tools
from agentlog.io.exporters.source import ExportSource

__all__ = ["openai_chat"]


def openai_chat(source: ExportSource) -> bytes:
    """``{"messages": [...], "tools": [...]}`` (``tools`` only when the header has some) as indented JSON."""
    header = source.request_header()
    system = header.get("system") if header is not None else None
    body: dict[str, Any] = {"messages": chat_messages(source.messages("surface"), system=system)}
    tools = chat_tools(source.session())
    if tools:
        body["tools"] = tools
    return dumps_indented(source.finish(body))
