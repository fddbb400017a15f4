"""The surface: markers, provenance, append/replace transitions, tool-result rewrites, folds (spec §3)."""

from __future__ import annotations

from typing import Any

import pytest

from agentlog import (
    Event,
    InvalidEventError,
    Replace,
    Replacement,
    Session,
    SurfaceError,
    derive_event_message,
    fold_surface,
    is_append_surface_event,
    is_replacement_surface_event,
    is_surface_event,
)
from agentlog.core.events import make_event
from agentlog.core.jsonvalue import freeze
from agentlog.core.surface import SurfaceManager, is_surface_eligible_type
from tests.strategies import (
    assert_unchanged,
    assistant_data,
    fixed_clock,
    header_wire,
    snapshot,
    tool_result_data,
    user_message,
)

CALL = "call-1"


def user_wire(seq: int, msg_id: str | None = None, **markers: Any) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "type": "user/message",
        "seq": seq,
        "time": seq,
        "data": user_message(msg_id or f"u{seq}"),
    }
    wire["surfaceOp"] = markers.pop("surfaceOp", "append")
    wire.update(markers)
    return wire


def log_wire(seq: int, kind: str = "turn/start", **markers: Any) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": seq, "data": {"turn": 1}, **markers}


def replace_op(start: int, end: int) -> dict[str, Any]:
    return {"op": "replace", "start": start, "end": end}


def fold_wire(wires: list[dict[str, Any]], base_seq: int = 0) -> Any:
    return fold_surface([Event.from_wire(wire) for wire in wires], base_seq)


def session_with_users(count: int) -> Session:
    session = Session.create("s", clock=fixed_clock())
    for index in range(count):
        session.append("user/message", user_message(f"u{index}"), surface_op="append")
    return session


# -- folds: provenance ------------------------------------------------------------------


def test_fold_accepts_absent_citations_and_a_fully_covered_replace() -> None:
    fold = fold_wire(
        [user_wire(0), user_wire(1), user_wire(2, surfaceOp=replace_op(0, 1), sourceEventSeqs=[1, 0])]
    )
    assert fold.nodes == (2,)
    assert fold.replacements == (Replacement(seq=2, start=0, end=1, shadowed_seqs=(0, 1)),)


def test_fold_accepts_empty_citations_on_assistant_messages() -> None:
    wire = {
        "type": "assistant/message",
        "seq": 0,
        "time": 0,
        "data": assistant_data("a", None),
        "surfaceOp": "append",
        "sourceEventSeqs": [],
    }
    assert fold_wire([wire]).nodes == (0,)


def test_replace_may_cite_more_than_it_shadows() -> None:
    fold = fold_wire(
        [log_wire(0), user_wire(1), user_wire(2, surfaceOp=replace_op(1, 1), sourceEventSeqs=[0, 1])]
    )
    assert fold.nodes == (2,)


@pytest.mark.parametrize(
    ("wires", "fragment"),
    [
        ([log_wire(0, sourceEventSeqs=[])], "cannot carry sourceEventSeqs"),
        ([user_wire(0), user_wire(1, sourceEventSeqs="0")], "must be an array"),
        ([user_wire(0), user_wire(1, sourceEventSeqs=[])], "must not be empty"),
        ([user_wire(0), user_wire(1), user_wire(2, sourceEventSeqs=[0, 0])], "must not contain duplicates"),
        ([user_wire(0), user_wire(1, sourceEventSeqs=["0"])], "non-negative safe integers"),
        ([user_wire(0), user_wire(1, sourceEventSeqs=[0.5])], "non-negative safe integers"),
        ([user_wire(0), user_wire(1, sourceEventSeqs=[-1])], "non-negative safe integers"),
        ([user_wire(0), user_wire(1, sourceEventSeqs=[1])], "must reference earlier events"),
        ([user_wire(0), user_wire(2)], "seq 2 is not contiguous; expected 1"),
        (
            [user_wire(0), user_wire(1), user_wire(2, surfaceOp=replace_op(0, 1), sourceEventSeqs=[0])],
            "missing 1",
        ),
        ([user_wire(0), user_wire(1), user_wire(2, surfaceOp=replace_op(0, 1))], "missing 0, 1"),
        ([user_wire(0, surfaceOp=None)], "invalid surfaceOp"),
        ([{k: v for k, v in user_wire(0).items() if k != "surfaceOp"}], "requires a surfaceOp marker"),
        ([log_wire(0, surfaceOp="append")], "not surface-eligible and cannot carry surfaceOp"),
    ],
)
def test_fold_refuses_bad_provenance_and_markers(wires: list[dict[str, Any]], fragment: str) -> None:
    with pytest.raises(SurfaceError, match=fragment):
        fold_wire(wires)


