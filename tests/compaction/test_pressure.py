"""Automatic compaction: pressure (A2, A3), context overflow (A4-A6) and the Recorder loop hooks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from agentlog import Session, SurfaceError
from agentlog.compaction.config import CompactionConfig, PrunerConfig
from agentlog.compaction.engine import Compactor
from agentlog.compaction.events import COMPACTION_END, COMPACTION_START, COMPACTION_SUMMARY, is_checkpoint
from agentlog.compaction.pairing import PairingIndex
from agentlog.compaction.pruner import ToolResultPruner
from agentlog.compaction.region import select_compactable_range
from agentlog.compaction.summary import SummaryRequest
from agentlog.compaction.tokens import Measurement, TokenMeter
from agentlog.core.invariants import InvariantChecker, check_invariants
from agentlog.errors import CompactionError, TargetPressureConfigError
from agentlog.recording.recorder import Recorder, Turn
from tests.compaction.helpers import (
    HEADER,
    BlockingSummarizer,
    FailingSummarizer,
    FixedSummarizer,
    compaction_events,
    fill,
    new_session,
    record_turn,
    run,
    tool_step,
    types,
)


class ContextOverflowError(Exception):
    """A provider error that says the request did not fit."""

    code = "CONTEXT_WINDOW_EXCEEDED"


def in_turn(turns: int = 3, size: int = 400) -> tuple[Session, Recorder, Turn]:
    session = new_session()
    InvariantChecker.attach(session)
    recorder = Recorder(session)
    for index in range(1, turns + 1):
        record_turn(recorder, index, size=size)
    turn = recorder.turn().start()
    fill(turn, turns + 1, size=size)
    return session, recorder, turn


def total(session: Session) -> int:
    return TokenMeter().measure(session).total_tokens


def window_for(session: Session, ratio: float) -> int:
    """A context window whose 0.8 threshold sits at ``ratio`` x the session's current total."""
    return int(total(session) * ratio / 0.8) + 1


# -- pressure ------------------------------------------------------------------------------------------


def test_no_request_header_means_no_pressure_compaction() -> None:
    session = new_session()
    turn = Recorder(session).turn().start()
    for _ in range(5):
        turn.user_message("x" * 400)
    assert Compactor(FixedSummarizer(), context_window=10).compact_if_needed(session, "pressure") is None
    assert not compaction_events(session)


def test_below_the_threshold_nothing_happens_and_above_it_the_head_is_compacted() -> None:
    session, _, turn = in_turn()
    assert (
        Compactor(FixedSummarizer(), context_window=window_for(session, 1.1)).compact_if_needed(
            session, "pressure"
        )
        is None
    )
    assert not compaction_events(session)
    head = session.surface.nodes[0]
    window = window_for(session, 0.6)
    result = Compactor(FixedSummarizer(), context_window=window).compact_if_needed(session, "pressure")
    assert result is not None and result.shadowed_seqs[0] == head
    assert compaction_events(session)[0].data["turn"] == turn.number
    assert total(session) < int(window * 0.8)
    retained = TokenMeter().measure(session).nodes.prices[1:]
    assert sum(retained) >= int(window * 0.16)


def test_capacity_comes_from_the_resolver_for_the_routed_target_or_the_logged_request_context() -> None:
    session, _, turn = in_turn()
    asked: list[tuple[str, str]] = []

    async def resolver(provider: str, model: str) -> int | None:
        asked.append((provider, model))
        return window_for(session, 1.5)

    Compactor(FixedSummarizer(), context_window=resolver).compact_if_needed(session, "pressure")
    with turn.step() as step:
        step.request_header({**HEADER, "config": {"provider": "q", "model": "m"}})
        step.text_delta("x")
        step.assistant()
    Compactor(FixedSummarizer(), context_window=resolver).compact_if_needed(session, "pressure")
    assert asked == [("p", "m"), ("q", "m")]
    with turn.step() as step:
        step.request_header(
            {**HEADER, "config": {"provider": "q", "model": "m"}},
            context={"provider": "q", "model": "m", "contextWindow": window_for(session, 0.6)},
        )
        step.text_delta("x")
        step.assistant()
    assert Compactor(FixedSummarizer()).compact_if_needed(session, "pressure") is not None


