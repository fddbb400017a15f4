"""The compaction transaction through ``compact_region`` (spec §2, compaction-basic region tests)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from agentlog import Session, SurfaceError, UsageError, thaw
from agentlog.compaction.engine import Compactor
from agentlog.compaction.events import (
    CHECKPOINT_CLOSE,
    CHECKPOINT_OPEN,
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    is_checkpoint,
)
from agentlog.compaction.invariants import CompactionInvariantChecker, check_compaction_invariants
from agentlog.compaction.summary import SummaryRequest
from agentlog.compaction.tokens import TokenMeter
from agentlog.core.events import Replace
from agentlog.core.invariants import InvariantChecker, check_invariants
from agentlog.errors import CompactionError
from agentlog.recording.recorder import Recorder, Turn
from tests.compaction.helpers import (
    FailingSummarizer,
    FixedSummarizer,
    HookSummarizer,
    compaction_events,
    fill,
    new_session,
    record_turn,
    run,
    types,
)


def open_turn(turns: int = 2) -> tuple[Session, Recorder, Turn]:
    """``turns`` closed turns, then an open turn with two closed steps; checked live."""
    session = new_session()
    InvariantChecker.attach(session)
    CompactionInvariantChecker.attach(session)
    recorder = Recorder(session)
    for index in range(1, turns + 1):
        record_turn(recorder, index)
    turn = recorder.turn().start()
    fill(turn, turns + 1)
    return session, recorder, turn


def head_span(session: Session, count: int) -> tuple[int, int]:
    nodes = list(session.surface.nodes)
    return nodes[0], nodes[count - 1]


# -- the committed bracket ----------------------------------------------------------------------


def test_region_commits_a_framed_replayable_checkpoint_with_exact_seqs_and_price() -> None:
    session, _, turn = open_turn()
    summarizer = FixedSummarizer(
        usage={"inputTokens": 50, "outputTokens": 7},
        raw_output=({"type": "reasoning", "text": "hm"}, {"type": "text", "text": "S"}),
    )
    compactor = Compactor(summarizer)
    nodes = list(session.surface.nodes)
    start, end = head_span(session, 8)
    price = sum(compactor.meter.measure(session).nodes.prices[:8])
    before = session.seq
    result = compactor.compact_region(session, start, end)

    assert types(session.events, before) == [
        COMPACTION_START,
        COMPACTION_SUMMARY,
        "user/message",
        COMPACTION_END,
    ]
    start_event, summary_event, checkpoint, end_event = session.events[before:]
    assert (result.start_seq, result.summary_seq, result.checkpoint_seq, result.end_seq) == (
        start_event.seq,
        summary_event.seq,
        checkpoint.seq,
        end_event.seq,
    )
    assert result.shadowed_seqs == tuple(nodes[:8]) and result.shadowed_token_count == price
    assert (result.shadowed_range.start, result.shadowed_range.end) == (start, end)
    assert thaw(start_event.data) == {"compactionId": result.compaction_id, "turn": turn.number}
    summary = thaw(summary_event.data)
    assert summary["shadowedSeqs"] == nodes[:8] and summary["shadowedTokenCount"] == price
    assert summary["shadowedRange"] == {"start": start, "end": end}
    assert summary["rawOutput"][0]["type"] == "reasoning" and summary["usage"] == {
        "inputTokens": 50,
        "outputTokens": 7,
    }
    assert "llmStreamCall" not in summary and (summary["provider"], summary["model"]) == ("sum-p", "sum-m")
    assert thaw(end_event.data) == {"compactionId": result.compaction_id, "turn": turn.number}
    assert checkpoint.surface_op == Replace(start, end)
    assert checkpoint.source_event_seqs == (start_event.seq, summary_event.seq, *nodes[:8])
    assert list(session.surface.nodes) == [checkpoint.seq, *nodes[8:]]
    head = session.derive_messages()[0]
    assert is_checkpoint(head) and head["role"] == "user"
    assert head["content"][0]["text"].endswith("\n\n" + CHECKPOINT_OPEN)
    assert head["content"][-1]["text"] == CHECKPOINT_CLOSE
    assert head["content"][1:-1] == result.summary
    assert thaw(head["source"]) == {
        "kind": "plugin",
        "plugin": "compact",
        "compactionId": result.compaction_id,
    }
    for event in (start_event, summary_event, end_event):
        assert event.surface_op is None and event.source_event_seqs is None
    assert start_event.seq < summary_event.seq < end_event.seq and end_event.time > start_event.time
    replayed = Session.restore(session.id, list(session.events), session.header)
    assert replayed.derive_messages() == session.derive_messages()
    assert replayed.surface.replace_generation == session.surface.replace_generation == 1


def test_the_summarizer_sees_the_shadowed_messages_and_the_latest_header_envelope() -> None:
    session, _, _ = open_turn()
    summarizer = FixedSummarizer()
    start, end = head_span(session, 4)
    expected = session.derive_messages()[:4]
    Compactor(summarizer).compact_region(session, start, end)
    request = summarizer.requests[0]
    assert list(request.messages) == expected
    assert request.system == "You are a careful coding agent." and request.tools is not None
    assert thaw(request.tools)[0]["name"] == "read"
    assert (request.provider, request.model, request.max_tokens) == ("p", "m", 8192)
    assert request.session_id == session.id


def test_a_configured_summarization_pair_is_the_requested_target() -> None:
    from agentlog.compaction.config import CompactionConfig

    session, _, _ = open_turn()
    summarizer = FixedSummarizer()
    config = CompactionConfig(summarization_provider="cheap", summarization_model="small", max_tokens=512)
    Compactor(summarizer, config=config).compact_region(session, *head_span(session, 4))
    request = summarizer.requests[0]
    assert (request.provider, request.model, request.max_tokens) == ("cheap", "small", 512)


def test_llm_stream_call_is_recorded_with_its_raw_output() -> None:
    session, _, _ = open_turn()
    raw = ({"type": "text", "text": "S"},)
    Compactor(FixedSummarizer(raw_output=raw, llm_stream_call=True)).compact_region(
        session, *head_span(session, 4)
    )
    summary = thaw(compaction_events(session)[1].data)
    assert summary["llmStreamCall"] is True and summary["rawOutput"] == [{"type": "text", "text": "S"}]


def test_llm_stream_call_without_raw_output_is_a_summary_failure() -> None:
    session, _, _ = open_turn()
    with pytest.raises(CompactionError, match="requires raw_output"):
        Compactor(FixedSummarizer(llm_stream_call=True)).compact_region(session, *head_span(session, 4))
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_END]


def test_a_custom_summarizer_works_without_any_conversation_model() -> None:
    session = new_session()
    recorder = Recorder(session)
    turn = recorder.turn().start()
    for index in range(3):
        turn.user_message(f"note {index}: " + "z" * 300)
    summarizer = FixedSummarizer()
    nodes = list(session.surface.nodes)
    Compactor(summarizer).compact_region(session, nodes[0], nodes[1])
    assert summarizer.requests[0].provider is None and summarizer.requests[0].system is None
    assert len(session.surface.nodes) == 2


# -- refusals before the bracket -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("pick", "message"),
    [
        (lambda nodes: (10_000, nodes[1]), "start seq 10000 not found in surface"),
        (lambda nodes: (nodes[0], 10_001), "end seq 10001 not found in surface"),
        (lambda nodes: (nodes[3], nodes[0]), "is after end seq"),
        (lambda nodes: (nodes[2], nodes[3]), "start seq .* not a balanced boundary"),
        (lambda nodes: (nodes[0], nodes[1]), "end seq .* not a balanced boundary"),
    ],
)
def test_an_invalid_region_is_refused_before_anything_is_written(pick: Any, message: str) -> None:
    session, _, _ = open_turn()
    before = session.seq
    with pytest.raises(SurfaceError, match=message):
        Compactor(FixedSummarizer()).compact_region(session, *pick(list(session.surface.nodes)))
    assert session.seq == before


def test_region_compaction_needs_an_open_turn() -> None:
    session = new_session()
    record_turn(Recorder(session), 1)
    with pytest.raises(UsageError, match="no open turn"):
        Compactor(FixedSummarizer()).compact_region(session, *head_span(session, 4))
    turnless = new_session()
    for index in range(3):
        turnless.append(
            "user/message",
            {
                "id": f"u{index}",
                "role": "user",
                "content": [{"type": "text", "text": "y" * 200}],
                "source": {"kind": "user"},
            },
            surface_op="append",
        )
    with pytest.raises(UsageError, match="no open turn"):
        Compactor(FixedSummarizer()).compact_region(turnless, *head_span(turnless, 2))
    assert not compaction_events(session) and not compaction_events(turnless)


def test_a_live_lock_makes_region_compaction_busy() -> None:
    session, _, turn = open_turn()
    session.append(COMPACTION_START, {"compactionId": "other", "turn": turn.number})
    with pytest.raises(CompactionError, match="already in progress") as caught:
        Compactor(FixedSummarizer()).compact_region(session, *head_span(session, 4))
    assert caught.value.code == "busy" and "compaction lock is already active" in str(caught.value)
    assert len(compaction_events(session)) == 1


# -- failures inside the bracket -----------------------------------------------------------------


def test_a_summarizer_failure_closes_the_bracket_with_its_message_and_leaves_the_surface() -> None:
    session, _, turn = open_turn()
    nodes = list(session.surface.nodes)
    boom = RuntimeError("model exploded")
    with pytest.raises(RuntimeError) as caught:
        Compactor(FailingSummarizer(boom)).compact_region(session, *head_span(session, 4))
    assert caught.value is boom  # current-turn mode re-raises the original object
    start, end = compaction_events(session)
    assert thaw(end.data) == {
        "compactionId": start.data["compactionId"],
        "turn": turn.number,
        "error": "model exploded",
    }
    assert list(session.surface.nodes) == nodes and session.surface.replace_generation == 0


def test_the_error_text_chains_causes() -> None:
    session, _, _ = open_turn()
    try:
        try:
            raise OSError("socket closed")
        except OSError as inner:
            raise RuntimeError("summary request failed") from inner
    except RuntimeError as outer:
        error = outer
    with pytest.raises(RuntimeError):
        Compactor(FailingSummarizer(error)).compact_region(session, *head_span(session, 4))
    assert compaction_events(session)[-1].data["error"] == "summary request failed: socket closed"


def test_a_log_only_append_during_summarization_is_tolerated() -> None:
    session, _, _turn = open_turn()

    def during(request: SummaryRequest) -> None:
        session.append("agent-preset/selected", {"preset": "x"})
        session.append("request/context", {"provider": "p", "model": "m", "contextWindow": 999})

    result = Compactor(HookSummarizer(during=during)).compact_region(session, *head_span(session, 4))
    assert result.end_seq == session.seq - 1


def test_a_surface_append_during_summarization_is_a_changed_failure_with_no_summary() -> None:
    session, _, turn = open_turn()

    def during(request: SummaryRequest) -> None:
        turn.user_message("a late injection")

    with pytest.raises(CompactionError, match="session surface changed") as caught:
        Compactor(HookSummarizer(during=during)).compact_region(session, *head_span(session, 4))
    assert caught.value.code == "changed"
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_END]
    assert session.surface.replace_generation == 0


def test_a_summary_that_does_not_shrink_the_span_is_rejected() -> None:
    session, _, _ = open_turn()
    with pytest.raises(CompactionError, match="summary is not smaller than the shadowed content") as caught:
        Compactor(FixedSummarizer(text="w" * 5000)).compact_region(session, *head_span(session, 4))
    assert caught.value.code == "summary"
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_END]


@pytest.mark.parametrize(
    "summary", [(), ({"type": "text", "text": "  \n"},), ({"type": "image", "url": "x"},)]
)
def test_a_summary_without_text_content_is_a_summary_failure(summary: tuple[Any, ...]) -> None:
    from agentlog.compaction.summary import SummaryResult

    class Odd:
        async def summarize(self, request: SummaryRequest) -> SummaryResult:
            return SummaryResult(summary=summary, provider="p", model="m")

    session, _, _ = open_turn()
    with pytest.raises(CompactionError) as caught:
        Compactor(Odd()).compact_region(session, *head_span(session, 4))
    assert caught.value.code == "summary"
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_END]


def test_a_refused_commit_append_records_the_error_and_leaves_the_bracket_closed() -> None:
    session, _, _ = open_turn()

    def veto(event: Any) -> None:
        if event.type == COMPACTION_SUMMARY:
            raise SurfaceError("no summaries today")

    session.add_validator(veto)
    with pytest.raises(SurfaceError, match="no summaries today"):
        Compactor(FixedSummarizer()).compact_region(session, *head_span(session, 4))
    _start, end = compaction_events(session)
    assert "no summaries today" in end.data["error"]


def test_a_failed_error_close_leaves_the_start_orphaned_and_the_next_call_busy() -> None:
    session, _, _ = open_turn()

    def veto(event: Any) -> None:
        if event.type == COMPACTION_END:
            raise SurfaceError("ends are refused")

    remove = session.add_validator(veto)
    compactor = Compactor(FailingSummarizer(RuntimeError("first failure")))
    with pytest.raises(SurfaceError, match="ends are refused"):
        compactor.compact_region(session, *head_span(session, 4))
    assert types(compaction_events(session)) == [COMPACTION_START]
    remove()
    with pytest.raises(CompactionError) as caught:
        Compactor(FixedSummarizer()).compact_region(session, *head_span(session, 4))
    assert caught.value.code == "busy"


def test_cancellation_during_summarization_closes_the_bracket_then_propagates() -> None:
    from tests.compaction.helpers import BlockingSummarizer

    session, _, _ = open_turn()

    async def main() -> None:
        summarizer = BlockingSummarizer()
        task = asyncio.ensure_future(Compactor(summarizer).acompact_region(session, *head_span(session, 4)))
        await summarizer.entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    _start, end = compaction_events(session)
    assert end.data["error"] == "CancelledError" and session.surface.replace_generation == 0


def test_region_commits_when_the_summarizer_finishes_despite_a_cancel_request() -> None:
    """Automatic/region paths may commit after an abort (T9 and T15 apply to standalone only)."""
    session, _, _ = open_turn()

    class Stubborn(FixedSummarizer):
        async def summarize(self, request: SummaryRequest) -> Any:
            task = asyncio.current_task()
            assert task is not None
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(10)
            return await super().summarize(request)

    async def main() -> Any:
        task = asyncio.ensure_future(Compactor(Stubborn()).acompact_region(session, *head_span(session, 4)))
        await asyncio.sleep(0.01)
        task.cancel()
        return await task

    result = asyncio.run(main())
    assert result.end_seq == session.seq - 1 and session.surface.replace_generation == 1


# -- the seam ----------------------------------------------------------------------------------------


def test_every_bracket_leaves_logs_that_pass_the_invariants() -> None:
    session, _recorder, turn = open_turn(3)
    compactor = Compactor(FixedSummarizer())
    compactor.compact_region(session, *head_span(session, 4))
    compactor.compact_region(session, *head_span(session, 4))  # merges the earlier checkpoint
    turn.end()
    compactor.compact_now(session)
    check_invariants(session.events)
    assert check_compaction_invariants(session.events).bracket is None
    checkpoints = [seq for seq in session.surface.nodes if is_checkpoint(session.events[seq].data)]
    assert len(checkpoints) == 1 and session.surface.nodes[0] == checkpoints[0]


def test_sync_twins_refuse_to_run_inside_an_event_loop() -> None:
    session, _, _ = open_turn()
    compactor = Compactor(FixedSummarizer())

    async def main() -> None:
        for call in (
            lambda: compactor.compact_now(session),
            lambda: compactor.compact_region(session, *head_span(session, 4)),
            lambda: compactor.compact_if_needed(session, "pressure"),
        ):
            with pytest.raises(UsageError, match=r"await compactor\.a"):
                call()

    asyncio.run(main())
    assert not compaction_events(session)


def test_an_unknown_trigger_is_a_usage_error() -> None:
    session, _, _ = open_turn()
    with pytest.raises(UsageError, match="unknown compaction trigger"):
        Compactor(FixedSummarizer()).compact_if_needed(session, "whenever")  # type: ignore[arg-type]


def test_measure_is_taken_once_for_preparation_and_once_for_stability() -> None:
    calls: list[int] = []

    class Counting(TokenMeter):
        def measure(self, session: Session, header_override: Any = None) -> Any:
            calls.append(session.seq)
            return super().measure(session, header_override)

    session, _, _ = open_turn()
    run(Compactor(FixedSummarizer(), meter=Counting()).acompact_region(session, *head_span(session, 4)))
    assert len(calls) == 2


def test_whole_surface_stability_sees_a_replace_elsewhere() -> None:
    session, _, turn = open_turn()
    nodes = list(session.surface.nodes)

    def during(request: SummaryRequest) -> None:  # rewrite the newest result (outside the span)
        newest = max(seq for seq in nodes if session.events[seq].type == "tool/result")
        data = thaw(session.events[newest].data)
        data["message"]["content"][0]["content"] = [{"type": "text", "text": "short"}]
        session.append("tool/result", data, surface_op=Replace(newest, newest), source_event_seqs=[newest])

    with pytest.raises(CompactionError) as caught:
        Compactor(HookSummarizer(during=during)).compact_region(session, *head_span(session, 4))
    assert caught.value.code == "changed"
    assert turn.is_open
