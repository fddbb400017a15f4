"""One pass over a session's log for the viewer: turns, steps, surface, compactions, title.

Stream chunks are never expanded: a packed run is one slot of the scan and its payloads are
never read, so indexing the 181,001-event benchmark session touches its 21,000 other events.
The index is what every page of a session needs; each page then reads only the range it shows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agentlog.compaction.events import COMPACTION_END, COMPACTION_START, COMPACTION_SUMMARY
from agentlog.compaction.tokens import Pricer
from agentlog.core.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_START,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)
from agentlog.core.packed import ChunkRun, EventsView, LogEntry
from agentlog.core.repair import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from agentlog.core.request_header import canonical_header, event_header
from agentlog.core.surface import SurfaceManager

__all__ = ["Bracket", "SessionIndex", "StepPoint", "TurnSpan", "index_session", "slots", "text_of"]

SESSION_TITLE: Final = "session/title"
SYNTHETIC_CODES: Final = frozenset({TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN})
"""Error codes of the tool results crash repair writes (``agentlog.core.repair``)."""


@dataclass(slots=True)
class TurnSpan:
    """One turn's seq range and timing; ``number`` None for events before the first turn."""

    number: int | None
    start: int
    stop: int
    started: int
    ended: int | None = None
    reason: str | None = None
    steps: int = 0
    repair: str | None = None
    """``"committed"`` when crash repair closed it in the log, ``"pending"`` when only a load would."""

    @property
    def duration_ms(self) -> int | None:
        return None if self.ended is None else self.ended - self.started


@dataclass(frozen=True, slots=True)
class StepPoint:
    """Token pressure after one model response: the provider's usage and the meter's estimate."""

    seq: int
    turn: Any
    provider_tokens: int | None
    estimated_tokens: int


@dataclass(slots=True)
class Bracket:
    """One compaction: its log-only bracket events, the range it shadowed and its summary."""

    compaction_id: str
    start_seq: int
    end_seq: int | None = None
    summary_seq: int | None = None
    checkpoint_seq: int | None = None
    shadowed: tuple[int, ...] = ()
    shadowed_tokens: int | None = None
    summary: str = ""
    error: str | None = None


@dataclass(slots=True)
class SessionIndex:
    """What every page of one session needs, from one scan of its log."""

    length: int
    stored: int
    """Events in the store; the rest (``length - stored``) are closers only a load would write."""
    turns: list[TurnSpan] = field(default_factory=list)
    steps: list[StepPoint] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)
    shadowed_by: dict[int, int] = field(default_factory=dict)
    brackets: list[Bracket] = field(default_factory=list)
    synthetic: set[int] = field(default_factory=set)
    title: str = ""
    model: str | None = None
    context_window: int | None = None
    header_tokens: int = 0
    header_seq: int | None = None
    """Seq of the latest ``request/header`` (what the next request sends besides the messages)."""
    first_time: int | None = None
    last_time: int | None = None


def slots(events: Sequence[Event], start: int = 0, stop: int | None = None) -> Iterator[tuple[int, LogEntry]]:
    """``(seq, event or packed run)`` of a log range, chunk runs unexpanded."""
    if isinstance(events, EventsView):
        yield from events.entries(start, stop)
        return
    end = len(events) if stop is None else min(stop, len(events))
    for seq in range(max(start, 0), end):
        yield seq, events[seq]


def text_of(blocks: Any, limit: int = 200) -> str:
    """The first text of content blocks, clipped: a title or a one-line summary."""
    for block in blocks if isinstance(blocks, (list, tuple)) else ():
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            text = " ".join(block["text"].split())
            if text:
                return text if len(text) <= limit else text[: limit - 1] + "…"
    return ""