def test_missing_capacity_fails_pressure_but_not_overflow() -> None:
    session, _, _ = in_turn()
    compactor = Compactor(FixedSummarizer())
    with pytest.raises(TargetPressureConfigError, match="no context capacity for p/m"):
        compactor.compact_if_needed(session, "pressure")
    assert compactor.compact_if_needed(session, "context-overflow") is not None


def test_the_envelope_counts_toward_pressure() -> None:
    session, _, turn = in_turn(2)
    window = window_for(session, 1.2)
    compactor = Compactor(FixedSummarizer(), context_window=window)
    assert compactor.compact_if_needed(session, "pressure") is None
    with turn.step() as step:
        step.request_header({**HEADER, "system": "s" * 4 * int(window * 0.3)})
        step.text_delta("x")
        step.assistant()
    assert compactor.compact_if_needed(session, "pressure") is not None


def test_a_decision_measures_once_with_the_session_only() -> None:
    calls: list[Any] = []

    class Counting(TokenMeter):
        def measure(self, session: Session, header_override: Any = None) -> Measurement:
            calls.append(header_override)
            return super().measure(session, header_override)

    session, _, _ = in_turn()
    Compactor(FixedSummarizer(), meter=Counting(), context_window=10**6).compact_if_needed(
        session, "pressure"
    )
    assert calls == [None]


def test_high_envelope_pressure_without_a_compactable_range_is_none() -> None:
    session = new_session()
    turn = Recorder(session).turn().start()
    with turn.step() as step:
        step.user_message("hello")
        step.request_header({**HEADER, "system": "s" * 40_000})
        step.text_delta("x")
        step.assistant()
    assert Compactor(FixedSummarizer(), context_window=1000).compact_if_needed(session, "pressure") is None
    assert not compaction_events(session)


def test_retries_are_bounded_and_the_committed_checkpoint_stays() -> None:
    session, _, turn = in_turn()
    with turn.step() as step:  # an envelope so big that no summary can relieve the pressure
        step.request_header({**HEADER, "system": "s" * 4 * 20 * total(session)})
        step.text_delta("x")
        step.assistant()
    config = CompactionConfig(compaction_retries=0, retain_tokens=0)
    compactor = Compactor(FixedSummarizer(), config=config, context_window=window_for(session, 0.9))
    with pytest.raises(CompactionError, match="still above threshold after 1 compaction attempts"):
        compactor.compact_if_needed(session, "pressure")
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END]
    assert session.surface.replace_generation == 1


def test_the_retention_cut_moves_toward_the_head_to_keep_a_tool_pair_whole() -> None:
    session, _, _ = in_turn()
    measured = TokenMeter().measure(session)
    nodes, prices = list(session.surface.nodes), list(measured.nodes.prices)
    index = PairingIndex()
    index.refresh(session.surface.nodes, 0, session.events.__getitem__)
    result_positions = [i for i, seq in enumerate(nodes) if session.events[seq].type == "tool/result"]
    cut = result_positions[-1]  # retaining from a tool result would split its pair
    retain = sum(prices[cut:])
    region = select_compactable_range(session.surface.nodes, measured, index, retain)
    assert region is not None and region.start == nodes[0]
    assert region.end == nodes[cut - 2]  # the cut moved before the assistant message that made the call
    assert index.balanced_after(region.end)


def test_a_mismatched_priced_surface_is_refused() -> None:
    session, _, _ = in_turn()
    other, _, _ = in_turn(2)
    index = PairingIndex()
    index.refresh(session.surface.nodes, 0, session.events.__getitem__)
    with pytest.raises(SurfaceError, match="token-meter surface does not match"):
        select_compactable_range(session.surface.nodes, TokenMeter().measure(other), index, 0)


def test_a_surface_that_is_one_tool_pair_cannot_be_compacted() -> None:
    session = new_session()
    turn = Recorder(session).turn().start()
    tool_step(turn, "only", result="r" * 5000)
    compactor = Compactor(FixedSummarizer(), context_window=100)
    assert compactor.compact_if_needed(session, "pressure") is None
    assert compactor.compact_if_needed(session, "context-overflow") is None
    assert not compaction_events(session)


# -- pruning on the automatic paths ---------------------------------------------------------------------


SMALL_PRUNE = PrunerConfig(threshold_chars=300, head_chars=40, tail_chars=20)


