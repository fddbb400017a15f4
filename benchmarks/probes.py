"""Hand-written fidelity probes and their paraphrase-tolerant matching (pure).

A probe is one fact a successor needs after a compaction (a constraint, an open task or the next
step, a path, a result), written from the shadowed history alone before any summary was read,
and stored in ``benchmarks/data/fidelity_probes.json``. It lists groups of alternatives: it is
recalled when one alternative of every group occurs, case-folded with markup removed, at the
start of a word, inside one window of ``WINDOW_LINES`` consecutive non-empty lines. The
matching shares nothing with the summarizer's own fact extraction.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

import orjson

__all__ = [
    "PROBE_CATEGORIES",
    "WINDOW_LINES",
    "Probe",
    "ProbeSet",
    "ProbeScore",
    "load_probe_sets",
    "merged_by_session",
    "only",
    "probe_digest",
    "probe_set_digests",
    "probe_file_bytes",
    "recalled",
    "score",
    "windows",
]

PROBE_CATEGORIES: tuple[str, ...] = ("constraints", "tasks", "paths", "results")
"""Constraints, open tasks and the next step, paths, results (errors and fixes, counts, commits)."""
WINDOW_LINES = 3
"""A probe's groups must all occur within this many consecutive non-empty lines."""

_MARKUP = re.compile("[`*\"'\u201c\u201d\u2018\u2019]")
_WS = re.compile(r"[ \t]+")


@dataclass(frozen=True, slots=True)
class Probe:
    """One fact to look for: every group of ``terms`` needs one of its alternatives."""

    id: str
    category: str
    fact: str
    terms: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class ProbeSet:
    """The probes of one real compaction (a Claude Code session cut at its compact boundary)."""

    session: str
    probes: tuple[Probe, ...]
    file: str = ""
    """The session's transcript, relative to ``../shared/data``."""
    group: str = ""
    """``spotter`` (written before the summarizer was rebuilt), ``held-out`` (after), ``cut``, or
    ``outcomes`` (more results and constraints for a session that already has a set)."""
    format: str = "claude-code"
    """The transcript's format (``claude-code`` or ``codex``)."""
    before_line: int | None = None
    """A ``cut`` set: the history is the transcript's lines before this one (else its compact boundary)."""
    budget_chars: int | None = None
    """A ``cut`` set's budget in characters (no Claude summary to take the size from)."""
    budget_tokens: int | None = None
    """A ``cut`` set's budget in tokens."""

    def budget(self) -> tuple[int, int]:
        """A ``cut`` set's (characters, tokens) budget."""
        if self.budget_chars is None or self.budget_tokens is None:
            raise ValueError(f"probe set {self.session}: a cut set needs budget_chars and budget_tokens")
        return self.budget_chars, self.budget_tokens


@dataclass(frozen=True, slots=True)
class ProbeScore:
    """Which probes a text recalled, with per-category and overall recall."""

    hits: Mapping[str, bool]
    by_category: Mapping[str, tuple[int, int]]
    """Category -> (recalled, total)."""

    def recall(self, category: str | None = None) -> float:
        """Share of probes recalled, of one category or of all."""
        pairs = [self.by_category[category]] if category else list(self.by_category.values())
        total = sum(t for _r, t in pairs)
        return sum(r for r, _t in pairs) / total if total else 0.0


def probe_file_bytes() -> bytes:
    """The probe file as shipped (its hash is pinned by a test)."""
    return resources.files("benchmarks").joinpath("data/fidelity_probes.json").read_bytes()


def probe_digest() -> str:
    """SHA-256 of the probe file."""
    return hashlib.sha256(probe_file_bytes()).hexdigest()


def _probe(raw: Mapping[str, Any], where: str) -> Probe:
    category = raw.get("category")
    groups = raw.get("all")
    if category not in PROBE_CATEGORIES:
        raise ValueError(f"{where}: unknown category {category!r}")
    if not isinstance(groups, list) or not groups or not all(
            isinstance(g, list) and g and all(isinstance(t, str) and t.strip() for t in g) for g in groups):
        raise ValueError(f"{where}: 'all' must be a non-empty list of non-empty lists of terms")
    return Probe(str(raw.get("id", "")), category, str(raw.get("fact", "")),
                 tuple(tuple(_normalize(t) for t in group) for group in groups))


def load_probe_sets(data: bytes | None = None) -> tuple[ProbeSet, ...]:
    """Parse the probe file (the shipped one by default); malformed probes are named and refused."""
    parsed = orjson.loads(probe_file_bytes() if data is None else data)
    sets: list[ProbeSet] = []
    for index, raw in enumerate(parsed.get("sessions", ())):
        session = str(raw.get("session", f"#{index}"))
        listed = enumerate(raw.get("probes", ()))
        probes = tuple(_probe(p, f"probe {session}/{p.get('id', i)}") for i, p in listed)
        ids = [p.id for p in probes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"probe set {session}: duplicate probe ids")
        probe_set = ProbeSet(session, probes, str(raw.get("file", "")), str(raw.get("group", "")),
                             str(raw.get("format", "claude-code")), _count(raw, "before_line", session),
                             _count(raw, "budget_chars", session), _count(raw, "budget_tokens", session))
        if probe_set.before_line is not None:
            probe_set.budget()
        sets.append(probe_set)
    return tuple(sets)


