"""Validated-state checkpoints: what restore computed from a log prefix, to resume without it.

A ``SessionState`` is what restore derives from the first ``count`` events of a log: the
surface fold, the derived messages and where the request scans stand. A store that proves
the prefix unchanged (a hash of its stored bytes: ``store/jsonl/checkpoint.py``) resumes a
session from it: the prefix stays unparsed in ``LazySpan`` slots until someone reads one of
its events, and only the events after it are validated. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Final

from agentlog.core.events import REQUEST_CONTEXT, REQUEST_HEADER
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import FrozenDict
from agentlog.core.messages import Message
from agentlog.core.packed import LazySpan, SpanReader
from agentlog.core.request_header import event_header
from agentlog.core.session import Session

__all__ = ["SessionState", "capture_state", "resume_prefix", "resume_session", "trusted_messages"]

_MAX_DEPTH: Final = 40
"""Nesting past which ``trusted_messages`` gives up: ``freeze`` turns arrays nested beyond 48
levels (of an event's data) into ``FrozenList``s, which a plain rebuild cannot match."""


@dataclass(frozen=True, slots=True)
class SessionState:
    """The state restore reaches after the first ``count`` events of a log (all validated)."""

    count: int
    nodes: list[int]
    surface_seqs: list[int]
    replace_generation: int
    first_replace_seq: int | None
    derived_nodes: int
    """Surface nodes whose messages the checkpoint's message list holds (all of them)."""
    header_seq: int | None
    """Seq of the latest ``request/header`` a request scan would take (None: none)."""
    context_seq: int | None
    """Seq of the latest ``request/context`` (None: none)."""

    def to_wire(self) -> dict[str, Any]:
        """The state as plain JSON (the checkpoint's core)."""
        same = self.nodes == self.surface_seqs
        return {"count": self.count, "nodes": None if same else self.nodes,
                "surfaceSeqs": self.surface_seqs, "replaceGeneration": self.replace_generation,
                "firstReplaceSeq": self.first_replace_seq, "derivedNodes": self.derived_nodes,
                "headerSeq": self.header_seq, "contextSeq": self.context_seq}

    @staticmethod
    def from_wire(wire: Any) -> SessionState | None:
        """The state read back; None unless every field has its type and bounds."""
        if type(wire) is not dict:
            return None
        fields: dict[str, Any] = wire
        values: list[Any] = [fields.get(key) for key in (
            "count", "surfaceSeqs", "nodes", "replaceGeneration", "firstReplaceSeq", "derivedNodes",
            "headerSeq", "contextSeq")]
        count, seqs, nodes, generation, first, derived, header, context = values
        nodes = seqs if nodes is None else nodes
        if not (_count(count) and _seqs(seqs, count) and _seqs(nodes, count)):
            return None
        if not (_count(generation) and _count(derived) and derived <= len(nodes)
                and all(value is None or (_count(value) and value < count)
                        for value in (first, header, context))):
            return None
        return SessionState(count, list(nodes), list(seqs), generation, first, derived, header, context)


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _seqs(value: Any, count: int) -> bool:
    return type(value) is list and (not value or (
        set(map(type, value)) == {int} and min(value) >= 0 and max(value) < count))


def capture_state(session: Session, count: int) -> tuple[SessionState, list[Message]]:
    """The state of ``session`` whose log holds exactly ``count`` events (all validated), and its
    derived messages. Brings the session's request scans and message projection up to date."""
    if session.seq != count:
        raise ValueError(f"session holds {session.seq} events, not {count}")
    messages = session.derive_messages()
    session.request_header()
    context = session.request_context()
    header_event = session._header_event
    manager = session._manager
    state = SessionState(
        count, list(manager.nodes), list(manager.surface_seqs), manager.replace_generation,
        manager.first_replace_seq, len(manager.nodes),
        None if header_event is None else header_event.seq,
        None if context is None else _context_seq(session, context),
    )
    return state, messages


def _context_seq(session: Session, context: Any) -> int:
    """The seq of the ``request/context`` whose data the session's scan holds (read backward)."""
    for seq in range(session.seq - 1, -1, -1):
        event = session._event_at(seq)
        if event.type == REQUEST_CONTEXT and event.data is context:
            return seq
    raise ValueError("the session's request context is not in its log")


def resume_session(header: SessionHeader, state: SessionState, spans: Sequence[tuple[int, int, int, int]],
                   read: SpanReader, messages: list[Message] | None) -> Session:
    """An unsealed session holding ``state.count`` events as unparsed spans, in the given state.

    ``spans`` are ``(seq0, count, start byte, end byte)``, contiguous from seq 0; ``messages``
    (None: unknown) are the derived messages of every surface node. The caller proved the spans'
    bytes are the log prefix the state was captured from; restore validated them then.
    """
    session = _spanned(header, spans, read)
    if len(session._log) != state.count:
        raise ValueError(f"spans cover {len(session._log)} events, the state {state.count}")
    manager = session._manager
    manager.nodes.extend(state.nodes)
    manager.surface_seqs.extend(state.surface_seqs)
    manager.replace_generation = state.replace_generation
    manager.first_replace_seq = state.first_replace_seq
    if messages is not None:
        session._derived = messages
        session._derived_nodes = state.derived_nodes
        session._derived_generation = state.replace_generation
    # The request scans stand at the prefix's end; their events are read now (one span each).
    session._header_scan = session._context_scan = state.count
    if state.header_seq is not None:
        header_event = session._event_at(state.header_seq)
        if header_event.type != REQUEST_HEADER or event_header(header_event) is None:
            raise ValueError(f"seq {state.header_seq} holds no request header")
        session._header_event = header_event
    if state.context_seq is not None:
        context = session._event_at(state.context_seq)
        if context.type != REQUEST_CONTEXT:
            raise ValueError(f"seq {state.context_seq} holds no request context")
        session._request_context = context.data
    return session


def resume_prefix(header: SessionHeader, state: SessionState, spans: Sequence[tuple[int, int, int, int]],
                  read: SpanReader) -> Session:
    """A fork's source: the first events of the log ``state`` was captured from, as unparsed spans
    (``resume_session``'s), without the rest. Only ``Session._fork_of`` may take it: its surface
    index is the whole log's (a fork keeps the part below its boundary) and its request scans
    stand at seq 0 (a fork scans its own prefix)."""
    session = _spanned(header, spans, read)
    if len(session._log) > state.count:
        raise ValueError(f"spans cover {len(session._log)} events, the state {state.count}")
    session._manager.surface_seqs.extend(state.surface_seqs)
    session._manager.first_replace_seq = state.first_replace_seq
    return session


def _spanned(header: SessionHeader, spans: Sequence[tuple[int, int, int, int]], read: SpanReader) -> Session:
    """A session whose log is the spans' events, unparsed (all validated, none live)."""
    session = Session(header)
    log = session._log
    for seq0, count, start, end in spans:
        log.extend(repeat(LazySpan(seq0, count, start, end, read), count))  # type: ignore[arg-type]
    session._lazy_end = session._validated = session._first_live_seq = len(log)
    session._manager.next_seq = len(log)
    return session


class _TooDeep(Exception):  # noqa: N818 - internal control flow
    pass


def trusted_messages(values: Iterable[Any]) -> list[Message] | None:
    """Derived messages from their JSON (already parsed), frozen without re-validation: they
    were validated when the checkpoint was written, and the checkpoint's hashes prove they are
    what was written. None when a value is not an object, or nests too deep. ``values`` may be
    a generator: each parsed message is then dropped once frozen (one copy in memory, not two).
    Equal short strings and equal small flat objects (a role, a ``source``) become one object."""
    shared: dict[Any, Any] = {}
    try:
        out = [_trusted(value, 0, shared) if value.__class__ is dict else value for value in values]
    except _TooDeep:
        return None
    return out if all(type(message) is FrozenDict for message in out) else None


_new_dict = dict.__new__
_fill = dict.update
_set = dict.__setitem__
_SHARED_CHARS: Final = 32
"""Strings up to this length are shared between the messages of one resume."""
_SHARED_MEMBERS: Final = 4
"""Objects of up to this many members, each a shared string, an int, a bool or null, are shared."""


def _trusted(value: Any, depth: int, shared: dict[Any, Any]) -> Any:
    """``value`` (parsed JSON) deep-frozen as ``freeze`` would, without checks: objects become
    ``FrozenDict``s (copied shallowly, then their container members replaced), arrays tuples;
    ``shared`` maps what was seen to the one object kept for it (frozen values only)."""
    if depth > _MAX_DEPTH:
        raise _TooDeep
    if value.__class__ is dict:
        frozen = _new_dict(FrozenDict)
        _fill(frozen, value)
        flat = len(value) <= _SHARED_MEMBERS
        for key, member in value.items():
            kind = member.__class__
            if kind is dict or kind is list:
                _set(frozen, key, _trusted(member, depth + 1, shared))
                flat = False
            elif kind is str:
                if len(member) <= _SHARED_CHARS:
                    _set(frozen, key, shared.setdefault(member, member))
                else:
                    flat = False
            elif kind is float:
                flat = False  # -0.0 == 0.0, yet they are different JSON
        if flat:  # the type is part of the key: true == 1 in Python, not in JSON
            seen = tuple([(key, member.__class__, member) for key, member in frozen.items()])
            return shared.setdefault(seen, frozen)
        return frozen
    return tuple([_trusted(member, depth + 1, shared) if member.__class__ is dict or member.__class__ is list
                  else _shared_scalar(member, shared) for member in value])


def _shared_scalar(member: Any, shared: dict[Any, Any]) -> Any:
    """An array's scalar member: a short string as the one object kept for it, others as they are."""
    if member.__class__ is str and len(member) <= _SHARED_CHARS:
        return shared.setdefault(member, member)
    return member



