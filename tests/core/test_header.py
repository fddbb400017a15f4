"""SessionHeader: the H1 field rules, wire form and how sessions take their header (spec §4.3)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from agentlog import FORMAT_VERSION, FrozenDict, InvalidHeaderError, Session, SessionHeader
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER
from tests.strategies import DictSubclass, header_wire


def test_format_version_is_pinned_at_zero() -> None:
    assert FORMAT_VERSION == 0
    assert SessionHeader(id="s").version == 0


def test_bare_header_gets_id_and_a_current_created_at() -> None:
    before = time.time_ns() // 1_000_000
    header = SessionHeader(id="s")
    after = time.time_ns() // 1_000_000
    assert header.id == "s"
    assert before <= header.created_at <= after
    assert header.to_wire() == {"version": 0, "id": "s", "createdAt": header.created_at}


def test_full_header_round_trips_through_wire() -> None:
    raw = header_wire(
        cwd="/work",
        parentSession="p",
        seedLength=3,
        origin="subagent",
        delegationDepth=2,
        agentPreset="coder",
        custom={"nested": [1]},
    )
    header = SessionHeader.from_wire(raw, session_id="s")
    assert (
        header.cwd,
        header.parent_session,
        header.seed_length,
        header.origin,
        header.delegation_depth,
        header.agent_preset,
    ) == ("/work", "p", 3, "subagent", 2, "coder")
    assert header.extra == {"custom": {"nested": (1,)}}
    assert header.to_wire() == {**raw, "custom": {"nested": (1,)}}
    assert list(header.to_wire())[:3] == ["version", "id", "createdAt"]


def test_unknown_extra_keys_are_kept_frozen() -> None:
    header = SessionHeader.from_wire(header_wire(future={"a": [1]}))
    assert type(header.extra) is FrozenDict
    with pytest.raises(TypeError):
        header.extra["future"] = 2


def test_header_is_a_frozen_dataclass() -> None:
    header = SessionHeader(id="s", created_at=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.id = "t"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"version": 1}, "header version"),
        ({"version": "0"}, "header version"),
        ({"version": False}, "header version"),
        ({"createdAt": -1}, "createdAt must be a non-negative safe integer"),
        ({"createdAt": 1.5}, "createdAt must be a non-negative safe integer"),
        ({"createdAt": "1"}, "createdAt must be a non-negative safe integer"),
        ({"createdAt": True}, "createdAt must be a non-negative safe integer"),
        ({"createdAt": MAX_SAFE_INTEGER + 1}, "not losslessly JSON-serializable"),
        ({"cwd": 1}, "header cwd must be a string"),
        ({"cwd": "relative/dir"}, "cwd must be an absolute path"),
        ({"parentSession": 1}, "header parentSession must be a string"),
        ({"seedLength": -1}, "seedLength must be a non-negative safe integer"),
        ({"seedLength": 0.5}, "seedLength must be a non-negative safe integer"),
        ({"origin": "user"}, 'origin must be "subagent"'),
        ({"delegationDepth": -1}, "delegationDepth must be a non-negative safe integer"),
        ({"delegationDepth": "1"}, "delegationDepth must be a non-negative safe integer"),
        ({"agentPreset": 1}, "agentPreset must be a string"),
        ({"id": ""}, "header id must be a non-empty string"),
        ({"id": 5}, "header id must be a non-empty string"),
    ],
)
def test_header_scalar_rules_refuse_bad_fields(fields: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidHeaderError, match=fragment):
        SessionHeader.from_wire(header_wire(**fields))


def test_header_without_created_at_is_refused() -> None:
    raw = header_wire()
    del raw["createdAt"]
    with pytest.raises(InvalidHeaderError, match="createdAt must be a non-negative safe integer"):
        SessionHeader.from_wire(raw)


def test_dataclass_construction_applies_the_same_rules() -> None:
    with pytest.raises(InvalidHeaderError, match="cwd must be an absolute path"):
        SessionHeader(id="s", cwd="rel")
    with pytest.raises(InvalidHeaderError, match="not losslessly JSON-serializable"):
        SessionHeader(id="s", extra={"a": -0.0})  # type: ignore[arg-type]
    assert type(SessionHeader(id="s", extra={"a": [1]}).extra) is FrozenDict  # type: ignore[arg-type]


def test_header_id_must_match_the_session_id() -> None:
    with pytest.raises(InvalidHeaderError, match="does not match session id") as caught:
        SessionHeader.from_wire(header_wire("other"), session_id="s")
    assert caught.value.session_id == "s"


@pytest.mark.parametrize("raw", [None, 1, [], "header", DictSubclass(version=0, id="s", createdAt=1)])
def test_header_that_is_not_a_plain_record_is_refused(raw: Any) -> None:
    with pytest.raises(InvalidHeaderError, match="not a plain JSON record"):
        SessionHeader.from_wire(raw)


def test_header_with_non_lossless_field_is_refused_with_its_path() -> None:
    with pytest.raises(InvalidHeaderError, match="not losslessly JSON-serializable") as caught:
        SessionHeader.from_wire(header_wire(custom={"bad": {1, 2}}))
    assert caught.value.path == "header.custom.bad"


# -- sessions and their header ----------------------------------------------------------


def test_bare_session_create_has_a_current_version_header() -> None:
    session = Session.create("s")
    assert session.header.version == FORMAT_VERSION
    assert session.header.id == "s" == session.id
    assert 0 <= session.header.created_at <= MAX_SAFE_INTEGER
    assert session.header.cwd is None and session.header.parent_session is None


def test_supplied_header_is_detached_equal_and_frozen() -> None:
    raw = header_wire("s", cwd="/w", custom={"list": [1]})
    session = Session.create("s", header=raw)
    raw["cwd"] = "/elsewhere"
    raw["custom"]["list"].append(2)
    assert session.header.cwd == "/w"
    assert session.header.extra == {"custom": {"list": (1,)}}
    assert session.header.to_wire() == header_wire("s", cwd="/w", custom={"list": (1,)})
    assert session.id == "s"


def test_session_header_object_is_taken_as_is() -> None:
    header = SessionHeader(id="s", created_at=7)
    assert Session.create("s", header=header).header is header
    assert Session.restore("s", [], header).header is header


@pytest.mark.parametrize("factory", ["create", "restore"])
def test_session_refuses_a_header_for_another_id(factory: str) -> None:
    with pytest.raises(InvalidHeaderError, match="does not match session id"):
        if factory == "create":
            Session.create("s", header=header_wire("t"))
        else:
            Session.restore("s", [], header_wire("t"))
    with pytest.raises(InvalidHeaderError, match="does not match session id"):
        Session.create("s", header=SessionHeader(id="t"))


@pytest.mark.parametrize("raw", [None, 1, [], DictSubclass(version=0, id="s", createdAt=1)])
def test_restore_refuses_a_header_that_is_not_a_plain_record(raw: Any) -> None:
    with pytest.raises(InvalidHeaderError, match="not a plain JSON record"):
        Session.restore("s", [], raw)


def test_create_refuses_a_non_lossless_header() -> None:
    with pytest.raises(InvalidHeaderError, match="not losslessly JSON-serializable"):
        Session.create("s", header=header_wire(createdAt=2**60))
    with pytest.raises(InvalidHeaderError, match="not losslessly JSON-serializable"):
        Session.create("s", header=header_wire(extra={"f": float("nan")}))


def test_restore_validates_the_header_before_the_events() -> None:
    bad_event = {"type": "x", "seq": 5, "time": 0, "data": None}
    with pytest.raises(InvalidHeaderError, match="header version"):
        Session.restore("s", [bad_event], header_wire(version=2))


@pytest.mark.parametrize("session_id", ["", 5, None])
def test_session_id_must_be_a_non_empty_string(session_id: Any) -> None:
    with pytest.raises(InvalidHeaderError, match="session id must be a non-empty string"):
        Session.create(session_id)