def test_no_pruning_below_pressure() -> None:
    session, _, _ = in_turn(size=1000)
    compactor = Compactor(
        FixedSummarizer(), pruner=ToolResultPruner(SMALL_PRUNE), context_window=window_for(session, 1.2)
    )
    assert compactor.compact_if_needed(session, "pressure") is None
    assert session.surface.replace_generation == 0


def test_pruning_alone_can_relieve_pressure_without_a_summary() -> None:
    session = new_session()
    turn = Recorder(session).turn().start()
    tool_step(turn, "c1", result="r" * 4000, prompt="go")
    answer_window = window_for(session, 0.9)
    summarizer = FixedSummarizer()
    compactor = Compactor(summarizer, pruner=ToolResultPruner(SMALL_PRUNE), context_window=answer_window)
    assert compactor.compact_if_needed(session, "pressure") is None
    assert summarizer.requests == [] and session.surface.replace_generation == 1
    assert types(compaction_events(session)) == ["compaction/prune"]


def test_insufficient_pruning_hands_the_marker_to_the_summarizer() -> None:
    session, _, _ = in_turn(size=1000)
    summarizer = FixedSummarizer()
    compactor = Compactor(
        summarizer, pruner=ToolResultPruner(SMALL_PRUNE), context_window=window_for(session, 0.3)
    )
    assert compactor.compact_if_needed(session, "pressure") is not None
    texts = [
        block["content"][0]["text"]
        for message in summarizer.requests[0].messages
        for block in message["content"]
        if block["type"] == "tool-result"
    ]
    assert texts and all("tool result middle pruned" in text and len(text) < 300 for text in texts)


def test_without_a_pruner_the_original_results_reach_the_summarizer() -> None:
    session, _, _ = in_turn(size=1000)
    summarizer = FixedSummarizer()
    Compactor(summarizer, context_window=window_for(session, 0.6)).compact_if_needed(session, "pressure")
    texts = [
        block["content"][0]["text"]
        for message in summarizer.requests[0].messages
        for block in message["content"]
        if block["type"] == "tool-result"
    ]
    assert texts and all(text == "r" * 1000 for text in texts)


# -- overflow recovery ----------------------------------------------------------------------------------


def recover(compactor: Compactor, session: Session, error: BaseException, attempts: int = 0) -> bool:
    result: bool = run(compactor.arecover_overflow(session, error, attempts=attempts))
    return result


def test_forced_overflow_below_pressure_retries_with_the_newest_node_retained() -> None:
    session, _, _ = in_turn()
    newest = session.surface.nodes[-1]
    assert recover(Compactor(FixedSummarizer()), session, ContextOverflowError("too long"))
    assert session.surface.replace_generation == 1 and list(session.surface.nodes)[-1] == newest
    assert len(session.surface.nodes) == 2


def test_a_prune_only_overflow_retries_without_a_summary() -> None:
    session = new_session()
    turn = Recorder(session).turn().start()
    tool_step(turn, "c1", result="r" * 4000)
    summarizer = FixedSummarizer()
    assert recover(
        Compactor(summarizer, pruner=ToolResultPruner(SMALL_PRUNE)), session, ContextOverflowError()
    )
    assert summarizer.requests == [] and types(compaction_events(session)) == ["compaction/prune"]


def test_a_summary_failure_after_a_durable_prune_still_retries(caplog: pytest.LogCaptureFixture) -> None:
    session, _, _ = in_turn(size=1000)
    compactor = Compactor(
        FailingSummarizer(RuntimeError("summary down")), pruner=ToolResultPruner(SMALL_PRUNE)
    )
    with caplog.at_level(logging.WARNING, logger="agentlog.compaction"):
        assert recover(compactor, session, ContextOverflowError())
    assert "retrying from the replacement surface" in caplog.text


def test_an_uncompactable_surface_declines_and_a_failure_keeps_the_original_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lone = new_session()
    turn = Recorder(lone).turn().start()
    tool_step(turn, "c1", result="r" * 100, prompt=None)
    assert not recover(Compactor(FixedSummarizer()), lone, ContextOverflowError())
    session, _, _ = in_turn()
    with caplog.at_level(logging.WARNING, logger="agentlog.compaction"):
        assert not recover(
            Compactor(FailingSummarizer(RuntimeError("down"))), session, ContextOverflowError()
        )
    assert "keeping the original error" in caplog.text and session.surface.replace_generation == 0


