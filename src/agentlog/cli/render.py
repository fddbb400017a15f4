"""How the command line shows session content: terminal-safe text, summaries of events, JSON."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape

from agentlog.core.jsonvalue import as_text, dumps
from agentlog.core.message_text import compact, text_of
from agentlog.core.visible import INVISIBLE
from agentlog.core.visible import visible as visible  # re-exported: the CLI modules print through it
from agentlog.errors import AgentlogError
from agentlog.store.records import Unreadable

console = Console(highlight=False, markup=False, soft_wrap=True)  # never break ids and paths
errors = Console(stderr=True, highlight=False, markup=False)


def safe(text: str) -> str:
    """``visible`` text, escaped for rich markup."""
    return escape(visible(text))


_JSON_INVISIBLE = {code: f"\\u{code:04x}" for code in INVISIBLE if code >= 0x7F}
"""What orjson leaves raw in strings (DEL, C1, bidi controls), as JSON escapes of the same text."""


def json_text(value: Any, *, indent: bool = True) -> str:
    """``value`` as JSON for a terminal: valid JSON in which no character can act on the terminal.

    A lone surrogate (a path that is not UTF-8, as ``os.fsdecode`` gives it) is shown as U+FFFD.
    """
    try:
        raw = orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0).decode()
    except orjson.JSONEncodeError:  # past orjson's depth limit, or a lone surrogate
        try:
            raw = dumps(value).decode()
        except orjson.JSONEncodeError:
            raw = dumps(_texts(value)).decode()
    return json_safe(raw)


def _texts(value: Any) -> Any:
    """``value`` with every string (and key) as valid text (``as_text``)."""
    if isinstance(value, str):
        return as_text(value)
    if isinstance(value, dict):
        return {_texts(key): _texts(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_texts(item) for item in value]
    return value


def json_safe(raw: str) -> str:
    """Encoded JSON with DEL, C1 and bidi controls escaped (orjson escapes only C0)."""
    return raw.translate(_JSON_INVISIBLE)


def print_json(value: Any, *, indent: bool = True) -> None:
    """One JSON document (or line, without ``indent``) on stdout, never wrapped."""
    import sys

    sys.stdout.write(json_text(value, indent=indent) + "\n")


def unreadable_json(bad: Unreadable) -> dict[str, Any]:
    """The ``--json`` shape of a session that could not be read (the same in every command)."""
    return {"id": bad.session_id, "where": bad.where, "error": str(bad.error)}


def columns(head: Sequence[str], rows: Iterable[Sequence[str]], *, to: Console | None = None) -> None:
    """An aligned plain table whose cells are never wrapped or cut: ids and paths are copied from it."""
    out = to or console
    table = [list(head), *([visible(cell) for cell in row] for row in rows)]
    widths = [max(cell_len(row[index]) for row in table) for index in range(len(head))]
    for row in table:
        out.print("  ".join(cell + " " * (widths[index] - cell_len(cell))
                                for index, cell in enumerate(row)).rstrip())


def plural(count: int, noun: str) -> str:
    """``1 event``, ``2 events``: a count with its noun in the number it takes."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def iso(ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


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
    if message.get("partial"):
        label = f"{label} (partial: cut off by a crash)"
    text = safe(clip(text_of(message.get("content")), 400))
    console.print(f"[bold {colour}]{safe(str(label))}[/bold {colour}] {text}", markup=True)
