"""``html``: one self-contained page, readable offline: no script, no external asset, all content escaped.

A strict Content-Security-Policy (nothing may load or run; only the page's own stylesheet, by
hash) backs the escaping: even a missed tag could not fetch or execute anything. Default view:
``log``; controls in content are shown as escapes, as in the terminal.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
from html import escape
from typing import Any, Final

from agentlog.core.visible import visible
from agentlog.io.exporters.source import ExportSource, label, parts

__all__ = ["CSP", "html"]

_STYLE: Final = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
header dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;color:#555}
article{border-left:4px solid #ccc;margin:1.2rem 0;padding:.2rem 1rem}
article.user{border-color:#2a7ab0}article.assistant{border-color:#3a9a4a}article.tool{border-color:#b08a2a}
article.other{border-color:#8a5ab0}
h2{font-size:.95rem;margin:.3rem 0;color:#444}
.text{white-space:pre-wrap;overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f5f5f5;padding:.5rem;margin:.4rem 0}
details{color:#666}.error{color:#b00}code{overflow-wrap:anywhere}
"""

CSP: Final = (
    "default-src 'none'; "
    f"style-src 'sha256-{base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()}'; "
    "img-src 'none'; base-uri 'none'; form-action 'none'"
)
"""Nothing loads, nothing runs: only the page's own stylesheet is allowed, by its hash."""


def _t(text: Any) -> str:
    """Content as HTML text: controls shown as escapes, then every markup character escaped."""
    return escape(visible(str(text)), quote=True)


def _css_class(message: Any) -> str:
    source = message.get("source") or {}
    if message.get("role") == "assistant":
        return "assistant"
    return {"tool": "tool", "user": "user"}.get(str(source.get("kind")), "other")


def _message(number: int, message: Any) -> str:
    out = [f'<article class="{_css_class(message)}"><h2>{number}. {_t(label(message))}</h2>']
    for kind, value in parts(message):
        if kind == "text":
            out.append(f'<div class="text">{_t(value)}</div>')
        elif kind == "reasoning":
            out.append(f"<details><summary>reasoning</summary><pre>{_t(value)}</pre></details>")
        elif kind == "call":
            name, call_id, arguments = value
            out.append(f"<div>tool call <b>{_t(name)}</b> <code>{_t(call_id)}</code></div>"
                       f"<pre>{_t(arguments)}</pre>")
        elif kind == "result":
            call_id, is_error, text = value
            flag = ' <span class="error">(error)</span>' if is_error else ""
            out.append(f"<div>result of <code>{_t(call_id)}</code>{flag}</div><pre>{_t(text)}</pre>")
        else:
            out.append(f"<pre>{_t(value)}</pre>")
    out.append("</article>")
    return "".join(out)


def html(source: ExportSource) -> bytes:
    """The transcript as one HTML page."""
    view = source.view or "log"
    header = source.shown_header()
    messages = source.finish(source.messages("log"))
    request = source.request_header()
    system = source.finish(request.get("system")) if request is not None else None
    created = datetime.datetime.fromtimestamp(header.created_at / 1000, tz=datetime.UTC)
    parent = f"{header.parent_session} at seq {header.seed_length}" if header.parent_session else None
    facts = [("created", f"{created:%Y-%m-%d %H:%M:%S} UTC"), ("cwd", header.cwd), ("forked from", parent),
             ("messages", f"{len(messages)}: " + ("what the model sees now (surface)" if view == "surface"
                                                   else "the whole transcript (log)"))]
    head = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>agentlog session {_t(header.id)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
    )
    body = [f"<header><h1>Session <code>{_t(header.id)}</code></h1><dl>"]
    body += [f"<dt>{name}</dt><dd>{_t(value)}</dd>" for name, value in facts if value]
    body.append("</dl>")
    if system:
        body.append(f"<details><summary>system prompt</summary><pre>{_t(system)}</pre></details>")
    body.append("</header>\n<main>")
    body += [_message(number, message) for number, message in enumerate(messages, 1)]
    body.append("</main>\n</body></html>\n")
    return (head + "\n".join(body)).encode()
