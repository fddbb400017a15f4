"""``jsonl``: the whole log as a DSH-readable JSONL transcript (format v0, raw lines).

The header line and the stored events encoded as the JSONL store writes them (a fork's
inherited prefix included, as ``materialize`` would write it), so the file loads in agentlog's
JSONL store and in DSH. With redaction the header (but its identity) and every string and key of
every event are redacted; a secret that was streamed in pieces across ``assistant/chunk`` deltas
is found in the joined stream and its placeholder put in the chunk where it began.
Views do not apply: this is the log itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentlog.core.events import ASSISTANT_CHUNK, Event, make_event
from agentlog.core.jsonvalue import freeze
from agentlog.errors import UsageError
from agentlog.io.exporters.source import ExportSource
from agentlog.ops.redact import find_secrets, may_hold, placeholder, redact_value
from agentlog.store.codec import encode_batch
from agentlog.store.jsonl.forks import public_header
from agentlog.store.jsonl.header import encode_header_line

__all__ = ["delta_streams", "jsonl", "redact_events"]

_STREAM_FIELDS = {"text-delta": "text", "reasoning-delta": "text", "tool-call-delta": "argumentsDelta"}


def _stream_piece(event: Event) -> tuple[tuple[Any, ...], str, str] | None:
    """(stream key, field, text) of a streamed delta: its step, its block and the field it grows."""
    data = event.data
    chunk = data.get("chunk") if isinstance(data, Mapping) else None
    if not isinstance(chunk, Mapping):
        return None
    field = _STREAM_FIELDS.get(str(chunk.get("type")))
    text = chunk.get(field) if field is not None else None
    if field is None or not isinstance(text, str):
        return None
    key = (data.get("turn"), data.get("step"), chunk.get("type"), chunk.get("index"), chunk.get("id"))
    return key, field, text


def delta_streams(events: Sequence[Event]) -> list[list[tuple[int, str, str]]]:
    """The streamed deltas of each block, joined in log order: ``[(seq, field, text), ...]`` per block."""
    streams: dict[tuple[Any, ...], list[tuple[int, str, str]]] = {}
    for event in events:
        if event.type == ASSISTANT_CHUNK and (piece := _stream_piece(event)) is not None:
            key, field, text = piece
            streams.setdefault(key, []).append((event.seq, field, text))
    return list(streams.values())


def _redacted_streams(events: Sequence[Event]) -> dict[int, tuple[str, str]]:
    """seq -> (field, redacted text) for every streamed delta whose joined stream holds a secret."""
    out: dict[int, tuple[str, str]] = {}
    for pieces in delta_streams(events):
        joined = "".join(text for _, _, text in pieces)
        findings = find_secrets(joined)
        if not findings:
            continue
        at = first = 0  # findings[first:] are those not wholly before the current piece
        for seq, field, text in pieces:
            start, end = at, at + len(text)
            at = end
            while first < len(findings) and findings[first].end <= start:
                first += 1
            kept: list[str] = []
            cursor, index = start, first
            while index < len(findings) and findings[index].start < end:
                finding = findings[index]
                kept.append(joined[cursor:max(cursor, finding.start)])
                if start <= finding.start:
                    kept.append(placeholder(finding.kind))
                cursor = min(end, finding.end)
                index += 1
            if index > first:
                kept.append(joined[cursor:end])
                out[seq] = (field, "".join(kept))
    return out


def redact_events(events: Sequence[Event]) -> list[Event]:
    """The events with every string redacted (streamed secrets found across their chunks)."""
    streamed = _redacted_streams(events)
    out: list[Event] = []
    for event in events:
        if event.seq not in streamed and not may_hold(event.data):
            out.append(event)  # nothing to redact: the event as stored
            continue
        data = redact_value(event.data)
        if event.seq in streamed:
            field, text = streamed[event.seq]
            data["chunk"][field] = text
        out.append(make_event(event.type, event.seq, event.time, freeze(data), event.surface_op,
                              event.source_event_seqs, event.ignorable, event.op_first))
    return out


def jsonl(source: ExportSource) -> bytes:
    """The header line and every stored event, redacted when asked."""
    if source.view is not None:
        raise UsageError("the jsonl export is the whole log: --surface/--log do not apply",
                         session_id=source.header.id)
    events = redact_events(source.events) if source.redact else source.events
    header = encode_header_line(public_header(source.shown_header()))
    return header + (encode_batch(events) if events else b"")
