"""The readable text of message content blocks, for people: display, search, snippets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentlog.core.jsonvalue import dumps

__all__ = ["compact", "text_of"]


def compact(value: Any) -> str:
    """A string as is, any other JSON value as compact JSON (iterative encoder past orjson's depth)."""
    return value if isinstance(value, str) else dumps(value).decode()


def text_of(blocks: Any) -> str:
    """The readable text of content blocks, nested tool results included (iterative: any depth)."""
    parts: list[str] = []
    pending: list[Iterator[Any]] = [iter(blocks or ())]
    while pending:
        block: Any = next(pending[-1], _DONE)
        if block is _DONE:
            pending.pop()
            continue
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("text", "reasoning"):
            parts.append(str(block.get("text", "")))
        elif kind == "tool-call":
            parts.append(f"→ {block.get('name')}({compact(block.get('arguments'))})")
        elif kind == "tool-result":
            parts.append(f"← result{' (error)' if block.get('isError') else ''}:")
            content = block.get("content")
            pending.append(iter(content if isinstance(content, list | tuple) else ()))
    return " ".join(part for part in parts if part)


_DONE = object()
