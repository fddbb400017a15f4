"""``markdown``: a readable transcript; message text as written, code, calls and results fenced.

Default view: ``log`` (the human transcript); ``surface`` shows what the model sees, compaction
summaries included. Terminal and bidi controls are shown as escapes (``\\x1b``), so the file is
safe to ``cat``. Message text is kept as Markdown (view it with a renderer that sanitises HTML),
but it cannot forge the transcript's structure: a text that, parsed as CommonMark, would add a
heading or leave a fence or HTML block open is shown fenced, verbatim; names and ids stay on
their line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from agentlog.core.header import SessionHeader
from agentlog.core.visible import visible
from agentlog.io.exporters.source import ExportSource, label, parts

__all__ = ["fence", "markdown"]

_TICKS = re.compile(r"`+")
_BLOCK_START = re.compile(r"(?m)^[ \t]*[#=\-`~<>*+_\d|]")
"""A line that may start a block other than a paragraph (a heading, fence, HTML block, list...)."""
_SENTINEL = "agentlog-end-of-part"


@functools.cache
def _parser() -> Any:
    """A CommonMark parser (``markdown-it-py``, imported on first use: the core import stays light)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def _stays_put(markdown: str) -> bool:
    """Whether Markdown placed as a block between blank lines adds no heading and leaves nothing open.

    Parsed with a heading after it: that heading must be the only one, at the top level, and the
    last block (an unclosed fence, HTML block or list would have swallowed it).
    """
    if not _BLOCK_START.search(markdown):
        return True  # plain paragraphs
    tokens = _parser().parse(f"{markdown}\n\n## {_SENTINEL}\n")
    headings = [(token.level, tokens[at + 1].content) for at, token in enumerate(tokens)
                if token.type == "heading_open"]
    blocks = any(token.type == "html_block" for token in tokens)
    return headings == [(0, _SENTINEL)] and tokens[-1].type == "heading_close" and not blocks


def _inert(text: str) -> str:
    """Message text as Markdown, or fenced verbatim when as Markdown it would forge a heading or
    swallow the transcript after it."""
    return text if _stays_put(visible(text)) else fence(text)


def _line(text: str) -> str:
    """``text`` on one line: a name, an id or a label never starts a line of its own."""
    return text.replace("\r", " ").replace("\n", " ")


def fence(text: str, info: str = "") -> str:
    """``text`` as a fenced code block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in _TICKS.findall(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _code(text: str) -> str:
    """An inline code span on one line that survives backticks in ``text``."""
    text = _line(text)
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
        lines += [f"## {number}. {_line(label(message))}", ""]
        for kind, value in parts(message):
            if kind == "text":
                lines.append(_inert(value))
            elif kind == "reasoning":
                quote = "\n".join(f"> {line}" for line in ["*reasoning*", "", *value.split("\n")])
                if not _stays_put(visible(quote)):
                    quote = "\n".join(f"> {line}" for line in ["*reasoning*", "", *fence(value).split("\n")])
                lines.append(quote)
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
