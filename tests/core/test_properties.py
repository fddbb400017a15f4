"""Properties of the fold and derivation over random valid sessions (spec §6 D3-D4, properties.spec)."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import FrozenDict, Replace, Session, derive_event_message, fold_surface
from agentlog.core.jsonvalue import dumps
from tests.strategies import (
    Op,
    fixed_clock,
    header_wire,
    interleaved,
    model_nodes,
    run_ops,
    session_ops,
)

SETTINGS = settings(max_examples=150, deadline=None)


def build(ops: list[Op]) -> tuple[Session, list[Any]]:
    session = Session.create("s", clock=fixed_clock())
    return session, run_ops(session, ops)


def rendered(messages: list[Any]) -> list[bytes]:
    """Messages as bytes: equal content, independent of object identity."""
    return [dumps(message) for message in messages]


def scratch(session: Session) -> list[Any]:
    events = session.events
    found = (derive_event_message(events[seq]) for seq in fold_surface(events).nodes)
    return [message for message in found if message is not None]


@SETTINGS
@given(session_ops())
def test_live_fold_and_restore_agree_on_nodes_and_messages(ops: list[Op]) -> None:
    session, events = build(ops)
    expected_nodes = [events[index].seq for index in model_nodes(ops)]
    restored = Session.restore("s", [event.to_wire() for event in session.events], header_wire())
    from_json = Session.restore(
        "s", [orjson.loads(event.to_json()) for event in session.events], header_wire()
    )
    assert list(session.surface.nodes) == expected_nodes
    assert list(fold_surface(session.events).nodes) == expected_nodes
    assert list(restored.surface.nodes) == expected_nodes
    assert restored.surface.replace_generation == session.surface.replace_generation
    assert rendered(restored.derive_messages()) == rendered(session.derive_messages())
    assert rendered(from_json.derive_messages()) == rendered(session.derive_messages())
    replacements = fold_surface(session.events).replacements
    assert len(replacements) == session.surface.replace_generation
    assert [r.seq for r in replacements] == [e.seq for e in events if isinstance(e.surface_op, Replace)]


@SETTINGS
@given(session_ops())
def test_derived_messages_equal_a_scratch_replay_after_every_append(ops: list[Op]) -> None:
    session = Session.create("s", clock=fixed_clock())
    checked: list[int] = []

    def check() -> None:
        derived = session.derive_messages()
        replay = scratch(session)
        assert len(derived) == len(replay)
        assert all(a is b for a, b in zip(derived, replay, strict=True))
        checked.append(session.seq)

    run_ops(session, ops, after=check)
    assert checked == list(range(1, len(ops) + 1))


@SETTINGS
@given(st.data())
def test_interleaving_log_only_events_never_changes_derived_messages(data: st.DataObject) -> None:
    ops = data.draw(session_ops(max_ops=15))
    noisy = data.draw(interleaved(ops))
    plain_session, _ = build(ops)
    noisy_session, _ = build(noisy)
    assert rendered(noisy_session.derive_messages()) == rendered(plain_session.derive_messages())


@SETTINGS
@given(session_ops())
def test_derivation_is_deterministic_and_seqs_are_dense(ops: list[Op]) -> None:
    first, _ = build(ops)
    second, _ = build(ops)
    assert rendered(first.derive_messages()) == rendered(second.derive_messages())
    assert [event.seq for event in first.events] == list(range(len(ops)))
    assert first.seq == len(ops) == len(first.events)


@SETTINGS
@given(session_ops())
def test_replay_adds_exactly_one_event_and_replay_of_replay_adds_none(ops: list[Op]) -> None:
    session, _ = build(ops)
    replay = Session.create("s", seed=session.events)
    assert list(replay.events[: len(ops)]) == list(session.events)
    assert len(replay.events) == len(ops) + 1 and replay.events[-1].type == "session/end-seed"
    assert replay.first_live_seq == len(ops)
    assert rendered(replay.derive_messages()) == rendered(session.derive_messages())
    again = Session.create("s", seed=replay.events)
    assert list(again.events) == list(replay.events) and again.first_live_seq == len(ops) + 1


@SETTINGS
@given(session_ops())
def test_derived_messages_have_known_roles_are_frozen_and_leave_the_log_alone(ops: list[Op]) -> None:
    session, _ = build(ops)
    log_before = [event.to_json() for event in session.events]
    messages = session.derive_messages()
    assert all(message["role"] in ("user", "assistant", "system") for message in messages)
    assert all(type(message) is FrozenDict for message in messages)
    messages.reverse()
    messages.clear()
    assert [event.to_json() for event in session.events] == log_before
    assert len(session.derive_messages()) == len(scratch(session))
