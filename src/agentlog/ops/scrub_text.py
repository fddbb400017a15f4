"""Scrubbing secrets out of a session's events and header: pure code, no I/O (``agentlog scrub``).

Every occurrence of a secret becomes ``[SCRUBBED:<label>]`` in every string and key of an event's
data and of the header (its identity fields, and the cwd that names a JSONL project directory,
excepted). Streamed deltas are joined per block first, so a secret split across consecutive chunks
is found: the marker goes in the chunk where the secret starts and the rest of it is cut from the
chunks after. Seq numbers, event types and the event count never change.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agentlog.core.events import ASSISTANT_CHUNK, Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import dumps, freeze, thaw, valid_text
from agentlog.errors import UsageError
from agentlog.ops.redact import _named_secret, find_secrets

__all__ = [
    "KEPT_HEADER_FIELDS", "Matcher", "ScrubbedLog", "Secrets", "found_secrets", "marker", "scrub_log",
    "scrub_text",
    "stream_pieces",
]

KEPT_HEADER_FIELDS: Final = ("version", "id", "createdAt", "parentSession", "seedLength", "cwd")
"""Header fields never rewritten: the session's identity and lineage, and the cwd (it names the
JSONL project directory); a secret in them is reported as not removable."""

_JSON_ESCAPED: Final = re.compile(r'["\\\x00-\x1f\u2028\u2029]')
"""Characters compact JSON may write escaped: a literal holding one is not looked for in JSON text."""
_STREAM_FIELDS: Final = {"text-delta": "text", "reasoning-delta": "text", "tool-call-delta": "argumentsDelta"}


def marker(label: str) -> str:
    """The fixed text that replaces a scrubbed secret."""
    return f"[SCRUBBED:{label}]"


@dataclass(frozen=True, slots=True)
class Secrets:
    """What to scrub: literal values and regular expressions, each with the label its marker shows."""

    literals: tuple[tuple[str, str], ...] = ()
    patterns: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.literals or self.patterns)

    @staticmethod
    def of(literals: Iterable[tuple[str, str]] = (), patterns: Iterable[str] = ()) -> Secrets:
        """Literals (empty ones dropped, duplicates once) and patterns labelled ``pattern-1``, ..."""
        kept = dict.fromkeys((value, label) for value, label in literals if value)
        return Secrets(tuple(kept), tuple((pattern, f"pattern-{n}") for n, pattern in enumerate(patterns, 1)))


class Matcher:
    """Finds the secrets of a ``Secrets`` in text; overlapping finds are merged into one span."""

    def __init__(self, secrets: Secrets) -> None:
        for value, _label in secrets.literals:  # stored text is valid Unicode: such a secret never matches
            if not valid_text(value):
                raise UsageError(f"secret {value!r} is not valid Unicode text (a lone surrogate: "
                                 "bytes the terminal or file could not decode); nothing could match it")
        self._labels = {value: label for value, label in secrets.literals}
        values = sorted(self._labels, key=len, reverse=True)  # the longest literal wins at a position
        # A lookahead finds a literal at every position, overlapping ones included (merged below).
        self._literal = re.compile(f"(?=({'|'.join(map(re.escape, values))}))") if values else None
        self._escaped = any(_JSON_ESCAPED.search(value) for value in values)
        self._patterns: list[tuple[re.Pattern[str], str]] = []
        for pattern, label in secrets.patterns:
            if not valid_text(pattern):
                raise UsageError(f"--pattern {pattern!r} is not valid Unicode text (a lone surrogate: "
                                 "bytes the terminal could not decode); nothing could match it")
            try:
                self._patterns.append((re.compile(pattern), label))
            except re.error as exc:
                raise UsageError(f"--pattern {pattern!r} is not a regular expression: {exc}") from None
            if self._patterns[-1][0].search("") is not None:
                raise UsageError(f"--pattern {pattern!r} matches the empty string: it would scrub nothing")

    def may_match(self, data: Any) -> bool:
        """Whether a JSON value may hold a secret (False: certainly not): literals are looked for in
        its compact JSON, which holds every string and key as it is unless JSON escapes a character
        of the literal; patterns could match anything, so with one this is always True."""
        if self._patterns or self._escaped:
            return True
        if self._literal is None:
            return False
        text = dumps(data).decode()
        return any(value in text for value in self._labels)

    def spans(self, text: str) -> list[tuple[int, int, str, str]]:
        """``(start, end, label, value)`` of every secret in ``text``, sorted, never overlapping."""
        found: list[tuple[int, int, str]] = []
        if self._literal is not None:
            found += [(m.start(), m.end(1), self._labels[m.group(1)]) for m in self._literal.finditer(text)]
        for pattern, label in self._patterns:
            found += [(m.start(), m.end(), label) for m in pattern.finditer(text) if m.end() > m.start()]
        if not found:
            return []
        found.sort()
        merged: list[list[Any]] = []
        for start, end, label in found:
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end, label])
        return [(start, end, label, text[start:end]) for start, end, label in merged]


@dataclass(slots=True)
class ScrubbedLog:
    """A session after the scrub: its header and events, what changed and what was removed."""

    header: SessionHeader
    events: list[Event]
    changed: list[int] = field(default_factory=list)
    """Seqs of the events whose data changed."""
    header_changed: bool = False
    removed: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Each removed value: its label and how many times it was removed (never shown or stored)."""
    kept: list[str] = field(default_factory=list)
    """Header fields (``KEPT_HEADER_FIELDS``) that still hold a secret."""


