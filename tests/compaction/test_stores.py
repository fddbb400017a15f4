"""Compaction of live sessions on every store backend of the contract suite."""

from __future__ import annotations

from agentlog.compaction.engine import Compactor
from agentlog.compaction.invariants import check_compaction_invariants
from agentlog.compaction.lock import scan_lock
from agentlog.compaction.tokens import TokenMeter
from agentlog.header import SessionHeader
from agentlog.invariants import check_invariants
from agentlog.recorder import Recorder
from tests.compaction.helpers import FixedSummarizer, compaction_events, record_turn
from tests.contract.conftest import (  # noqa: F401 - fixtures
    StoreFactory,
    _drop_postgres_schemas,
    backend,
    open_store,
)


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
