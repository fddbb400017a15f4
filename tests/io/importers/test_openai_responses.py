"""Responses API items: import then export ``openai-responses`` gives the same items back."""

from __future__ import annotations

import collections
import gc
import sys
import types
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import AgentlogError, Session, SourceFormatError
from agentlog.io.exporters import export
from agentlog.io.importers import SourceFile
from agentlog.io.importers.openai_responses import ORPHAN_OUTPUT, import_openai_responses
from tests.integrations.helpers import assert_tool_pairs_hold
from tests.io.importers.helpers import FIXTURES, assert_golden, checked, import_file

SMALL = FIXTURES / "openai-responses" / "small.json"


def exported(data: bytes, view: str = "surface") -> dict[str, Any]:
    """Import ``data`` (checked as a store would) and export it as a Responses request body."""
    (imported,) = import_openai_responses(SourceFile("r.json", data))
    checked(imported)
    body: dict[str, Any] = orjson.loads(export(imported.header, imported.events, "openai-responses",
                                               view=view))  # type: ignore[arg-type]
    return body


texts = st.text(max_size=12)
call_ids = st.text("abcdefgh0123456789", min_size=1, max_size=6).map(lambda s: f"call_{s}")


@st.composite
def model_group(draw: st.DrawFn, used: set[str]) -> list[Any]:
    """One response's items (reasoning, a message, parallel calls) followed by every call's output."""
    items: list[Any] = []
    if draw(st.booleans()):
        reasoning: dict[str, Any] = {"type": "reasoning", "id": f"rs_{len(used)}",
                                     "summary": [{"type": "summary_text", "text": t}
                                                 for t in draw(st.lists(texts, max_size=2))]}
        if draw(st.booleans()):
            reasoning["encrypted_content"] = draw(texts)
        items.append(reasoning)
    if draw(st.booleans()):
        part = draw(st.sampled_from([{"type": "output_text", "annotations": []}, {"type": "refusal"}]))
        field = "text" if part["type"] == "output_text" else "refusal"
        items.append({"type": "message", "id": f"msg_{len(used)}", "role": "assistant", "status": "completed",
                      "content": [{**part, field: draw(texts)}]})
    calls = [call for call in draw(st.lists(call_ids, max_size=3, unique=True)) if call not in used]
    used.update(calls)
    items += [{"type": "function_call", "call_id": call, "name": "f", "arguments": draw(texts)}
              for call in calls]
    if not items:
        items.append({"type": "message", "role": "assistant", "content": draw(texts)})
    outputs = draw(st.permutations(calls))
    return items + [{"type": "function_call_output", "call_id": call, "output": draw(texts)}
                    for call in outputs]


@st.composite
def item_lists(draw: st.DrawFn) -> list[Any]:
    """Valid item lists: user (or developer) items, each followed by responses whose calls are answered."""
    used: set[str] = set()
    items: list[Any] = []
    for _ in range(draw(st.integers(1, 3))):
        role = draw(st.sampled_from(["user", "developer"]))
        items.append({"role": role, "content": draw(st.one_of(texts, st.builds(
            lambda t: [{"type": "input_text", "text": t}], texts)))})
        for _ in range(draw(st.integers(0, 2))):
            items += draw(model_group(used))
    return items


@settings(max_examples=80, deadline=None)
@given(item_lists())
def test_generated_items_round_trip(items: list[Any]) -> None:
    for view in ("surface", "log"):
        assert exported(orjson.dumps(items), view)["input"] == items


def test_the_small_request_body_round_trips_in_both_views() -> None:
    body = orjson.loads(SMALL.read_bytes())
    sent = {key: body[key] for key in ("input", "instructions", "tools")}
    for view in ("surface", "log"):
        assert exported(SMALL.read_bytes(), view) == sent


def test_golden_small_body() -> None:
    sessions = import_file("openai-responses", SMALL)
    (imported,) = sessions
    session = checked(imported)
    assert imported.unmapped == {}
    assert session.request_header()["config"] == {"provider": "openai", "model": "gpt-5"}
    assert_golden(sessions, "openai-responses-small")


def test_the_same_file_gives_the_same_session_id() -> None:
    first, second = (import_file("openai-responses", SMALL)[0] for _ in range(2))
    assert first.header.id == second.header.id and first.events == second.events


