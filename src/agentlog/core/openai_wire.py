"""The OpenAI chat-completions wire format, shared by the summarizer's HTTP client and the adapters.

Message and tool conversion, SSE chunk assembly, usage mapping and HTTP error mapping; pure
functions and one lazy ``httpx`` import (the ``llm`` extra).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from agentlog.core.jsonvalue import dumps, thaw
from agentlog.errors import SummarizerError

__all__ = [
    "CONTEXT_HINT",
    "STATUS_CODES",
    "CompletionStream",
    "http_error",
    "provider_from_url",
    "retry_after_ms",
    "to_openai_messages",
    "to_openai_tools",
    "tool_arguments",
    "usage_from_openai",
]


def _refuse_image(session_id: str | None, where: str) -> SummarizerError:
    return SummarizerError(
        f"cannot summarize image content ({where}) through a text-only chat-completions request",
        code="UNSUPPORTED_CONTENT", session_id=session_id,
    )


def _tool_result_content(block: Any, session_id: str | None) -> str:
    inner = block.get("content")
    if isinstance(inner, str):
        return inner
    parts: list[str] = []
    for part in inner if isinstance(inner, (list, tuple)) else ():
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "image":
            raise _refuse_image(session_id, "in a tool result")
        if kind == "text":
            parts.append(str(part.get("text", "")))
        else:
            parts.append(dumps(part).decode())
    return "\n".join(parts)


def tool_arguments(block: Any) -> str:
    raw = block.get("arguments")
    return raw if isinstance(raw, str) else dumps(raw if raw is not None else {}).decode()


def _convert(message: Any, session_id: str | None) -> list[dict[str, Any]]:
    role = message.get("role") if isinstance(message, dict) else None
    blocks = message.get("content") if isinstance(message, dict) else None
    if isinstance(blocks, str):
        blocks = ({"type": "text", "text": blocks},)
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for block in blocks if isinstance(blocks, (list, tuple)) else ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "image":
            raise _refuse_image(session_id, f"in a {role} message")
        elif kind == "reasoning":
            continue  # providers reject or ignore replayed reasoning; the text carries the facts
        elif kind == "tool-call":
            function = {"name": str(block.get("name", "")), "arguments": tool_arguments(block)}
            calls.append({"id": str(block.get("id", "")), "type": "function", "function": function})
        elif kind == "tool-result":
            results.append({"role": "tool", "tool_call_id": str(block.get("toolCallId", "")),
                            "content": _tool_result_content(block, session_id)})
        elif block is not None:
            texts.append(dumps(block).decode())
    if results:
        return results
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
        if calls:
            out["tool_calls"] = calls
        return [out] if texts or calls else []
    return [{"role": role if role in ("system", "user") else "user", "content": "\n".join(texts)}]


def to_openai_messages(messages: Sequence[Any], *, session_id: str | None = None) -> list[dict[str, Any]]:
    """agentlog messages as chat-completions messages (text, tool calls, tool results).

    Text blocks of one message are joined with newlines, each tool result becomes a ``tool``
    message, reasoning is left out; an image anywhere raises UNSUPPORTED_CONTENT.
    """
    converted: list[dict[str, Any]] = []
    for message in messages:
        converted.extend(_convert(message, session_id))
    return converted


def to_openai_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """agentlog tool schemas ``{name, description, parameters}`` as ``{"type": "function", ...}``."""
    converted: list[dict[str, Any]] = []
    for tool in tools:
        plain = thaw(tool)
        if isinstance(plain, dict) and plain.get("type") == "function" and "function" in plain:
            converted.append(plain)
            continue
        function: dict[str, Any] = {"name": plain.get("name", "")}
        if plain.get("description") is not None:
            function["description"] = plain["description"]
        function["parameters"] = plain.get("parameters", {"type": "object", "properties": {}})
        converted.append({"type": "function", "function": function})
    return converted


def provider_from_url(base_url: str) -> str:
    host = (urlsplit(base_url).hostname or "").lower()
    for name in ("deepseek", "openai", "anthropic", "mistral", "groq", "together", "openrouter"):
        if name in host:
            return name
    if urlsplit(base_url).port == 11434:
        return "ollama"
    return "openai-compatible"


def retry_after_ms(headers: Any) -> int | None:
    value = headers.get("retry-after-ms") or headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value) / (1000 if headers.get("retry-after-ms") else 1)
    except ValueError:
        return None
    return max(0, math.ceil(seconds * 1000))


STATUS_CODES = {400: "BAD_REQUEST", 401: "AUTHENTICATION", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 408: "TIMEOUT", 413: "CONTEXT_WINDOW_EXCEEDED", 422: "BAD_REQUEST", 429: "RATE_LIMITED"}
CONTEXT_HINT = re.compile(r"context.{0,20}(length|window)|maximum context|too many tokens|too long",
                           re.IGNORECASE)


def http_error(status: int, body: bytes, headers: Any, session_id: str | None) -> SummarizerError:
    message = body.decode("utf-8", "replace").strip()[:500]
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            message = error["message"]
        elif isinstance(error, str):
            message = error
    code = STATUS_CODES.get(status, "SERVER_ERROR" if status >= 500 else "HTTP_ERROR")
    if status == 400 and CONTEXT_HINT.search(message):
        code = "CONTEXT_WINDOW_EXCEEDED"
    return SummarizerError(
        f"summarization request failed with HTTP {status}: {message or '(no body)'}",
        code=code, status=status, retry_after_ms=retry_after_ms(headers),
        retryable=status in (408, 409, 429) or status >= 500, session_id=session_id,
    )


@dataclass(slots=True)
class CompletionStream:
    """What the SSE chunks of one completion add up to."""

    text: str = ""
    reasoning: str = ""
    calls: dict[int, dict[str, str]] | None = None
    finish: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None

    def feed(self, chunk: dict[str, Any]) -> None:
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if isinstance(delta.get("content"), str):
                self.text += delta["content"]
            reasoning = delta.get("reasoning_content", delta.get("reasoning"))
            if isinstance(reasoning, str):
                self.reasoning += reasoning
            for call in delta.get("tool_calls") or ():
                self._call(call)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])

    def _call(self, call: Any) -> None:
        if not isinstance(call, dict):
            return
        calls = self.calls if self.calls is not None else {}
        self.calls = calls
        slot = calls.setdefault(int(call.get("index", len(calls))), {"id": "", "name": "", "arguments": ""})
        function = call.get("function") or {}
        if call.get("id"):
            slot["id"] = str(call["id"])
        if function.get("name"):
            slot["name"] = str(function["name"])
        if isinstance(function.get("arguments"), str):
            slot["arguments"] += function["arguments"]

    def blocks(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.reasoning:
            out.append({"type": "reasoning", "text": self.reasoning})
        if self.text:
            out.append({"type": "text", "text": self.text})
        for _index, call in sorted((self.calls or {}).items()):
            out.append({"type": "tool-call", **call})
        return out


def usage_from_openai(raw: dict[str, Any] | None) -> dict[str, int] | None:
    """OpenAI/DeepSeek usage as agentlog TokenUsage (disjoint input and cache-read counts)."""
    if raw is None:
        return None
    prompt = raw.get("prompt_tokens")
    completion = raw.get("completion_tokens")
    details, completion_details = raw.get("prompt_tokens_details"), raw.get("completion_tokens_details")
    listed = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = raw.get("prompt_cache_hit_tokens", listed)
    reasoning = completion_details.get("reasoning_tokens") if isinstance(completion_details, dict) else None
    usage: dict[str, int] = {}
    if isinstance(prompt, int):
        usage["inputTokens"] = prompt - cached if isinstance(cached, int) else prompt
    if isinstance(completion, int):
        usage["outputTokens"] = completion
    if isinstance(cached, int):
        usage["cacheReadTokens"] = cached
    if isinstance(reasoning, int):
        usage["reasoningTokens"] = reasoning
    return usage or None
