"""What every exporter reads: a stored session (header and whole log), the view asked for, redaction.

Pure: the log goes in, plain JSON-shaped values come out. ``surface`` is what the model sees
now (``derive_messages``: compaction summaries in place of what they replaced); ``log`` is the
whole human transcript (``transcript``: every message the user saw, checkpoints left out).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import dumps
from agentlog.core.messages import transcript
from agentlog.core.session import Session
from agentlog.errors import UsageError
from agentlog.ops.redact import redact_header, redact_value

__all__ = ["VIEWS", "ExportSource", "View", "label", "parts"]

View = Literal["surface", "log"]
VIEWS: tuple[View, ...] = ("surface", "log")


class ExportSource:
    """A session to export: header, whole stored log, view (None: the format's own), redaction."""

    __slots__ = ("_session", "events", "header", "redact", "view")

    def __init__(self, header: SessionHeader, events: Sequence[Event], *, view: View | None = None,
                 redact: bool = False) -> None:
        if view is not None and view not in VIEWS:
            raise UsageError(f"unknown export view {view!r} (use one of: {', '.join(VIEWS)})",
                             session_id=header.id)
        self.header = header
        self.events = events
        self.view = view
        self.redact = redact
        self._session: Session | None = None

    def session(self) -> Session:
        """The log restored (validated in full): its surface and latest request header."""
        if self._session is None:
            self._session = Session.restore(self.header.id, self.events, self.header)
        return self._session

    def messages(self, default: View) -> list[Any]:
        """The messages of the view asked for (``default`` when none was), as stored (frozen)."""
        if (self.view or default) == "surface":
            return self.session().derive_messages()
        return transcript(self.events)

    def request_header(self) -> Any:
        """The latest request header (system prompt, tools, model route), or None."""
        return self.session().request_header()

    def shown_header(self) -> SessionHeader:
        """The header as exports show it; redacted when asked: cwd and extras (importers' metadata)."""
        return redact_header(self.header) if self.redact else self.header

    def finish(self, value: Any) -> Any:
        """``value`` redacted (a plain copy) when asked, else as it is: every export passes through here."""
        return redact_value(value) if self.redact else value


def label(message: Mapping[str, Any]) -> str:
    """Who speaks in a message, for the human formats: ``user``, ``assistant · provider/model``..."""
    source = message.get("source") or {}
    kind = source.get("kind") if isinstance(source, Mapping) else None
    if message.get("role") == "assistant":
        route = "/".join(str(source[key]) for key in ("provider", "model") if source.get(key))
        return f"assistant · {route}" if route else "assistant"
    if kind == "tool":
        return "tool result"
    if kind == "user" or kind is None:
        return str(message.get("role") or "user")
    plugin = source.get("plugin") if isinstance(source, Mapping) else None
    return f"{message.get('role') or 'user'} · {plugin or kind}"


def parts(message: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """A message's content as ``(kind, value)`` for the human formats.

    Kinds: ``text`` and ``reasoning`` (str), ``call`` ((name, id, arguments)), ``result``
    ((call id, is error, text)), ``other`` (a placeholder or compact JSON).
    """
    for block in message.get("content") or ():
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind in ("text", "reasoning"):
            yield kind, str(block.get("text", ""))
        elif kind == "tool-call":
            arguments = block.get("arguments")
            text = arguments if isinstance(arguments, str) else dumps(arguments).decode()
            yield "call", (str(block.get("name", "")), str(block.get("id", "")), text)
        elif kind == "tool-result":
            inner = "\n".join(value for kind, value in parts({"content": block.get("content")})
                              if isinstance(value, str))
            yield "result", (str(block.get("toolCallId", "")), bool(block.get("isError")), inner)
        elif kind == "image":
            attachment = block.get("attachment") or {}
            name = attachment.get("name") or attachment.get("attachmentId", "")
            yield "other", f"[image {name} ({attachment.get('mediaType', 'unknown type')})]"
        else:
            yield "other", dumps(block).decode()