def _count(raw: Mapping[str, Any], key: str, session: str) -> int | None:
    value = raw.get(key)
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError(f"probe set {session}: {key!r} must be a positive integer, got {value!r}")
    return value


def probe_set_digests(data: bytes | None = None) -> dict[str, str]:
    """SHA-256 of each set's probes (canonical JSON, sorted keys), by session: a set cannot change
    without its digest changing, and adding a set leaves the others' digests as they were."""
    parsed = orjson.loads(probe_file_bytes() if data is None else data)
    digests: dict[str, str] = {}
    for raw in parsed.get("sessions", ()):
        key = str(raw.get("session"))
        if key in digests:  # a later set for the same session: keyed by its group too
            key = f"{key} {raw.get('group', '')}"
        probes = orjson.dumps(raw.get("probes"), option=orjson.OPT_SORT_KEYS)
        digests[key] = hashlib.sha256(probes).hexdigest()
    return digests


def merged_by_session(sets: Sequence[ProbeSet]) -> tuple[ProbeSet, ...]:
    """One set per session, in first-seen order: a later set's probes join the first set of its
    session (which keeps its file, group and cut); a probe id used twice in a session is refused."""
    merged: dict[str, ProbeSet] = {}
    for probe_set in sets:
        first = merged.get(probe_set.session)
        if first is None:
            merged[probe_set.session] = probe_set
            continue
        ids = [p.id for p in (*first.probes, *probe_set.probes)]
        if len(set(ids)) != len(ids):
            raise ValueError(f"probe set {probe_set.session} ({probe_set.group}): duplicate probe ids")
        merged[probe_set.session] = replace(first, probes=first.probes + probe_set.probes)
    return tuple(merged.values())


def only(result: ProbeScore, probes: Iterable[Probe]) -> ProbeScore:
    """``result`` restricted to ``probes`` (a subset of those it scored): per-group figures."""
    hits: dict[str, bool] = {}
    counts: dict[str, list[int]] = {}
    for probe in probes:
        hit = result.hits[probe.id]
        hits[probe.id] = hit
        pair = counts.setdefault(probe.category, [0, 0])
        pair[0] += hit
        pair[1] += 1
    return ProbeScore(hits, {c: (counts[c][0], counts[c][1]) for c in PROBE_CATEGORIES if c in counts})


def _normalize(text: str) -> str:
    return _WS.sub(" ", _MARKUP.sub("", text.casefold())).strip()


def _occurs(term: str, text: str) -> bool:
    """``term`` at the start of a word: not after a letter or digit, nor after ``_`` (``ash_oban``
    is not ``oban``) unless a digit precedes it (``20260211_add_state``), nor after ``.`` when
    it continues into a longer word (``this.pushEvent``); a number not inside a longer one."""
    start = text.find(term)
    while start >= 0:
        end = start + len(term)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        glued = before.isalnum()
        if term[0].isalnum() and before == "_":
            glued = not (start >= 2 and text[start - 2].isdigit())
        elif term[0].isalnum() and before == ".":
            glued = after.isalnum() or after == "_"
        if not glued and not (term.isdigit() and after.isdigit()):
            return True
        start = text.find(term, start + 1)
    return False


def windows(text: str) -> list[str]:
    """The text normalized and cut into overlapping windows of ``WINDOW_LINES`` non-empty lines."""
    lines = [line for line in (_normalize(raw) for raw in text.splitlines()) if line]
    if len(lines) <= WINDOW_LINES:
        return ["\n".join(lines)]
    return ["\n".join(lines[i:i + WINDOW_LINES]) for i in range(len(lines) - WINDOW_LINES + 1)]


def recalled(probe: Probe, windows: Sequence[str]) -> bool:
    """Whether one window holds an alternative of every group of the probe."""
    return any(all(any(_occurs(t, w) for t in group) for group in probe.terms) for w in windows)


def score(probes: Iterable[Probe], text: str) -> ProbeScore:
    """Recall of the probes in ``text``."""
    lines = windows(text)
    hits: dict[str, bool] = {}
    counts = {category: [0, 0] for category in PROBE_CATEGORIES}
    for probe in probes:
        hit = recalled(probe, lines)
        hits[probe.id] = hit
        counts[probe.category][0] += hit
        counts[probe.category][1] += 1
    return ProbeScore(hits, {c: (r, t) for c, (r, t) in counts.items() if t})
