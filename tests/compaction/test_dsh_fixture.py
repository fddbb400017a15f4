"""The engine against DSH's own compaction (``compaction-T5``: events 906-909)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from benchmarks.workload import workload_events

from agentlog import Session, thaw
from agentlog.compaction.engine import Compactor
from agentlog.compaction.events import CHECKPOINT_CLOSE, CHECKPOINT_OPEN, is_checkpoint
from agentlog.compaction.invariants import check_compaction_invariants
from agentlog.compaction.lock import scan_lock
from agentlog.compaction.tokens import TokenMeter
from agentlog.compaction.transaction import Plan
from agentlog.core.invariants import check_invariants
from tests.compaction.helpers import FixedSummarizer, run

HEADER = {
    "version": 0,
    "id": "fx-compaction-t5",
    "createdAt": 1767225600000,
    "cwd": "/home/user/project",
    "delegationDepth": 0,
}


def fixture_events(dsh_fixtures: Path) -> list[dict[str, Any]]:
    lines = (dsh_fixtures / "compaction-T5.expected-events.jsonl").read_bytes().splitlines()
    return [orjson.loads(line) for line in lines]


def shape(value: Any) -> Any:
    """Keys (in order) and value kinds, without the values themselves."""
    if isinstance(value, dict):
        return [(key, shape(item)) for key, item in value.items()]
    if isinstance(value, list):
        return ["list", *(shape(item) for item in value[:1])]
    return type(value).__name__


def test_the_engine_reproduces_dsh_compaction_event_shapes(dsh_fixtures: Path) -> None:
    wires = fixture_events(dsh_fixtures)
    session = Session.restore(HEADER["id"], wires[:906], HEADER)
    summarizer = FixedSummarizer(
        text="## Primary Request and Intent\n- resume the work",
        provider="deepseek",
        model="deepseek-chat",
        max_tokens=4096,
        usage={"inputTokens": 9000, "outputTokens": 180},
    )
    result = run(Compactor(summarizer)._transact(Plan(session, 2, 360, True)))
    ours = [thaw(event.to_wire()) for event in session.events[result.start_seq :]]
    theirs = wires[906:910]
    assert [event["type"] for event in ours] == [event["type"] for event in theirs]
    for mine, dsh in zip(ours, theirs, strict=True):
        assert list(mine) == list(dsh)
        assert shape(mine["data"]) == shape(dsh["data"])
    dsh_summary, my_summary = theirs[1]["data"], ours[1]["data"]
    for key in ("shadowedRange", "shadowedSeqs", "shadowedTokenCount", "provider", "model", "maxTokens"):
        assert my_summary[key] == dsh_summary[key], key
    assert my_summary["shadowedTokenCount"] == 4030
    dsh_checkpoint, my_checkpoint = theirs[2], ours[2]
    assert (
        my_checkpoint["surfaceOp"] == dsh_checkpoint["surfaceOp"] == {"op": "replace", "start": 2, "end": 360}
    )
    assert my_checkpoint["sourceEventSeqs"][2:] == dsh_checkpoint["sourceEventSeqs"][2:]
    assert my_checkpoint["sourceEventSeqs"][:2] == [result.start_seq, result.summary_seq]
    for checkpoint in (my_checkpoint, dsh_checkpoint):
        content = checkpoint["data"]["content"]
        assert (
            content[0]["text"].endswith("\n\n" + CHECKPOINT_OPEN) and content[-1]["text"] == CHECKPOINT_CLOSE
        )
        assert list(checkpoint["data"]["source"]) == ["kind", "plugin", "compactionId"]
    messages = session.derive_messages()
    assert len(messages) == 40 - 16 + 1 and is_checkpoint(messages[0])


def test_dsh_compacted_logs_pass_the_checks_and_can_compact_again(dsh_fixtures: Path) -> None:
    wires = fixture_events(dsh_fixtures)
    session = Session.restore(HEADER["id"], wires, HEADER)
    check_invariants(session.events)
    assert check_compaction_invariants(session.events).bracket is None
    assert not scan_lock(session.events).live
    measured = TokenMeter().measure(session)
    assert len(measured.nodes) == 33 and measured.nodes.seqs[0] == 908
    result = Compactor(FixedSummarizer()).compact_now(session)
    assert result is not None and result.shadowed_seqs[0] == 908  # the DSH checkpoint is merged


def test_the_standard_workload_prices_like_the_dsh_fixture(dsh_fixtures: Path) -> None:
    """Our workload generator and DSH's fixture writer differ; the meter must price DSH's log as DSH did."""
    wires = fixture_events(dsh_fixtures)
    session = Session.restore(HEADER["id"], wires[:906], HEADER)
    prices = TokenMeter().measure(session).nodes
    assert sum(prices.prices[:16]) == wires[907]["data"]["shadowedTokenCount"]
    assert len(workload_events(1)) == 182


def test_the_extractive_summarizer_compacts_the_standard_workload() -> None:
    summarizers = pytest.importorskip("agentlog.compaction.summarizers")
    session = Session.restore("w", workload_events(5), {"version": 0, "id": "w", "createdAt": 1})
    before = TokenMeter().measure(session).total_tokens
    result = Compactor(summarizers.ExtractiveSummarizer()).compact_now(session)
    assert result is not None and len(result.shadowed_seqs) == 39
    assert TokenMeter().measure(session).total_tokens < before
    assert result.summary[0]["text"].strip()
