"""Each export format on a hand-written session: golden files, views, and the JSONL copy read back."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from agentlog import JsonlStore, Session, SessionHeader, UsageError, open_store
from agentlog.exporters import EXPORTERS, export
from agentlog.exporters.markdown import fence
from tests.dsh_reader import read_dsh_file
from tests.exporters.sessions import sample_session

GOLDEN = Path(__file__).parent / "golden"
CASES = [("openai-chat", None, "sample.openai-chat.json"),
         ("openai-chat", "log", "sample.openai-chat.log.json"),
         ("anthropic", None, "sample.anthropic.json"),
         ("markdown", None, "sample.md"),
         ("markdown", "surface", "sample.surface.md"),
         ("html", None, "sample.html"),
         ("jsonl", None, "sample.jsonl")]


@pytest.mark.parametrize(("fmt", "view", "name"), CASES)
def test_golden(fmt: str, view: str | None, name: str) -> None:
    session = sample_session()
    out = export(session.header, session.events, fmt, view=view)  # type: ignore[arg-type]
    path = GOLDEN / name
    if os.environ.get("AGENTLOG_UPDATE_GOLDEN"):
        path.write_bytes(out)
    assert out == path.read_bytes(), f"{name} changed; AGENTLOG_UPDATE_GOLDEN=1 rewrites it (review the diff)"


def test_surface_is_the_next_request_and_log_the_whole_transcript() -> None:
    from agentlog.adapters.anthropic_request import anthropic_request
    from agentlog.adapters.openai_messages import chat_tools, to_chat_messages

    session = sample_session()
    surface = orjson.loads(export(session.header, session.events, "openai-chat", view="surface"))
    assert surface == {"messages": to_chat_messages(session), "tools": chat_tools(session)}
    assert orjson.loads(export(session.header, session.events, "anthropic")) == anthropic_request(session)
    log = orjson.loads(export(session.header, session.events, "openai-chat", view="log"))
    assert "Summary" in surface["messages"][1]["content"]  # the checkpoint stands for turn 1
    roles = ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    assert [m["role"] for m in log["messages"]] == roles
    assert not any("Summary" in str(m.get("content")) for m in log["messages"])


def test_markdown_and_html_default_to_the_log_and_openai_to_the_surface() -> None:
    session = sample_session()
    defaults = (("markdown", "log"), ("html", "log"), ("openai-chat", "surface"), ("anthropic", "surface"))
    for fmt, default in defaults:
        implicit = export(session.header, session.events, fmt)
        assert implicit == export(session.header, session.events, fmt, view=default)  # type: ignore[arg-type]


def _place(export_bytes: bytes, root: Path, header: SessionHeader) -> Path:
    store = JsonlStore(root, compression="none")
    path = Path(store.locate(header))
    path.parent.mkdir(parents=True)
    path.write_bytes(export_bytes)
    return path


def test_jsonl_is_the_stored_log_and_loads_back(tmp_path: Path) -> None:
    source = open_store(f"jsonl://{tmp_path / 'src'}")
    with source.start(SessionHeader(id="s1", cwd="/w")) as live:
        for event in sample_session().events:
            live.session.append(event.type, event.data, surface_op=event.surface_op,
                                source_event_seqs=event.source_event_seqs)
    stored = source.inspect("s1")
    data = export(stored.header, stored.events, "jsonl")
    path = _place(data, tmp_path / "copy", stored.header)
    loaded = JsonlStore(tmp_path / "copy", compression="none").load("s1")
    assert loaded.header == stored.header
    assert list(loaded.events) == list(stored.events)
    dsh = read_dsh_file(path)
    assert dsh.header["id"] == "s1" and dsh.torn == b""
    assert Session.restore("s1", loaded.events, loaded.header).derive_messages() == \
        Session.restore("s1", stored.events, stored.header).derive_messages()


def test_jsonl_of_a_fork_is_a_full_copy_readable_without_its_parent(tmp_path: Path) -> None:
    store = open_store(f"jsonl://{tmp_path / 'src'}")
    with store.start(SessionHeader(id="parent", cwd="/w")) as live:
        for event in sample_session(compact=False).events:
            live.session.append(event.type, event.data, surface_op=event.surface_op,
                                source_event_seqs=event.source_event_seqs)
    store.fork("parent", 12, "child").close()
    child = store.inspect("child")
    assert child.header.parent_session == "parent"
    data = export(child.header, child.events, "jsonl")
    assert b"sharedPrefix" not in data.split(b"\n", 1)[0]
    _place(data, tmp_path / "copy", child.header)
    copy = JsonlStore(tmp_path / "copy", compression="none").load("child")  # no parent there
    assert list(copy.events) == list(child.events)


def test_jsonl_refuses_a_view_and_unknown_formats_are_named() -> None:
    session = sample_session()
    with pytest.raises(UsageError, match="whole log"):
        export(session.header, session.events, "jsonl", view="log")
    with pytest.raises(UsageError, match=r"unknown export format 'pdf' \(known: openai-chat, anthropic"):
        export(session.header, session.events, "pdf")
    with pytest.raises(UsageError, match="unknown export view"):
        export(session.header, session.events, "markdown", view="all")  # type: ignore[arg-type]


def test_an_empty_session_exports_in_every_format() -> None:
    session = Session.create("empty")
    for fmt in EXPORTERS:
        assert export(session.header, session.events, fmt)


def test_fences_outgrow_the_backticks_inside() -> None:
    assert fence("a ``` b") == "````\na ``` b\n````"
    assert fence("plain") == "```\nplain\n```"
