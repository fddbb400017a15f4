"""Responses items <-> agentlog events: lossless round trips (property tests) and the request rules."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import InvalidEventError, Recorder, Session, check_invariants, thaw
from agentlog.core.events import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, USER_MESSAGE
from agentlog.integrations.common import tool_calls
from agentlog.integrations.responses_events import responses_events, unanswered_calls
from agentlog.integrations.responses_items import (
    OPAQUE,
    REPLAY_KEY,
    item_side,
    join_item,
    messages_to_items,
    split_item,
    split_items,
    to_responses_input,
)
from tests.integrations.helpers import assert_tool_pairs_hold

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
IDS = st.sampled_from(["call_a", "call_b", "call_c", "call_d"])


def _maybe(**fields: Any) -> Any:
    """Optional keys: each present or absent."""
    return st.fixed_dictionaries({}, optional=fields)


def _with(base: dict[str, Any], **optional: Any) -> Any:
    return st.tuples(st.fixed_dictionaries(base), _maybe(**optional)).map(lambda pair: {**pair[0], **pair[1]})


INPUT_PART = st.one_of(
    st.fixed_dictionaries({"type": st.just("input_text"), "text": TEXT}),
    st.fixed_dictionaries({"type": st.just("input_image"), "image_url": st.just("data:image/png;base64,AA"),
                           "detail": st.just("auto")}),
)
OUTPUT_PART = st.one_of(
    _with({"type": st.just("output_text"), "text": TEXT}, annotations=st.just([]), logprobs=st.just([])),
    st.fixed_dictionaries({"type": st.just("refusal"), "refusal": TEXT}),
)
USER_ITEM = _with({"role": st.sampled_from(["user", "system", "developer"]),
                   "content": st.one_of(TEXT, st.lists(INPUT_PART, max_size=3))},
                  type=st.just("message"))
ASSISTANT_ITEM = st.one_of(
    st.fixed_dictionaries({"role": st.just("assistant"), "content": TEXT}),
    _with({"type": st.just("message"), "role": st.just("assistant"),
           "content": st.lists(OUTPUT_PART, max_size=3)},
          id=st.just("msg_1"), status=st.sampled_from(["completed", "incomplete"])),
)
REASONING_ITEM = _with(
    {"type": st.just("reasoning"), "id": st.just("rs_1"),
     "summary": st.lists(st.fixed_dictionaries({"type": st.just("summary_text"), "text": TEXT}), max_size=2)},
    encrypted_content=st.just("gAAAA-x"),
    content=st.lists(st.fixed_dictionaries({"type": st.just("reasoning_text"), "text": TEXT}), max_size=2),
)
CALL_ITEM = st.one_of(
    _with({"type": st.just("function_call"), "call_id": IDS, "name": st.sampled_from(["f", "g"]),
           "arguments": TEXT}, id=st.just("fc_1"), status=st.just("completed")),
    st.fixed_dictionaries({"type": st.just("custom_tool_call"), "call_id": IDS, "name": st.just("patch"),
                           "input": TEXT}),
    st.fixed_dictionaries({"type": st.just("computer_call"), "id": st.just("cu_1"), "call_id": IDS,
                           "action": st.just({"type": "click", "x": 1, "y": 2}),
                           "pending_safety_checks": st.just([]), "status": st.just("completed")}),
)
OUTPUT_ITEM = st.one_of(
    _with({"type": st.just("function_call_output"), "call_id": IDS,
           "output": st.one_of(TEXT, st.lists(INPUT_PART, max_size=2))}, id=st.just("fco_1")),
    st.fixed_dictionaries({"type": st.just("custom_tool_call_output"), "call_id": IDS, "output": TEXT}),
    st.fixed_dictionaries({"type": st.just("computer_call_output"), "call_id": IDS,
                           "output": st.just({"type": "computer_screenshot", "image_url": "data:x"})}),
)
OTHER_ITEM = st.one_of(
    st.fixed_dictionaries({"type": st.just("web_search_call"), "id": st.just("ws_1"),
                           "status": st.just("completed"),
                           "action": st.just({"type": "search", "query": "q"})}),
    st.fixed_dictionaries({"type": st.just("item_reference"), "id": st.just("msg_0")}),
    st.fixed_dictionaries({"type": st.just("mcp_list_tools"), "id": st.just("mcpl_1"),
                           "server_label": st.just("s"), "tools": st.just([])}),
)
ITEMS = st.lists(st.one_of(USER_ITEM, ASSISTANT_ITEM, REASONING_ITEM, CALL_ITEM, OUTPUT_ITEM, OTHER_ITEM),
                 max_size=14)


def logged(items: list[Any], session: Session | None = None) -> Session:
    """``items`` appended to a (new) session as the events ``responses_events`` gives."""
    session = session or Session.create("items")
    last_turn = max((e.data["turn"] for e in session.events if e.type == "turn/end"), default=0)
    open_calls = unanswered_calls(session.derive_messages())
    for event in responses_events(items, seq=session.seq, turn=last_turn + 1, open_calls=open_calls):
        session.append(event["type"], event["data"], surface_op=event.get("surfaceOp"),
                       source_event_seqs=event.get("sourceEventSeqs"))
    return session


@settings(max_examples=300, deadline=None)
@given(ITEMS)
def test_items_to_events_to_items_is_the_identity(items: list[Any]) -> None:
    session = logged(items)
    check_invariants(session.events)
    assert messages_to_items(session.derive_messages()) == items
    restored = Session.restore("items", [e.to_wire() for e in session.events], session.header)
    assert messages_to_items(restored.derive_messages()) == items


@settings(max_examples=200, deadline=None)
@given(st.lists(ITEMS, min_size=1, max_size=4))
def test_items_added_in_batches_read_back_as_one_list(batches: list[list[Any]]) -> None:
    session = Session.create("items")
    for batch in batches:
        logged(batch, session)
    check_invariants(session.events)
    assert messages_to_items(session.derive_messages()) == [item for batch in batches for item in batch]


@settings(max_examples=200, deadline=None)
@given(st.lists(ITEMS, min_size=1, max_size=4))
def test_the_surface_keeps_tool_pairs_whatever_outputs_arrive(batches: list[list[Any]]) -> None:
    session = Session.create("items")
    for batch in batches:  # outputs of calls never seen, answered already or in an earlier batch
        logged(batch, session)
    assert_tool_pairs_hold(session)
    check_invariants(session.events)


@settings(max_examples=300, deadline=None)
@given(st.one_of(USER_ITEM, ASSISTANT_ITEM, REASONING_ITEM, CALL_ITEM, OUTPUT_ITEM, OTHER_ITEM))
def test_split_then_join_gives_the_item(item: dict[str, Any]) -> None:
    blocks, shell = split_item(item)
    assert blocks, "every item leaves at least one block, so no message is empty"
    assert join_item(shell, blocks) == item


@settings(max_examples=300, deadline=None)
@given(ITEMS)
def test_the_request_input_answers_every_call_and_has_no_orphan_output(items: list[Any]) -> None:
    sent = to_responses_input(logged(items))
    pending: set[str] = set()
    for item in sent:
        side = item_side(item)
        if side == "result":
            assert item["call_id"] in pending
            pending.discard(item["call_id"])
        elif side == "input":
            assert not pending, "a user item before every call was answered"
        elif item.get("call_id") and item["type"].endswith("_call"):
            pending.add(item["call_id"])
    assert not pending


def test_items_map_onto_turns_steps_and_tool_pairs() -> None:
    items = [
        {"role": "user", "content": "read a"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": '{"p": "a"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "A"},
        {"role": "assistant", "content": "a says A"},
        {"role": "user", "content": "thanks"},
    ]
    session = logged(items)
    kinds = [e.type for e in session.events]
    assert kinds == ["turn/start", "step/start", USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT,
                     "step/end", "step/start", ASSISTANT_MESSAGE, "step/end", "turn/end",
                     "turn/start", "step/start", USER_MESSAGE, "step/end", "turn/end"]
    call = next(e for e in session.events if e.type == TOOL_CALL)
    assert thaw(call.data) == {"turn": 1, "step": 1, "callId": "call_1", "name": "read",
                               "arguments": '{"p": "a"}'}
    first = session.derive_messages()[1]
    assert thaw(first["content"]) == [{"type": "reasoning", "text": ""}, {
        "type": "tool-call", "id": "call_1", "name": "read", "arguments": '{"p": "a"}'}]


def test_an_output_whose_call_came_in_an_earlier_batch_gets_a_step_of_its_own() -> None:
    session = logged([{"role": "user", "content": "go"},
                      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}])
    logged([{"type": "function_call_output", "call_id": "c", "output": "ok"}], session)
    call = [e for e in session.events if e.type == TOOL_CALL][-1]
    assert thaw(call.data) == {"turn": 2, "step": 1, "callId": "c", "name": "f", "arguments": "{}"}
    check_invariants(session.events)


def test_unmapped_items_are_kept_whole_as_opaque_blocks() -> None:
    item = {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "AAAA"}
    blocks, shell = split_item(item)
    assert blocks == [{"type": OPAQUE, "item": item}] and shell is None


def test_a_message_rewritten_after_logging_is_rebuilt_from_its_blocks() -> None:
    session = logged([{"role": "user", "content": "hi"},
                      {"type": "message", "role": "assistant", "id": "m", "content": [
                          {"type": "output_text", "text": "one"}, {"type": "output_text", "text": "two"}]}])
    message = thaw(session.derive_messages()[1])
    message["content"] = message["content"][:1]  # e.g. a summary that kept less
    assert messages_to_items([message]) == [{"role": "assistant", "content": "one"}]


@pytest.mark.parametrize(("items", "detail"), [
    ("not a list", "must be a list"),
    ([{"role": "user", "content": "ok"}, 3], "item 1 is not an object"),
    ([{"role": "user", "content": float("nan")}], "item 0 is not plain JSON"),
    ([{"role": "user", "content": "ok"}, {"role": "user", "content": "\udc00"}], "item 1 is not plain JSON"),
])
def test_bad_items_are_refused_naming_the_item(items: Any, detail: str) -> None:
    with pytest.raises(InvalidEventError, match=detail):
        responses_events(items)


def test_a_result_the_app_logged_for_a_custom_tool_call_goes_back_as_its_output_type() -> None:
    call = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_p", "name": "apply_patch",
            "input": "*** Begin Patch"}
    session = Session.create("custom")
    with Recorder(session).turn() as turn, turn.step() as step:
        step.user_message("patch it")
        blocks, shells = split_items([call])
        step.assistant(provider="openai", model="gpt-5", content=blocks, replay_state={REPLAY_KEY: shells})
        (block,) = tool_calls(step)
        step.tool_call(block["id"], block["name"], block["arguments"])
        step.tool_result(block["id"], "patched")
    assert to_responses_input(session) == [
        {"role": "user", "content": "patch it"}, call,
        {"type": "custom_tool_call_output", "call_id": "call_p", "output": "patched"}]
    assert messages_to_items(session.derive_messages())[-1]["type"] == "function_call_output"  # as logged
