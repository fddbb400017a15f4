"""What the search indexes hold: each message's text, folded so an index can pre-filter the scan.

``search`` matches ``re.escape(text)`` with ``re.IGNORECASE`` (see ``agentlog.ops.search``). An index
cannot reproduce that exactly, so it only narrows the messages the scan then confirms: ``fold``
maps every character to one character such that two characters the regex treats as equal fold
equal (simple lowercase, then the regex engine's extra case equivalences such as long s/``s``).
Folding the message and the query the same way makes "folded message contains folded query" a
superset of the regex's hits, whatever the text; characters no database can store (NUL, lone
surrogates) fold to U+FFFD on both sides.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Iterator
from typing import TypeAlias

from agentlog.core.events import LEGACY_STEERING, Event
from agentlog.core.message_text import text_of
from agentlog.core.messages import derive_event_message
from agentlog.core.packed import slots_of

__all__ = ["SEARCHED_TYPES", "Candidates", "fold", "folding_available", "indexed_texts"]

SEARCHED_TYPES = frozenset({"user/message", "assistant/message", "tool/result"})
"""The event types whose message text search matches (chunks are not: their message is)."""

_REPLACEMENT = 0xFFFD

Candidates: TypeAlias = "dict[str, list[Event] | None]"
"""Per session id, the stored events an index says may match (a superset, seq order), or None: scan it."""


@functools.cache
def _extra_cases() -> dict[int, tuple[int, ...]] | None:
    """The regex engine's case equivalences beyond simple lowercase, or None if this Python hides them."""
    try:
        extra = importlib.import_module("re._casefix")._EXTRA_CASES
    except (ImportError, AttributeError):  # pragma: no cover - a future Python: search only scans
        return None
    return dict(extra)


def folding_available() -> bool:
    """Whether ``fold`` is exact for this Python's regex engine (otherwise search only scans)."""
    return _extra_cases() is not None


@functools.cache
def _table() -> dict[int, int]:
    """``str.translate`` table after ``lower()``: one representative per equivalence class."""
    table = {code: _REPLACEMENT for code in range(0xD800, 0xE000)}
    table[0] = _REPLACEMENT
    for code, others in (_extra_cases() or {}).items():
        table[code] = min(code, *others)
    return table


def fold(text: str) -> str:
    """``text`` with each character folded as the case-insensitive regex compares it (same length).

    ``str.lower`` is the simple lowercase mapping per character except U+0130 (two characters,
    so it is folded to ``i`` first) and a final sigma (the same class as sigma).
    """
    if text.isascii() and "\x00" not in text:  # the common case: nothing for the table to map
        return text.lower()
    return text.replace("\u0130", "i").lower().translate(_table())


def indexed_texts(entries: Iterable[object]) -> Iterator[tuple[int, str]]:
    """``(seq, folded text)`` of every event the scan could match (non-empty message text only).

    Packed chunk runs among ``entries`` are skipped: the scan matches their assembled message.
    A legacy ``steering/message`` is indexed by its content: reads upgrade it to a ``user/message``.
    """
    for event in slots_of(entries):  # a live batch's packed runs come as spans: skipped unexpanded
        if type(event) is not Event:
            continue
        if event.type == LEGACY_STEERING:
            data = event.data if isinstance(event.data, dict) else {}
            message = data.get("message") if isinstance(data.get("message"), dict) else data
        elif event.type in SEARCHED_TYPES:
            message = derive_event_message(event)
        else:
            continue
        if message is None:
            continue
        body = text_of(message.get("content"))
        if body:
            yield event.seq, fold(body)
