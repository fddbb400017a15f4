"""Request headers and context: canonical form, equality and the folds (spec §7)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentlog import (
    FrozenDict,
    InvalidEventError,
    Session,
    canonical_header,
    fold_request_header,
    freeze,
    header_equals,
    thaw,
)
from agentlog.core.events import make_event
from tests.strategies import header_wire

CONFIG = {"provider": "p", "model": "m"}
TOOL = {"name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {}}}


def header(**parts: Any) -> Any:
    return freeze({"config": dict(CONFIG), **parts})


def header_data(reason: str = "initial", **parts: Any) -> dict[str, Any]:
    return {"header": {"config": dict(CONFIG), **parts}, "reason": reason}


# -- canonical_header -------------------------------------------------------------------


def test_canonical_header_drops_empty_parts() -> None:
    raw = header(adapterDefaults={}, system="", tools=[])
    assert canonical_header(raw) == {"config": CONFIG}
    assert canonical_header(header(adapterDefaults={"maxTokens": False})) == {"config": CONFIG}


def test_canonical_header_keeps_populated_parts_in_order() -> None:
    raw = freeze(
        {
            "tools": [TOOL],
            "system": "be brief",
            "adapterDefaults": {"maxTokens": True},
            "config": {**CONFIG, "maxTokens": 5},
        }
    )
    canonical = canonical_header(raw)
    assert list(canonical) == ["config", "adapterDefaults", "system", "tools"]
    assert canonical["adapterDefaults"] is raw["adapterDefaults"]
    assert canonical["tools"] is raw["tools"]
    assert type(canonical) is FrozenDict


# -- header_equals ----------------------------------------------------------------------


def test_equal_headers_compare_equal() -> None:
    assert header_equals(header(system="s", tools=[TOOL]), header(system="s", tools=[dict(TOOL)]))
    assert header_equals(header(), header(tools=[]))
    assert header_equals(header(tools=[]), header())


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ({"config": {**CONFIG, "model": "m2"}}, {}),
        ({"config": {**CONFIG, "provider": "q"}}, {}),
        ({"config": {**CONFIG, "reasoningEffort": "high"}}, {}),
        ({"config": {**CONFIG, "reasoningEffort": "high"}}, {"config": {**CONFIG, "reasoningEffort": "low"}}),
        ({"config": {**CONFIG, "temperature": 0.5}}, {}),
        ({"config": {**CONFIG, "maxTokens": 1}}, {"config": {**CONFIG, "maxTokens": True}}),
        ({"config": {**CONFIG, "stop": []}}, {}),
        ({"config": {**CONFIG, "stop": ["a"]}}, {"config": {**CONFIG, "stop": ["b"]}}),
        ({"config": {**CONFIG, "stop": ["a", "b"]}}, {"config": {**CONFIG, "stop": ["a"]}}),
        ({"adapterDefaults": {"maxTokens": True}}, {}),
        ({"adapterDefaults": {"maxTokens": True}}, {"adapterDefaults": {"reasoningEffort": True}}),
        ({"system": ""}, {}),
        ({"system": "a"}, {"system": "b"}),
        ({"tools": [TOOL]}, {}),
        ({"tools": [TOOL]}, {"tools": [{**TOOL, "description": "changed"}]}),
        ({"tools": [TOOL, {**TOOL, "name": "write"}]}, {"tools": [{**TOOL, "name": "write"}, TOOL]}),
        (
            {"tools": [TOOL]},
            {"tools": [{"parameters": TOOL["parameters"], "name": "read", "description": "Read a file"}]},
        ),
    ],
)
def test_header_equals_notices_each_difference(left: dict[str, Any], right: dict[str, Any]) -> None:
    a = freeze({"config": dict(CONFIG), **left})
    b = freeze({"config": dict(CONFIG), **right})
    assert not header_equals(a, b)
    assert not header_equals(b, a)


def test_header_equals_treats_equal_numbers_alike_and_ignores_false_flags() -> None:
    assert header_equals(
        header(config={**CONFIG, "temperature": 1}), header(config={**CONFIG, "temperature": 1.0})
    )
    assert header_equals(header(adapterDefaults={"maxTokens": False}), header())
    assert header_equals(header(config={**CONFIG, "stop": ["x"]}), header(config={**CONFIG, "stop": ("x",)}))


def test_header_equals_handles_deep_tool_schemas() -> None:
    schema: Any = {"type": "string"}
    for _ in range(600):
        schema = {"type": "array", "items": schema}
    tool = {**TOOL, "parameters": schema}
    assert header_equals(header(tools=[tool]), header(tools=[tool]))


# -- folds ------------------------------------------------------------------------------


def test_fold_returns_none_or_the_baseline_by_identity() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    assert fold_request_header(session.events) is None
    baseline = header()
    assert fold_request_header(session.events, baseline) is baseline
    assert fold_request_header([], baseline) is baseline


def test_latest_snapshot_wins_and_is_canonical() -> None:
    session = Session.create("s")
    session.append("request/header", header_data(system="first", tools=[TOOL]))
    session.append("request/header", header_data("change", system="", tools=[], adapterDefaults={}))
    expected = {"config": CONFIG}
    assert fold_request_header(session.events, header()) == expected
    assert session.request_header() == expected


def test_session_request_header_is_incremental_frozen_and_stable() -> None:
    session = Session.create("s")
    assert session.request_header() is None
    session.append("request/header", header_data(system="one"))
    first = session.request_header()
    assert first == {"config": CONFIG, "system": "one"} and type(first) is FrozenDict
    with pytest.raises(TypeError):
        first["system"] = "two"
    session.append("turn/start", {"turn": 1})
    assert session.request_header() is first
    session.append("request/header", header_data("change", system="two"))
    assert session.request_header()["system"] == "two"


def test_request_header_folds_the_seed_on_first_read() -> None:
    seed = [{"type": "request/header", "seq": 0, "time": 0, "data": header_data(system="seeded")}]
    session = Session.restore("s", seed, header_wire())
    assert session.request_header() == {"config": CONFIG, "system": "seeded"}


def test_request_headers_without_a_header_object_are_not_snapshots() -> None:
    """Append refuses these shapes (DESIGN §8); the fold must still skip them in unvalidated events."""
    session = Session.create("s")
    good = session.append("request/header", header_data(system="good"))
    for bad in ({"reason": "change"}, {"header": "not an object", "reason": "change"}, "junk"):
        with pytest.raises(InvalidEventError):
            session.append("request/header", bad)
    lax = [good, *(make_event("request/header", seq, 0, freeze(bad)) for seq, bad in
                   enumerate(({"reason": "change"}, {"header": "not an object", "reason": "change"}), 1))]
    assert session.request_header() == {"config": CONFIG, "system": "good"}
    assert fold_request_header(lax) == {"config": CONFIG, "system": "good"}
    assert fold_request_header([make_event("request/header", 0, 0, "junk")]) is None


@pytest.mark.parametrize(
    ("kind", "data", "fragment"),
    [
        ("request/header-delta", {"delta": {}}, "unsupported legacy request/header-delta"),
        ("request/header", header_data("fallback"), 'unsupported legacy request/header reason "fallback"'),
    ],
)
def test_legacy_forms_are_refused_in_seed_and_append(kind: str, data: Any, fragment: str) -> None:
    with pytest.raises(InvalidEventError, match=fragment):
        Session.create("s").append(kind, data)
    with pytest.raises(InvalidEventError, match=fragment):
        Session.restore("s", [{"type": kind, "seq": 0, "time": 0, "data": data}], header_wire())


# -- request context --------------------------------------------------------------------


def context(model: str, window: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"provider": "p", "model": model}
    if window is not None:
        data["contextWindow"] = window
    return data


def test_request_context_is_none_before_any_record() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    assert session.request_context() is None


def test_request_context_folds_the_seed_on_first_read_last_wins() -> None:
    seed = [
        {"type": "request/context", "seq": i, "time": 0, "data": context(f"m{i}", 1000 * (i + 1))}
        for i in range(3)
    ]
    session = Session.restore("s", seed, header_wire())
    assert thaw(session.request_context()) == context("m2", 3000)


def test_request_context_is_incremental_and_each_record_replaces_the_last() -> None:
    session = Session.create("s")
    session.append("request/context", context("a", 64_000))
    assert thaw(session.request_context()) == context("a", 64_000)
    session.append("request/context", context("b", 128_000))
    session.append("request/context", context("c"))
    latest = session.request_context()
    assert thaw(latest) == context("c")
    assert "contextWindow" not in latest
    with pytest.raises(TypeError):
        latest["model"] = "x"


_TOOLS = st.lists(st.sampled_from([
    TOOL, {"name": "read", "parameters": {"type": "object", "properties": {}}, "description": "Read a file"},
    {"name": "run", "description": "Run a command"},
]), max_size=3)
_CONFIGS = st.fixed_dictionaries({"provider": st.sampled_from(["p", "q"]), "model": st.just("m")},
                                 optional={"maxTokens": st.sampled_from([1, 2])})
_HEADERS = st.fixed_dictionaries({"config": _CONFIGS},
                                 optional={"system": st.sampled_from(["", "be brief", "be kind"]),
                                           "tools": _TOOLS})


@given(_HEADERS, _HEADERS)
def test_header_equals_answers_the_same_for_shared_and_copied_members(x: Any, y: Any) -> None:
    """Issue 30's fast path (the same frozen tools object is equal without dumps) never changes
    an answer: a header and its canonical form share members; fresh copies share none."""
    a, b = freeze(x), freeze(y)

    def copy(value: Any) -> Any:
        return freeze(thaw(value))

    for left, right in ((a, b), (canonical_header(a), a), (canonical_header(b), canonical_header(b)),
                        (a, canonical_header(a))):
        assert header_equals(left, right) == header_equals(copy(left), copy(right))
    assert header_equals(canonical_header(a), canonical_header(a))