class _Scrubber:
    def __init__(self, matcher: Matcher, removed: dict[str, tuple[str, int]]) -> None:
        self.matcher = matcher
        self.removed = removed

    def note(self, value: str, label: str) -> None:
        count = self.removed.get(value, (label, 0))[1]
        self.removed[value] = (label, count + 1)

    def text(self, text: str) -> str:
        spans = self.matcher.spans(text)
        if not spans:
            return text
        parts: list[str] = []
        at = 0
        for start, end, label, value in spans:
            self.note(value, label)
            parts += [text[at:start], marker(label)]
            at = end
        parts.append(text[at:])
        return "".join(parts)

    def value(self, value: Any) -> Any:
        """A plain copy of a JSON value with every string and key scrubbed (iterative: any depth)."""
        root: list[Any] = [thaw(value)]
        pending: list[tuple[Any, Any]] = [(root, 0)]
        while pending:
            parent, key = pending.pop()
            item = parent[key]
            if isinstance(item, str):
                parent[key] = self.text(item)
            elif isinstance(item, dict):
                copy: dict[Any, Any] = {}
                for name, member in item.items():
                    new = self.text(name) if isinstance(name, str) else name
                    number = 1
                    while new in copy:  # two scrubbed keys never merge
                        number += 1
                        new = f"{self.text(name)} ({number})"
                    copy[new] = member
                    pending.append((copy, new))
                parent[key] = copy
            elif isinstance(item, list):
                pending.extend((item, index) for index in range(len(item)))
        return root[0]

    def stream(self, pieces: Sequence[str]) -> list[str]:
        """Streamed deltas with the secrets of their joined text scrubbed: a secret's marker in the
        delta where it starts, the rest of it cut from the deltas it reaches."""
        joined = "".join(pieces)
        spans = self.matcher.spans(joined)
        if not spans:
            return list(pieces)
        out: list[str] = []
        at, first = 0, 0
        for piece in pieces:
            start, end = at, at + len(piece)
            at = end
            while first < len(spans) and spans[first][1] <= start:
                first += 1
            kept: list[str] = []
            cursor, index = start, first
            while index < len(spans) and spans[index][0] < end:
                s_start, s_end, label, value = spans[index]
                kept.append(joined[cursor:max(cursor, s_start)])
                if start <= s_start:
                    kept.append(marker(label))
                    self.note(value, label)
                cursor = max(cursor, min(s_end, end))
                if s_end > end:
                    break
                index += 1
            kept.append(joined[cursor:end])
            out.append("".join(kept))
        return out


def scrub_text(matcher: Matcher, text: str) -> str:
    """``text`` with every secret the matcher finds replaced by its marker."""
    return _Scrubber(matcher, {}).text(text)