def test_fold_refuses_marker_inconsistent_events_built_without_checks() -> None:
    markerless = make_event("user/message", 0, 0, freeze(user_message("u")))
    with pytest.raises(SurfaceError, match="requires a surfaceOp marker"):
        fold_surface([markerless])
    marked = make_event("turn/start", 0, 0, freeze({"turn": 1}), "append")
    with pytest.raises(SurfaceError, match="not surface-eligible and cannot carry surfaceOp"):
        fold_surface([marked])
    with pytest.raises(SurfaceError, match="requires a surfaceOp marker"):
        Session.restore("s", [markerless], header_wire())


# -- transitions ------------------------------------------------------------------------


def test_append_markers_extend_the_surface_in_order() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message("a"), surface_op="append")
    session.append("user/message", user_message("b"), surface_op="append")
    assert session.surface.nodes == [1, 2]


def test_empty_session_has_no_nodes_and_no_messages() -> None:
    session = Session.create("s")
    assert list(session.surface.nodes) == []
    assert session.derive_messages() == []
    assert session.surface.replace_generation == 0


def test_incremental_pickup_and_seeded_replay_agree() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message("a"), surface_op="append")
    session.append("user/message", user_message("b"), surface_op="append")
    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {}})
    assert list(session.surface.nodes) == [1, 2]
    session.append("assistant/message", assistant_data("c"), surface_op="append")
    assert list(session.surface.nodes) == [1, 2, 4]
    replay = Session.create("s", seed=session.events)
    assert list(replay.surface.nodes) == [1, 2, 4]
    assert replay.derive_messages() == session.derive_messages()


@pytest.mark.parametrize(
    ("count", "start", "end", "expected"),
    [
        (3, 1, 2, [0, 3]),
        (3, 0, 1, [3, 2]),
        (3, 1, 1, [0, 3, 2]),
        (4, 1, 2, [0, 4, 3]),
        (2, 0, 1, [2]),
    ],
)
def test_replace_swaps_the_positional_run_for_the_new_seq(
    count: int, start: int, end: int, expected: list[int]
) -> None:
    session = session_with_users(count)
    shadowed = list(range(start, end + 1))
    event = session.append(
        "user/message", user_message("c"), surface_op=Replace(start, end), source_event_seqs=shadowed
    )
    assert event.seq == count
    assert list(session.surface.nodes) == expected
    assert session.surface.replace_generation == 1


def test_replace_of_one_and_two_to_a_single_node() -> None:
    session = Session.create("s")
    session.append("turn/start", {"turn": 1})
    for name in ("a", "b"):
        session.append("user/message", user_message(name), surface_op="append")
    session.append("compaction/summary", {"summary": []})
    session.append("user/message", user_message("sum"), surface_op=Replace(1, 2), source_event_seqs=[3, 1, 2])
    assert list(session.surface.nodes) == [4]


def test_replace_bounds_are_positions_not_numeric_ranges() -> None:
    session = session_with_users(2)
    session.append("user/message", user_message("c"), surface_op=Replace(0, 0), source_event_seqs=[0])
    assert list(session.surface.nodes) == [2, 1]
    session.append("user/message", user_message("d"), surface_op=Replace(2, 1), source_event_seqs=[1, 2])
    assert list(session.surface.nodes) == [3]
    fold = fold_surface(session.events)
    assert fold.nodes == (3,)
    assert fold.replacements[-1] == Replacement(seq=3, start=2, end=1, shadowed_seqs=(2, 1))