def test_other_failures_the_retry_cap_and_disabled_recovery_decline() -> None:
    session, _, _ = in_turn()
    compactor = Compactor(FixedSummarizer())
    assert not recover(compactor, session, RuntimeError("rate limited"))
    assert not recover(compactor, session, ContextOverflowError(), attempts=1)
    no_retries = Compactor(FixedSummarizer(), config=CompactionConfig(max_overflow_retries=0))
    assert not recover(no_retries, session, ContextOverflowError())
    assert not recover(
        Compactor(FixedSummarizer(), config=CompactionConfig(auto=False)), session, ContextOverflowError()
    )
    assert not compaction_events(session)
    assert (
        Compactor(
            FixedSummarizer(),
            config=CompactionConfig(max_overflow_retries=0),
            context_window=window_for(session, 0.5),
        ).compact_if_needed(session, "pressure")
        is not None
    )


def test_cancellation_during_overflow_compaction_propagates_instead_of_retrying() -> None:
    session, _, _ = in_turn()

    async def main() -> None:
        summarizer = BlockingSummarizer()
        task = asyncio.ensure_future(Compactor(summarizer).arecover_overflow(session, ContextOverflowError()))
        await summarizer.entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_END]


# -- the Recorder hooks --------------------------------------------------------------------------------


def test_the_pre_step_hook_compacts_between_steps_and_stays_idle_below_pressure() -> None:
    session, recorder, turn = in_turn()
    window = window_for(session, 0.6)
    recorder.compactor = Compactor(FixedSummarizer(), context_window=window)
    turn.end()
    with recorder.turn() as next_turn:
        answer_count = len(compaction_events(session))
        with next_turn.step() as step:
            step.user_message("next")
            step.request_header(HEADER)
            step.text_delta("x")
            step.assistant()
        assert len(compaction_events(session)) > answer_count
        with next_turn.step() as step:
            step.request_header(HEADER)
            step.text_delta("y")
            step.assistant()
    kinds = types(session.events)
    start = kinds.index(COMPACTION_START)
    assert kinds[start - 1] == "turn/start" and kinds[start + 4] == "step/start"
    assert kinds.count(COMPACTION_START) == 1
    check_invariants(session.events)


def test_pre_step_failures_warn_and_the_step_still_starts(caplog: pytest.LogCaptureFixture) -> None:
    session, recorder, turn = in_turn()
    recorder.compactor = Compactor(
        FailingSummarizer(RuntimeError("model down")), context_window=window_for(session, 0.6)
    )
    with caplog.at_level(logging.WARNING), turn.step() as step:
        step.text_delta("x")
        step.assistant()
    assert "pre-step compaction failed: model down" in caplog.text and step.message is not None


def test_missing_capacity_is_warned_once_per_target(caplog: pytest.LogCaptureFixture) -> None:
    _session, recorder, turn = in_turn()
    recorder.compactor = Compactor(FixedSummarizer())
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            with turn.step() as step:
                step.text_delta("x")
                step.assistant()
    assert caplog.text.count("no context capacity for p/m") == 1


def test_auto_false_leaves_the_loop_alone() -> None:
    session, recorder, turn = in_turn()
    recorder.compactor = Compactor(FixedSummarizer(), config=CompactionConfig(auto=False), context_window=10)
    with turn.step() as step:
        step.text_delta("x")
        step.assistant()
    assert not compaction_events(session)


def test_on_request_error_caps_retries_until_a_response_succeeds() -> None:
    session, recorder, turn = in_turn()
    recorder.compactor = Compactor(FixedSummarizer())
    with turn.step() as step:
        step.text_delta("partial")
        assert step.on_request_error(ContextOverflowError())
        assert not step.on_request_error(ContextOverflowError())  # the cap: one overflow retry per response
        assert types(compaction_events(session)).count(COMPACTION_START) == 1
        step.text_delta("fresh")
        message = step.assistant()
    assert message.data["message"]["content"][0]["text"] == "fresh"  # the failed stream was discarded
    with turn.step() as step:
        step.user_message("more " * 200)
        step.user_message("and more " * 200)
        assert step.on_request_error(ContextOverflowError())  # the counter reset after the assistant message


