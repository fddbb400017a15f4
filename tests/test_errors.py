"""The error hierarchy: one root, structured fields, messages that say where (DESIGN §7 item 2)."""

from __future__ import annotations

import inspect
import pickle

import pytest

import agentlog.errors as errors_module
from agentlog import AgentlogError, InvalidEventError, Replace, Session, SurfaceError
from agentlog.errors import SessionLockedError
from tests.strategies import user_message

ERROR_CLASSES = [
    value
    for _, value in inspect.getmembers(errors_module, inspect.isclass)
    if issubclass(value, BaseException) and value.__module__ == errors_module.__name__
]
FIELDS = ("session_id", "seq", "event_type", "path", "file", "offset", "code")


def test_the_module_exports_exactly_its_error_classes() -> None:
    assert sorted(errors_module.__all__) == sorted(cls.__name__ for cls in ERROR_CLASSES)
    assert len(ERROR_CLASSES) >= 16


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda cls: cls.__name__)
def test_every_error_derives_from_the_root_and_is_documented(cls: type[AgentlogError]) -> None:
    assert issubclass(cls, AgentlogError)
    assert cls.__doc__ and cls.__doc__.strip()
    assert cls.__name__ in (errors_module.__doc__ or "")


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda cls: cls.__name__)
def test_every_error_carries_the_structured_fields(cls: type[AgentlogError]) -> None:
    bare = cls("detail")
    assert all(getattr(bare, name) is None for name in FIELDS)
    assert str(bare) == "detail" and bare.detail == "detail"
    full = cls(
        "went wrong",
        session_id="sess",
        seq=7,
        event_type="user/message",
        path="data.content[2].text",
        file="/tmp/s.jsonl",
        offset=120,
        code="CODE",
    )
    assert (full.session_id, full.seq, full.event_type, full.path, full.file, full.offset, full.code) == (
        "sess",
        7,
        "user/message",
        "data.content[2].text",
        "/tmp/s.jsonl",
        120,
        "CODE",
    )
    assert str(full) == (
        'session "sess", user/message, seq 7: went wrong (at data.content[2].text) [/tmp/s.jsonl at byte 120]'
    )
    assert isinstance(pickle.loads(pickle.dumps(full)), cls)


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("InvalidEventError", ValueError),
        ("SurfaceError", ValueError),
        ("InvalidHeaderError", ValueError),
        ("InvariantError", ValueError),
        ("ForkError", ValueError),
        ("UsageError", RuntimeError),
        ("SessionNotFoundError", LookupError),
        ("PersistenceIOError", OSError),
    ],
)
def test_argument_and_state_errors_also_subclass_the_matching_builtin(name: str, builtin: type) -> None:
    assert issubclass(getattr(errors_module, name), builtin)


def test_store_errors_share_the_store_root() -> None:
    for name in (
        "PersistenceIOError",
        "ConcurrentWriterError",
        "SessionLockedError",
        "SessionFormatUnsupportedError",
        "SessionCorruptionError",
    ):
        assert issubclass(getattr(errors_module, name), errors_module.StoreError)
    assert issubclass(SurfaceError, InvalidEventError)


def test_file_location_renders_without_an_offset() -> None:
    assert str(AgentlogError("bad", file="/x")) == "bad [/x]"


def test_session_locked_error_names_the_holder() -> None:
    error = SessionLockedError("locked", pid=42, session_id="s")
    assert error.pid == 42 and str(error) == 'session "s": locked'


def test_locate_fills_only_unknown_fields_and_returns_the_error() -> None:
    error = AgentlogError("x", seq=3)
    assert error.locate(session_id="s", seq=9, event_type="t", file="f", offset=1) is error
    assert (error.session_id, error.seq, error.event_type, error.file, error.offset) == ("s", 3, "t", "f", 1)


def test_refused_appends_name_session_type_seq_and_payload_path() -> None:
    session = Session.create("sess")
    session.append("user/message", user_message("u"), surface_op="append")
    bad = {"id": "m", "content": [{"text": "a"}, {"text": "b"}, {"text": float("inf")}]}
    with pytest.raises(InvalidEventError) as caught:
        session.append("user/message", bad, surface_op="append")
    assert str(caught.value) == (
        'session "sess", user/message, seq 1: non-JSON-serializable data: '
        "inf is not a finite number (at data.content[2].text)"
    )
    with pytest.raises(SurfaceError) as surface:
        session.append("user/message", user_message("v"), surface_op=Replace(4, 4), source_event_seqs=[0])
    assert (
        str(surface.value) == 'session "sess", user/message, seq 1: replace start seq 4 not found in surface'
    )
