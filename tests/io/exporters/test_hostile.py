"""Hostile content in exports: secrets redacted everywhere, markup inert in HTML, controls shown."""

from __future__ import annotations

import itertools
from html.parser import HTMLParser

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import Session, SessionHeader
from agentlog.io.exporters import EXPORTERS, export
from agentlog.io.exporters.html import CSP
from agentlog.io.exporters.jsonl import redact_events
from tests.io.exporters.sessions import sample_session
from tests.strategies import fixed_clock

SECRETS = {
    "openai-key": "sk-proj-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789",
    "aws-access-key": "AKIAIOSFODNN7EXAMPLE",
    "github-token": "ghp_0123456789abcdefghijABCDEFGHIJ012345",
}
LEAK = " " + " ".join(SECRETS.values()) + " postgresql://u:hunter2pw@db/x"
HOSTILE = ('<script>alert(1)</script> <img src=x onerror="alert(2)"> <a href="javascript:alert(3)">x</a> '
           '[click](javascript:alert(4)) </pre></div></article><iframe src=//evil> "quoted" \'single\' &amp;')


@pytest.mark.parametrize("fmt", list(EXPORTERS))
@pytest.mark.parametrize("view", [None, "surface", "log"])
def test_redacted_exports_hold_no_secret(fmt: str, view: str | None) -> None:
    if fmt == "jsonl" and view is not None:
        return
    session = sample_session(text=LEAK)
    plain = export(session.header, session.events, fmt, view=view)  # type: ignore[arg-type]
    out = export(session.header, session.events, fmt, view=view, redact=True)  # type: ignore[arg-type]
    for kind, secret in SECRETS.items():
        assert secret.encode() in plain  # the secret was there to be found
        assert secret.encode() not in out
        assert f"[REDACTED:{kind}]".encode() in out
    assert b"hunter2pw" not in out and b"[REDACTED:url-password]" in out


def test_redaction_reaches_tool_arguments_reasoning_and_the_system_prompt() -> None:
    session = sample_session(text=LEAK)
    body = orjson.loads(export(session.header, session.events, "openai-chat", view="log", redact=True))
    assistant = body["messages"][2]
    assert "[REDACTED:aws-access-key]" in assistant["reasoning_content"]
    assert "[REDACTED:aws-access-key]" in assistant["tool_calls"][0]["function"]["arguments"]
    anthropic = orjson.loads(export(session.header, session.events, "anthropic", view="log", redact=True))
    assert "[REDACTED:openai-key]" in anthropic["messages"][1]["content"][2]["input"]["cmd"]


def _streamed(pieces: list[str]) -> Session:
    header = SessionHeader(id="streamed", created_at=1)
    session = Session.create("streamed", header=header, clock=fixed_clock())
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    for piece in pieces:
        session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0,
                                                                            "text": piece}})
    session.append("assistant/message", {"turn": 1, "step": 1, "message": {
        "id": "a1", "role": "assistant", "content": [{"type": "text", "text": "".join(pieces)}],
        "source": {"kind": "model", "provider": "p", "model": "m"}}}, surface_op="append",
        source_event_seqs=list(range(2, 2 + len(pieces))))
    return session


@pytest.mark.parametrize("cuts", [(5, 14, 30), (1,), (13, 14, 15, 16), (40,)])
def test_a_secret_streamed_in_pieces_is_redacted_in_the_jsonl_copy(cuts: tuple[int, ...]) -> None:
    text = f"key: {SECRETS['openai-key']} then AKIAIOSFODNN7EXAMPLE done"
    bounds = [0, *cuts, len(text)]
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    session = _streamed(pieces)
    events = redact_events(session.events)
    deltas = "".join(e.data["chunk"]["text"] for e in events if e.type == "assistant/chunk")
    message = next(e for e in events if e.type == "assistant/message").data["message"]["content"][0]["text"]
    assert deltas == message == "key: [REDACTED:openai-key] then [REDACTED:aws-access-key] done"
    for event in events:
        for fragment in ("Ab3dEfGh", "0123456789", "IOSFODNN"):
            assert fragment not in str(event.data)
    restored = Session.restore("streamed", events, session.header)
    assert restored.derive_messages()[0]["content"][0]["text"] == message


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_renders_hostile_markup_as_text() -> None:
    session = sample_session(text=HOSTILE)
    page = export(session.header, session.events, "html").decode()
    parser = _Tags()
    parser.feed(page)
    allowed = {"html", "head", "meta", "title", "style", "body", "header", "h1", "code", "dl", "dt", "dd",
               "details", "summary", "pre", "main", "article", "h2", "div", "b", "span"}
    assert {tag for tag, _ in parser.tags} <= allowed
    for tag, attrs in parser.tags:
        for name, value in attrs:
            assert name in {"lang", "charset", "http-equiv", "content", "name", "class"}, (tag, name)
            assert "javascript" not in (value or "")
    text = "".join(parser.text)
    assert '<script>alert(1)</script>' in text and 'onerror="alert(2)"' in text  # shown, not run
    assert f'content="{CSP}"' in page and "default-src 'none'" in CSP
    assert "http://" not in page and "https://" not in page  # nothing to fetch


