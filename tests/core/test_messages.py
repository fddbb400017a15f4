"""Derived messages: per-event derivation, the incremental cache and the human transcript (spec §6)."""

from __future__ import annotations

from typing import Any

import pytest

from agentlog import (
    FrozenDict,
    InvalidEventError,
    Replace,
    Session,
    derive_event_message,
    fold_surface,
    transcript,
)
from agentlog.core.events import Event, make_event
from agentlog.core.jsonvalue import freeze
from agentlog.core.messages import check_message_shape, event_message
from tests.strategies import assistant_data, tool_result_data, user_message


def scratch(session: Session) -> list[Any]:
    """Derived messages recomputed from nothing but the log."""
    events = session.events
    found = (derive_event_message(events[seq]) for seq in fold_surface(events).nodes)
    return [message for message in found if message is not None]


def assert_same_objects(left: list[Any], right: list[Any]) -> None:
    assert len(left) == len(right)
    assert all(a is b for a, b in zip(left, right, strict=True))


# -- derive_event_message ---------------------------------------------------------------


def test_user_message_derives_to_its_whole_data_even_when_empty() -> None:
    session = Session.create("s")
    data = {**user_message("u"), "extra": {"kept": [1]}}
    event = session.append("user/message", data, surface_op="append")
    assert derive_event_message(event) is event.data
    empty = session.append("user/message", {**user_message("e"), "content": []}, surface_op="append")
    assert derive_event_message(empty) is empty.data
    assert session.derive_messages() == [event.data, empty.data]


def test_assistant_message_derives_to_its_message_unless_content_is_empty() -> None:
    session = Session.create("s")
    event = session.append("assistant/message", assistant_data("a"), surface_op="append")
    assert derive_event_message(event) is event.data["message"]
    empty = session.append(
        "assistant/message",
        assistant_data("b", None, usage={"inputTokens": 5}),
        surface_op="append",
        source_event_seqs=[],
    )
    assert derive_event_message(empty) is None


def test_tool_result_derives_to_its_message() -> None:
    event = Session.create("s").append("tool/result", tool_result_data("c"), surface_op="append")
    message = derive_event_message(event)
    assert message is event.data["message"]
    assert message is not None and message["content"][0]["toolCallId"] == "c"


@pytest.mark.parametrize(
    "kind",
    [
        "step/start",
        "turn/start",
        "assistant/chunk",
        "tool/call",
        "session/end-seed",
        "request/header",
        "todo/write",
        "plugin/event",
    ],
)
def test_log_only_events_derive_nothing(kind: str) -> None:
    # built directly: append checks request/header's shape (what restore accepts, DESIGN §8)
    event = make_event(kind, 0, 0, freeze({"turn": 1, "message": {"content": [1]}}))
    assert derive_event_message(event) is None
    assert event_message(event) is None


def test_lax_payloads_derive_without_crashing() -> None:
    """Append refuses these now (DESIGN §8); derivation must still survive unvalidated events."""
    session = Session.create("s")
    with pytest.raises(InvalidEventError, match="lacks an identified message"):
        session.append("assistant/message", "not an object", surface_op="append")
    odd = make_event("assistant/message", 0, 0, "not an object", "append")
    no_message = make_event("tool/result", 1, 0, freeze({"turn": 1}), "append")
    assert derive_event_message(odd) is None and derive_event_message(no_message) is None
    assert session.derive_messages() == []


def test_event_message_returns_the_carried_message_regardless_of_content() -> None:
    session = Session.create("s")
    empty = session.append("assistant/message", assistant_data("a", None), surface_op="append")
    assert event_message(empty) is empty.data["message"]


# -- the derived cache ------------------------------------------------------------------


def test_cache_equals_scratch_replay_while_growing() -> None:
    session = Session.create("s")
    steps: list[tuple[str, Any]] = [
        ("user/message", user_message("u1")),
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {}}),
        ("assistant/message", assistant_data("a1", None, usage={"inputTokens": 3, "outputTokens": 0})),
        ("assistant/message", assistant_data("a2", "text", calls=("c1",))),
        ("tool/result", tool_result_data("c1")),
        ("step/end", {"turn": 1, "step": 1}),
        ("user/message", user_message("u2")),
    ]
    for kind, data in steps:
        marker = "append" if kind in ("user/message", "assistant/message", "tool/result") else None
        session.append(kind, data, surface_op=marker)
        assert_same_objects(session.derive_messages(), scratch(session))
    assert [m["id"] for m in session.derive_messages()] == ["u1", "a2", "result-c1", "u2"]


def test_rebuild_after_replace_equals_scratch_and_leaves_old_lists_alone() -> None:
    session = Session.create("s")
    for name in ("u1", "u2", "u3"):
        session.append("user/message", user_message(name), surface_op="append")
    old = session.derive_messages()
    old_ids = [id(m) for m in old]
    session.append("user/message", user_message("sum"), surface_op=Replace(0, 1), source_event_seqs=[0, 1])
    new = session.derive_messages()
    assert [m["id"] for m in new] == ["sum", "u3"]
    assert_same_objects(new, scratch(session))
    assert [id(m) for m in old] == old_ids and [m["id"] for m in old] == ["u1", "u2", "u3"]
    assert new[1] is old[2]


def test_each_call_returns_a_fresh_list_of_shared_frozen_messages() -> None:
    session = Session.create("s")
    session.append("user/message", user_message("u1"), surface_op="append")
    session.append("assistant/message", assistant_data("a1"), surface_op="append")
    first, second = session.derive_messages(), session.derive_messages()
    assert first is not second
    assert_same_objects(first, second)
    first.reverse()
    first.append("junk")
    assert [m["id"] for m in session.derive_messages()] == ["u1", "a1"]
    assert session.events[0].data["id"] == "u1"


