"""Compaction fidelity scores: which extracted facts survive in a summary, per category.

A diagnostic: it scores with the same fact extraction the extractive summarizer is built from,
so it shows what a summary kept of those facts, not how good the summary is (the probe-based
evaluation in ``benchmarks.fidelity`` does that).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agentlog.compaction.fidelity import ShadowedFacts, dedupe, extract_facts
from agentlog.compaction.reading import normalize
from agentlog.core.messages import derive_event_message

if TYPE_CHECKING:
    from agentlog.core.session import Session

__all__ = [
    "CATEGORIES",
    "CategoryScore",
    "FidelityItem",
    "FidelityReport",
    "compaction_fidelity",
    "fidelity_of_facts",
    "match_text",
]

CATEGORIES: tuple[str, ...] = ("constraints", "tasks", "paths", "tool_results")
"""The four fact categories of the seed's evaluation guidance, in report order."""

MatchKind = Literal["exact", "normalized", "partial"]

_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/@#-]*[A-Za-z0-9_]|[A-Za-z0-9]")
_STOPWORDS = frozenset({
    "the", "and", "for", "with", "that", "this", "from", "into", "onto", "must", "never", "not",
    "don't", "do", "does", "always", "keep", "avoid", "only", "without", "instead", "should",
    "shouldn't", "ensure", "make", "sure", "when", "then", "than", "are", "was", "were", "will",
    "can", "all", "any", "each", "via", "use", "uses", "used", "using", "its", "it's", "has",
    "have", "had", "been", "being", "also", "just", "per", "but", "out", "new", "one", "two",
    "there", "their", "them", "they", "you", "your", "our", "what", "which", "who", "how", "why",
    "where", "while", "still", "both", "either", "after", "before", "once", "same", "other", "more",
    "most", "such", "very", "may", "might", "would", "could", "let", "lets", "yes", "no", "none",
})
_PARTIAL_COVERAGE = 0.75
_PARTIAL_MIN_TOKENS = 3


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.casefold()) if len(t) >= 3 and t not in _STOPWORDS]