@pytest.mark.parametrize(
    ("op", "fragment"),
    [
        (Replace(5, 0), "replace start seq 5 not found in surface"),
        (Replace(0, 5), "replace end seq 5 not found"),
        (Replace(1, 0), r"start seq 1 \(index 1\) is after end seq 0 \(index 0\)"),
    ],
)
def test_replace_with_a_bad_range_is_refused_and_changes_nothing(op: Replace, fragment: str) -> None:
    session = session_with_users(2)
    before = snapshot(session)
    with pytest.raises(SurfaceError, match=fragment):
        session.append("user/message", user_message("c"), surface_op=op, source_event_seqs=[0, 1])
    assert_unchanged(session, before)


def test_replace_that_does_not_cite_what_it_shadows_is_refused() -> None:
    session = session_with_users(3)
    before = snapshot(session)
    with pytest.raises(SurfaceError, match="missing 1"):
        session.append("user/message", user_message("c"), surface_op=Replace(0, 2), source_event_seqs=[0, 2])
    assert_unchanged(session, before)


def test_range_is_checked_before_provenance() -> None:
    session = session_with_users(2)
    with pytest.raises(SurfaceError, match="start seq 9 not found"):
        session.append("user/message", user_message("c"), surface_op=Replace(9, 0))


@pytest.mark.parametrize(
    "seqs",
    [[0, 0], [], "0", [-1], [0.5], [5]],
    ids=["duplicate", "empty", "not-an-array", "negative", "fraction", "forward"],
)
def test_replace_range_is_looked_up_before_any_provenance_rule(seqs: Any) -> None:
    """Spec S11: range lookup, then provenance (S4-S7), on append and on restore alike."""
    session = session_with_users(2)
    before = snapshot(session)
    with pytest.raises(SurfaceError, match=r"seq 2: replace start seq 42 not found in surface$"):
        session.append("user/message", user_message("c"), surface_op=Replace(42, 42), source_event_seqs=seqs)
    assert_unchanged(session, before)
    seed = [user_wire(0), user_wire(1), user_wire(2, surfaceOp=replace_op(42, 42), sourceEventSeqs=seqs)]
    with pytest.raises(SurfaceError, match=r"index 2: replace start seq 42 not found in surface$"):
        Session.restore("s", seed, {"version": 0, "id": "s", "createdAt": 0})


def test_failed_candidate_keeps_the_node_list_and_later_appends_extend_it() -> None:
    session = session_with_users(2)
    view = session.surface.nodes
    with pytest.raises(SurfaceError):
        session.append("user/message", user_message("c"), surface_op=Replace(1, 0), source_event_seqs=[0, 1])
    assert session.surface.nodes is view and list(view) == [0, 1]
    session.append("user/message", user_message("d"), surface_op="append")
    assert session.surface.nodes is view and list(view) == [0, 1, 2]


def test_fold_and_restore_report_the_same_missing_start() -> None:
    wires = [user_wire(0), user_wire(1, surfaceOp=replace_op(42, 0), sourceEventSeqs=[0])]
    with pytest.raises(SurfaceError, match="start seq 42 not found") as folded:
        fold_wire(wires)
    with pytest.raises(SurfaceError, match="start seq 42 not found") as restored:
        Session.restore("s", wires, header_wire())
    assert folded.value.detail in restored.value.detail
    assert restored.value.detail.startswith("invalid seed event at index 1: ")


# -- tool-result rewrites ---------------------------------------------------------------


def rewrite_session(**result: Any) -> Session:
    session = Session.create("s", clock=fixed_clock())
    session.append("assistant/message", assistant_data("a", "x", calls=(CALL,)), surface_op="append")
    session.append("tool/call", {"turn": 1, "step": 1, "callId": CALL, "name": "read", "arguments": "{}"})
    session.append(
        "tool/result",
        tool_result_data(CALL, "long output", **result),
        surface_op="append",
        source_event_seqs=[1],
    )
    return session


def rewrite(session: Session, data: Any, op: Replace | None = None, cites: Any = (2,)) -> Event:
    return session.append("tool/result", data, surface_op=op or Replace(2, 2), source_event_seqs=list(cites))


