"""The compaction bracket invariants (spec compaction §1 E10), as a session validator.

Brackets must nest inside their owner (a numbered bracket inside its open turn, a ``null``
one between turns), never overlap, carry at most one matching summary and close with a
matching end; turn boundaries may not cross an open bracket, and a checkpoint replace must
belong to the open bracket. A ``session/end-seed`` clears an open bracket (a dead process's
orphan); on replay, turn-repair boundaries before that end-seed are accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentlog.compaction.events import (
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    is_checkpoint,
)
from agentlog.core.events import END_SEED, TURN_END, TURN_START, USER_MESSAGE, Event, Replace
from agentlog.errors import InvariantError

if TYPE_CHECKING:
    from agentlog.core.session import Session

__all__ = ["BracketTrace", "CompactionInvariantChecker", "check_compaction_invariants"]

_MISSING = object()


@dataclass(slots=True)
class _Bracket:
    seq: int
    compaction_id: Any
    command_id: Any  # _MISSING when absent
    turn: Any
    summarized: bool = False
    stale: bool = False  # replay only: a later end-seed clears it before any end


@dataclass(slots=True)
class BracketTrace:
    """The open turn and the open bracket of a log."""

    open_turn: int | None = None
    bracket: _Bracket | None = None


def _get(value: Any, key: str, default: Any = None) -> Any:
    return value.get(key, default) if isinstance(value, dict) else default


def _fail(event: Event, detail: str) -> InvariantError:
    return InvariantError(detail, seq=event.seq, event_type=event.type)


def _show(value: Any) -> str:
    return "absent" if value is _MISSING else repr(value)


def _command_id(event: Event, data: Any) -> Any:
    command = _get(data, "sourceCommandId", _MISSING)
    if command is not _MISSING and (type(command) is not str or not command):
        raise _fail(event, f"{event.type} has an empty or non-string sourceCommandId {command!r}")
    return command


def _check_identity(event: Event, bracket: _Bracket, data: Any) -> None:
    if _get(data, "compactionId") != bracket.compaction_id:
        raise _fail(event, f"{event.type} compactionId {_get(data, 'compactionId')!r} does not match the "
                           f"open bracket {bracket.compaction_id!r} (started at seq {bracket.seq})")
    command = _command_id(event, data)
    if command != bracket.command_id:
        raise _fail(event, f"{event.type} sourceCommandId {_show(command)} does not match the open bracket's "
                           f"{_show(bracket.command_id)}")


def _on_start(trace: BracketTrace, event: Event, stale: bool) -> BracketTrace:
    data = event.data
    compaction_id = _get(data, "compactionId")
    if type(compaction_id) is not str or not compaction_id:
        raise _fail(event, "compaction/start needs a non-empty compactionId")
    command = _command_id(event, data)
    turn = _get(data, "turn", _MISSING)
    if trace.bracket is not None:
        owner = "standalone" if trace.bracket.turn is None else f"turn {trace.bracket.turn}"
        raise _fail(event, f"nested compaction/start while the {owner} bracket from seq "
                           f"{trace.bracket.seq} is still open")
    if turn is None:
        if trace.open_turn is not None:
            raise _fail(event, f"standalone compaction/start (turn null) while turn {trace.open_turn} "
                               "is open")
    elif type(turn) is not int:
        raise _fail(event, f"compaction/start turn must be an integer or null, got {_show(turn)}")
    elif trace.open_turn is None:
        raise _fail(event, f"compaction/start for turn {turn} while no turn is open")
    elif turn != trace.open_turn:
        raise _fail(event, f"compaction/start for turn {turn} but the open turn is {trace.open_turn}")
    return BracketTrace(trace.open_turn, _Bracket(event.seq, compaction_id, command, turn, stale=stale))


def _on_summary(trace: BracketTrace, event: Event) -> BracketTrace:
    bracket = trace.bracket
    if bracket is None:
        raise _fail(event, "compaction/summary with no open compaction/start")
    data = event.data
    _check_identity(event, bracket, data)
    if bracket.summarized:
        raise _fail(event, f"second compaction/summary in the bracket started at seq {bracket.seq}")
    seqs, span = _get(data, "shadowedSeqs"), _get(data, "shadowedRange")
    if not isinstance(seqs, (list, tuple)) or not seqs:
        raise _fail(event, "compaction/summary has empty shadowedSeqs")
    if _get(span, "start") != seqs[0] or _get(span, "end") != seqs[-1]:
        raise _fail(event, f"compaction/summary shadowedRange {span!r} disagrees with shadowedSeqs endpoints "
                           f"{seqs[0]}..{seqs[-1]}")
    tokens = _get(data, "shadowedTokenCount")
    if type(tokens) is not int or tokens < 0:
        raise _fail(event, "compaction/summary shadowedTokenCount must be a non-negative integer, "
                           f"got {tokens!r}")
    summarized = _Bracket(bracket.seq, bracket.compaction_id, bracket.command_id, bracket.turn, True,
                          bracket.stale)
    return BracketTrace(trace.open_turn, summarized)


def _on_end(trace: BracketTrace, event: Event) -> BracketTrace:
    bracket = trace.bracket
    if bracket is None:
        raise _fail(event, "compaction/end with no open compaction/start")
    data = event.data
    _check_identity(event, bracket, data)
    turn = _get(data, "turn", _MISSING)
    if turn is _MISSING or type(turn) is bool or turn != bracket.turn:
        raise _fail(event, f"compaction/end turn {_show(turn)} does not match the bracket owner "
                           f"{_show(bracket.turn)}")
    if "error" not in data and not bracket.summarized:
        raise _fail(event, "successful compaction/end without a compaction/summary "
                           f"(bracket at seq {bracket.seq})")
    return BracketTrace(trace.open_turn, None)


def _on_turn(trace: BracketTrace, event: Event) -> BracketTrace:
    bracket = trace.bracket
    if bracket is not None and not bracket.stale:
        raise _fail(event, f"{event.type} while the compaction bracket from seq {bracket.seq} is open")
    if event.type == TURN_START:
        turn = _get(event.data, "turn")
        return BracketTrace(turn if type(turn) is int else None, bracket)
    return BracketTrace(None, bracket)


def _on_checkpoint(trace: BracketTrace, event: Event) -> BracketTrace:
    bracket = trace.bracket
    if bracket is None:
        raise _fail(event, "compaction checkpoint replace with no open compaction/start")
    source = _get(event.data, "source")
    if _get(source, "compactionId") != bracket.compaction_id:
        raise _fail(event, f"checkpoint compactionId {_get(source, 'compactionId')!r} does not match the "
                           f"open bracket {bracket.compaction_id!r}")
    command = _get(source, "sourceCommandId", _MISSING)
    if command is not _MISSING and (type(command) is not str or not command):
        raise _fail(event, "checkpoint has an empty sourceCommandId")
    if command != bracket.command_id:
        raise _fail(event, f"checkpoint sourceCommandId {_show(command)} does not match the open bracket's "
                           f"{_show(bracket.command_id)}")
    return trace


def next_trace(trace: BracketTrace, event: Event, *, stale: bool = False) -> BracketTrace:
    """The trace after ``event`` (raises InvariantError); ``stale`` marks a start a later end-seed clears."""
    kind = event.type
    if kind == COMPACTION_START:
        return _on_start(trace, event, stale)
    if kind == COMPACTION_SUMMARY:
        return _on_summary(trace, event)
    if kind == COMPACTION_END:
        return _on_end(trace, event)
    if kind in (TURN_START, TURN_END):
        return _on_turn(trace, event)
    if kind == END_SEED:
        return BracketTrace(trace.open_turn, None)
    if kind == USER_MESSAGE and isinstance(event.surface_op, Replace) and is_checkpoint(event.data):
        return _on_checkpoint(trace, event)
    return trace


def _stale_starts(events: Sequence[Event]) -> set[int]:
    """Seqs of starts that an end-seed clears before any end: their turn crossings are repair."""
    stale: set[int] = set()
    open_start: int | None = None
    for event in events:
        kind = event.type
        if kind == COMPACTION_START:
            open_start = event.seq
        elif kind == COMPACTION_END:
            open_start = None
        elif kind == END_SEED and open_start is not None:
            stale.add(open_start)
            open_start = None
    return stale


def check_compaction_invariants(events: Sequence[Event]) -> BracketTrace:
    """Replay ``events`` under E10 (with the end-seed rules); return the final trace."""
    stale = _stale_starts(events)
    trace = BracketTrace()
    for event in events:
        trace = next_trace(trace, event, stale=event.seq in stale)
    return trace


class CompactionInvariantChecker:
    """E10 checked live: ``validate`` stages a candidate, ``commit`` advances after it logged."""

    __slots__ = ("_staged", "trace")

    def __init__(self, trace: BracketTrace | None = None) -> None:
        self.trace = trace or BracketTrace()
        self._staged: tuple[Event, BracketTrace] | None = None

    def validate(self, event: Event) -> None:
        """Check a candidate (raising ``InvariantError``) without moving the trace."""
        self._staged = (event, next_trace(self.trace, event))

    def commit(self, event: Event) -> None:
        staged, self._staged = self._staged, None
        self.trace = staged[1] if staged is not None and staged[0] is event else next_trace(self.trace, event)

    def __call__(self, event: Event) -> None:
        self.validate(event)

    @classmethod
    def attach(cls, session: Session) -> Callable[[], None]:
        """Replay ``session`` (raising on a broken rule), then check every append; returns a detach."""
        try:
            trace = check_compaction_invariants(session.events)
        except InvariantError as exc:
            raise exc.locate(session_id=session.id) from None
        checker = cls(trace)
        remove = session.add_validator(checker.validate)
        unsubscribe = session.subscribe(checker.commit)

        def detach() -> None:
            remove()
            unsubscribe()

        return detach
