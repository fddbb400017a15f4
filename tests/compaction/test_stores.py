"""Compaction of live sessions on every store backend of the contract suite."""

from __future__ import annotations

import pytest

from agentlog.compaction.config import PrunerConfig
from agentlog.compaction.engine import Compactor
from agentlog.compaction.invariants import check_compaction_invariants
from agentlog.compaction.lock import scan_lock
from agentlog.compaction.pruner import ToolResultPruner
from agentlog.compaction.tokens import TokenMeter
from agentlog.core.header import SessionHeader
from agentlog.core.invariants import check_invariants
from agentlog.errors import InvariantError
from agentlog.recording.recorder import Recorder
from tests.compaction.helpers import FixedSummarizer, compaction_events, record_turn
from tests.contract.conftest import (  # noqa: F401 - fixtures
    StoreFactory,
    _drop_postgres_schemas,
    backend,
    open_store,
)

SMALL_PRUNER = PrunerConfig(threshold_chars=60, head_chars=10, tail_chars=5)


def test_manual_compaction_of_a_live_session_is_flushed_and_restores(open_store: StoreFactory) -> None:  # noqa: F811
    store = open_store()
    live = store.start(SessionHeader(id="cmp", created_at=1, cwd="/work"))
    recorder = Recorder(live)
    for index in range(1, 4):
        record_turn(recorder, index)
    result = Compactor(FixedSummarizer()).compact_now(live)
    assert result is not None and live.durable_seq == live.session.seq
    events, messages = list(live.session.events), live.session.derive_messages()
    live.close()

    reopened = open_store().open("cmp")
    session = reopened.session
    assert list(session.events)[: len(events)] == events
    assert session.derive_messages() == messages and session.surface.replace_generation == 1
    assert not scan_lock(session.events).live
    record_turn(Recorder(reopened), 4)
    again = Compactor(FixedSummarizer()).compact_now(reopened)
    assert again is not None and again.shadowed_seqs[0] == result.checkpoint_seq
    check_invariants(session.events)
    assert check_compaction_invariants(session.events).bracket is None
    reopened.close()


def test_automatic_compaction_through_the_recorder_persists(open_store: StoreFactory) -> None:  # noqa: F811
    store = open_store()
    live = store.start(SessionHeader(id="auto", created_at=1, cwd="/work"))
    recorder = Recorder(live)
    record_turn(recorder, 1)
    window = int(TokenMeter().measure(live.session).total_tokens * 1.5)
    recorder.compactor = Compactor(FixedSummarizer(), context_window=window)
    for index in range(2, 6):
        record_turn(recorder, index)
    brackets = [event for event in compaction_events(live.session) if event.type == "compaction/start"]
    assert brackets and all(event.data["turn"] is not None for event in brackets)
    messages = live.session.derive_messages()
    live.close()
    restored = open_store().load("auto")
    check_invariants(restored.events)
    assert check_compaction_invariants(restored.events).bracket is None
    reopened = open_store().open("auto")
    assert reopened.session.derive_messages() == messages
    reopened.close()


def _pruned_turn(recorder: Recorder) -> None:
    """A closed turn whose tool result (2,000 chars) is over the small pruner's threshold."""
    record_turn(recorder, 1, size=2000)


def test_pruning_inside_a_turn_keeps_the_stored_log_within_the_invariants(open_store: StoreFactory) -> None:  # noqa: F811
    live = open_store().start(SessionHeader(id="prune", created_at=1, cwd="/work"))
    recorder = Recorder(live)
    _pruned_turn(recorder)
    with recorder.turn():
        assert ToolResultPruner(SMALL_PRUNER).prune_session(live.session).pruned
    live.close()
    restored = open_store().load("prune")
    check_invariants(restored.events)
    assert [event.type for event in restored.events].count("compaction/prune") == 1


def test_pruning_an_idle_session_is_refused_and_writes_nothing(open_store: StoreFactory) -> None:  # noqa: F811
    live = open_store().start(SessionHeader(id="idle", created_at=1, cwd="/work"), check_invariants=False)
    _pruned_turn(Recorder(live))
    before = list(live.session.events)
    with pytest.raises(InvariantError, match="outside any open turn"):
        ToolResultPruner(SMALL_PRUNER).prune_session(live.session)
    live.close()
    restored = open_store().load("idle")
    assert list(restored.events) == before
    check_invariants(restored.events)
