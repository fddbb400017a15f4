"""How the command line shows session content: terminal-safe text, summaries of events, JSON."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.markup import escape

from agentlog.errors import AgentlogError
from agentlog.jsonvalue import dumps, dumps_indented
from agentlog.visible import visible as visible  # re-exported: the CLI modules print through it

console = Console(highlight=False, markup=False, soft_wrap=True)  # never break ids and paths
errors = Console(stderr=True, highlight=False, markup=False)


def safe(text: str) -> str:
    """``visible`` text, escaped for rich markup."""
    return escape(visible(text))


def iso(ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


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
            pending.append(iter(content if isinstance(content, list) else ()))
    return " ".join(part for part in parts if part)


_DONE = object()


def indented(value: Any) -> str:
    """Indented JSON; past orjson's depth limit, compact JSON from the iterative encoder."""
    return dumps_indented(value).decode()


def compact(value: Any) -> str:
    """A string as is, any other JSON value as compact JSON (iterative encoder past orjson's depth)."""
    return value if isinstance(value, str) else dumps(value).decode()


def clip(text: str, width: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def summary(event: Any) -> str:
    data = event.data
    if not isinstance(data, dict):
        return ""
    if event.type in ("turn/start", "step/start", "step/end"):
        return " ".join(f"{key} {data[key]}" for key in ("turn", "step") if key in data)
    if event.type == "turn/end":
        reason = data.get("reason") or {}
        return f"turn {data.get('turn')} {reason.get('kind') if isinstance(reason, dict) else reason}"
    if event.type == "assistant/chunk":
        chunk = data.get("chunk") or {}
        return clip(repr(chunk.get("text", chunk.get("argumentsDelta", ""))), 60)
    if event.type == "user/message":
        return clip(text_of(data.get("content")))
    if event.type in ("assistant/message", "tool/result"):
        message = data.get("message") or {}
        return clip(text_of(message.get("content")))
    if event.type == "tool/call":
        return clip(f"{data.get('name')} {compact(data.get('arguments'))}")
    return clip(compact(data), 80)


def displayed(session_id: str, event: Any) -> str:
    """``summary`` for a table row; a failure names the session, type, seq and payload path."""
    try:
        return summary(event)
    except Exception as exc:  # a renderer bug must still be one located line, not a traceback
        raise AgentlogError(f"cannot display the event: {type(exc).__name__}: {exc}", session_id=session_id,
                            seq=event.seq, event_type=event.type, path="data") from exc


def print_message(message: Any) -> None:
    role = message.get("role")
    source = message.get("source") or {}
    label = {"user": "user", "assistant": "assistant"}.get(role, role)
    if source.get("kind") == "tool":
        label = "tool"
    colour = {"user": "cyan", "assistant": "green", "tool": "yellow"}.get(label, "white")
    text = safe(clip(text_of(message.get("content")), 400))
    console.print(f"[bold {colour}]{safe(str(label))}[/bold {colour}] {text}", markup=True)
