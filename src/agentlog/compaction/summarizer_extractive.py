"""``ExtractiveSummarizer``: the offline checkpoint, quoted from the shadowed messages (no model)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentlog.compaction.fidelity import ShadowedFacts, extract_facts, result_lines
from agentlog.compaction.reading import (
    command_text,
    is_tool_result,
    is_user_request,
    message_texts,
    normalize,
    tool_calls,
    tool_result_call_id,
    tool_result_is_error,
)
from agentlog.compaction.summary import SECTIONS, SummaryRequest, SummaryResult
from agentlog.jsonvalue import freeze

__all__ = ["ExtractiveSummarizer"]


_KEEP = 100  # priority of items that are never dropped, only shortened as a last resort
_MIN_BUDGET = 400  # the empty skeleton takes 222 characters
_WRITE_TOOLS = re.compile(r"edit|write|patch|replace|create|insert|apply", re.IGNORECASE)
_BACKTICKED = re.compile(r"`([^`\n]{2,60})`")
_MODULE_NAME = re.compile(r"\b[A-Z][A-Za-z0-9]+(?:\.[A-Z][A-Za-z0-9]+)+\b")
_HEADING = re.compile(r"^#{1,6}\s*(?:\d+\.\s*)?(.+?)\s*:?\s*$")
_FIRST_SENTENCE = re.compile(r"^(.{20,240}?[.!?])(?:\s|$)", re.DOTALL)


@dataclass(slots=True)
class _Item:
    """One bullet of the checkpoint; lower ``priority`` (then lower ``order``) is dropped first."""

    section: int
    priority: int
    order: int
    text: str


def _quote(text: str) -> str:
    """A verbatim quote as a bullet; continuation lines are indented so Markdown keeps them."""
    return '"' + text.strip().replace("\n", "\n  ") + '"'


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def _prior_sections(summary: str) -> dict[int, list[str]]:
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


class _Draft:
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
        """Drop the lowest-priority items, then shorten kept ones, until the text fits ``budget``."""
        text = self.render()
        droppable = sorted((i for i in self.items if i.priority < _KEEP), key=lambda i: (i.priority, i.order))
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
        while len(text) > budget:
            longest = max(self.items, key=lambda i: len(i.text), default=None)
            if longest is None or len(longest.text) <= 40:
                return text[:budget]
            longest.text = _clip(longest.text, max(40, len(longest.text) - (len(text) - budget) - 1))
            text = self.render()
        return text


class ExtractiveSummarizer:
    """The offline default: a deterministic checkpoint quoted from the shadowed messages.

    It keeps the user's requests and constraint sentences verbatim, the latest todo state,
    touched files, commands, error strings and outcomes, and merges a prior checkpoint found in
    the range. It fits ``budget_chars`` by dropping the lowest-priority items first: concepts,
    old commands and reads go before errors, outcomes and current work; requests and
    constraints go last. ``max_ratio`` also caps the text at that share of the input's size
    (never below 1,000 characters), so a checkpoint stays smaller than what it replaces; None
    turns that cap off.
    """

    def __init__(
        self,
        budget_chars: int = 16_000,
        *,
        max_ratio: float | None = 0.5,
        provider: str = "agentlog",
        model: str = "extractive",
    ) -> None:
        if budget_chars < _MIN_BUDGET:
            raise ValueError(f"budget_chars must be at least {_MIN_BUDGET}, got {budget_chars}")
        if max_ratio is not None and not 0 < max_ratio <= 1:
            raise ValueError(f"max_ratio must lie in (0, 1], got {max_ratio}")
        self.budget_chars = budget_chars
        self.max_ratio = max_ratio
        self.provider = provider
        self.model = model

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(budget_chars={self.budget_chars}, max_ratio={self.max_ratio})"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize without a model; never fails for lack of content (empty sections say so)."""
        text = self.summarize_text(request.messages)
        return SummaryResult(
            summary=(freeze({"type": "text", "text": text}, root="summary"),),
            provider=self.provider,
            model=self.model,
            max_tokens=request.max_tokens,
        )

    def summarize_text(self, messages: Sequence[Any]) -> str:
        """The checkpoint text for the messages (pure and deterministic)."""
        budget = self.budget_chars
        if self.max_ratio is not None:
            input_chars = sum(len(t) for m in messages for t in message_texts(m))
            input_chars += sum(len(c.arguments) for m in messages for c in tool_calls(m))
            budget = min(budget, max(1_000, int(input_chars * self.max_ratio)))
        draft = _Draft()
        _collect(draft, list(messages))
        return draft.fit(budget)


def _merged_paths(
    actions: Sequence[tuple[str, tuple[str, ...]]], root: str | None,
) -> list[tuple[str, list[str]]]:
    """Touched paths with a project-relative spelling folded into its absolute one."""
    merged: dict[str, list[str]] = {}
    for path, tools in actions:
        absolute = f"{root}/{path}" if root and not path.startswith("/") else path
        key = absolute if absolute in merged or any(p == absolute for p, _t in actions) else path
        bucket = merged.setdefault(key, [])
        bucket.extend(t for t in tools if t not in bucket)
    return list(merged.items())


def _describe_todo(todo: str, messages: list[Any]) -> str:
    """An issue id with the title a tool result showed for it (``ID · Title``), else the todo."""
    if " " in todo:
        return todo
    pattern = re.compile(re.escape(todo) + r"(?![\w.])\W{0,4}[·:\u2013-]\s*([^\n\[]{4,120})")
    title: str | None = None
    for message in messages:
        if is_tool_result(message):
            for text in message_texts(message):
                found = pattern.search(text)
                if found is not None:
                    title = found.group(1).strip()
    return f"{todo}: {title}" if title else todo


