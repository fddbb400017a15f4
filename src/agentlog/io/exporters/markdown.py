"""``markdown``: a readable transcript; message text as written, code, calls and results fenced.

Default view: ``log`` (the human transcript); ``surface`` shows what the model sees, compaction
summaries included. Terminal and bidi controls are shown as escapes (``\\x1b``), so the file is
safe to ``cat``. Message text is kept as Markdown: view it with a renderer that sanitises HTML.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from agentlog.core.header import SessionHeader
from agentlog.core.visible import visible
from agentlog.io.exporters.source import ExportSource, label, parts

__all__ = ["fence", "markdown"]

_TICKS = re.compile(r"`+")


def fence(text: str, info: str = "") -> str:
    """``text`` as a fenced code block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in _TICKS.findall(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _code(text: str) -> str:
    """An inline code span that survives backticks in ``text``."""
    longest = max((len(run) for run in _TICKS.findall(text)), default=0)
    ticks = "`" * (longest + 1)
    return f"{ticks} {text} {ticks}" if longest else f"`{text}`"


def _about(header: SessionHeader, view: str, count: int, system: Any) -> Iterator[str]:
    import datetime

    created = datetime.datetime.fromtimestamp(header.created_at / 1000, tz=datetime.UTC)
    yield f"# Session {_code(header.id)}"
    yield ""
    yield f"- created: {created:%Y-%m-%d %H:%M:%S} UTC"
    if header.cwd:
        yield f"- cwd: {_code(header.cwd)}"
    if header.parent_session:
        yield f"- forked from {_code(header.parent_session)} at seq {header.seed_length}"
    what = "what the model sees now (surface)" if view == "surface" else "the whole transcript (log)"
    yield f"- {count} messages: {what}"
    if system:
        yield ""
        yield "## System prompt"
        yield ""
        yield fence(system if isinstance(system, str) else str(system))


def markdown(source: ExportSource) -> bytes:
    """The transcript as Markdown."""
    view = source.view or "log"
    messages = source.finish(source.messages("log"))
    header = source.request_header()
    system = source.finish(header.get("system")) if header is not None else None
    lines = [*_about(source.shown_header(), view, len(messages), system), ""]
    for number, message in enumerate(messages, 1):
        lines += [f"## {number}. {label(message)}", ""]
        for kind, value in parts(message):
            if kind == "text":
                lines.append(value)
            elif kind == "reasoning":
                lines.append("\n".join(f"> {line}" for line in (["*reasoning*", "", *value.split("\n")])))
            elif kind == "call":
                name, call_id, arguments = value
                lines.append(f"**tool call** {_code(name)} ({_code(call_id)})\n\n{fence(arguments, 'json')}")
            elif kind == "result":
                call_id, is_error, text = value
                flag = " (error)" if is_error else ""
                lines.append(f"**result of** {_code(call_id)}{flag}\n\n{fence(text)}")
            else:
                lines.append(fence(value))
            lines.append("")
    return visible("\n".join(lines).rstrip("\n") + "\n").encode()