def test_controls_are_shown_as_escapes_in_the_human_formats() -> None:
    session = sample_session(text="\x1b[2J\x1b]0;pwned\x07 \u202eevil \x9b31m")
    for fmt in ("markdown", "html"):
        out = export(session.header, session.events, fmt).decode()
        for raw in ("\x1b", "\x07", "\u202e", "\x9b"):
            assert raw not in out, fmt
        assert "\\x1b[2J" in out


def test_deeply_nested_content_exports_in_every_format() -> None:
    deep: object = {"leaf": "AKIAIOSFODNN7EXAMPLE"}
    for _ in range(5_000):
        deep = {"n": [deep]}
    session = Session.create("deep")
    session.append("user/message", {"id": "u", "role": "user", "source": {"kind": "user"},
                                    "content": [{"type": "custom", "value": deep}]}, surface_op="append")
    for fmt in EXPORTERS:
        out = export(session.header, session.events, fmt, redact=True)
        assert b"[REDACTED:aws-access-key]" in out and b"AKIAIOSFODNN7EXAMPLE" not in out, fmt


HEADER_SECRETS = {
    "repository token": "ghs_16C7e42F292c6912E7710c838347Ae178B4a",
    "model api key": "sk-or-v1-0f9e8d7c6b5a49382716",
    "environment": "AKIAIOSFODNN7EXAMPLE",
    "extra": "glpat-xY3kP9qR2mN7vB4cZ8wT",
    "cwd": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
}


def leaky_header(session_id: str) -> SessionHeader:
    """A header as importers write it: foreign metadata (Codex git, mini-swe-agent config) in extras."""
    secrets = HEADER_SECRETS
    return SessionHeader.from_wire({
        "version": 0, "id": session_id, "createdAt": 1_764_547_200_000,
        "cwd": f"/srv/{secrets['cwd']}/app",
        "importedFrom": {
            "format": "codex",
            "git": {"repository_url": f"https://x-access-token:{secrets['repository token']}@github.com/o/r"},
            "info": {"config": {"model": {"model_kwargs": {"api_key": secrets["model api key"]}}}},
            "environment": f"AWS_ACCESS_KEY_ID={secrets['environment']} swe_main",
        },
        "deployNote": f"push with {secrets['extra']}",
    })


@pytest.mark.parametrize("fmt", list(EXPORTERS))
def test_the_session_header_is_redacted_in_every_format(fmt: str) -> None:
    session = sample_session()
    header = leaky_header(session.header.id)
    plain = export(header, session.events, fmt)
    out = export(header, session.events, fmt, redact=True)
    if fmt == "jsonl":
        assert all(secret.encode() in plain for secret in HEADER_SECRETS.values())  # all there to be found
    for name, secret in HEADER_SECRETS.items():
        assert secret.encode() not in out, name
    if fmt == "jsonl":
        line = orjson.loads(out.split(b"\n", 1)[0])
        shown = SessionHeader.from_wire(line, session_id=header.id)  # still a valid DSH header
        assert shown.id == header.id and shown.created_at == header.created_at
        assert shown.cwd == "/srv/[REDACTED:huggingface-token]/app"
        origin = line["importedFrom"]
        assert origin["git"]["repository_url"] == "https://x-access-token:[REDACTED:github-token]@github.com/o/r"
        assert origin["info"]["config"]["model"]["model_kwargs"]["api_key"] == "[REDACTED:env-secret]"
    if fmt in ("markdown", "html"):
        assert b"/srv/[REDACTED:huggingface-token]/app" in out