def stream_pieces(events: Sequence[Event], until: int | None = None) -> list[list[tuple[int, str, str]]]:
    """Streamed deltas below seq ``until`` joined per block, in log order: ``[(seq, field, text)]``."""
    streams: dict[tuple[Any, ...], list[tuple[int, str, str]]] = {}
    for event in events:
        if until is not None and event.seq >= until:
            break
        if event.type != ASSISTANT_CHUNK:
            continue
        data = event.data
        chunk = data.get("chunk") if isinstance(data, Mapping) else None
        if not isinstance(chunk, Mapping):
            continue
        name = _STREAM_FIELDS.get(str(chunk.get("type")))
        text = chunk.get(name) if name is not None else None
        if name is None or not isinstance(text, str):
            continue
        key = (data.get("turn"), data.get("step"), chunk.get("type"), chunk.get("index"), chunk.get("id"))
        streams.setdefault(key, []).append((event.seq, name, text))
    return list(streams.values())


def scrub_log(header: SessionHeader, events: Sequence[Event], secrets: Secrets | Matcher, *,
              until: int | None = None) -> ScrubbedLog:
    """The session with every occurrence of ``secrets`` replaced, in events below seq ``until``
    (None: all) and in the header; events without a secret are kept as they are (the same objects)."""
    matcher = secrets if isinstance(secrets, Matcher) else Matcher(secrets)
    result = ScrubbedLog(header, list(events))
    scrubber = _Scrubber(matcher, result.removed)
    streamed: dict[int, tuple[str, str]] = {}
    for pieces in stream_pieces(events, until):
        new = scrubber.stream([text for _, _, text in pieces])
        streamed.update({seq: (name, text) for (seq, name, old), text in zip(pieces, new, strict=True)
                         if text != old})
    for index, event in enumerate(result.events):
        if until is not None and event.seq >= until:
            break
        if event.seq not in streamed and not matcher.may_match(event.data):
            continue
        data = thaw(event.data)
        if event.seq in streamed:
            name, text = streamed[event.seq]
            data["chunk"][name] = text
        new = scrubber.value(data)
        if event.seq not in streamed and new == data:
            continue
        wire = event.to_wire()
        wire["data"] = freeze(new)
        result.events[index] = Event.from_wire(wire)
        result.changed.append(event.seq)
    wire = header.to_wire()
    kept = {name: wire.pop(name) for name in KEPT_HEADER_FIELDS if name in wire}
    scrubbed = scrubber.value(wire)
    if scrubbed != thaw(wire):
        result.header = SessionHeader.from_wire(freeze({**kept, **scrubbed}), session_id=header.id)
        result.header_changed = True
    result.kept = [name for name, value in kept.items()
                   if isinstance(value, str) and matcher.spans(value)]
    return result


def found_secrets(header: SessionHeader, events: Sequence[Event]) -> dict[str, tuple[str, set[int | None]]]:
    """Every secret the audit's detector finds: value -> (kind, seqs where it occurs; None: the
    header). Streamed deltas are joined per block; a value whose key names a secret counts too."""
    found: dict[str, tuple[str, set[int | None]]] = {}

    def add(value: str, kind: str, seq: int | None) -> None:
        if value:
            found.setdefault(value, (kind, set()))[1].add(seq)

    def walk(value: Any, seq: int | None) -> None:
        pending = [value]
        while pending:
            item = pending.pop()
            if isinstance(item, str):
                for finding in find_secrets(item):
                    add(item[finding.start:finding.end], finding.kind, seq)
            elif isinstance(item, Mapping):
                for key, member in item.items():
                    pending.append(key)
                    if _named_secret(key, member) and isinstance(member, str):
                        add(member, "env-secret", seq)
                    else:
                        pending.append(member)
            elif isinstance(item, (list, tuple)):
                pending.extend(item)

    wire = header.to_wire()
    walk({name: value for name, value in wire.items() if name not in KEPT_HEADER_FIELDS}, None)
    for event in events:
        if event.type != ASSISTANT_CHUNK:
            walk(event.data, event.seq)
    for value, kind, seq in _streamed_secrets(events):
        add(value, kind, seq)
    return found


def _streamed_secrets(events: Sequence[Event]) -> Iterator[tuple[str, str, int]]:
    """``(value, kind, seq of the chunk where it starts)`` of each secret in the joined streams."""
    for pieces in stream_pieces(events):
        joined = "".join(text for _, _, text in pieces)
        ends = list(zip(itertools.accumulate(len(text) for _, _, text in pieces),
                        (seq for seq, _, _ in pieces), strict=True))
        for finding in find_secrets(joined):
            seq = next(seq for end, seq in ends if end > finding.start)
            yield joined[finding.start:finding.end], finding.kind, seq

