"""The compaction bracket invariants, live and on replay (spec §1 E10, invariant.spec)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentlog import InvariantError, Session
from agentlog.compaction.engine import Compactor
from agentlog.compaction.invariants import CompactionInvariantChecker, check_compaction_invariants
from agentlog.core.events import Replace
from tests.compaction.helpers import FailingSummarizer, FixedSummarizer, new_session, session_with_turns

Build = Callable[[Session], None]


def start(session: Session, turn: int | None = 1, ident: str = "k", **extra: Any) -> None:
    session.append("compaction/start", {"compactionId": ident, **extra, "turn": turn})


def summary(session: Session, ident: str = "k", seqs: tuple[int, ...] = (0,), **extra: Any) -> None:
    data = {
        "compactionId": ident,
        "summary": [{"type": "text", "text": "s"}],
        "shadowedRange": {"start": seqs[0] if seqs else 0, "end": seqs[-1] if seqs else 0},
        "shadowedSeqs": list(seqs),
        "shadowedTokenCount": 3,
        "provider": "p",
        "model": "m",
    }
    data.update(extra)
    session.append("compaction/summary", data)


def end(session: Session, turn: int | None = 1, ident: str = "k", **extra: Any) -> None:
    session.append("compaction/end", {"compactionId": ident, **extra, "turn": turn})


def turn_start(session: Session, turn: int = 1) -> None:
    session.append("turn/start", {"turn": turn})


def turn_end(session: Session, turn: int = 1) -> None:
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


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


def checkpoint(session: Session, target: int, ident: str = "k", **source: Any) -> None:
    session.append(
        "user/message",
        {
            "id": f"c{session.seq}",
            "role": "user",
            "content": [],
            "source": {"kind": "plugin", "plugin": "compact", "compactionId": ident, **source},
        },
        surface_op=Replace(target, target),
        source_event_seqs=[target],
    )


def built(build: Build) -> Session:
    session = new_session()
    build(session)
    return session


def numbered_success(s: Session) -> None:
    turn_start(s)
    seq = note(s)
    start(s)
    summary(s, seqs=(seq,))
    checkpoint(s, seq)
    end(s)
    turn_end(s)


ACCEPTED: dict[str, Build] = {
    "numbered success": numbered_success,
    "numbered failure": lambda s: (turn_start(s), start(s), end(s, error="boom"), turn_end(s)),
    "standalone success": lambda s: (note(s), start(s, None), summary(s), checkpoint(s, 0), end(s, None)),
    "standalone failure": lambda s: (
        start(s, None, sourceCommandId="cmd"),
        end(s, None, sourceCommandId="cmd", error="x"),
    ),
    "end-seed clears an inherited open bracket": lambda s: (
        start(s, None),
        s.append("session/end-seed", {}),
        start(s, None, "k2"),
        end(s, None, "k2", error="x"),
    ),
    "repair turn/end before the end-seed of a numbered orphan": lambda s: (
        turn_start(s),
        start(s),
        s.append("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}}),
        s.append("session/end-seed", {}),
        turn_start(s, 2),
    ),
    "inherited repair turns before the end-seed of a standalone orphan": lambda s: (
        start(s, None),
        turn_start(s),
        turn_end(s),
        s.append("session/end-seed", {}),
        turn_start(s, 2),
    ),
    "unrelated events inside the bracket": lambda s: (
        start(s, None),
        note(s),
        s.append("agent-preset/selected", {}),
        end(s, None, error="x"),
    ),
    "prune needs no bracket": lambda s: (
        note(s),
        s.append(
            "compaction/prune",
            {"shadowedRange": {"start": 0, "end": 0}, "shadowedSeqs": [0], "shadowedTokenCount": 1},
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_well_formed_brackets_are_accepted(name: str) -> None:
    session = built(ACCEPTED[name])
    assert check_compaction_invariants(session.events).bracket is None


REJECTED: dict[str, tuple[Build, str]] = {
    "empty start id": (lambda s: start(s, None, ""), "non-empty compactionId"),
    "empty start command id": (lambda s: start(s, None, sourceCommandId=""), "empty or non-string"),
    "summary without start": (lambda s: summary(s), "no open compaction/start"),
    "nested start": (
        lambda s: (start(s, None), start(s, None, "k2")),
        "nested compaction/start while the standalone",
    ),
    "repeated summary": (lambda s: (start(s, None), summary(s), summary(s)), "second compaction/summary"),
    "summary with another id": (lambda s: (start(s, None), summary(s, "zz")), "does not match the open"),
    "summary with another command": (
        lambda s: (start(s, None), summary(s, sourceCommandId="c")),
        "sourceCommandId 'c' does not match",
    ),
    "empty shadowed seqs": (lambda s: (start(s, None), summary(s, seqs=())), "empty shadowedSeqs"),
    "wrong range endpoints": (
        lambda s: (start(s, None), summary(s, seqs=(0, 1), shadowedRange={"start": 0, "end": 0})),
        "disagrees with shadowedSeqs",
    ),
    "negative token count": (lambda s: (start(s, None), summary(s, shadowedTokenCount=-1)), "non-negative"),
    "end without start": (lambda s: end(s, None), "no open compaction/start"),
    "wrong end turn": (lambda s: (turn_start(s), start(s), end(s, 2)), "does not match the bracket owner"),
    "end with another id": (
        lambda s: (start(s, None), end(s, None, "zz", error="x")),
        "does not match the open",
    ),
    "end missing the command id": (
        lambda s: (start(s, None, sourceCommandId="c"), end(s, None, error="x")),
        "sourceCommandId absent does not match",
    ),
    "end with an empty command id": (
        lambda s: (start(s, None, sourceCommandId="c"), end(s, None, sourceCommandId="", error="x")),
        "empty",
    ),
    "success end without summary": (lambda s: (start(s, None), end(s, None)), "without a compaction/summary"),
    "start outside a turn": (lambda s: start(s, 1), "while no turn is open"),
    "start for another turn": (lambda s: (turn_start(s), start(s, 2)), "but the open turn is 1"),
    "standalone start in a turn": (lambda s: (turn_start(s), start(s, None)), "while turn 1 is open"),
    "numbered start between turns": (lambda s: (turn_start(s), turn_end(s), start(s, 1)), "no turn is open"),
    "turn/start crossing a bracket": (
        lambda s: (start(s, None), turn_start(s)),
        "turn/start while the compaction",
    ),
    "turn/end crossing a bracket": (
        lambda s: (turn_start(s), start(s), turn_end(s)),
        "turn/end while the compaction",
    ),
    "checkpoint with no start": (lambda s: (note(s), checkpoint(s, 0)), "no open compaction/start"),
    "checkpoint with another id": (
        lambda s: (note(s), start(s, None), checkpoint(s, 0, "zz")),
        "does not match",
    ),
    "checkpoint with an empty command id": (
        lambda s: (note(s), start(s, None), checkpoint(s, 0, sourceCommandId="")),
        "empty sourceCommandId",
    ),
    "closed standalone bracket containing a turn": (
        lambda s: (start(s, None), turn_start(s), turn_end(s), end(s, None, error="x")),
        "turn/start while",
    ),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_broken_brackets_are_rejected_on_replay_and_live(name: str) -> None:
    build, message = REJECTED[name]
    session = built(build)
    with pytest.raises(InvariantError, match=message):
        check_compaction_invariants(session.events)
    live = new_session()
    CompactionInvariantChecker.attach(live)
    with pytest.raises(InvariantError, match=message):
        build(live)


def test_turn_boundaries_are_allowed_once_the_bracket_closes() -> None:
    session = new_session()
    CompactionInvariantChecker.attach(session)
    start(session, None)
    end(session, None, error="x")
    turn_start(session)
    turn_end(session)


def test_attaching_to_an_existing_session_rebuilds_the_open_bracket() -> None:
    session = new_session()
    start(session, None)
    CompactionInvariantChecker.attach(session)
    with pytest.raises(InvariantError, match="turn/start while the compaction bracket from seq 0"):
        turn_start(session)
    assert session.seq == 1


def test_a_vetoed_candidate_does_not_move_the_trace() -> None:
    session = new_session()
    CompactionInvariantChecker.attach(session)
    with pytest.raises(InvariantError):
        end(session, None)
    start(session, None)
    end(session, None, error="x")


def test_the_engine_writes_brackets_the_checker_accepts_including_failures() -> None:
    session, _ = session_with_turns(3)
    CompactionInvariantChecker.attach(session)
    with pytest.raises(Exception, match="nope"):
        Compactor(FailingSummarizer(RuntimeError("nope"))).compact_now(session, command_id="c1")
    assert Compactor(FixedSummarizer()).compact_now(session, command_id="c2") is not None
    check_compaction_invariants(session.events)
