"""Each export format on a hand-written session: golden files, views, and the JSONL copy read back."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from agentlog import JsonlStore, Session, SessionHeader, UsageError, open_store
from agentlog.io.exporters import EXPORTERS, export
from agentlog.io.exporters.markdown import fence
from agentlog.store.jsonl.header import parse_header_line
from tests.dsh_reader import read_dsh_file
from tests.io.exporters.sessions import sample_session
from tests.strategies import conversations

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
    from agentlog.integrations.anthropic_request import anthropic_request
    from agentlog.integrations.openai_messages import chat_tools, to_chat_messages

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


@pytest.mark.parametrize(("name", "expected"), [
    ("basic-T5.raw-packed.jsonl", None), ("basic-T50.raw-packed.jsonl", None),
    ("compaction-T5.raw-packed.jsonl", None), ("crash-midturn.raw-packed.after-repair.jsonl", None),
    ("crash-torn.raw-packed.jsonl", "crash-torn.raw-packed.after-repair.jsonl"),
])
def test_jsonl_of_a_dsh_file_is_dsh_s_own_bytes(dsh_fixtures: Path, tmp_path: Path, name: str,
                                                 expected: str | None) -> None:
    """Files DeepSeek Harness wrote come back byte for byte (a torn tail as DSH's repair leaves it)."""
    data = (dsh_fixtures / name).read_bytes()
    header = parse_header_line(data.split(b"\n", 1)[0], path=name)
    _place(data, tmp_path, header)
    stored = JsonlStore(tmp_path, compression="none").inspect(header.id)
    assert export(stored.header, stored.events, "jsonl") == (dsh_fixtures / (expected or name)).read_bytes()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_jsonl_of_any_session_loads_back_as_the_same_log(session: Session) -> None:
    data = export(session.header, session.events, "jsonl")
    with tempfile.TemporaryDirectory() as root:
        _place(data, Path(root), session.header)
        loaded = JsonlStore(root, compression="none").inspect(session.header.id)
    assert list(loaded.events) == list(session.events)
    assert read_dsh_file_bytes(data) == (len(data.split(b"\n", 1)[0]) + 1, b"")


def read_dsh_file_bytes(data: bytes) -> tuple[int, bytes]:
    """(header bytes, torn tail) of a raw DSH file, through the test reader."""
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / "session.jsonl"
        path.write_bytes(data)
        dsh = read_dsh_file(path)
    return len(data) - len(dsh.body) - len(dsh.torn), dsh.torn