def test_tool_result_may_rewrite_only_its_content() -> None:
    session = rewrite_session(is_error=False, meta={"lines": [1, 2]})
    event = rewrite(session, tool_result_data(CALL, "[pruned]", is_error=False, meta={"lines": [1, 2]}))
    assert list(session.surface.nodes) == [0, event.seq]
    assert session.derive_messages()[-1]["content"][0]["content"][0]["text"] == "[pruned]"


def fold_rewrite(data: Any) -> Any:
    """The S12 rule alone: fold a rewrite built directly, without append's shape checks (C6)."""
    events = [*rewrite_session().events, make_event("tool/result", 3, 0, freeze(data), Replace(2, 2), (2,))]
    return fold_surface(events)


def test_tool_result_rewrite_ignores_blocks_after_the_first() -> None:
    """S12's quirk is a surface rule; append also checks C6 (one block), so it refuses the event."""
    data = tool_result_data(CALL, "[pruned]")
    data["message"]["content"].append({"type": "text", "text": "extra"})
    assert fold_rewrite(data).nodes == (0, 3)
    with pytest.raises(InvalidEventError, match="must contain one tool-result block"):
        rewrite(rewrite_session(), data)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"msg_id": "other"}, "may change only content"),
        ({"is_error": True}, "may change only content"),
        ({"turn": 2}, "may change only content"),
        ({"step": 2}, "may change only content"),
        ({"error": {"name": "E", "code": "X"}}, "may change only content"),
        ({"meta": {"lines": [1, 3]}}, "may change only content"),
        ({"meta": {"lines": "1,2"}}, "may change only content"),
        ({"meta": {"rows": [1, 2]}}, "may change only content"),
        ({"meta": {"lines": [1, 2], "more": 1}}, "may change only content"),
        ({"meta": {"lines": [True, 2]}}, "may change only content"),
    ],
)
def test_tool_result_rewrite_that_changes_more_than_content_is_refused(
    change: dict[str, Any], fragment: str
) -> None:
    session = rewrite_session(meta={"lines": [1, 2]})
    args = {"meta": {"lines": [1, 2]}, **change}
    before = snapshot(session)
    with pytest.raises(SurfaceError, match=fragment):
        rewrite(session, tool_result_data(CALL, "[pruned]", **args))
    assert_unchanged(session, before)


def test_tool_result_meta_is_compared_structurally_not_by_key_order() -> None:
    session = rewrite_session(meta={"a": [1, {"b": 2, "c": 3}]})
    rewrite(session, tool_result_data(CALL, "[pruned]", meta={"a": [1.0, {"c": 3, "b": 2}]}))


def test_tool_result_rewrite_keeps_is_error_presence_and_value() -> None:
    for original, replacement in ((True, None), (None, False), (True, 1), (False, 0)):
        session = rewrite_session(is_error=original)
        with pytest.raises(SurfaceError, match="may change only content"):
            rewrite(session, tool_result_data(CALL, "[pruned]", is_error=replacement))


def test_tool_result_rewrite_refuses_a_changed_tool_call_id_and_other_call() -> None:
    session = rewrite_session()
    data = tool_result_data(CALL, "[pruned]")
    data["message"]["content"][0]["toolCallId"] = "call-2"
    with pytest.raises(SurfaceError, match="may change only content"):
        fold_rewrite(data)
    with pytest.raises(InvalidEventError, match="mismatched tool call ids"):  # C6, before the surface
        rewrite(session, data)
    with pytest.raises(SurfaceError, match="may change only content"):
        rewrite(session, tool_result_data("call-2", "[pruned]"))


def test_tool_result_rewrite_must_target_exactly_one_tool_result() -> None:
    session = rewrite_session()
    with pytest.raises(SurfaceError, match="must rewrite exactly one current node"):
        rewrite(session, tool_result_data(CALL, "[pruned]"), Replace(0, 2), (0, 2))
    with pytest.raises(SurfaceError, match="must target a current tool/result"):
        rewrite(session, tool_result_data(CALL, "[pruned]"), Replace(0, 0), (0,))


def test_message_replacements_may_shadow_tool_results_without_the_rewrite_rule() -> None:
    session = rewrite_session()
    session.append("user/message", user_message("sum"), surface_op=Replace(0, 2), source_event_seqs=[0, 2])
    session.append("assistant/message", assistant_data("a2"), surface_op=Replace(3, 3), source_event_seqs=[3])
    assert list(session.surface.nodes) == [4]