def test_derived_messages_are_frozen_views_of_the_log() -> None:
    session = Session.create("s")
    session.append("user/message", user_message("u1", "text"), surface_op="append")
    message = session.derive_messages()[0]
    assert message is session.events[0].data and type(message) is FrozenDict
    with pytest.raises(TypeError):
        message["content"][0]["text"] = "edited"
    with pytest.raises(TypeError):
        message["content"] = ()
    with pytest.raises(AttributeError):
        message["content"].append({"type": "text"})
    with pytest.raises(TypeError):
        message["source"]["kind"] = "plugin"
    assert session.events[0].data["content"][0]["text"] == "text"


def test_derive_event_message_equals_the_last_derived_message() -> None:
    session = Session.create("s")
    session.append("user/message", user_message("u1"), surface_op="append")
    event = session.append("assistant/message", assistant_data("a1"), surface_op="append")
    assert session.derive_messages()[-1] is derive_event_message(event)


def test_cache_follows_tool_result_rewrites() -> None:
    session = Session.create("s")
    session.append("tool/result", tool_result_data("c", "long"), surface_op="append")
    before = session.derive_messages()
    pruned = session.append(
        "tool/result", tool_result_data("c", "[pruned]"), surface_op=Replace(0, 0), source_event_seqs=[0]
    )
    assert session.derive_messages() == [pruned.data["message"]]
    assert before[0]["content"][0]["content"][0]["text"] == "long"


# -- transcript -------------------------------------------------------------------------


def test_transcript_keeps_appended_messages_and_skips_replacements() -> None:
    session = Session.create("s")
    session.append("user/message", user_message("u1"), surface_op="append")
    session.append("assistant/message", assistant_data("a1"), surface_op="append")
    session.append("assistant/message", assistant_data("empty", None), surface_op="append")
    session.append("user/message", user_message("sum"), surface_op=Replace(0, 1), source_event_seqs=[0, 1])
    session.append("user/message", user_message("u2"), surface_op="append")
    assert [m["id"] for m in transcript(session.events)] == ["u1", "a1", "u2"]
    assert [m["id"] for m in session.derive_messages()] == ["sum", "u2"]


# -- message shape rules (restore) ------------------------------------------------------


def test_check_message_shape_accepts_well_formed_messages_of_every_surface_type() -> None:
    check_message_shape("user/message", user_message("u"), "seed")
    check_message_shape("assistant/message", assistant_data("a"), "seed")
    check_message_shape("tool/result", tool_result_data("c"), "seed")


@pytest.mark.parametrize(
    ("kind", "data", "fragment", "path"),
    [
        ("user/message", "text", "lacks an identified message", "data"),
        ("assistant/message", {"message": None}, "lacks an identified message", "data.message"),
        ("user/message", {**user_message("u"), "role": "system"}, 'must have role "user"', "data.role"),
        ("user/message", {**user_message("u"), "source": "user"}, "invalid source", "data.source"),
        ("user/message", {**user_message("u"), "content": None}, "invalid content", "data.content"),
        (
            "assistant/message",
            {"message": {**assistant_data("a")["message"], "source": {"kind": "model", "model": "m"}}},
            "must have model source",
            "data.message.source",
        ),
    ],
)
def test_check_message_shape_names_the_rule_and_the_member(
    kind: str, data: Any, fragment: str, path: str
) -> None:
    with pytest.raises(InvalidEventError, match=f"subject .*{fragment}") as caught:
        check_message_shape(kind, data, "subject")
    assert caught.value.path == path


def test_tool_result_shape_checks_the_call_id_pairing() -> None:
    data = tool_result_data("c1")
    data["message"]["content"][0]["toolCallId"] = "c2"
    with pytest.raises(InvalidEventError, match="mismatched tool call ids") as caught:
        check_message_shape("tool/result", data, "seed")
    assert caught.value.path == "data.message.content[0].toolCallId"


def test_events_from_the_log_are_what_derivation_returns() -> None:
    session = Session.create("s")
    events: list[Event] = [
        session.append("user/message", user_message("u"), surface_op="append"),
        session.append("assistant/message", assistant_data("a"), surface_op="append"),
    ]
    assert_same_objects(session.derive_messages(), [events[0].data, events[1].data["message"]])


def test_a_transcript_with_partials_adds_only_what_a_crash_cut_off() -> None:
    from agentlog import Recorder, SessionHeader, open_store
    from agentlog.core.messages import transcript, transcript_with_partials

    with open_store("memory:") as store:
        live = store.start(SessionHeader(id="p"))
        recorder = Recorder(live)
        with recorder.turn() as turn, turn.step() as step:  # answered: nothing partial
            step.user_message("q1")
            step.request_header({"config": {"provider": "deepseek", "model": "deepseek-chat"}})
            step.text_delta("whole ")
            step.text_delta("answer")
            step.assistant()
        events = list(live.session.events)
        assert transcript_with_partials(events) == transcript(events)
        turn = recorder.turn().__enter__()
        turn.user_message("q2")
        turn.step().__enter__().text_delta("cut o")
        events = list(live.session.events)
    partial = transcript_with_partials(events)
    assert partial[:-1] == transcript(events)
    assert partial[-1]["partial"] is True and partial[-1]["content"][0]["text"] == "cut o"