class _Summary:
    """A summary prepared for lookups: raw text, normalized text and token windows of 3 lines."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.normalized = normalize(text)
        lines = [line for line in text.splitlines() if line.strip()]
        line_tokens = [set(_tokens(line)) for line in lines]
        self.windows = [
            set().union(*line_tokens[i: i + 3]) for i in range(max(1, len(line_tokens) - 2))
        ] if line_tokens else []


def _partial(item: str, summary: _Summary) -> bool:
    wanted = set(_tokens(item))
    if len(wanted) < _PARTIAL_MIN_TOKENS:
        return False
    need = math.ceil(len(wanted) * _PARTIAL_COVERAGE)
    return any(len(wanted & window) >= need for window in summary.windows)


def _boundary_find(haystack: str, needle: str, *, after_slash: bool = True) -> bool:
    """Whether ``needle`` occurs where a path component starts (and, unless ``after_slash``, a path)."""
    barred = "_-." if after_slash else "_-./"
    start = haystack.find(needle)
    while start >= 0:
        if start == 0 or not (haystack[start - 1].isalnum() or haystack[start - 1] in barred):
            return True
        start = haystack.find(needle, start + 1)
    return False


def _match_path(path: str, summary: _Summary, root: str | None) -> MatchKind | None:
    if _boundary_find(summary.text, path, after_slash=False):
        return "exact"
    if root is not None and path.startswith(root + "/"):
        relative = path[len(root) + 1:]
        if _boundary_find(summary.text, relative, after_slash=False):
            return "normalized"
    parts = [p for p in path.split("/") if p not in ("", ".", "..", "~")]
    for keep in range(len(parts) - 1, 1, -1):
        if _boundary_find(summary.text, "/".join(parts[-keep:])):
            return "partial"
    return None


def match_text(item: str, summary: str) -> MatchKind | None:
    """How ``item`` appears in ``summary``: verbatim, after normalization, by its key words, or not."""
    return _match(item, _Summary(summary))


def _match(item: str, summary: _Summary) -> MatchKind | None:
    if item in summary.text:
        return "exact"
    key = normalize(item)
    if key and key in summary.normalized:
        return "normalized"
    return "partial" if _partial(item, summary) else None


@dataclass(frozen=True, slots=True)
class FidelityItem:
    """One fact of the shadowed range and how the summary kept it (None: not found)."""

    category: str
    text: str
    match: MatchKind | None


@dataclass(frozen=True, slots=True)
class CategoryScore:
    """Counts and scores of one category; scores are None when the range had no such fact."""

    category: str
    total: int
    exact: int
    normalized: int
    partial: int

    @property
    def strict_score(self) -> float | None:
        """Share of facts found verbatim or after whitespace/case/markup normalization."""
        return (self.exact + self.normalized) / self.total if self.total else None

    @property
    def score(self) -> float | None:
        """Share of facts found at all (including partial: ≥75% of their key words nearby)."""
        return (self.exact + self.normalized + self.partial) / self.total if self.total else None


@dataclass(frozen=True, slots=True)
class FidelityReport:
    """Which facts of a shadowed range survive in a summary, per category and overall."""

    items: tuple[FidelityItem, ...]
    categories: tuple[CategoryScore, ...]

    def category(self, name: str) -> CategoryScore:
        """The score of one category (``constraints``, ``tasks``, ``paths``, ``tool_results``)."""
        for score in self.categories:
            if score.category == name:
                return score
        raise KeyError(name)

    def missing(self, category: str | None = None) -> list[str]:
        """Facts the summary lost, optionally of one category."""
        return [i.text for i in self.items if i.match is None and category in (None, i.category)]

    @property
    def score(self) -> float | None:
        """Mean of the category scores (categories without facts are left out)."""
        values = [s.score for s in self.categories if s.score is not None]
        return sum(values) / len(values) if values else None

    @property
    def strict_score(self) -> float | None:
        """Mean of the strict category scores."""
        values = [s.strict_score for s in self.categories if s.strict_score is not None]
        return sum(values) / len(values) if values else None


def fidelity_of_facts(facts: ShadowedFacts, summary_text: str) -> FidelityReport:
    """Look every fact up in the summary and score the four categories."""
    summary = _Summary(summary_text)
    items: list[FidelityItem] = []
    items.extend(FidelityItem("constraints", c, _match(c, summary)) for c in facts.constraints)
    tasks = list(facts.open_todos)
    if facts.pending_request is not None:
        tasks.append(facts.pending_request)
    items.extend(FidelityItem("tasks", t, _match(t, summary)) for t in dedupe(tasks))
    items.extend(
        FidelityItem("paths", p, _match_path(p, summary, facts.project_root)) for p in facts.paths
    )
    results = dedupe([*facts.errors, *facts.outcomes])
    items.extend(FidelityItem("tool_results", r, _match(r, summary)) for r in results)
    scores = []
    for category in CATEGORIES:
        matches = [i.match for i in items if i.category == category]
        scores.append(CategoryScore(
            category=category,
            total=len(matches),
            exact=matches.count("exact"),
            normalized=matches.count("normalized"),
            partial=matches.count("partial"),
        ))
    return FidelityReport(items=tuple(items), categories=tuple(scores))


def compaction_fidelity(shadowed: Any, summary: Any, *, project_root: str | None = None) -> FidelityReport:
    """Score a summary against its shadowed range.

    ``compaction_fidelity(messages, summary_text)`` is the pure core. The convenience form
    ``compaction_fidelity(session, result)`` takes a Session and a compaction result (anything
    with ``shadowed_seqs`` and ``summary``, or the ``compaction/summary`` event data); the
    session header's ``cwd`` then serves as the project root.
    """
    if isinstance(summary, str):
        return fidelity_of_facts(extract_facts(shadowed, project_root=project_root), summary)
    session: Session = shadowed
    seqs = _field(summary, "shadowed_seqs", "shadowedSeqs")
    blocks = _field(summary, "summary", "summary")
    if isinstance(blocks, str):
        text = blocks
    else:
        text = "\n".join(
            b["text"] for b in blocks or () if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    messages = [m for m in (derive_event_message(session.events[s]) for s in seqs or ()) if m is not None]
    if project_root is None:
        cwd = getattr(session.header, "cwd", None)
        project_root = cwd if isinstance(cwd, str) and cwd.startswith("/") else None
    return fidelity_of_facts(extract_facts(messages, project_root=project_root), text)


def _field(value: Any, attribute: str, key: str) -> Any:
    """``value[key]`` for event data, else ``value.attribute``, else ``value.data[key]`` (an Event)."""
    for candidate in (value, getattr(value, "data", None)):
        if isinstance(candidate, dict):
            found = candidate.get(key, candidate.get(attribute))
        else:
            found = getattr(candidate, attribute, None)
        if found is not None:
            return found
    return None
