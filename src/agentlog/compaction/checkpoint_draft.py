"""The checkpoint being written: bullets by section and priority, rendered and fitted to a budget.

``fit`` first trims each section that is over its share of the budget (lowest priority first),
so one voluminous section cannot push out the others, then drops globally by priority, and
shortens kept bullets only as a last resort.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentlog.compaction.reading import normalize
from agentlog.compaction.summary import SECTIONS

__all__ = ["KEEP", "SECTION_SHARES", "Draft", "clip", "prior_sections", "quote"]

KEEP = 100
"""Priority of items that are never dropped, only shortened as a last resort."""
SECTION_SHARES: tuple[float, ...] = (0.16, 0.04, 0.16, 0.14, 0.12, 0.08, 0.04, 0.26)
"""Each section's share of the budget, enforced only while the whole is over budget."""
_MIN_CLIPPED = 200
"""A dropped bullet is put back cut to the room left only when that room is at least this long."""
_HEADING = re.compile(r"^#{1,6}\s*(?:\d+\.\s*)?(.+?)\s*:?\s*$")


@dataclass(slots=True)
class _Item:
    """One bullet of the checkpoint; lower ``priority`` (then lower ``order``) is dropped first."""

    section: int
    priority: int
    order: int
    text: str


def quote(text: str) -> str:
    """A verbatim quote as a bullet; continuation lines are indented so Markdown keeps them."""
    return '"' + text.strip().replace("\n", "\n  ") + '"'


def clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def prior_sections(summary: str) -> dict[int, list[str]]:
    """The bullets of an earlier checkpoint, by section index (unknown headings are skipped)."""
    by_name = {normalize(name): index for index, name in enumerate(SECTIONS)}
    found: dict[int, list[str]] = {}
    current: int | None = None
    for line in summary.splitlines():
        heading = _HEADING.match(line) if line.startswith("#") else None
        if heading is not None:
            current = by_name.get(normalize(heading.group(1)))
            continue
        if current is None or not line.strip() or line.strip() == "(none)":
            continue
        bullets = found.setdefault(current, [])
        if line.startswith(("- ", "* ")) or not bullets:
            bullets.append(line[2:] if line.startswith(("- ", "* ")) else line.strip())
        else:
            bullets[-1] += "\n" + line
    return found


class Draft:
    """Checkpoint items being collected, rendered and cut down to a budget."""

    def __init__(self) -> None:
        self.items: list[_Item] = []
        self.seen: set[tuple[int, str]] = set()

    def add(self, section: int, priority: int, text: str) -> None:
        key = (section, normalize(text))
        if key[1] and key not in self.seen:
            self.seen.add(key)
            self.items.append(_Item(section, priority, len(self.items), text))

    def render(self) -> str:
        parts: list[str] = []
        for index, name in enumerate(SECTIONS):
            ranked = sorted((i for i in self.items if i.section == index),
                            key=lambda i: (-i.priority, i.order))
            bullets = [f"- {i.text}" for i in ranked]
            parts.append(f"## {name}\n" + ("\n".join(bullets) if bullets else "(none)"))
        return "\n\n".join(parts) + "\n"

    def fit(self, budget: int) -> str:
        """Trim sections over their share, then drop the lowest priorities, then put back the
        highest-priority dropped bullets that still fit, then shorten, to ``budget``."""
        text = self.render()
        if len(text) <= budget:
            return text
        before = list(self.items)
        self._trim_sections(budget, len(text))
        text = self.render()
        droppable = sorted((i for i in self.items if i.priority < KEEP), key=lambda i: (i.priority, i.order))
        dropped = 0
        while len(text) > budget and dropped < len(droppable):
            # Drop about as many characters as the text is over, then measure again.
            excess = len(text) - budget
            gone: set[int] = set()
            while excess > 0 and dropped < len(droppable):
                item = droppable[dropped]
                dropped += 1
                gone.add(id(item))
                excess -= len(item.text) + 3
            self.items = [i for i in self.items if id(i) not in gone]
            text = self.render()
        if len(text) <= budget:
            text = self._refill(before, budget, text)
        while len(text) > budget:
            longest = max(self.items, key=lambda i: len(i.text), default=None)
            if longest is None or len(longest.text) <= 40:
                return text[:budget]
            longest.text = clip(longest.text, max(40, len(longest.text) - (len(text) - budget) - 1))
            text = self.render()
        return text

    def _refill(self, before: list[_Item], budget: int, text: str) -> str:
        """Put back dropped bullets, highest priority first, while each still fits (dropping by
        estimate can overshoot by a long bullet), then the best one left cut to the room left."""
        kept = {id(i) for i in self.items}
        dropped = sorted((i for i in before if id(i) not in kept), key=lambda i: (-i.priority, i.order))
        for clipping in (False, True):
            for item in dropped:
                room = budget - len(text) - 3
                if id(item) in kept or (len(item.text) > room and (not clipping or room < _MIN_CLIPPED)):
                    continue
                original = item.text
                item.text = clip(item.text, room)
                self.items.append(item)
                self.items.sort(key=lambda i: i.order)
                candidate = self.render()
                if len(candidate) <= budget:
                    text = candidate
                    kept.add(id(item))
                else:
                    self.items.remove(item)
                    item.text = original
                if clipping and id(item) in kept:
                    break
        return text

    def _trim_sections(self, budget: int, size: int) -> None:
        """While over ``budget``, drop the lowest-priority droppable bullet of the section furthest
        over its share; stops when no section is over its share."""
        queues = {
            section: sorted((i for i in self.items if i.section == section and i.priority < KEEP),
                            key=lambda i: (i.priority, i.order))
            for section in range(len(SECTIONS))
        }
        sizes = [sum(len(i.text) + 3 for i in self.items if i.section == s) for s in range(len(SECTIONS))]
        caps = [int(budget * share) for share in SECTION_SHARES]
        gone: set[int] = set()
        while size > budget:
            over = [(sizes[s] - caps[s], s) for s in range(len(SECTIONS)) if queues[s] and sizes[s] > caps[s]]
            if not over:
                break
            _excess, section = max(over)
            item = queues[section].pop(0)
            gone.add(id(item))
            sizes[section] -= len(item.text) + 3
            size -= len(item.text) + 3
        if gone:
            self.items = [i for i in self.items if id(i) not in gone]
