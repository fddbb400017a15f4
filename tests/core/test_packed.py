"""Packed chunk runs: cold loads keep packed rows packed, and nothing a reader sees changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.workload import record_workload

from agentlog import (
    Compactor,
    ExtractiveSummarizer,
    InvalidEventError,
    Session,
    SessionHeader,
    check_invariants,
)
from agentlog.core.packed import ChunkRun, resolve_entries
from agentlog.store.codec import decode_line, decode_line_entry, encode_batch
from agentlog.store.jsonl.store import JsonlStore

HEADER = SessionHeader(id="lazy", created_at=1, cwd="/w")


def _recorded(turns: int = 3) -> list:
    session = Session.create("lazy")
    record_workload(session, turns)
    return list(session.events)


@pytest.fixture(params=["zstd", "none"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> JsonlStore:
    store = JsonlStore(tmp_path / "store", compression=request.param, write_delay_ms=60_000)
    with store.start(HEADER) as live:
        record_workload(live.session, 3, flush=live.flush)
    return JsonlStore(tmp_path / "store", compression=request.param)  # cold: a new store object


def _packed_slots(events: object) -> int:
    return sum(entry.__class__ is ChunkRun for entry in events._log)  # type: ignore[attr-defined]


def test_a_packed_line_decodes_to_a_run_that_expands_to_the_eager_events() -> None:
    events = _recorded(1)
    for line in encode_batch(events).splitlines():
        entry = decode_line_entry(line)
        eager = decode_line(line)
        if isinstance(entry, ChunkRun):
            assert entry.count == len(eager) > 1 and entry.seq0 == eager[0].seq
            assert entry.events() == eager
            assert entry.events() is entry.events()  # built once
            assert [entry.event(e.seq) for e in eager] == eager
        else:
            assert [entry] == eager


def test_a_cold_load_keeps_chunk_rows_packed_until_they_are_read(store: JsonlStore) -> None:
    events = store.load("lazy").events
    packed = _packed_slots(events)
    assert packed == 3 * 4 * 40  # every streamed chunk of the workload
    assert list(events) == _expected(store)


def _expected(store: JsonlStore) -> list:
    """The same log decoded eagerly, line by line, from the raw artifact."""
    raw = store.read_raw("lazy")
    assert raw is not None
    lines = raw.content.encode().splitlines()[1:]
    return [event for line in lines for event in decode_line(line)]


def test_reading_a_packed_slot_returns_the_same_event_object_every_time(store: JsonlStore) -> None:
    events = store.load("lazy").events
    chunk_seq = next(e.seq for e in events if e.type == "assistant/chunk")
    assert events[chunk_seq] is events[chunk_seq]
    assert events[chunk_seq].seq == chunk_seq and events[chunk_seq].data["chunk"]["type"] == "text-delta"
    again = store.load("lazy").events  # the validated session is cached: same runs, same events
    assert again[chunk_seq] is events[chunk_seq]


def test_slices_and_iteration_across_packed_slots_give_events(store: JsonlStore) -> None:
    events = store.load("lazy").events
    whole = list(events)
    assert all(e.__class__.__name__ == "Event" for e in whole)
    assert [e.seq for e in whole] == list(range(len(events)))
    assert events[5:60] == whole[5:60]
    assert events[::7] == whole[::7]
    assert events[-3:] == whole[-3:]


def test_restore_resume_and_derive_work_without_expanding_rows(store: JsonlStore) -> None:
    inspection = store.load("lazy")
    session = Session.restore("lazy", inspection.events, inspection.header)
    assert _packed_slots(session.events) == 3 * 4 * 40  # restore took the runs as they are
    eager = Session.restore("lazy", list(inspection.events), inspection.header)
    assert session.derive_messages() == eager.derive_messages()
    assert session.request_header() == eager.request_header()
    assert session.surface.nodes == eager.surface.nodes
    record_workload(session, 1)  # recording continues after the packed prefix
    check_invariants(session.events)
    with store.open("lazy") as live:
        assert live.session.derive_messages() == eager.derive_messages()
        record_workload(live.session, 1, flush=live.flush)
        written = list(live.session.events)
    assert len(written) > len(eager.events) + 181
    assert list(store.load("lazy").events) == written


def test_forks_of_a_cold_session_share_its_runs(store: JsonlStore) -> None:
    events = store.load("lazy").events
    boundary = max(e.seq for e in events if e.type == "turn/end" and e.data["turn"] == 2)
    with store.fork("lazy", boundary, "child") as child:
        assert list(child.session.events)[: boundary + 1] == list(events)[: boundary + 1]
    assert list(store.load("child").events)[: boundary + 1] == list(events)[: boundary + 1]


def test_compaction_meters_a_cold_session_by_expanding_its_rows(store: JsonlStore) -> None:
    with store.open("lazy") as live:
        result = Compactor(ExtractiveSummarizer()).compact_now(live)
        assert result is not None
        assert _packed_slots(live.session.events) == 0  # the token meter read every chunk
        check_invariants(live.session.events)


def test_a_packed_run_in_the_wrong_slot_is_refused_with_its_place() -> None:
    line = next(line for line in encode_batch(_recorded(1)).splitlines()
                if isinstance(decode_line_entry(line), ChunkRun))
    run = decode_line_entry(line)
    assert isinstance(run, ChunkRun)
    prefix = _recorded(1)[: run.seq0]
    misplaced = [*prefix, *[run] * run.count, run]  # one slot too many
    with pytest.raises(InvalidEventError, match=rf"index {run.seq0 + run.count}.*packed row of {run.count}"):
        Session.restore("lazy", misplaced, HEADER)
    shifted = [*prefix[:-1], *[run] * run.count]  # a slot too early
    with pytest.raises(InvalidEventError, match="seed must be contiguous"):
        Session.restore("lazy", shifted, HEADER)


def test_resolve_entries_expands_runs_at_their_seqs() -> None:
    events = _recorded(1)
    entries = [entry for line in encode_batch(events).splitlines()
               for entry in _slots(decode_line_entry(line))]
    assert resolve_entries(entries) == events
    assert resolve_entries(entries[50:], 50) == events[50:]


def _slots(entry: object) -> list:
    return [entry] * entry.count if isinstance(entry, ChunkRun) else [entry]


def test_a_row_whose_slots_were_partly_expanded_still_restores() -> None:
    events = _recorded(1)
    line = next(line for line in encode_batch(events).splitlines()
                if isinstance(decode_line_entry(line), ChunkRun))
    run = decode_line_entry(line)
    assert isinstance(run, ChunkRun) and run.count > 2
    mixed = [*events[: run.seq0], run, run.event(run.seq0 + 1), *[run] * (run.count - 2),
             *events[run.seq0 + run.count :]]
    assert list(Session.restore("lazy", mixed, HEADER).events)[:-1] == events


def test_restoring_a_view_reuses_validation_only_for_events_a_restore_validated() -> None:
    live = Session.create("x")
    message = {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    with pytest.raises(InvalidEventError, match='must have role "user"'):  # append checks restore's shapes
        live.append("user/message", message, surface_op="append")
    live.append("user/message", {**message, "role": "user", "source": {"kind": "user"}}, surface_op="append")
    assert Session.restore("x", live.events, live.header).seq == 2  # appended events are validated again
    restored = Session.restore("lazy", _recorded(1), HEADER)
    again = Session.restore("lazy", restored.events, HEADER)  # seed-validated: taken as it stands
    assert again.events == restored.events  # it already ends with session/end-seed
    assert again.derive_messages() == restored.derive_messages()
    again.append("turn/start", {"turn": 2})
    assert len(restored.events) == len(again.events) - 1  # the copy is independent