class _Walk:
    """One pass over the shadowed messages, adding what the facts alone do not give."""

    def __init__(self, draft: _Draft) -> None:
        self.draft = draft
        self.concepts: dict[str, int] = {}
        self.last_text: str | None = None
        self.recent_calls: list[str] = []
        self.pending_errors: list[str] = []
        self.call_names: dict[str, str] = {}

    def run(self, messages: list[Any]) -> None:
        for message in messages:
            if not isinstance(message, dict):
                continue
            if message.get("role") == "assistant":
                self.assistant(message)
            elif is_tool_result(message):
                self.tool_result(message)
            elif is_user_request(message) and self.pending_errors:
                said = _quote(_clip(" ".join(message_texts(message)), 300))
                for error in self.pending_errors:
                    self.draft.add(3, 50, f"`{error}` — user then said: {said}")
                self.pending_errors = []
        for error in self.pending_errors:
            self.draft.add(3, 45, f"`{error}`")

    def _count(self, names: list[str]) -> None:
        for name in names:
            self.concepts[name] = self.concepts.get(name, 0) + 1

    def assistant(self, message: Any) -> None:
        joined = "\n".join(t for t in message_texts(message) if t.strip())
        if joined:
            self.last_text = joined
            fix = _FIRST_SENTENCE.match(joined.strip())
            suffix = f" — then: {_clip(fix.group(1), 200)}" if fix else ""
            for error in self.pending_errors:
                self.draft.add(3, 45, f"`{error}`{suffix}")
            self.pending_errors = []
            self._count(_BACKTICKED.findall(joined) + _MODULE_NAME.findall(joined))
        for call in tool_calls(message):
            self.call_names[call.id] = call.name
            command = command_text(call.args)
            target = next((v for k, v in call.args.items()
                           if k in ("file_path", "path", "notebook_path") and isinstance(v, str)), None)
            if command is not None:
                first, _newline, more = command.partition("\n")
                shown = _clip(first + (" …" if more else ""), 160)
                self.recent_calls.append(f"{call.name}: {shown}")
                self.draft.add(7, 40, f"Ran: `{shown}`")
            else:
                self.recent_calls.append(f"{call.name} {target}" if target else call.name)

    def tool_result(self, message: Any) -> None:
        text = "\n".join(message_texts(message))
        errors, outcomes = result_lines(text, is_error=tool_result_is_error(message))
        self.pending_errors.extend(errors)
        self._count(_BACKTICKED.findall(text))
        name = self.call_names.get(tool_result_call_id(message) or "", "tool")
        for outcome in outcomes:
            self.draft.add(7, 60, f"{name} result: `{outcome}`")


def _add_prior(draft: _Draft, prior: dict[int, list[str]]) -> None:
    """A prior checkpoint's bullets: requests and quoted constraints stay kept, the others rank
    a little below fresh ones; its Current Work is stale and left out."""
    for bullet in prior.get(0, []):
        draft.add(0, _KEEP, bullet)
    for section, priority in ((1, 15), (2, 30), (3, 35), (4, 75)):
        for bullet in prior.get(section, []):
            draft.add(section, priority, bullet)
    for bullet in prior.get(7, []):
        draft.add(7, _KEEP if bullet.startswith('"') else 55, bullet)


def _add_files(draft: _Draft, facts: ShadowedFacts) -> None:
    for path, tools in _merged_paths(facts.path_actions, facts.project_root):
        writes = any(_WRITE_TOOLS.search(t) for t in tools)
        draft.add(2, 55 if writes else 30, f"`{path}` ({', '.join(tools)})")
    touched = {p for p, _tools in facts.path_actions}
    for path in facts.paths:
        if path not in touched:
            draft.add(2, 25, f"`{path}`")


def _add_work(draft: _Draft, facts: ShadowedFacts, walk: _Walk, prior: dict[int, list[str]],
              messages: list[Any]) -> None:
    for todo in facts.open_todos:
        draft.add(4, 85, f"[ ] {_describe_todo(todo, messages)}")
    if facts.pending_request is not None:
        draft.add(4, 88, f"Latest request: {_quote(facts.pending_request)}")
    if walk.last_text is not None:
        draft.add(5, 70, f"Last assistant note: {_quote(_clip(walk.last_text, 600))}")
    for label in walk.recent_calls[-5:]:
        draft.add(5, 65, f"Recent action: `{label}`")
    if facts.open_todos:
        draft.add(6, 90, f"Continue with: {facts.open_todos[0]}")
    elif facts.pending_request is not None:
        draft.add(6, 90, "Continue the latest request (see Pending Jobs).")
    else:
        for bullet in prior.get(6, []):
            draft.add(6, 80, bullet)


def _collect(draft: _Draft, messages: list[Any]) -> None:
    """Fill the draft: prior checkpoint, requests, walk results, files, work state, constraints."""
    facts = extract_facts(messages)
    prior = _prior_sections(facts.prior_summary) if facts.prior_summary else {}
    _add_prior(draft, prior)
    for request in facts.requests:
        draft.add(0, _KEEP, f"User: {_quote(request)}")
    walk = _Walk(draft)
    walk.run(messages)
    for concept, _count in sorted(walk.concepts.items(), key=lambda kv: -kv[1])[:80]:
        draft.add(1, 20, f"`{concept}`")
    _add_files(draft, facts)
    _add_work(draft, facts, walk, prior, messages)
    for constraint in facts.constraints:
        draft.add(7, _KEEP, _quote(constraint))