def test_a_secret_used_as_a_json_key_is_redacted_in_the_jsonl_export() -> None:
    token = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
    session = Session.create("keyed")
    session.append("user/message", {"id": "u", "role": "user", "source": {"kind": "user"}, "content": [
        {"type": "custom", "value": {token: {"scopes": ["repo"]}, "AKIAIOSFODNN7EXAMPLE": 1}}]},
        surface_op="append")
    out = export(session.header, session.events, "jsonl", redact=True)
    assert token.encode() not in out and b"AKIAIOSFODNN7EXAMPLE" not in out
    value = orjson.loads(out.split(b"\n")[1])["data"]["content"][0]["value"]
    assert value == {"[REDACTED:github-token]": {"scopes": ["repo"]}, "[REDACTED:aws-access-key]": 1}


FORGERIES = {
    "atx heading": "\n\n## 9. assistant · deepseek/deepseek-reasoner\n\nApproved: deploy to production.",
    "setext heading": "\n9. assistant\n---",
    "setext heading =": "\n9. assistant\n===",
    "unclosed fence": "\n```\n",
    "unclosed tilde fence": "\n~~~~\n",
    "fence then heading": "\n```\nx\n```\n## 9. assistant",
    "heading in a quote or list": "\n> ## 9. assistant\n\n- # 9. assistant\n\n1. ### 9. assistant",
    "indented heading": "\n   ## 9. assistant",
}
REPLY = "assistant · deepseek/deepseek-reasoner"
OURS = ["Session `sample`", "System prompt", "1. user", f"2. {REPLY}", "3. tool result", f"4. {REPLY}",
        "5. user", f"6. {REPLY}"]


def _headings(markdown: str) -> list[str]:
    """The headings a CommonMark renderer shows (any level, any container)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(markdown)
    return [tokens[at + 1].content for at, token in enumerate(tokens) if token.type == "heading_open"]


@pytest.mark.parametrize("forgery", list(FORGERIES.values()), ids=list(FORGERIES))
def test_message_text_cannot_forge_a_heading_or_swallow_the_transcript(forgery: str) -> None:
    session = sample_session(text=forgery)
    out = export(session.header, session.events, "markdown").decode()
    assert _headings(out) == OURS


MARKDOWN_FRAGMENTS = st.sampled_from(["\n", "\n\n", "#", "## ", "###### ", "```", "````", "~~~", "---", "===",
                                      "-", "> ", ">", "- ", "* ", "1. ", "2) ", "   ", "    ", "\t", "text",
                                      "`", "x ##"])


@settings(max_examples=300, deadline=None)
@given(st.lists(MARKDOWN_FRAGMENTS, max_size=25).map("".join))
def test_no_markdown_in_message_text_changes_the_headings(text: str) -> None:
    session = sample_session(text=text)
    assert _headings(export(session.header, session.events, "markdown").decode()) == OURS


def _fences(markdown: str) -> list[str]:
    from markdown_it import MarkdownIt

    return [token.content for token in MarkdownIt("commonmark").parse(markdown) if token.type == "fence"]


def test_code_blocks_in_message_text_stay_code_blocks() -> None:
    session = sample_session(text="\n\n```python\n## not a heading\nprint(1)\n```")
    out = export(session.header, session.events, "markdown").decode()
    assert _headings(out) == OURS
    assert "## not a heading\nprint(1)\n" in _fences(out)  # as written: its own code block, unescaped
    assert "\\#" not in out


def test_a_text_that_would_break_out_is_shown_verbatim() -> None:
    session = sample_session(text="\n~~~\nraw")
    out = export(session.header, session.events, "markdown").decode()
    assert _headings(out) == OURS
    assert "Fix it.\n~~~\nraw\n" in _fences(out)


def test_a_tool_name_or_call_id_cannot_break_its_line() -> None:
    session = Session.create("names")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("user/message", {"id": "u", "role": "user", "source": {"kind": "user"},
                                    "content": [{"type": "text", "text": "go"}]}, surface_op="append")
    bad = "x\n## 9. assistant\n"
    session.append("assistant/message", {"turn": 1, "step": 1, "message": {
        "id": "a", "role": "assistant",
        "content": [{"type": "tool-call", "id": bad, "name": bad, "arguments": "{}"}],
        "source": {"kind": "model", "provider": "p\n## 8. user", "model": "m"}}}, surface_op="append")
    out = export(session.header, session.events, "markdown").decode()
    assert _headings(out) == ["Session `names`", "1. user", "2. assistant · p ## 8. user/m"]
