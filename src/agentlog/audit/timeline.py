"""The evidence of an audit: inputs, model results, tool calls and results, turn ends, in log order.

Text is clipped and redacted: an audit names where secrets are, it never shows them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from agentlog.audit.report import TimelineEntry
from agentlog.core.events import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TURN_END, USER_MESSAGE, Event
from agentlog.core.jsonvalue import dumps
from agentlog.core.surface import is_replacement_surface_event
from agentlog.io.exporters.source import parts
from agentlog.ops.redact import redact_text

__all__ = ["timeline"]

_WIDTH = 160


def _clip(text: str) -> str:
    text = " ".join(redact_text(text).split())
    return text if len(text) <= _WIDTH else text[: _WIDTH - 1] + "…"


def _text(message: Any) -> str:
    pieces: list[str] = []
    for kind, value in parts(message if isinstance(message, Mapping) else {}):
        if kind == "call":
            pieces.append(f"→ {value[0]}({value[2]})")
        elif kind == "result":
            pieces.append(("error: " if value[1] else "") + value[2])
        elif kind != "reasoning":
            pieces.append(value)
    return " ".join(pieces)


def timeline(events: Sequence[Event]) -> Iterator[TimelineEntry]:
    """One entry per user input, model result, tool call, tool result and turn end."""
    for event in events:
        data = event.data if isinstance(event.data, Mapping) else {}
        if event.type == USER_MESSAGE:
            source = data.get("source") or {}
            origin = source.get("plugin") or source.get("kind")
            kind = "summary" if is_replacement_surface_event(event) else (
                "input" if origin == "user" else f"context ({origin})")
            yield TimelineEntry(event.seq, kind, _clip(_text(data)))
        elif event.type == ASSISTANT_MESSAGE:
            yield TimelineEntry(event.seq, "model result", _clip(_text(data.get("message"))))
        elif event.type == TOOL_CALL:
            arguments = data.get("arguments")
            shown = arguments if isinstance(arguments, str) else dumps(arguments).decode()
            call = f"{data.get('callId')} {data.get('name')}({shown})"
            yield TimelineEntry(event.seq, "tool call", _clip(call))
        elif event.type == TOOL_RESULT:
            error = (data.get("error") or {}).get("code") if isinstance(data.get("error"), Mapping) else None
            kind = "interrupted" if error in ("TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN") else "tool result"
            call = (data.get("message") or {}).get("source", {}).get("callId")
            yield TimelineEntry(event.seq, kind, _clip(f"{call}: {_text(data.get('message'))}"))
        elif event.type == TURN_END:
            reason = data.get("reason") or {}
            yield TimelineEntry(event.seq, "turn end", f"turn {data.get('turn')} {reason.get('kind')}")
