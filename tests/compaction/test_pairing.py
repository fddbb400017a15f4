"""Tool-pairing balance of surface cuts, and its per-generation cache (spec §2, tool-pairing.spec)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentlog import Session, SurfaceError
from agentlog.compaction.pairing import PairingIndex, PairingIndexes
from agentlog.core.events import Event, Replace
from tests.compaction.helpers import new_session


def assistant(session: Session, *calls: str) -> int:
    content: list[Any] = [{"type": "text", "text": "t"}]
    content += [{"type": "tool-call", "id": call, "name": "read", "arguments": "{}"} for call in calls]
    return session.append(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "id": f"a{session.seq}",
                "role": "assistant",
                "content": content,
                "source": {"kind": "model", "provider": "p", "model": "m"},
            },
        },
        surface_op="append",
    ).seq


def result(session: Session, call: str) -> int:
    return session.append(
        "tool/result",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "id": f"r{session.seq}",
                "role": "user",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": call,
                        "content": [{"type": "text", "text": "out"}],
                        "isError": False,
                    }
                ],
                "source": {"kind": "tool", "callId": call},
            },
        },
        surface_op="append",
    ).seq


def note(session: Session) -> int:
    return session.append(
        "user/message",
        {
            "id": f"u{session.seq}",
            "role": "user",
            "content": [{"type": "text", "text": "n"}],
            "source": {"kind": "user"},
        },
        surface_op="append",
    ).seq


class Reads:
    """Counts event reads made by the index."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.count = 0

    def __call__(self, seq: int) -> Event:
        self.count += 1
        return self.session.events[seq]


def index_of(
    session: Session, reads: Callable[[int], Event] | None = None, index: PairingIndex | None = None
) -> PairingIndex:
    index = index or PairingIndex()
    index.refresh(
        session.surface.nodes, session.surface.replace_generation, reads or session.events.__getitem__
    )
    return index


def test_a_closed_single_call_step_is_balanced_only_outside_the_pair() -> None:
    session = new_session()
    prompt, call = note(session), assistant(session, "c1")
    answer = result(session, "c1")
    index = index_of(session)
    assert index.balanced_before(prompt) and index.balanced_before(call) and index.balanced_after(answer)
    assert not index.balanced_after(call) and not index.balanced_before(answer)


def test_an_open_call_is_unbalanced_after() -> None:
    session = new_session()
    call = assistant(session, "c1")
    assert not index_of(session).balanced_after(call)


def test_with_several_calls_only_the_cut_after_the_last_result_is_balanced() -> None:
    session = new_session()
    call = assistant(session, "c1", "c2")
    first, second = result(session, "c1"), result(session, "c2")
    index = index_of(session)
    assert not index.balanced_after(call) and not index.balanced_after(first) and index.balanced_after(second)


def test_a_neutral_node_inside_a_pair_is_unbalanced_on_both_sides_and_a_free_one_balanced() -> None:
    session = new_session()
    free = note(session)
    assistant(session, "c1")
    inside = note(session)
    result(session, "c1")
    index = index_of(session)
    assert not index.balanced_before(inside) and not index.balanced_after(inside)
    assert index.balanced_before(free) and index.balanced_after(free)


def test_after_a_replace_the_checkpoint_is_balanced_and_removed_seqs_are_not_found() -> None:
    session = new_session()
    call = assistant(session, "c1")
    answer = result(session, "c1")
    tail = note(session)
    checkpoint = session.append(
        "user/message",
        {
            "id": "k",
            "role": "user",
            "content": [],
            "source": {"kind": "plugin", "plugin": "compact", "compactionId": "k"},
        },
        surface_op=Replace(call, answer),
        source_event_seqs=[call, answer],
    ).seq
    index = index_of(session)
    assert (
        index.balanced_before(checkpoint) and index.balanced_after(checkpoint) and index.balanced_after(tail)
    )
    for seq in (call, answer):
        with pytest.raises(SurfaceError, match=f"seq {seq} not found"):
            index.balanced_before(seq)


def test_repeated_queries_answer_the_same_from_the_cache() -> None:
    session = new_session()
    call = assistant(session, "c1")
    result(session, "c1")
    indexes = PairingIndexes()
    answers = [
        (indexes.of(session).balanced_after(call), indexes.of(session).position(call)) for _ in range(3)
    ]
    assert answers == [(False, 0)] * 3 and indexes.of(session) is indexes.of(session)


def test_a_missing_seq_is_not_found_even_on_an_empty_surface() -> None:
    session = new_session()
    index = index_of(session)
    with pytest.raises(SurfaceError, match="not found"):
        index.balanced_before(0)
    first = note(session)
    assert index_of(session, index=index).balanced_before(first)


def test_log_only_growth_reads_no_event_and_appends_are_folded_incrementally() -> None:
    session = new_session()
    assistant(session, "c1")
    result(session, "c1")
    reads = Reads(session)
    index = index_of(session, reads)
    assert reads.count == 2
    session.append("agent-preset/selected", {"preset": "x"})
    index_of(session, reads, index)
    assert reads.count == 2
    note(session)
    note(session)
    index_of(session, reads, index)
    assert reads.count == 4
    first = session.surface.nodes[0]
    session.append(
        "user/message",
        {"id": "k", "role": "user", "content": [], "source": {"kind": "user"}},
        surface_op=Replace(first, session.surface.nodes[1]),
        source_event_seqs=list(session.surface.nodes[:2]),
    )
    index_of(session, reads, index)
    assert reads.count == 4 + 3  # a replace rebuilds the whole index


def test_a_shrinking_surface_in_the_same_generation_rebuilds() -> None:
    session = new_session()
    nodes = [note(session) for _ in range(3)]
    reads = Reads(session)
    index = PairingIndex()
    index.refresh(nodes, 0, reads)
    index.refresh(nodes[:2], 0, reads)
    assert reads.count == 3 + 2 and len(index) == 2
    with pytest.raises(SurfaceError, match="not found"):
        index.position(nodes[2])


def test_an_orphan_result_raises_on_rebuild_and_in_a_tail_without_partial_commit() -> None:
    session = new_session()
    result(session, "nobody")
    with pytest.raises(SurfaceError, match="no matching tool-call"):
        index_of(session)
    clean = new_session()
    first = note(clean)
    index = index_of(clean)
    note(clean)
    result(clean, "nobody")
    for _ in range(2):
        with pytest.raises(SurfaceError, match="no matching tool-call"):
            index_of(clean, index=index)
        assert len(index) == 1 and index.balanced_after(first)


def test_a_surface_seq_without_its_event_raises() -> None:
    session = new_session()
    note(session)
    with pytest.raises(SurfaceError, match="no matching log event"):
        PairingIndex().refresh([0, 5], 0, session.events.__getitem__)

    def shifted(seq: int) -> Event:
        return session.events[0]

    note(session)
    with pytest.raises(SurfaceError, match="maps to a log event with seq 0"):
        PairingIndex().refresh([0, 1], 0, shifted)
