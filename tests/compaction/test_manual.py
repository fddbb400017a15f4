"""Manual compaction (``compact_now``): idle sessions, standalone brackets, the six codes (spec §4, M1-M5)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from agentlog import Session, SurfaceError, UsageError, thaw
from agentlog.compaction.config import CompactionConfig
from agentlog.compaction.engine import Compactor
from agentlog.compaction.events import COMPACTION_END, COMPACTION_START, COMPACTION_SUMMARY
from agentlog.compaction.summary import SummaryRequest, SummaryResult
from agentlog.compaction.tokens import Measurement, TokenMeter
from agentlog.core.events import Replace
from agentlog.errors import CompactionError
from agentlog.recording.recorder import Recorder
from tests.compaction.helpers import (
    BlockingSummarizer,
    FailingSummarizer,
    FixedSummarizer,
    HookSummarizer,
    compaction_events,
    new_session,
    record_turn,
    run,
    session_with_turns,
    types,
)


class FakeLive:
    """A LiveSession stand-in whose flush is scripted (counts calls, may fail or block)."""

    def __init__(
        self, session: Session, *, fail: BaseException | None = None, gate: asyncio.Event | None = None
    ) -> None:
        self.session = session
        self.flushes: list[int] = []
        self.fail = fail
        self.gate = gate
        self.finished = False

    async def aflush(self) -> None:
        self.flushes.append(self.session.seq)
        if self.gate is not None:
            await self.gate.wait()
        self.finished = True
        if self.fail is not None:
            raise self.fail


def idle(turns: int = 3) -> Session:
    session, _ = session_with_turns(turns)
    return session


# -- success ---------------------------------------------------------------------------------------


def test_standalone_commit_uses_turn_null_and_flushes_once() -> None:
    session = idle()
    live = FakeLive(session)
    turns_before = [e.data["turn"] for e in session.events if e.type == "turn/start"]
    result = Compactor(FixedSummarizer()).compact_now(live, command_id="cmd-7")  # type: ignore[arg-type]
    assert result is not None and result.source_command_id == "cmd-7"
    start, summary, end = compaction_events(session)
    assert thaw(start.data) == {
        "compactionId": result.compaction_id,
        "sourceCommandId": "cmd-7",
        "turn": None,
    }
    assert summary.data["sourceCommandId"] == "cmd-7"
    assert thaw(end.data) == {"compactionId": result.compaction_id, "sourceCommandId": "cmd-7", "turn": None}
    checkpoint = session.events[result.checkpoint_seq]
    assert checkpoint.data["source"]["sourceCommandId"] == "cmd-7"
    assert live.flushes == [session.seq]
    assert [e.data["turn"] for e in session.events if e.type == "turn/start"] == turns_before


def test_manual_compaction_keeps_the_newest_unit_and_merges_the_previous_checkpoint() -> None:
    session = idle()
    compactor = Compactor(FixedSummarizer())
    newest = session.surface.nodes[-1]
    first = compactor.compact_now(session)
    assert first is not None and list(session.surface.nodes) == [first.checkpoint_seq, newest]
    record_turn(Recorder(session), 4)
    second = compactor.compact_now(session)
    assert second is not None and second.shadowed_seqs[0] == first.checkpoint_seq
    assert len(session.surface.nodes) == 2


def test_nothing_to_compact_returns_none_and_writes_nothing() -> None:
    for session in (new_session(), idle(0)):
        before = session.seq
        assert Compactor(FixedSummarizer()).compact_now(session) is None
        assert session.seq == before
    single = new_session()
    Recorder(single).turn().start().end()
    with Recorder(single).turn() as turn:
        turn.user_message("only one")
    live = FakeLive(single)
    assert Compactor(FixedSummarizer()).compact_now(live) is None  # type: ignore[arg-type]
    assert not compaction_events(single) and live.flushes == []


def test_a_turnless_session_compacts_without_creating_turns() -> None:
    session = new_session()
    for index in range(4):
        session.append(
            "user/message",
            {
                "id": f"u{index}",
                "role": "user",
                "content": [{"type": "text", "text": "note " * 80}],
                "source": {"kind": "user"},
            },
            surface_op="append",
        )
    result = Compactor(FixedSummarizer()).compact_now(session)
    assert result is not None and result.shadowed_seqs == (0, 1, 2)
    assert not [e for e in session.events if e.type.startswith("turn/")]


def test_raw_output_and_usage_are_preserved_and_time_moves_forward() -> None:
    session = idle()
    usage = {"inputTokens": 900, "outputTokens": 40, "cacheReadTokens": 100}
    raw = ({"type": "reasoning", "text": "plan"}, {"type": "text", "text": "S"})
    Compactor(FixedSummarizer(usage=usage, raw_output=raw)).compact_now(session)
    start, summary, end = compaction_events(session)
    assert thaw(summary.data["usage"]) == usage and thaw(summary.data["rawOutput"])[0]["text"] == "plan"
    assert end.time > start.time


# -- busy ----------------------------------------------------------------------------------------------


def test_an_open_turn_in_the_log_is_busy_without_a_summarizer_call() -> None:
    session = idle()
    Recorder(session).turn().start()
    summarizer = FixedSummarizer()
    with pytest.raises(CompactionError, match="already has an open turn") as caught:
        Compactor(summarizer).compact_now(session)
    assert caught.value.code == "busy" and summarizer.requests == [] and not compaction_events(session)


def test_a_live_orphan_is_busy_and_names_the_lock() -> None:
    session = idle()
    session.append(COMPACTION_START, {"compactionId": "dead?", "turn": None})
    with pytest.raises(CompactionError, match="compaction lock is already active") as caught:
        Compactor(FixedSummarizer()).compact_now(session)
    assert caught.value.code == "busy"


def test_an_orphan_before_the_end_seed_is_stale_and_ignored() -> None:
    session = idle()
    session.append(COMPACTION_START, {"compactionId": "dead", "turn": None})
    reopened = Session.restore(session.id, list(session.events), session.header)
    assert reopened.events[-1].type == "session/end-seed"
    assert Compactor(FixedSummarizer()).compact_now(reopened) is not None


def test_a_stale_orphan_is_ignored_even_when_a_repaired_turn_follows_it() -> None:
    session = idle()
    session.append(COMPACTION_START, {"compactionId": "dead", "turn": None})
    session.append("turn/start", {"turn": 4})
    session.append("turn/end", {"turn": 4, "reason": {"kind": "interrupted"}})
    reopened = Session.restore(session.id, list(session.events), session.header)
    assert Compactor(FixedSummarizer()).compact_now(reopened) is not None


def test_manual_and_region_compaction_exclude_each_other_through_the_lock() -> None:
    session = idle()

    async def manual_blocks_region() -> None:
        summarizer = BlockingSummarizer()
        compactor = Compactor(summarizer)
        task = asyncio.ensure_future(compactor.acompact_now(session))
        await summarizer.entered.wait()
        with pytest.raises(CompactionError) as caught:
            await Compactor(FixedSummarizer()).acompact_if_needed(session, "context-overflow")
        assert caught.value.code == "busy"
        summarizer.release.set()
        assert await task is not None

    number = sum(event.type == "turn/start" for event in session.events) + 1
    session.append("turn/start", {"turn": number})  # a request/header belongs inside a turn (I7)
    session.append(
        "request/header", {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"}
    )
    session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})
    asyncio.run(manual_blocks_region())

    recorder = Recorder(session)
    turn = recorder.turn().start()
    turn.user_message("x" * 400)
    turn.user_message("y" * 400)

    async def region_blocks_manual() -> None:
        summarizer = BlockingSummarizer()
        nodes = list(session.surface.nodes)
        task = asyncio.ensure_future(Compactor(summarizer).acompact_region(session, nodes[0], nodes[-2]))
        await summarizer.entered.wait()
        with pytest.raises(CompactionError) as caught:
            await Compactor(FixedSummarizer()).acompact_now(session)
        assert caught.value.code == "busy"
        summarizer.release.set()
        await task

    asyncio.run(region_blocks_manual())


# -- changed ---------------------------------------------------------------------------------------------


def replace_node(session: Session, seq: int) -> None:
    """Replace surface node ``seq`` with a note (a user/message replace)."""
    session.append(
        "user/message",
        {
            "id": f"rewrite-{seq}",
            "role": "user",
            "content": [{"type": "text", "text": "rewritten"}],
            "source": {"kind": "user"},
        },
        surface_op=Replace(seq, seq),
        source_event_seqs=[seq],
    )


@pytest.mark.parametrize(("where", "message"), [(0, "start seq"), (3, "the span changed")])
def test_a_replace_inside_the_span_during_summarization_is_changed_and_flushed(
    where: int, message: str
) -> None:
    session = idle()
    nodes = list(session.surface.nodes)
    live = FakeLive(session)
    summarizer = HookSummarizer(during=lambda request: replace_node(session, nodes[where]))
    with pytest.raises(CompactionError, match=message) as caught:
        Compactor(summarizer).compact_now(live)  # type: ignore[arg-type]
    assert caught.value.code == "changed"
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_END]
    assert live.flushes == [session.seq]


def test_a_surface_append_outside_the_span_is_tolerated_by_manual_compaction() -> None:
    session = idle()

    def inject(request: SummaryRequest) -> None:
        session.append(
            "user/message",
            {
                "id": "late",
                "role": "user",
                "content": [{"type": "text", "text": "late note"}],
                "source": {"kind": "user"},
            },
            surface_op="append",
        )

    result = Compactor(HookSummarizer(during=inject)).compact_now(session)
    assert result is not None
    nodes = list(session.surface.nodes)
    assert nodes[0] == result.checkpoint_seq and session.events[nodes[-1]].data["id"] == "late"


def test_changed_span_prices_are_a_changed_failure() -> None:
    class Drifting(TokenMeter):
        """Reports a different price for the first node from its second measurement on."""

        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def measure(self, session: Session, header_override: Any = None) -> Measurement:
            self.calls += 1
            measured = super().measure(session, header_override)
            if self.calls > 2:
                measured.nodes.prices._items = [
                    measured.nodes.prices[0] + 1,
                    *measured.nodes.prices._items[1:],
                ]
            return measured

    session = idle()
    with pytest.raises(CompactionError, match="span prices changed") as caught:
        Compactor(FixedSummarizer(), meter=Drifting()).compact_now(session)
    assert caught.value.code == "changed"


# -- summary, commit, persistence ----------------------------------------------------------------------


def test_a_summarizer_failure_is_summary_with_the_bracket_closed_and_flushed() -> None:
    session = idle()
    live = FakeLive(session)
    with pytest.raises(CompactionError, match="upstream 500") as caught:
        Compactor(FailingSummarizer(RuntimeError("upstream 500"))).compact_now(live)  # type: ignore[arg-type]
    assert caught.value.code == "summary" and isinstance(caught.value.__cause__, RuntimeError)
    _start, end = compaction_events(session)
    assert end.data["error"] == "upstream 500" and end.data["turn"] is None
    assert live.flushes == [session.seq]


def veto(kind: str, *, only_success: bool = False) -> Callable[[Any], None]:
    def check(event: Any) -> None:
        if event.type == kind and not (only_success and "error" in event.data):
            raise SurfaceError(f"{kind} refused")

    return check


def test_a_refused_success_end_is_commit_without_flush_and_keeps_the_lock() -> None:
    session = idle()
    session.add_validator(veto(COMPACTION_END, only_success=True))
    live = FakeLive(session)
    with pytest.raises(CompactionError) as caught:
        Compactor(FixedSummarizer()).compact_now(live)  # type: ignore[arg-type]
    assert caught.value.code == "commit" and live.flushes == []
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_SUMMARY]
    with pytest.raises(CompactionError) as again:
        Compactor(FixedSummarizer()).compact_now(session)
    assert again.value.code == "busy"


def test_a_refused_error_close_is_commit_with_only_the_start_and_no_flush() -> None:
    session = idle()
    session.add_validator(veto(COMPACTION_END))
    live = FakeLive(session)
    with pytest.raises(CompactionError) as caught:
        Compactor(FailingSummarizer(RuntimeError("x"))).compact_now(live)  # type: ignore[arg-type]
    assert caught.value.code == "commit" and live.flushes == []
    assert types(compaction_events(session)) == [COMPACTION_START]


def test_a_refused_summary_append_is_commit_with_the_error_recorded() -> None:
    session = idle()
    session.add_validator(veto(COMPACTION_SUMMARY))
    live = FakeLive(session)
    with pytest.raises(CompactionError) as caught:
        Compactor(FixedSummarizer()).compact_now(live)  # type: ignore[arg-type]
    assert caught.value.code == "commit"
    _start, end = compaction_events(session)
    assert "compaction/summary refused" in end.data["error"] and end.data["turn"] is None
    assert live.flushes == [session.seq] and session.surface.replace_generation == 0


def test_a_commit_failure_wins_over_a_flush_failure() -> None:
    session = idle()
    session.add_validator(veto(COMPACTION_SUMMARY))
    live = FakeLive(session, fail=OSError("disk full"))
    with pytest.raises(CompactionError) as caught:
        Compactor(FixedSummarizer()).compact_now(live)  # type: ignore[arg-type]
    assert caught.value.code == "commit"


def test_a_rejected_flush_is_persistence_with_the_full_bracket_in_memory() -> None:
    session = idle()
    live = FakeLive(session, fail=OSError("disk full"))
    with pytest.raises(CompactionError, match="disk full") as caught:
        Compactor(FixedSummarizer()).compact_now(live)  # type: ignore[arg-type]
    assert caught.value.code == "persistence"
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END]
    assert session.surface.replace_generation == 1


def test_an_empty_command_id_is_refused() -> None:
    with pytest.raises(UsageError, match="command_id"):
        Compactor(FixedSummarizer()).compact_now(idle(), command_id="")


# -- cancellation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["busy", "empty", "compactable"])
def test_a_pre_cancelled_call_writes_nothing_and_measures_nothing(state: str) -> None:
    session = new_session() if state == "empty" else idle()
    if state == "busy":
        Recorder(session).turn().start()
    meter = TokenMeter()
    before = session.seq

    async def main() -> None:
        task = asyncio.ensure_future(Compactor(FixedSummarizer(), meter=meter).acompact_now(session))
        task.cancel("stop now")
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert session.seq == before and session not in meter._folds


def test_caller_cancellation_closes_flushes_and_rethrows_the_exact_cancellation() -> None:
    session = idle()
    live = FakeLive(session)

    async def main() -> None:
        summarizer = BlockingSummarizer()
        task = asyncio.ensure_future(Compactor(summarizer).acompact_now(live))  # type: ignore[arg-type]
        await summarizer.entered.wait()
        task.cancel("user pressed escape")
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        assert caught.value.args == ("user pressed escape",)

    asyncio.run(main())
    _start, end = compaction_events(session)
    assert end.data["error"] == "user pressed escape" and live.flushes == [session.seq]


def test_a_cancellation_not_from_the_caller_is_cancelled_with_its_cause() -> None:
    session = idle()
    with pytest.raises(CompactionError) as caught:
        Compactor(FailingSummarizer(asyncio.CancelledError("maintenance aborted"))).compact_now(session)
    assert caught.value.code == "cancelled" and isinstance(caught.value.__cause__, asyncio.CancelledError)
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_END]


def test_a_cancel_landing_after_the_summary_rethrows_without_committing() -> None:
    session = idle()

    class Swallowing(FixedSummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryResult:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(10)
            return await super().summarize(request)

    async def main() -> None:
        task = asyncio.ensure_future(Compactor(Swallowing()).acompact_now(session))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_END]
    assert session.surface.replace_generation == 0


def test_a_cancel_during_the_flush_waits_for_the_flush_to_finish() -> None:
    session = idle()

    async def main() -> None:
        gate = asyncio.Event()
        live = FakeLive(session, gate=gate)
        task = asyncio.ensure_future(Compactor(FixedSummarizer()).acompact_now(live))  # type: ignore[arg-type]
        while not live.flushes:
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.sleep(0.01)
        assert not task.done()
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert live.finished

    asyncio.run(main())
    assert types(compaction_events(session)) == [COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END]


def test_manual_compaction_accepts_a_plain_session_without_flushing() -> None:
    session = idle()
    assert run(Compactor(FixedSummarizer()).acompact_now(session)) is not None
    with pytest.raises(UsageError, match="expected a Session or a LiveSession"):
        Compactor(FixedSummarizer()).compact_now("not a session")  # type: ignore[arg-type]


# -- re-compaction with nothing new (no summary of a summary) ----------------------------------------


def test_recompacting_with_nothing_new_is_a_noop_that_says_why() -> None:
    session = idle()
    first = Compactor(FixedSummarizer(text="A long summary. " * 40)).compact_now(session)
    assert first is not None
    before, surface = session.seq, list(session.surface.nodes)
    summarizer = FixedSummarizer()  # shorter: a summary of the summary would commit, losing detail
    live = FakeLive(session)
    again = Compactor(summarizer).compact_now(live)  # type: ignore[arg-type]
    assert session.seq == before and list(session.surface.nodes) == surface  # the log is unchanged
    assert summarizer.requests == [] and live.flushes == []  # the checkpoint was not re-summarized
    assert again is not None and again.compacted is False
    assert f"seq {first.checkpoint_seq}" in again.reason and "previous checkpoint" in again.reason
    assert again.checkpoint_seqs == (first.checkpoint_seq,) and again.new_tokens == 0


def test_recompacting_below_the_configured_minimum_of_new_material_is_a_noop() -> None:
    session = idle()
    compactor = Compactor(FixedSummarizer(), config=CompactionConfig(min_new_tokens=10_000))
    first = compactor.compact_now(session)
    assert first is not None and first.compacted  # no checkpoint at the head: the minimum does not apply
    record_turn(Recorder(session), 4)
    before = session.seq
    skipped = compactor.compact_now(session)
    assert skipped is not None and skipped.compacted is False and session.seq == before
    assert 0 < skipped.new_tokens < 10_000 and "min_new_tokens 10000" in skipped.reason
    enough = Compactor(FixedSummarizer(), config=CompactionConfig(min_new_tokens=skipped.new_tokens))
    merged = enough.compact_now(session)
    assert merged is not None and merged.compacted and merged.shadowed_seqs[0] == first.checkpoint_seq


def test_automatic_paths_may_still_shrink_a_lone_checkpoint() -> None:
    """Under pressure or overflow the shrink itself is the gain: region compaction of the checkpoint stays."""
    session = idle()
    first = Compactor(FixedSummarizer(text="A long summary. " * 40)).compact_now(session)
    assert first is not None
    compactor = Compactor(FixedSummarizer())
    with Recorder(session).turn() as turn:
        turn.user_message("next")
        result = run(compactor.acompact_region(session, first.checkpoint_seq, first.checkpoint_seq))
    assert result.compacted and result.shadowed_seqs == (first.checkpoint_seq,)
