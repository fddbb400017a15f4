"""The tool-result pruner (spec §5; tool-result-pruner specs)."""

from __future__ import annotations

from typing import Any

import pytest

from agentlog import InvariantError, Session, thaw
from agentlog.compaction.config import PRUNE_MARKER, PrunerConfig
from agentlog.compaction.events import COMPACTION_PRUNE
from agentlog.compaction.pruner import ToolResultPruner, prune_content, text_code_points
from agentlog.compaction.tokens import Pricer
from agentlog.core.events import Replace
from agentlog.core.invariants import InvariantChecker, check_invariants
from agentlog.recording.recorder import Recorder
from tests.compaction.helpers import new_session, tool_step


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


SMALL = PrunerConfig(threshold_chars=60, head_chars=10, tail_chars=5)


def test_only_text_code_points_count_and_content_within_the_threshold_is_kept() -> None:
    assert text_code_points([text("a😀b"), {"type": "image", "url": "x" * 500}]) == 3
    assert prune_content([text("x" * 60)], SMALL) is None


def test_pruned_text_is_head_marker_tail_and_a_second_pass_changes_nothing() -> None:
    original = "".join(chr(ord("a") + i % 26) for i in range(100))
    pruned = prune_content([text(original)], SMALL)
    assert pruned == (text(original[:10] + PRUNE_MARKER + original[-5:]),)
    assert text_code_points(pruned) == 10 + 39 + 5
    assert prune_content(pruned, SMALL) is None


def test_surrogate_pairs_stay_whole() -> None:
    config = PrunerConfig(threshold_chars=50, head_chars=4, tail_chars=3)
    pruned = prune_content([text("😀" * 60)], config)
    assert pruned == (text("😀" * 4 + PRUNE_MARKER + "😀" * 3),)


def test_non_text_blocks_keep_their_order_and_an_emptied_middle_block_is_dropped() -> None:
    image = {"type": "image", "url": "u"}
    blocks = [text("A" * 20), image, text("B" * 50), text(""), {"type": "file", "path": "p"}, text("C" * 20)]
    pruned = prune_content(blocks, SMALL)
    assert pruned == (text("A" * 10 + PRUNE_MARKER), image, {"type": "file", "path": "p"}, text("C" * 5))


def test_zero_head_and_tail_keep_just_the_marker() -> None:
    pruned = prune_content([text("z" * 100)], PrunerConfig(threshold_chars=50, head_chars=0, tail_chars=0))
    assert pruned == (text(PRUNE_MARKER),)


def session_with_results(*sizes: int) -> tuple[Session, list[int]]:
    session = new_session()
    InvariantChecker.attach(session)
    recorder = Recorder(session)
    turn = recorder.turn().start()
    for index, size in enumerate(sizes):
        tool_step(turn, f"c{index}", result="r" * size, prompt="go" if index == 0 else None)
    results = [seq for seq in session.surface.nodes if session.events[seq].type == "tool/result"]
    return session, results


def test_a_session_pass_copies_every_field_cites_the_original_and_prices_it_first() -> None:
    session, (seq,) = session_with_results(200)
    original = session.events[seq]
    pass_result = ToolResultPruner(SMALL).prune_session(session)
    (pruned,) = pass_result.pruned
    price, replacement = session.events[pruned.replacement_seq - 1], session.events[pruned.replacement_seq]
    assert price.type == COMPACTION_PRUNE
    assert thaw(price.data) == {
        "shadowedRange": {"start": seq, "end": seq},
        "shadowedSeqs": [seq],
        "shadowedTokenCount": Pricer().message(original.data["message"]),
    }
    assert replacement.surface_op == Replace(seq, seq) and replacement.source_event_seqs == (seq,)
    before, after = thaw(original.data), thaw(replacement.data)
    inner = after["message"]["content"][0].pop("content")
    before["message"]["content"][0].pop("content")
    assert before == after  # turn, step, ids, isError: everything but the inner content
    assert inner == [text("r" * 10 + PRUNE_MARKER + "r" * 5)]
    assert (pruned.original_seq, pruned.call_id, pruned.chars_before, pruned.chars_after) == (
        seq,
        "c0",
        200,
        54,
    )
    assert pass_result.chars_removed == 146 and session.surface.nodes[-1] == pruned.replacement_seq


def test_short_results_are_skipped_a_second_pass_is_empty_and_removed_chars_add_up() -> None:
    session, results = session_with_results(200, 20, 100)
    pruner = ToolResultPruner(SMALL)
    first = pruner.prune_session(session)
    assert [item.original_seq for item in first.pruned] == [results[0], results[2]]
    assert first.chars_removed == (200 - 54) + (100 - 54)
    assert pruner.prune_session(session).pruned == ()


def test_replay_gives_identical_messages_and_generation() -> None:
    session, _ = session_with_results(200, 300)
    ToolResultPruner(SMALL).prune_session(session)
    replayed = Session.restore(session.id, list(session.events), session.header)
    assert replayed.derive_messages() == session.derive_messages()
    assert replayed.surface.replace_generation == session.surface.replace_generation == 2


def test_pruning_outside_a_turn_is_refused_under_the_invariants() -> None:
    session, _ = session_with_results(200)
    Recorder(session)._active = None
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    before = list(session.events)
    with pytest.raises(InvariantError, match="outside any open turn") as caught:
        ToolResultPruner(SMALL).prune_session(session)
    assert list(session.events) == before  # refused before the price: no stray compaction/prune
    assert (caught.value.session_id, caught.value.event_type) == (session.id, "tool/result")
    assert caught.value.seq == len(before) + 1  # the replacement's seq, after its price


def test_pruning_an_idle_unchecked_session_writes_nothing_that_breaks_the_invariants() -> None:
    session = new_session()
    recorder = Recorder(session, check_invariants=False)
    with recorder.turn() as turn:
        tool_step(turn, "c0", result="r" * 200, prompt="go")
    with pytest.raises(InvariantError, match="outside any open turn"):
        ToolResultPruner(SMALL).prune_session(session)
    check_invariants(session.events)


def test_pruning_inside_a_turn_keeps_the_tool_pairs_balanced() -> None:
    from tests.compaction.helpers import pairing_problems

    session, _ = session_with_results(200, 300)
    ToolResultPruner(SMALL).prune_session(session)
    assert pairing_problems(session.derive_messages()) == []
