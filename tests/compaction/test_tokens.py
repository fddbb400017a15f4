"""The token meter: DSH's heuristic, the incremental fold, usage anchors and projections (spec §6)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentlog import InvalidEventError, InvariantError, Session, thaw
from agentlog.compaction.events import COMPACTION_PRUNE, COMPACTION_SUMMARY
from agentlog.compaction.tokens import Pricer, TokenMeter, utf16_len
from agentlog.core.events import Replace
from tests.compaction.helpers import new_session


def user(session: Session, text: str, *, index: int | None = None) -> int:
    ident = f"u{session.seq if index is None else index}"
    return session.append(
        "user/message",
        {
            "id": ident,
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        },
        surface_op="append",
    ).seq


def header(session: Session, system: str | None = None, tools: Any = None, model: str = "m") -> None:
    value: dict[str, Any] = {"config": {"provider": "p", "model": model}}
    if system is not None:
        value["system"] = system
    if tools is not None:
        value["tools"] = tools
    session.append("request/header", {"header": value, "reason": "change"})


def step(
    session: Session,
    turn: int,
    number: int,
    *,
    text: str = "ok",
    usage: Any = None,
    chunks: list[str] | None = None,
    cite: bool = True,
) -> int:
    """A step whose assistant message says ``text`` (streamed as ``chunks``)."""
    session.append("step/start", {"turn": turn, "step": number})
    seqs = [
        session.append(
            "assistant/chunk",
            {"turn": turn, "step": number, "chunk": {"type": "text-delta", "index": 0, "text": piece}},
        ).seq
        for piece in (chunks or [])
    ]
    data: dict[str, Any] = {
        "turn": turn,
        "step": number,
        "message": {
            "id": f"a{session.seq}",
            "role": "assistant",
            "content": [{"type": "text", "text": text}] if text else [],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        },
    }
    if usage is not None:
        data["usage"] = usage
    seq = session.append(
        "assistant/message", data, surface_op="append", source_event_seqs=seqs if cite else None
    ).seq
    session.append("step/end", {"turn": turn, "step": number})
    return seq


# -- pricing ---------------------------------------------------------------------------------------


def test_fixed_prices_follow_the_heuristic() -> None:
    pricer = Pricer()
    assert pricer.message({"content": [{"type": "text", "text": "abcd"}]}) == 9
    assert pricer.block({"type": "text", "text": "abcde"}) == 2 + 4
    assert pricer.block({"type": "reasoning", "text": "abcd"}) == 5
    assert (
        pricer.block({"type": "tool-call", "id": "c", "name": "read", "arguments": '{"p":12}'}) == 1 + 2 + 4
    )
    inner = [{"type": "text", "text": "abcd"}, {"type": "text", "text": ""}]
    assert pricer.block({"type": "tool-result", "toolCallId": "c", "content": inner}) == 5 + 4 + 4
    image = {"type": "image", "url": "abc"}  # '{"type":"image","url":"abc"}' is 28 long
    assert pricer.block(image) == 4 + 7
    assert pricer.block({"type": "future-thing", "x": [1, 2]}) == 4 + 9  # priced by its JSON (33 long)


def test_lengths_are_utf16_code_units() -> None:
    assert utf16_len("😀😀😀") == 6 and utf16_len("héllo") == 5 and utf16_len("abc") == 3
    assert Pricer().block({"type": "text", "text": "😀😀😀"}) == 2 + 4  # len() would say 1 + 4


def test_an_exact_counter_replaces_the_estimate_but_keeps_the_overheads() -> None:
    meter = TokenMeter(counter=len)
    assert meter.estimate_message({"content": [{"type": "text", "text": "abcd"}]}) == 4 + 4 + 4


def test_the_header_envelope_is_priced_and_empty_parts_are_free() -> None:
    meter = TokenMeter()
    assert meter.estimate_header({"config": {"provider": "p", "model": "m"}, "system": "abcd"}) == 5
    assert meter.estimate_header({"config": {"provider": "p", "model": "m"}, "system": "", "tools": []}) == 0
    tools = [{"name": "t"}]  # [{"name":"t"}] is 14 long
    assert meter.estimate_header({"config": {}, "tools": tools}) == 4 + 4


def test_an_assistant_message_with_empty_content_costs_nothing() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    step(session, 1, 1, text="")
    measured = TokenMeter().measure(session)
    assert [tuple(node) for node in measured.nodes] == [(measured.nodes.seqs[0], 0)]


# -- measurement --------------------------------------------------------------------------------------


def test_an_empty_session_measures_none_and_the_snapshot_is_frozen() -> None:
    measured = TokenMeter().measure(new_session())
    assert (measured.baseline, measured.total_tokens, len(measured.nodes)) == ("none", 0, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        measured.total_tokens = 5  # type: ignore[misc]


def test_without_usage_the_total_is_the_estimate_of_header_and_surface() -> None:
    session = new_session()
    header(session, system="abcd")
    user(session, "abcd")
    measured = TokenMeter().measure(session)
    assert (measured.baseline, measured.total_tokens, measured.surface_tokens, measured.header_tokens) == (
        "estimated",
        14,
        9,
        5,
    )


def test_earlier_snapshots_stay_detached_through_appends_and_replaces() -> None:
    session = new_session()
    meter = TokenMeter()
    first = user(session, "abcd")
    before = meter.measure(session)
    user(session, "abcdefgh")
    grown = meter.measure(session)
    session.append(
        "user/message",
        {"id": "r", "role": "user", "content": [], "source": {"kind": "user"}},
        surface_op=Replace(first, first),
        source_event_seqs=[first],
    )
    after = meter.measure(session)
    assert [tuple(node) for node in before.nodes] == [(first, 9)]
    assert [node.tokens for node in grown.nodes] == [9, 10]
    assert [node.tokens for node in after.nodes] == [4, 10] and after.surface_tokens == 14
    assert before.log_revision == 1 and grown.log_revision == 2 and after.log_revision == 3


def test_a_header_override_changes_pressure_only() -> None:
    session = new_session()
    header(session, system="abcd")
    user(session, "abcd")
    meter = TokenMeter()
    plain = meter.measure(session)
    override = meter.measure(session, {"config": {"provider": "p", "model": "m"}, "system": "a" * 400})
    assert override.nodes == plain.nodes and override.surface_tokens == plain.surface_tokens
    assert override.total_tokens == 9 + 104 and plain.total_tokens == 14


def test_usage_anchors_the_total_and_later_growth_is_added() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    usage = {
        "inputTokens": 20,
        "cacheReadTokens": 3,
        "cacheWriteTokens": 4,
        "outputTokens": 7,
        "reasoningTokens": 100,
    }
    step(session, 1, 1, text="ok", usage=usage, chunks=["o", "k"])
    meter = TokenMeter()
    measured = meter.measure(session)
    assert (measured.baseline, measured.baseline_tokens, measured.delta_tokens, measured.total_tokens) == (
        "usage",
        34,
        0,
        34,
    )
    user(session, "abcd")
    assert meter.measure(session).total_tokens == 34 + 9


def test_usage_below_the_estimate_falls_back_to_an_estimated_anchor() -> None:
    session = new_session()
    header(session, system="s" * 400)
    session.append("turn/start", {"turn": 1})
    step(session, 1, 1, text="ok", usage={"inputTokens": 1, "outputTokens": 1}, chunks=["ok"])
    measured = TokenMeter().measure(session)
    assert measured.baseline == "estimated" and measured.total_tokens == 104 + 9


def test_missing_usage_gives_an_estimated_anchor() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    step(session, 1, 1, text="ok", chunks=["ok"])
    assert TokenMeter().measure(session).baseline == "estimated"


def test_the_anchor_prices_the_streamed_output_not_the_durable_message() -> None:
    usage = {"inputTokens": 0, "outputTokens": 0}
    totals = {}
    for name, chunks, cite in (
        ("explicit-empty", [], True),
        ("absent", [], False),
        ("streamed", ["abcd"] * 4, True),
    ):
        session = new_session()
        session.append("turn/start", {"turn": 1})
        step(session, 1, 1, text="x" * 40, usage=usage, chunks=chunks, cite=cite)
        measured = TokenMeter().measure(session)
        totals[name] = measured.total_tokens
    message = 10 + 4 + 4
    assert totals["absent"] == message  # anchor = durable message: delta 0
    assert totals["explicit-empty"] == message  # anchor surface 0, delta = the message
    assert totals["streamed"] == message  # output 16 chars (4+4+4=12), baseline 12, delta 18 - 12


def test_the_latest_anchor_wins_and_a_changed_envelope_invalidates_it() -> None:
    session = new_session()
    header(session, system="abcd", tools=[])
    session.append("turn/start", {"turn": 1})
    step(session, 1, 1, usage={"inputTokens": 100, "outputTokens": 0}, chunks=["ok"])
    step(session, 1, 2, usage={"inputTokens": 200, "outputTokens": 0}, chunks=["ok"])
    meter = TokenMeter()
    assert meter.measure(session).baseline_tokens == 200
    assert (
        meter.measure(session, {"config": {"provider": "p", "model": "m"}, "system": "abcd"}).baseline
        == "usage"
    )
    header(session, system="abcd", model="other")
    assert meter.measure(session).baseline == "estimated"
    header(session, system="abcd")
    assert meter.measure(session).baseline == "usage"  # the old envelope again matches the latest anchor
    step(session, 1, 3, usage={"inputTokens": 300, "outputTokens": 0}, chunks=["ok"])
    header(session, system="abcd", model="other")
    header(session, system="abcd")
    assert meter.measure(session).baseline_tokens == 300


def test_a_replace_has_a_negative_delta() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    step(session, 1, 1, usage={"inputTokens": 1000, "outputTokens": 0}, chunks=["ok"])
    big = user(session, "b" * 400)
    meter = TokenMeter()
    before = meter.measure(session)
    session.append(
        "user/message",
        {
            "id": "small",
            "role": "user",
            "content": [{"type": "text", "text": "s"}],
            "source": {"kind": "user"},
        },
        surface_op=Replace(big, big),
        source_event_seqs=[big],
    )
    after = meter.measure(session)
    assert after.delta_tokens - before.delta_tokens == 9 - 108 and after.total_tokens < before.total_tokens


def test_malformed_steps_fail_the_same_way_every_call_without_advancing() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 2})
    meter = TokenMeter()
    for _ in range(2):
        with pytest.raises(InvariantError, match="step/start while step 1 is open") as caught:
            meter.measure(session)
        assert caught.value.seq == 2 and meter._folds[session].consumed == 2


def test_a_message_citing_a_non_chunk_fails_the_same_way_every_call() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    note = user(session, "not a chunk")
    session.append("step/start", {"turn": 1, "step": 1})
    session.append(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "a",
                "role": "assistant",
                "content": [{"type": "text", "text": "x"}],
                "source": {"kind": "model", "provider": "p", "model": "m"},
            },
        },
        surface_op="append",
        source_event_seqs=[note],
    )
    meter = TokenMeter()
    for _ in range(2):
        with pytest.raises(InvalidEventError, match="not an earlier assistant/chunk"):
            meter.measure(session)
    assert len(meter._folds[session].seqs) == 1  # the message was not priced


def test_a_fresh_meter_catches_up_to_the_same_figures() -> None:
    from tests.compaction.helpers import session_with_turns

    session, recorder = session_with_turns(2)
    incremental = TokenMeter()
    incremental.measure(session)
    from tests.compaction.helpers import record_turn

    record_turn(recorder, 3)
    assert incremental.measure(session) == TokenMeter().measure(session)


# -- projections --------------------------------------------------------------------------------------


def test_pressure_projection_excludes_output_and_carries_forward() -> None:
    session = new_session()
    meter = TokenMeter()
    assert meter.context_pressure(session).pressure_tokens is None
    session.append("turn/start", {"turn": 1})
    step(session, 1, 1, usage={"inputTokens": 100, "cacheReadTokens": 20, "outputTokens": 50}, chunks=["ok"])
    assert meter.context_pressure(session).pressure_tokens == 120
    assert meter.context_pressure(session).projected_tokens == 120 + 9
    user(session, "abcd")
    assert meter.context_pressure(session).projected_tokens == 120 + 18


def test_a_priced_replace_shrinks_the_projection_and_an_unpriced_one_does_not() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    step(session, 1, 1, usage={"inputTokens": 1000, "outputTokens": 0}, chunks=["ok"])
    big = user(session, "b" * 400)
    meter = TokenMeter()
    assert meter.context_pressure(session).projected_tokens == 1000 + 9 + 108
    session.append(
        COMPACTION_PRUNE,
        {"shadowedRange": {"start": big, "end": big}, "shadowedSeqs": [big], "shadowedTokenCount": 108},
    )
    small = session.append(
        "user/message",
        {"id": "s", "role": "user", "content": [{"type": "text", "text": "s"}], "source": {"kind": "user"}},
        surface_op=Replace(big, big),
        source_event_seqs=[big],
    ).seq
    assert meter.context_pressure(session).projected_tokens == 1000 + 9 + 9
    session.append(
        "user/message",
        {
            "id": "t",
            "role": "user",
            "content": [{"type": "text", "text": "t" * 40}],
            "source": {"kind": "user"},
        },
        surface_op=Replace(small, small),
        source_event_seqs=[small],
    )
    assert meter.context_pressure(session).projected_tokens == 1000 + 9 + 9


def test_a_price_naming_another_span_is_a_hard_error() -> None:
    session = new_session()
    first, second = user(session, "a" * 40), user(session, "b" * 40)
    session.append(
        COMPACTION_SUMMARY,
        {
            "compactionId": "k",
            "summary": [],
            "shadowedRange": {"start": first, "end": first},
            "shadowedSeqs": [first],
            "shadowedTokenCount": 14,
            "provider": "p",
            "model": "m",
        },
    )
    session.append(
        "user/message",
        {"id": "c", "role": "user", "content": [], "source": {"kind": "user"}},
        surface_op=Replace(second, second),
        source_event_seqs=[second],
    )
    with pytest.raises(InvalidEventError, match="follows a price for a different span"):
        TokenMeter().context_pressure(session)


def test_the_projection_clamps_at_zero_and_keeps_constant_state() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    step(session, 1, 1, usage={"inputTokens": 5, "outputTokens": 0}, chunks=["ok"])
    big = user(session, "b" * 400)
    session.append(
        COMPACTION_PRUNE,
        {"shadowedRange": {"start": big, "end": big}, "shadowedSeqs": [big], "shadowedTokenCount": 100_000},
    )
    session.append(
        "user/message",
        {"id": "s", "role": "user", "content": [], "source": {"kind": "user"}},
        surface_op=Replace(big, big),
        source_event_seqs=[big],
    )
    meter = TokenMeter()
    assert meter.context_pressure(session).projected_tokens == 0
    assert set(type(meter._projections[session]).__slots__) == {"consumed", "pending", "sample", "surface"}


def test_the_breakdown_splits_system_tools_and_messages() -> None:
    session = new_session()
    header(session, system="abcd", tools=[{"name": "t"}])
    user(session, "abcd")
    breakdown = TokenMeter().context_breakdown(session)
    assert (breakdown.system_tokens, breakdown.tools_tokens, breakdown.message_tokens) == (5, 8, 9)
    assert thaw(session.request_header())["system"] == "abcd"