# -- windows and folds ------------------------------------------------------------------


BASE = 400_000


def test_window_fold_offsets_seqs_by_its_base() -> None:
    wires = [
        user_wire(BASE),
        user_wire(BASE + 1),
        user_wire(BASE + 2, surfaceOp=replace_op(BASE, BASE), sourceEventSeqs=[BASE, 7]),
    ]
    events = [Event.from_wire(wire) for wire in wires]
    manager = SurfaceManager(lambda seq: events[seq - BASE], BASE)
    for event in events:
        manager.apply(event)
    assert manager.nodes == [BASE + 2, BASE + 1]
    assert manager.replace_generation == 1
    assert fold_surface(events, BASE).nodes == (BASE + 2, BASE + 1)


def test_window_fold_applies_tool_result_rewrites_inside_the_window() -> None:
    wires = [
        {
            "type": "tool/result",
            "seq": BASE,
            "time": 0,
            "data": tool_result_data(CALL),
            "surfaceOp": "append",
        },
        {
            "type": "tool/result",
            "seq": BASE + 1,
            "time": 0,
            "data": tool_result_data(CALL, "[pruned]"),
            "surfaceOp": replace_op(BASE, BASE),
            "sourceEventSeqs": [BASE],
        },
    ]
    assert fold_wire(wires, BASE).nodes == (BASE + 1,)
    wires[1]["data"] = tool_result_data(CALL, "[pruned]", msg_id="changed")
    with pytest.raises(SurfaceError, match="may change only content"):
        fold_wire(wires, BASE)


def test_window_fold_refuses_a_replace_reaching_before_the_window() -> None:
    wires = [
        user_wire(BASE),
        user_wire(BASE + 1, surfaceOp=replace_op(BASE - 1, BASE), sourceEventSeqs=[BASE - 1, BASE]),
    ]
    with pytest.raises(SurfaceError, match=f"start seq {BASE - 1} not found"):
        fold_wire(wires, BASE)
    with pytest.raises(SurfaceError, match=f"seq {BASE} is not contiguous; expected 0"):
        fold_wire(wires)


def test_fold_equals_the_live_surface_and_is_detached() -> None:
    session = session_with_users(3)
    session.append("user/message", user_message("c"), surface_op=Replace(1, 2), source_event_seqs=[1, 2])
    fold = fold_surface(session.events)
    assert list(fold.nodes) == list(session.surface.nodes) == [0, 3]
    assert fold.replacements == (Replacement(3, 1, 2, (1, 2)),)
    with pytest.raises(TypeError):
        fold.nodes[0] = 9  # type: ignore[index]
    with pytest.raises(AttributeError):
        fold.nodes.append(9)  # type: ignore[attr-defined]
    assert list(session.surface.nodes) == [0, 3]


def test_incremental_manager_keeps_no_replacement_history() -> None:
    session = session_with_users(2)
    session.append("user/message", user_message("c"), surface_op=Replace(0, 1), source_event_seqs=[0, 1])
    manager = SurfaceManager(session.events.__getitem__)
    assert not hasattr(manager, "replacements")
    assert not hasattr(manager, "__dict__")


# -- the live surface object ------------------------------------------------------------


def test_surface_accessor_returns_one_stable_object_with_a_read_only_live_view() -> None:
    session = Session.create("s")
    surface = session.surface
    view = surface.nodes
    assert session.surface is surface and surface.nodes is view
    session.append("user/message", user_message("a"), surface_op="append")
    assert list(view) == [0] and view == [0] and view[-1] == 0 and len(view) == 1
    with pytest.raises(TypeError):
        view[0] = 5  # type: ignore[index]
    with pytest.raises(AttributeError):
        view.append(5)  # type: ignore[attr-defined]
    assert list(view) == [0]


def test_replace_generation_counts_committed_replaces_only() -> None:
    session = session_with_users(3)
    assert session.surface.replace_generation == 0
    session.append("user/message", user_message("c"), surface_op=Replace(0, 0), source_event_seqs=[0])
    session.append("user/message", user_message("d"), surface_op="append")
    with pytest.raises(SurfaceError):
        session.append("user/message", user_message("e"), surface_op=Replace(1, 1), source_event_seqs=[1, 9])
    session.append("user/message", user_message("f"), surface_op=Replace(1, 4), source_event_seqs=[1, 2, 4])
    assert session.surface.replace_generation == 2
    assert list(session.surface.nodes) == [3, 5]


