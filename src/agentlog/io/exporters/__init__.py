"""Sessions out of agentlog: one module per format, each a pure function of an ``ExportSource``.

``EXPORTERS`` maps a format name to its function; ``export`` is the one entry point (the CLI's
``agentlog export`` is this plus I/O). See each module for what its format does with the
``surface`` and ``log`` views.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.errors import UsageError
from agentlog.io.exporters.anthropic import anthropic
from agentlog.io.exporters.html import html
from agentlog.io.exporters.jsonl import jsonl
from agentlog.io.exporters.markdown import markdown
from agentlog.io.exporters.openai_chat import openai_chat
from agentlog.io.exporters.openai_responses import openai_responses
from agentlog.io.exporters.source import VIEWS, ExportSource, View

__all__ = ["EXPORTERS", "VIEWS", "ExportSource", "Exporter", "View", "export"]

Exporter = Callable[[ExportSource], bytes]

EXPORTERS: dict[str, Exporter] = {
    "openai-chat": openai_chat,
    "anthropic": anthropic,
    "openai-responses": openai_responses,
    "markdown": markdown,
    "html": html,
    "jsonl": jsonl,
}
"""Format name -> exporter."""


def export(header: SessionHeader, events: Sequence[Event], format: str, *, view: View | None = None,
           redact: bool = False) -> bytes:
    """A stored session (``store.inspect(id)``'s header and events) in ``format``, as bytes."""
    exporter = EXPORTERS.get(format)
    if exporter is None:
        raise UsageError(f"unknown export format {format!r} (known: {', '.join(EXPORTERS)})",
                         session_id=header.id)
    return exporter(ExportSource(header, events, view=view, redact=redact))