def _int(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def _provider_tokens(usage: Any) -> int | None:
    if not isinstance(usage, dict):
        return None
    return sum(_int(usage.get(key)) for key in
               ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens"))


class _Indexer:
    """The scan's state; ``feed`` takes one non-chunk event."""

    def __init__(self, events: Sequence[Event], stored: int) -> None:
        self.index = SessionIndex(len(events), stored)
        self.manager = SurfaceManager(lambda seq: events[seq])
        self.pricer = Pricer()
        self.prices: dict[int, int] = {}
        self.surface_tokens = 0
        self.brackets: dict[str, Bracket] = {}

    def feed(self, event: Event) -> None:
        kind = event.type
        if kind in (TURN_START, TURN_END, STEP_START):
            self.boundary(event)
        elif kind in (REQUEST_HEADER, REQUEST_CONTEXT):
            self.request(event)
        elif kind in (COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END):
            self.compaction(event)
        elif kind == SESSION_TITLE and isinstance(event.data, dict):
            title = event.data.get("title")
            self.index.title = title if isinstance(title, str) else self.index.title
        if event.surface_op is not None:
            self.surface(event)
            self.message(event)

    def boundary(self, event: Event) -> None:
        index, data = self.index, event.data
        if event.type == TURN_START:
            number = data.get("turn") if isinstance(data, dict) else None
            index.turns.append(TurnSpan(number if type(number) is int else None, event.seq, event.seq,
                                        event.time))
        elif event.type == TURN_END and index.turns:
            span = index.turns[-1]
            span.ended = event.time
            reason = data.get("reason") if isinstance(data, dict) else None
            span.reason = str(reason.get("kind")) if isinstance(reason, dict) else None
            if span.reason == "interrupted":
                span.repair = "committed" if event.seq < index.stored else "pending"
        elif index.turns:
            index.turns[-1].steps += 1

    def request(self, event: Event) -> None:
        index, data = self.index, event.data
        if event.type == REQUEST_HEADER:
            found = event_header(event)
            if found is None:
                return
            header = canonical_header(found)
            index.header_tokens = self.pricer.header(header)
            index.header_seq = event.seq
            config = header.get("config")
            if isinstance(config, dict) and isinstance(config.get("model"), str):
                index.model = config["model"]
        elif isinstance(data, dict):
            window = data.get("contextWindow")
            index.context_window = window if type(window) is int else index.context_window
            if isinstance(data.get("model"), str):
                index.model = data["model"]

    def message(self, event: Event) -> None:
        index, data = self.index, event.data
        if not isinstance(data, dict):
            return
        if event.type == ASSISTANT_MESSAGE:
            estimate = index.header_tokens + self.surface_tokens
            index.steps.append(StepPoint(event.seq, data.get("turn"), _provider_tokens(data.get("usage")),
                                         estimate))
        elif event.type == TOOL_RESULT:
            error = data.get("error")
            if isinstance(error, dict) and error.get("code") in SYNTHETIC_CODES:
                index.synthetic.add(event.seq)
        elif event.type == USER_MESSAGE and not index.title:
            source = data.get("source")
            if isinstance(source, dict) and source.get("kind") not in ("plugin", "tool"):
                index.title = text_of(data.get("content"), 120)

    def surface(self, event: Event) -> None:
        self.manager.next_seq = event.seq
        plan = self.manager.apply(event)
        price = self.pricer.event(event)
        self.prices[event.seq] = price
        self.surface_tokens += price
        for seq in plan.shadowed:
            self.index.shadowed_by[seq] = event.seq
            self.surface_tokens -= self.prices.get(seq, 0)
        if plan.shadowed and isinstance(event.data, dict):
            source = event.data.get("source")
            compaction_id = source.get("compactionId") if isinstance(source, dict) else None
            bracket = self.brackets.get(compaction_id) if isinstance(compaction_id, str) else None
            if bracket is not None:
                bracket.checkpoint_seq = event.seq
                bracket.shadowed = plan.shadowed

    def compaction(self, event: Event) -> None:
        data = event.data if isinstance(event.data, dict) else {}
        compaction_id = str(data.get("compactionId"))
        bracket = self.brackets.get(compaction_id)
        if bracket is None:
            bracket = self.brackets[compaction_id] = Bracket(compaction_id, event.seq)
            self.index.brackets.append(bracket)
        if event.type == COMPACTION_SUMMARY:
            bracket.summary_seq = event.seq
            bracket.summary = "\n".join(str(block.get("text")) for block in data.get("summary") or ()
                                         if isinstance(block, dict) and block.get("type") == "text")
            tokens = data.get("shadowedTokenCount")
            bracket.shadowed_tokens = tokens if type(tokens) is int else None
        elif event.type == COMPACTION_END:
            bracket.end_seq = event.seq
            error = data.get("error")
            bracket.error = error if isinstance(error, str) else None


def index_session(events: Sequence[Event], stored: int | None = None) -> SessionIndex:
    """Index a session's log (``stored``: how many of ``events`` are in the store; default all)."""
    indexer = _Indexer(events, len(events) if stored is None else stored)
    index = indexer.index
    last: Event | None = None
    for _seq, entry in slots(events):
        if entry.__class__ is ChunkRun or entry.type == ASSISTANT_CHUNK:
            continue
        event: Event = entry  # type: ignore[assignment]
        if index.first_time is None:  # events before the first turn (if any) form a span of their own
            index.first_time = event.time
            index.turns.append(TurnSpan(None, 0, 0, event.time))
        indexer.feed(event)
        last = event
    for position, span in enumerate(index.turns):
        span.stop = index.turns[position + 1].start if position + 1 < len(index.turns) else len(events)
    if index.turns and index.turns[0].number is None and index.turns[0].stop == 0:
        index.turns.pop(0)
    if events:
        tail = events[-1]
        index.last_time = tail.time if last is None else max(last.time, tail.time)
    index.nodes = list(indexer.manager.nodes)
    return index