# -- append records markers -------------------------------------------------------------


def test_append_records_citations_and_op_on_the_returned_and_logged_event() -> None:
    session = Session.create("s")
    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {}})
    event = session.append(
        "assistant/message", assistant_data("a"), surface_op="append", source_event_seqs=[0]
    )
    assert event.surface_op == "append" and event.source_event_seqs == (0,)
    assert session.events[-1] is event
    assert event.to_wire()["sourceEventSeqs"] == (0,) and event.to_wire()["surfaceOp"] == "append"


def test_non_surface_events_have_no_surface_fields() -> None:
    event = Session.create("s").append("turn/start", {"turn": 1})
    assert event.surface_op is None and event.source_event_seqs is None
    assert set(event.to_wire()) == {"type", "seq", "time", "data"}


def test_wire_replace_object_is_accepted_by_append() -> None:
    session = session_with_users(1)
    event = session.append(
        "user/message", user_message("b"), surface_op=replace_op(0, 0), source_event_seqs=[0]
    )
    assert event.surface_op == Replace(0, 0)


def test_citations_and_replace_objects_are_snapshotted() -> None:
    session = session_with_users(2)
    cites = [0, 1]
    op = replace_op(0, 1)
    event = session.append("user/message", user_message("c"), surface_op=op, source_event_seqs=cites)
    cites.append(2)
    op["start"] = 1
    assert event.source_event_seqs == (0, 1) and event.surface_op == Replace(0, 1)
    assert session.events[-1].to_wire()["surfaceOp"] == replace_op(0, 1)


def test_derived_messages_follow_the_surface() -> None:
    session = Session.create("s", clock=fixed_clock())
    session.append("turn/start", {"turn": 1})
    first = session.append("user/message", user_message("u1"), surface_op="append")
    ctx = session.append(
        "user/message", user_message("ctx", source={"kind": "plugin", "plugin": "p"}), surface_op="append"
    )
    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta"}})
    reply = session.append("assistant/message", assistant_data("a1"), surface_op="append")
    session.append("session/end-seed", {})
    assert session.derive_messages() == [first.data, ctx.data, reply.data["message"]]
    summary = session.append(
        "user/message", user_message("sum"), surface_op=Replace(1, 2), source_event_seqs=[1, 2]
    )
    assert [m["id"] for m in session.derive_messages()] == ["sum", "a1"]
    assert session.derive_messages()[0] is summary.data


def test_empty_assistant_message_joins_the_surface_but_derives_nothing() -> None:
    session = Session.create("s")
    event = session.append(
        "assistant/message",
        assistant_data("a", None, usage={"inputTokens": 1}),
        surface_op="append",
        source_event_seqs=[],
    )
    assert list(session.surface.nodes) == [0]
    assert derive_event_message(event) is None
    assert session.derive_messages() == []


# -- guards -----------------------------------------------------------------------------


def test_guard_predicates_classify_events() -> None:
    session = session_with_users(1)
    appended = session.events[0]
    replacing = session.append(
        "user/message", user_message("b"), surface_op=Replace(0, 0), source_event_seqs=[0]
    )
    log_only = session.append("turn/start", {"turn": 1})
    markerless = make_event("user/message", 9, 0, freeze(user_message("m")))
    assert [is_surface_event(e) for e in (appended, replacing, log_only, markerless)] == [
        True,
        True,
        False,
        False,
    ]
    assert [is_append_surface_event(e) for e in (appended, replacing, log_only, markerless)] == [
        True,
        False,
        False,
        False,
    ]
    assert [is_replacement_surface_event(e) for e in (appended, replacing, log_only, markerless)] == [
        False,
        True,
        False,
        False,
    ]
    assert all(is_surface_eligible_type(t) for t in ("user/message", "assistant/message", "tool/result"))
    assert not any(is_surface_eligible_type(t) for t in ("tool/call", "turn/start", "user/message2"))