def test_what_the_log_cannot_hold_is_counted() -> None:
    body = {"model": "gpt-5", "temperature": 0.2, "previous_response_id": "resp_1",
            "tools": [{"type": "web_search"}, {"type": "function", "name": "f", "strict": True,
                                                "parameters": {"type": "object", "properties": {}}}],
            "input": [{"role": "user", "content": "hi"},
                      {"type": "function_call_output", "call_id": "call_gone", "output": "late"}]}
    (imported,) = import_openai_responses(SourceFile("b.json", orjson.dumps(body)))
    assert_tool_pairs_hold(checked(imported))  # the orphan output is a user message, not a tool/result
    assert imported.unmapped == {"function tool key 'strict'": 1, "request key 'previous_response_id'": 1,
                                 "request key 'temperature'": 1, "tool of type 'web_search'": 1,
                                 ORPHAN_OUTPUT: 1}


@pytest.mark.parametrize(("document", "message"), [
    ([{"role": "user", "content": "hi"}, 42], "item 1 is a JSON int, not an object"),
    ({"input": [{"role": "user", "content": "a"}, {"role": "tool", "content": "x"}]},
     "input item 1 is a message with role 'tool'"),
    ([{"role": "assistant", "content": None, "tool_calls": []}], "whose content is a JSON NoneType"),
    ([{"role": "assistant", "content": "x", "tool_calls": []}], "keys ['tool_calls']"),
    ([{"content": "no role"}], "item 0 is a message with role None"),
    ([{"role": ["user"], "content": "x"}], "item 0 is a message with role ['user']"),  # found by fuzzing
    ([{"type": 7}], "item 0 has no item type"),
    ({"input": []}, "no items"),
    ({"messages": []}, "a JSON dict of another shape"),
])
def test_malformed_items_are_refused_naming_the_file_and_index(document: Any, message: str) -> None:
    with pytest.raises(SourceFormatError) as caught:
        import_openai_responses(SourceFile("bad.json", orjson.dumps(document)))
    assert message in str(caught.value) and "expected Responses API items" in str(caught.value)
    assert caught.value.file == "bad.json"


def test_terminal_escapes_are_kept_as_data() -> None:
    hostile = "\x1b]0;owned\x07\x1b[2J\u202e"
    items = [{"role": "user", "content": hostile}, {"role": "assistant", "content": hostile}]
    assert exported(orjson.dumps(items))["input"] == items


leaves = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=4))
keys = st.sampled_from(["type", "role", "content", "text", "summary", "call_id", "name", "output"])
values = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(keys, inner, max_size=4)), max_leaves=8)
kinds = st.sampled_from(["message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
                         "computer_call", "computer_call_output", "web_search_call", "other"])
loose_items = st.fixed_dictionaries({"type": kinds}, optional={
    "role": st.sampled_from(["user", "assistant", "developer"]), "content": values, "summary": values,
    "call_id": st.sampled_from(["a", "b", ""]), "name": values, "arguments": values, "output": values})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(loose_items, values), max_size=6))
def test_any_json_is_refused_cleanly_or_imported_into_a_log_that_exports(items: list[Any]) -> None:
    try:
        (imported,) = import_openai_responses(SourceFile("f.json", orjson.dumps(items)))
    except AgentlogError:
        return
    Session.restore(imported.header.id, [event.to_wire() for event in imported.events], imported.header)
    for view in ("surface", "log"):
        export(imported.header, imported.events, "openai-responses", view=view)  # type: ignore[arg-type]


def _work(count: int) -> tuple[collections.Counter[str], int]:
    """Python calls per function, and cyclic-GC collections, while importing ``count`` items."""
    from benchmarks.importers import responses_items

    source = SourceFile("r.json", orjson.dumps(responses_items(count)))
    calls: collections.Counter[str] = collections.Counter()
    collections_run: list[int] = []

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections_run.append(info["generation"])

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        if event == "call":
            calls[f"{frame.f_code.co_filename}:{frame.f_code.co_name}"] += 1

    gc.callbacks.append(collected)
    sys.setprofile(profile)
    try:
        import_openai_responses(source)
    finally:
        sys.setprofile(None)
        gc.callbacks.remove(collected)
    return calls, len(collections_run)


def test_a_long_import_does_work_linear_in_its_items() -> None:
    """Counted, not timed: 4x the items makes at most ~4x the calls of every function, and the
    build runs with the cyclic GC paused (its full collections re-scanned everything built so far,
    which made 32k items 6x slower than 8k)."""
    small, _ = _work(500)
    large, collections_run = _work(2000)
    assert collections_run == 0
    assert sum(large.values()) <= 4.2 * sum(small.values())
    grown = {name: (small[name], count) for name, count in large.items()
             if count > 4.2 * max(small[name], 10)}
    assert grown == {}
