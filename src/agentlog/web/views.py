"""What the session pages show, as plain values: transcript turns, surface nodes, event rows.

Pure functions over a log and its ``SessionIndex``; each reads only the range of the page it
builds, and never expands a packed chunk run (runs are shown collapsed, as a count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agentlog.compaction.events import is_checkpoint
from agentlog.core.events import ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TOOL_CALL, Event
from agentlog.core.jsonvalue import dumps
from agentlog.core.messages import derive_event_message, event_message
from agentlog.core.packed import ChunkRun
from agentlog.web.scan import Bracket, SessionIndex, TurnSpan, slots

__all__ = [
    "EVENTS_PAGE", "NODES_PAGE", "TURNS_PAGE", "Block", "EventRow", "Item", "TurnView", "unseen_items",
    "event_rows", "message_item", "surface_items", "turn_views",
]

TURNS_PAGE: Final = 10
NODES_PAGE: Final = 40
EVENTS_PAGE: Final = 200
TEXT_LIMIT: Final = 20_000
"""Characters of one block shown on a page (the event inspector has the rest)."""


@dataclass(frozen=True, slots=True)
class Block:
    """One content block as shown: ``kind`` is text, reasoning, tool-call, tool-result or other."""

    kind: str
    text: str
    label: str = ""
    error: bool = False
    clipped: bool = False


@dataclass(slots=True)
class Item:
    """One message of a column: who, what, where it is in the log and what happened to it."""

    seq: int
    role: str
    blocks: list[Block]
    synthetic: bool = False
    shadowed_by: int | None = None
    checkpoint: Bracket | None = None
    chunks: tuple[int, int] | None = None
    """``(first seq, count)`` of the stream chunks the message was assembled from."""
    interrupted: bool = False


@dataclass(slots=True)
class TurnView:
    """One turn of the transcript: its span, its messages, and the compactions inside it."""

    span: TurnSpan
    items: list[Item | Bracket] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class EventRow:
    """A row of the event inspector: one event, or a collapsed run of stream chunks."""

    seq: int
    type: str
    time: int
    summary: str
    raw: str
    count: int = 1


def _clip(text: str) -> tuple[str, bool]:
    return (text, False) if len(text) <= TEXT_LIMIT else (text[:TEXT_LIMIT] + "…", True)


def _json(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value).decode()


def _label(value: Any) -> str:
    """A name or id to print: the string, JSON for anything else, nothing when absent."""
    return "" if value is None else _json(value)


def _blocks(content: Any) -> list[Block]:
    blocks: list[Block] = []
    for block in content if isinstance(content, (list, tuple)) else ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("text", "reasoning"):
            text, clipped = _clip(_label(block.get("text")))
            blocks.append(Block(str(kind), text, clipped=clipped))
        elif kind == "tool-call":
            text, clipped = _clip(_json(block.get("arguments")))
            blocks.append(Block("tool-call", text, label=_label(block.get("name")), clipped=clipped))
        elif kind == "tool-result":
            inner = block.get("content")
            parts = [str(part.get("text", "")) if isinstance(part, dict) and part.get("type") == "text"
                     else _json(part) for part in (inner if isinstance(inner, (list, tuple)) else ())]
            text, clipped = _clip("\n".join(parts))
            blocks.append(Block("tool-result", text, label=_label(block.get("toolCallId")),
                                error=block.get("isError") is True, clipped=clipped))
        else:
            text, clipped = _clip(_json(block))
            blocks.append(Block("other", text, label=_label(kind), clipped=clipped))
    return blocks


def message_item(event: Event, message: Any, index: SessionIndex) -> Item:
    """The item of a message event (``message``: the message it carries)."""
    source = message.get("source") if isinstance(message, dict) else None
    role = str(message.get("role")) if isinstance(message, dict) else "?"
    if isinstance(source, dict) and source.get("kind") == "tool":
        role = "tool"
    item = Item(event.seq, role, _blocks(message.get("content") if isinstance(message, dict) else None),
                synthetic=event.seq in index.synthetic, shadowed_by=index.shadowed_by.get(event.seq))
    if is_checkpoint(message):
        item.role = "checkpoint"
        item.checkpoint = next((bracket for bracket in index.brackets if bracket.checkpoint_seq == event.seq),
                               None)
    if event.type == ASSISTANT_MESSAGE and isinstance(event.data, dict):
        item.interrupted = event.data.get("interrupted") is True
        sources = event.source_event_seqs
        if sources:
            item.chunks = (sources[0], len(sources))
    return item


def turn_views(events: Sequence[Event], index: SessionIndex, first: int,
               count: int = TURNS_PAGE) -> list[TurnView]:
    """Turns ``first .. first + count`` of the transcript: append-origin messages and brackets."""
    brackets = {bracket.start_seq: bracket for bracket in index.brackets}
    views: list[TurnView] = []
    for span in index.turns[first : first + count]:
        view = TurnView(span)
        for seq, entry in slots(events, span.start, span.stop):
            if entry.__class__ is ChunkRun or entry.type == ASSISTANT_CHUNK:
                continue
            event: Event = entry  # type: ignore[assignment]
            if seq in brackets:
                view.items.append(brackets[seq])
            if event.surface_op != "append":
                continue
            message = event_message(event)
            if message is not None and (event.type != ASSISTANT_MESSAGE or derive_event_message(event)
                                        or event.data.get("interrupted")):
                view.items.append(message_item(event, message, index))
        views.append(view)
    return views


def unseen_items(events: Sequence[Event], index: SessionIndex) -> tuple[list[Item], int]:
    """``(items, messages in the log)``: the log's messages the surface no longer holds (shadowed
    by a compaction, or removed by another surface operation), in log order."""
    in_surface = set(index.nodes)
    items: list[Item] = []
    total = 0
    for seq, entry in slots(events, 0, index.stored):
        if entry.__class__ is ChunkRun or entry.type == ASSISTANT_CHUNK:
            continue
        event: Event = entry  # type: ignore[assignment]
        if event.surface_op != "append":
            continue
        message = event_message(event)
        if message is None:
            continue
        total += 1
        if seq not in in_surface:
            items.append(message_item(event, message, index))
    return items, total


def surface_items(events: Sequence[Event], index: SessionIndex, first: int,
                  count: int = NODES_PAGE) -> list[Item]:
    """Surface nodes ``first .. first + count``: exactly the messages the next request sends."""
    items: list[Item] = []
    for seq in index.nodes[first : first + count]:
        event = events[seq]
        message = derive_event_message(event)
        if message is not None:
            items.append(message_item(event, message, index))
    return items


def _summary(event: Event) -> str:
    message = event_message(event)
    if message is not None:
        blocks = _blocks(message.get("content"))
        text = " ".join(block.text if block.kind != "tool-call" else f"{block.label}({block.text})"
                        for block in blocks)
        return text[:300]
    data = event.data
    if event.type == TOOL_CALL and isinstance(data, dict):
        return f"{data.get('name')} {_json(data.get('arguments'))}"[:300]
    return _json(data)[:300]


def _raw(event: Event) -> str:
    text = event.to_json().decode()
    return text if len(text) <= TEXT_LIMIT * 5 else text[: TEXT_LIMIT * 5] + "…"


def event_rows(events: Sequence[Event], start: int, *, expand: bool = False,
               count: int = EVENTS_PAGE) -> list[EventRow]:
    """The inspector's rows from ``start``: stream chunks collapsed into one row per run unless
    ``expand``; at most ``count`` rows."""
    if expand:
        return [_row(events[seq]) for seq in range(max(start, 0), min(len(events), start + count))]
    rows: list[EventRow] = []
    for seq, entry in slots(events, start):
        if len(rows) >= count:
            break
        if isinstance(entry, ChunkRun) or entry.type == ASSISTANT_CHUNK:
            run = entry.count - (seq - entry.seq0) if isinstance(entry, ChunkRun) else 1
            last = rows[-1] if rows else None
            if last is not None and last.type == ASSISTANT_CHUNK and last.seq + last.count == seq:
                rows[-1] = EventRow(last.seq, last.type, last.time, last.summary, "", last.count + run)
            else:
                rows.append(EventRow(seq, ASSISTANT_CHUNK, events[seq].time, "stream chunks", "", run))
            continue
        rows.append(_row(entry))
    return rows


def _row(event: Event) -> EventRow:
    return EventRow(event.seq, event.type, event.time, _summary(event), _raw(event))
