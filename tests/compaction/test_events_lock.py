"""Compaction event payloads, the checkpoint predicate, error rendering and the durable lock (E1-E8)."""

from __future__ import annotations

import pytest

from agentlog import SurfaceError, thaw
from agentlog.compaction.events import (
    CHECKPOINT_CLOSE,
    CHECKPOINT_OPEN,
    CHECKPOINT_PREAMBLE,
    checkpoint_message,
    end_data,
    error_text,
    is_checkpoint,
    prune_data,
    start_data,
    summary_data,
)
from agentlog.compaction.lock import LockTracker, scan_lock
from tests.compaction.helpers import new_session


def test_payloads_follow_the_spec_shapes_and_key_order() -> None:
    assert list(start_data("k", None, 3)) == ["compactionId", "turn"]
    assert list(start_data("k", "c", None)) == ["compactionId", "sourceCommandId", "turn"]
    assert thaw(end_data("k", None, None, "boom")) == {"compactionId": "k", "turn": None, "error": "boom"}
    data = summary_data(
        "k",
        "c",
        summary=({"type": "text", "text": "s"},),
        shadowed_seqs=(4, 2, 9),
        shadowed_tokens=12,
        provider="p",
        model="m",
        raw_output=(),
        llm_stream_call=True,
        max_tokens=10,
        usage={"inputTokens": 1},
    )
    assert list(data) == [
        "compactionId",
        "sourceCommandId",
        "summary",
        "rawOutput",
        "llmStreamCall",
        "shadowedRange",
        "shadowedSeqs",
        "shadowedTokenCount",
        "provider",
        "model",
        "maxTokens",
        "usage",
    ]
    assert thaw(data["shadowedRange"]) == {"start": 4, "end": 9}
    assert thaw(prune_data(7, 30)) == {
        "shadowedRange": {"start": 7, "end": 7},
        "shadowedSeqs": [7],
        "shadowedTokenCount": 30,
    }


def test_compaction_events_cannot_carry_surface_markers() -> None:
    session = new_session()
    session.append(
        "user/message",
        {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}},
        surface_op="append",
    )
    for kind in ("compaction/start", "compaction/summary", "compaction/end", "compaction/prune"):
        with pytest.raises(SurfaceError, match="not surface-eligible"):
            session.append(kind, {}, surface_op="append")
        with pytest.raises(SurfaceError, match="not surface-eligible"):
            session.append(kind, {}, source_event_seqs=[0])


def test_the_checkpoint_is_framed_by_the_preamble_and_tags() -> None:
    message = checkpoint_message(
        [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}], "k", "c", message_id="m1"
    )
    assert list(message) == ["content", "source", "role", "id"]
    assert thaw(message["content"]) == [
        {"type": "text", "text": f"{CHECKPOINT_PREAMBLE}\n\n{CHECKPOINT_OPEN}"},
        {"type": "text", "text": "A"},
        {"type": "text", "text": "B"},
        {"type": "text", "text": CHECKPOINT_CLOSE},
    ]
    assert thaw(message["source"]) == {
        "kind": "plugin",
        "plugin": "compact",
        "compactionId": "k",
        "sourceCommandId": "c",
    }
    assert (
        "checkpoint" in CHECKPOINT_PREAMBLE and "without mentioning or acknowledging" in CHECKPOINT_PREAMBLE
    )


def test_the_checkpoint_predicate_checks_kind_and_plugin_only() -> None:
    assert is_checkpoint({"source": {"kind": "plugin", "plugin": "compact"}})
    assert not is_checkpoint({"source": {"kind": "plugin", "plugin": "other"}})
    assert not is_checkpoint({"source": {"kind": "user", "plugin": "compact"}})
    assert not is_checkpoint({"source": None}) and not is_checkpoint("text")


def test_error_text_chains_causes_skips_repeats_and_lists_group_members() -> None:
    try:
        try:
            raise ValueError("bad token")
        except ValueError as inner:
            raise RuntimeError("summary failed") from inner
    except RuntimeError as outer:
        assert error_text(outer) == "summary failed: bad token"
    repeat = RuntimeError("same")
    repeat.__cause__ = RuntimeError("same")
    assert error_text(repeat) == "same"
    group = ExceptionGroup("two failures", [ValueError("a"), KeyError("b")])
    assert error_text(group) == "two failures [a; 'b']"
    assert error_text(42) == "42" and error_text(RuntimeError()) == "RuntimeError"


def test_the_lock_is_live_until_an_end_or_a_newer_end_seed() -> None:
    session = new_session()
    tracker = LockTracker()

    def state() -> tuple[bool, bool]:
        backwards, forwards = scan_lock(session.events), tracker.state(session.events)
        assert backwards == forwards
        return forwards.live, forwards.stale_start is not None

    assert state() == (False, False)
    session.append("turn/start", {"turn": 1})
    session.append("compaction/start", {"compactionId": "k", "turn": 1})
    session.append("compaction/summary", {"compactionId": "k"})
    assert state() == (True, False)
    assert tracker.state(session.events).open_turn == 1
    session.append("session/end-seed", {})
    assert state() == (False, True)
    session.append("compaction/start", {"compactionId": "k2", "turn": 1})
    assert state() == (True, False)
    session.append("compaction/end", {"compactionId": "k2", "turn": 1, "error": "x"})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert state() == (False, False)
    assert not tracker.state(session.events).turn_open
