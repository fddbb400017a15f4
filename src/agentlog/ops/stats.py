"""What a session did, in figures: turns, steps, tool calls by name, tokens, durations.

Pure folds over stored events (``session_stats``) and their sum over sessions (``total_stats``);
the ``stats`` command reads the store and prints them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentlog.core.events import (
    ASSISTANT_MESSAGE,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)
from agentlog.errors import AgentlogError
from agentlog.store.base import Store
from agentlog.store.records import Unreadable

__all__ = ["SessionStats", "StoreStats", "session_stats", "store_stats", "total_stats"]


@dataclass(slots=True)
class SessionStats:
    """Counts and sums over one session (``session_id`` set) or over many (``sessions`` of them)."""

    session_id: str | None
    sessions: int = 1
    events: int = 0
    turns: int = 0
    interrupted_turns: int = 0
    steps: int = 0
    user_messages: int = 0
    assistant_messages: int = 0
    tool_calls: Counter[str] = field(default_factory=Counter)
    tool_errors: int = 0
    compactions: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    wall_ms: int = 0
    """First event to last event."""
    turn_ms: int = 0
    """Time inside turns (``turn/start`` to its ``turn/end``)."""
    tool_ms: int = 0
    """Time between each ``tool/call`` and its ``tool/result``."""

    def to_json(self) -> dict[str, Any]:
        """The stable ``--json`` shape (camelCase like the wire format)."""
        return {
            "session": self.session_id, "sessions": self.sessions, "events": self.events,
            "turns": self.turns, "interruptedTurns": self.interrupted_turns, "steps": self.steps,
            "userMessages": self.user_messages, "assistantMessages": self.assistant_messages,
            "toolCalls": dict(sorted(self.tool_calls.items())), "toolErrors": self.tool_errors,
            "compactions": self.compactions,
            "tokens": {"input": self.input_tokens, "output": self.output_tokens,
                       "cacheRead": self.cache_read_tokens},
            "durationsMs": {"wall": self.wall_ms, "turns": self.turn_ms, "tools": self.tool_ms},
        }


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def session_stats(session_id: str, events: Sequence[Event]) -> SessionStats:
    """The figures of one session's log (a crash-repaired view counts its synthetic closers)."""
    stats = SessionStats(session_id, events=len(events))
    turn_started: int | None = None
    calls: dict[Any, int] = {}
    for event in events:
        kind, data = event.type, event.data
        if not isinstance(data, dict):
            continue
        if kind == TURN_START:
            stats.turns += 1
            turn_started = event.time
        elif kind == TURN_END:
            reason = data.get("reason")
            if isinstance(reason, dict) and reason.get("kind") == "interrupted":
                stats.interrupted_turns += 1
            if turn_started is not None:
                stats.turn_ms += max(0, event.time - turn_started)
                turn_started = None
        elif kind == STEP_START:
            stats.steps += 1
        elif kind == USER_MESSAGE:
            stats.user_messages += 1
        elif kind == ASSISTANT_MESSAGE:
            _assistant_message(stats, data)
        elif kind == TOOL_CALL:
            stats.tool_calls[str(data.get("name"))] += 1
            calls[data.get("callId")] = event.time
        elif kind == TOOL_RESULT:
            _tool_result(stats, data, calls, event.time)
        elif kind == "compaction/end":
            stats.compactions += 1
    if events:
        stats.wall_ms = max(0, events[-1].time - events[0].time)
    return stats


def _assistant_message(stats: SessionStats, data: dict[str, Any]) -> None:
    stats.assistant_messages += 1
    usage = data.get("usage")
    if isinstance(usage, dict):
        stats.input_tokens += _count(usage.get("inputTokens"))
        stats.output_tokens += _count(usage.get("outputTokens"))
        stats.cache_read_tokens += _count(usage.get("cacheReadTokens"))


def _tool_result(stats: SessionStats, data: dict[str, Any], calls: dict[Any, int], time: int) -> None:
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, (list, tuple)) else ():
        if isinstance(block, dict) and block.get("type") == "tool-result":
            if block.get("isError"):
                stats.tool_errors += 1
            started = calls.pop(block.get("toolCallId"), None)
            if started is not None:
                stats.tool_ms += max(0, time - started)


def total_stats(each: Iterable[SessionStats]) -> SessionStats:
    """The sum of per-session figures (``session_id`` None, ``sessions`` the count)."""
    total = SessionStats(None, sessions=0)
    for stats in each:
        total.sessions += stats.sessions
        total.tool_calls.update(stats.tool_calls)
        for name in ("events", "turns", "interrupted_turns", "steps", "user_messages", "assistant_messages",
                     "tool_errors", "compactions", "input_tokens", "output_tokens", "cache_read_tokens",
                     "wall_ms", "turn_ms", "tool_ms"):
            setattr(total, name, getattr(total, name) + getattr(stats, name))
    return total


@dataclass(slots=True)
class StoreStats:
    """Figures per session, their total, and each session that could not be read."""

    sessions: list[SessionStats]
    total: SessionStats
    unreadable: list[Unreadable]
    stopped: bool = False
    """True when ``stop`` ended the pass early: the figures are those of the sessions read so far."""


def store_stats(store: Store, session_ids: Sequence[str] | None = None, *,
                progress: Callable[[int, int], None] | None = None,
                stop: Callable[[], bool] | None = None) -> StoreStats:
    """Figures of the given sessions (default: every listed one), read without writing.

    Named sessions must be readable (their error is raised); in a store-wide pass one damaged
    session is reported in ``unreadable`` and never hides the others. ``stop`` is asked before
    each session (a Ctrl-C in the CLI): once true, the figures so far are returned, ``stopped``.
    """
    unreadable: list[Unreadable] = []
    if session_ids is None:
        listing = store.listing()
        unreadable.extend(listing.unreadable)
        ids, strict = sorted(snapshot.header.id for snapshot in listing.snapshots), False
    else:
        ids, strict = list(session_ids), True
    per: list[SessionStats] = []
    for done, session_id in enumerate(ids, 1):
        if stop is not None and stop():
            return StoreStats(per, total_stats(per), unreadable, stopped=True)
        try:
            events = store.inspect(session_id).events
        except AgentlogError as exc:
            if strict:
                raise
            unreadable.append(Unreadable(session_id, session_id, exc))
        else:
            per.append(session_stats(session_id, events))
        if progress is not None:
            progress(done, len(ids))
    return StoreStats(per, total_stats(per), unreadable)