async def agent_turn(
    recorder: Recorder, prompt: str, model: Callable[[list[Any]], str], requests: list[list[Any]]
) -> None:
    """A minimal async agent loop: one step, retried in place on context overflow."""
    async with recorder.turn() as turn, turn.step() as step:
        step.user_message(prompt)
        await step.arequest_header(HEADER)
        while True:
            messages = recorder.session.derive_messages()
            requests.append(messages)
            try:
                reply = model(messages)
                break
            except ContextOverflowError as exc:
                step.chunk(
                    {
                        "type": "finish",
                        "reason": {
                            "kind": "error",
                            "error": {"message": str(exc), "code": ContextOverflowError.code},
                        },
                    }
                )
                if await step.aon_request_error(exc):
                    continue
                raise
        step.text_delta(reply)
        step.assistant()


def test_a_real_loop_recovers_from_overflow_inside_the_same_step() -> None:
    session = new_session()
    InvariantChecker.attach(session)
    summarizer = FixedSummarizer()
    recorder = Recorder(session, compactor=Compactor(summarizer, context_window=10**6))
    requests: list[list[Any]] = []
    overflow_once = [True]

    def model(messages: list[Any]) -> str:
        if len(requests) > 2 and overflow_once[0]:
            overflow_once[0] = False
            raise ContextOverflowError("prompt is too long")
        return "answer " * 40

    async def main() -> None:
        for index, prompt in enumerate(("SENTINEL-ONE " * 30, "second " * 30, "third " * 30), 1):
            await agent_turn(recorder, prompt, model, requests)
            assert index == 3 or not compaction_events(session)

    asyncio.run(main())
    assert len(requests) == 4 and len(summarizer.requests) == 1
    assert any("SENTINEL-ONE" in str(message) for message in requests[2])
    assert not any("SENTINEL-ONE" in str(message) for message in requests[3])
    assert is_checkpoint(requests[3][0])
    kinds = types(session.events)
    turn3 = kinds.index("turn/start", kinds.index("turn/start", kinds.index("turn/start") + 1) + 1)
    window = kinds[turn3:]
    assert window.count("step/start") == 1
    assert window.index("step/start") < window.index(COMPACTION_START) < window.index(COMPACTION_END)
    assert window.index(COMPACTION_END) < window.index("step/end")
    assert session.events[-1].data["reason"]["kind"] == "completed"
    check_invariants(session.events)


def test_checkpoints_left_on_the_surface_are_balanced_on_both_sides() -> None:
    session, _recorder, turn = in_turn(4)
    compactor = Compactor(FixedSummarizer(), context_window=window_for(session, 0.7))
    compactor.compact_if_needed(session, "pressure")
    fill(turn, 9)
    compactor.compact_if_needed(session, "context-overflow")
    index = PairingIndex()
    index.refresh(session.surface.nodes, session.surface.replace_generation, session.events.__getitem__)
    checkpoints = [seq for seq in session.surface.nodes if is_checkpoint(session.events[seq].data)]
    assert len(checkpoints) == 1
    assert index.balanced_before(checkpoints[0]) and index.balanced_after(checkpoints[0])


def test_the_summarizer_request_for_overflow_carries_the_envelope() -> None:
    session, _, _ = in_turn()
    summarizer = FixedSummarizer()

    def check(request: SummaryRequest) -> None:
        assert request.system == HEADER["system"]

    assert recover(Compactor(summarizer), session, ContextOverflowError())
    check(summarizer.requests[0])


def test_async_steps_await_the_pre_step_check_and_sync_steps_in_a_loop_only_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session, recorder, turn = in_turn()
    recorder.compactor = Compactor(FixedSummarizer(), context_window=window_for(session, 0.6))

    async def main() -> None:
        # synchronous inside a running loop: the step cannot block on the check
        with caplog.at_level(logging.WARNING), turn.step() as step:
            step.text_delta("x")
            step.assistant()
        assert "use `async with turn.step()`" in caplog.text and not compaction_events(session)
        async with turn.step() as step:
            step.text_delta("y")
            step.assistant()
        assert compaction_events(session)[0].data["turn"] == turn.number

    asyncio.run(main())
    kinds = types(session.events)
    assert kinds[kinds.index(COMPACTION_END) + 1] == "step/start"
