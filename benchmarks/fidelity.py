"""The ``fidelity`` suite: what a successor can still recover after a real compaction.

For each real Claude Code compaction in ``../shared/data`` (five spotter sessions, three
held-out ones from other projects) and each real session cut where its context crossed a threshold
(``cut`` sets, sized by their own budget), the hand-written probes of ``benchmarks/data/fidelity_probes.json``
are looked up in Claude's own summary, in agentlog's summaries and in two baselines (the first and
the last N characters of the history), every candidate at the size of Claude's summary: once at equal
characters and once at equal tokens (the project's token meter; DeepSeek's exact tokenizer when
the ``tokens`` extra is installed). Recall per category and overall, against Claude's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from agentlog.compaction.config import PrunerConfig
from agentlog.compaction.fidelity_report import (
    ClaudeCompaction,
    default_transcripts_dir,
    load_claude_code_compaction,
)
from agentlog.compaction.pruner import prune_content
from agentlog.compaction.reading import is_tool_result, message_texts, tool_calls
from agentlog.compaction.summarizer_extractive import ExtractiveSummarizer
from agentlog.compaction.tokens import Pricer
from agentlog.core.messages import Message
from benchmarks.fidelity_cuts import load_cut_session
from benchmarks.probes import (
    PROBE_CATEGORIES,
    ProbeScore,
    ProbeSet,
    load_probe_sets,
    merged_by_session,
    only,
    probe_digest,
    score,
)
from benchmarks.runner import Comparison, Context, Figure, Stat, Suite, Target

__all__ = [
    "CANDIDATES", "POLICIES", "SUITE", "Candidate", "PolicyRow", "Scored", "evaluate", "fidelity_markdown",
    "group_rows",
    "policy_markdown", "real_compaction_rows", "policy_rows", "pruned_messages", "transcript_text",
]

QUICK_BELOW_TURNS: Final = 100
"""Runs with fewer turns (the smoke test's ``--turns 2``) score one compaction only."""
OVERALL_TARGET: Final = Target(">=", 0.95)
CATEGORY_TARGET: Final = Target(">=", 0.90)

Summarize = Callable[[Sequence[Message], int], str]
"""A candidate: the shadowed messages and a character budget -> the checkpoint text."""


def transcript_text(messages: Sequence[Message]) -> str:
    """The history as plain text, in order (what the first/last-N baselines cut from)."""
    lines: list[str] = []
    for message in messages:
        role = "tool result" if is_tool_result(message) else str(message.get("role"))
        lines.extend(f"{role}: {text}" for text in message_texts(message) if text.strip())
        lines.extend(f"tool call {call.name}: {call.arguments}" for call in tool_calls(message))
    return "\n".join(lines)


def _extractive(messages: Sequence[Message], budget: int) -> str:
    return ExtractiveSummarizer(budget_chars=max(budget, 400), max_ratio=None).summarize_text(messages)


def pruned_messages(messages: Sequence[Message], config: PrunerConfig | None = None) -> list[Any]:
    """The messages with every oversized tool result cut to head + marker + tail (spec §5)."""
    out: list[Any] = []
    for message in messages:
        blocks = message.get("content")
        if not is_tool_result(message) or not isinstance(blocks, (list, tuple)):
            out.append(message)
            continue
        rewritten = []
        for block in blocks:
            inner = block.get("content") if isinstance(block, dict) else None
            pruned = prune_content(inner, config) if isinstance(inner, (list, tuple)) else None
            rewritten.append(block if pruned is None else {**block, "content": list(pruned)})
        out.append({**message, "content": rewritten})
    return out


def _pruned_extractive(messages: Sequence[Message], budget: int) -> str:
    return _extractive(pruned_messages(messages), budget)


def _first(messages: Sequence[Message], budget: int) -> str:
    return transcript_text(messages)[:budget]


def _last(messages: Sequence[Message], budget: int) -> str:
    text = transcript_text(messages)
    return text[max(0, len(text) - budget):]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A way to fill Claude's budget from the history."""

    name: str
    summarize: Summarize


CANDIDATES: Final = (
    Candidate("agentlog extractive", _extractive),
    Candidate("agentlog extractive, tool results pruned first", _pruned_extractive),
    Candidate("first N characters", _first),
    Candidate("last N characters", _last),
)


@dataclass(frozen=True, slots=True)
class Scored:
    """One candidate's text for one session at one size, with its probe recall."""

    session: str
    candidate: str
    size: str
    """``claude`` (its own size), ``chars`` or ``tokens`` (equal to Claude's)."""
    chars: int
    tokens: int
    score: ProbeScore


def _fit_tokens(summarize: Summarize, messages: Sequence[Message], tokens: int,
                count: Callable[[str], int], start: int, text: str) -> str:
    """``text`` (the candidate at Claude's character budget ``start``) if it fits ``tokens``, else
    the largest text of the candidate that does (binary search on the character budget)."""
    if count(text) <= tokens:
        return text
    low, high = 0, start - 1
    best = ""
    while low <= high:
        middle = (low + high) // 2
        text = summarize(messages, middle)
        if count(text) <= tokens:
            best, low = text, middle + 1
        else:
            high = middle - 1
    return best


def token_counter() -> tuple[str, Callable[[str], int]]:
    """DeepSeek's exact tokenizer when installed, else the project's heuristic meter."""
    try:
        from agentlog.compaction.tokenizer import deepseek_counter

        return "DeepSeek tokenizer", deepseek_counter()
    except ImportError:
        pass
    except Exception as exc:  # MissingExtraError: the extra is not installed
        if type(exc).__name__ != "MissingExtraError":
            raise
    pricer = Pricer()
    return "heuristic meter (utf16/4)", pricer.text


def evaluate(compactions: Sequence[ClaudeCompaction], probe_sets: Sequence[ProbeSet],
             count: Callable[[str], int], candidates: Sequence[Candidate] = CANDIDATES) -> list[Scored]:
    """Score Claude's summary and every candidate at equal characters and equal tokens (pure)."""
    by_session = {p.session: p for p in probe_sets}
    rows: list[Scored] = []
    for compaction in compactions:
        probe_set = by_session[compaction.session_id]
        probes = probe_set.probes
        claude = compaction.summary
        if probe_set.before_line is not None:  # a cut session: no summary, the set's own budget
            chars, tokens = probe_set.budget()
        else:
            chars, tokens = len(claude), count(claude)
            rows.append(Scored(compaction.session_id, "Claude", "claude", chars, tokens,
                               score(probes, claude)))
        for candidate in candidates:
            text = candidate.summarize(compaction.messages, chars)
            rows.append(Scored(compaction.session_id, candidate.name, "chars", len(text), count(text),
                               score(probes, text)))
            fitted = _fit_tokens(candidate.summarize, compaction.messages, tokens, count, chars, text)
            rows.append(Scored(compaction.session_id, candidate.name, "tokens", len(fitted), count(fitted),
                               score(probes, fitted)))
    return rows


def real_compaction_rows(rows: Sequence[Scored]) -> list[Scored]:
    """The rows of the sessions Claude summarized itself: the like-for-like comparison with it."""
    claude = {r.session for r in rows if r.size == "claude"}
    return [r for r in rows if r.session in claude]


def group_rows(rows: Sequence[Scored], listed: Sequence[ProbeSet], group: str) -> list[Scored]:
    """The rows of the sessions with a set of ``group``, scored on that set's probes only."""
    probes = {p.session: p.probes for p in listed if p.group == group}
    return [replace(r, score=only(r.score, probes[r.session])) for r in rows if r.session in probes]


def _pooled(rows: Sequence[Scored], category: str | None) -> tuple[int, int]:
    pairs = [r.score.by_category[c] for r in rows for c in ([category] if category else PROBE_CATEGORIES)
             if c in r.score.by_category]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def _groups(rows: Sequence[Scored]) -> list[tuple[str, list[Scored]]]:
    keys = list(dict.fromkeys((r.candidate, r.size) for r in rows))
    return [(f"{c} ({'own size' if s == 'claude' else 'equal ' + s})",
             [r for r in rows if (r.candidate, r.size) == (c, s)]) for c, s in keys]


def _pct(pair: tuple[int, int]) -> str:
    return f"{100 * pair[0] / pair[1]:.0f}% ({pair[0]}/{pair[1]})" if pair[1] else "-"


def fidelity_markdown(rows: Sequence[Scored]) -> str:
    """The per-category table (probes pooled over sessions) and the per-session overall table."""
    head = "| summary | chars | tokens | " + " | ".join(PROBE_CATEGORIES) + " | overall |"
    out = [head, "|---|---:|---:|" + "---:|" * (len(PROBE_CATEGORIES) + 1)]
    for label, group in _groups(rows):
        cells = [_pct(_pooled(group, c)) for c in PROBE_CATEGORIES] + [_pct(_pooled(group, None))]
        out.append(f"| {label} | {sum(r.chars for r in group):,} | {sum(r.tokens for r in group):,} | "
                   + " | ".join(cells) + " |")
    sessions = list(dict.fromkeys(r.session for r in rows))
    out += ["", "| summary | " + " | ".join(s[:8] for s in sessions) + " |",
            "|---|" + "---:|" * len(sessions)]
    for label, group in _groups(rows):
        by = {r.session: r for r in group}
        cells = [f"{100 * by[s].score.recall():.0f}%" if s in by else "-" for s in sessions]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


@dataclass(frozen=True, slots=True)
class PolicyRow:
    """What replaces the history under one policy, for one session: its size and its recall."""

    session: str
    policy: str
    tokens: int
    score: ProbeScore


POLICIES: Final = ("history as it was", "tool results pruned (no summary)", "agentlog extractive summary",
                   "tool results pruned, then summarized", "Claude's summary")


def policy_rows(compactions: Sequence[ClaudeCompaction], probe_sets: Sequence[ProbeSet],
                count: Callable[[str], int]) -> list[PolicyRow]:
    """Pruning old tool results against summarizing: tokens left and probes kept, per session."""
    by_session = {p.session: p for p in probe_sets}
    rows: list[PolicyRow] = []
    for compaction in compactions:
        if by_session[compaction.session_id].before_line is not None:
            continue  # a cut session has no Claude summary to compare
        probes = by_session[compaction.session_id].probes
        budget = len(compaction.summary)
        texts = (transcript_text(compaction.messages), transcript_text(pruned_messages(compaction.messages)),
                 _extractive(compaction.messages, budget), _pruned_extractive(compaction.messages, budget),
                 compaction.summary)
        rows.extend(PolicyRow(compaction.session_id, policy, count(text), score(probes, text))
                    for policy, text in zip(POLICIES, texts, strict=True))
    return rows


def policy_markdown(rows: Sequence[PolicyRow]) -> str:
    """Tokens left, recall and probes kept per 1,000 tokens, summed over sessions, per policy."""
    out = ["| policy | tokens | recall | probes kept per 1k tokens |", "|---|---:|---:|---:|"]
    for policy in POLICIES:
        mine = [r for r in rows if r.policy == policy]
        tokens = sum(r.tokens for r in mine)
        kept = sum(r.score.by_category[c][0] for r in mine for c in r.score.by_category)
        total = sum(r.score.by_category[c][1] for r in mine for c in r.score.by_category)
        out.append(f"| {policy} | {tokens:,} | {100 * kept / total:.0f}% | {1000 * kept / tokens:.2f} |")
    return "\n".join(out)


def load_compactions(data: Path, probe_sets: Sequence[ProbeSet]) -> list[ClaudeCompaction]:
    """The compaction of every probe set, read from ``data`` (``../shared/data``): a Claude Code
    compact boundary, or a ``cut`` set's lines; a missing transcript is a FileNotFoundError naming it."""
    compactions: list[ClaudeCompaction] = []
    for probe_set in probe_sets:
        path = data / probe_set.file
        if not path.is_file():
            raise FileNotFoundError(f"transcript of probe set {probe_set.session} not found: {path}")
        if probe_set.before_line is not None:
            compaction = load_cut_session(path, probe_set.format, probe_set.before_line)
        else:
            compaction = load_claude_code_compaction(path)
        if compaction.session_id != probe_set.session:
            raise ValueError(f"{path}: session {compaction.session_id}, but the probe set is for "
                             f"{probe_set.session}")
        compactions.append(compaction)
    return compactions


def _run(ctx: Context) -> None:
    data = default_transcripts_dir().parent
    if not data.is_dir() and not os.environ.get("CI"):
        ctx.note(f"skipped: no data at {data} (../shared/data beside the repository)")
        return
    listed = load_probe_sets()
    probe_sets = merged_by_session(listed)  # an ``outcomes`` set joins its session's set
    quick = ctx.options.turns < QUICK_BELOW_TURNS
    if quick:  # a smoke run (``--turns 2``): one compaction, to check the suite works end to end
        probe_sets = probe_sets[:1]
        listed = tuple(p for p in listed if p.session == probe_sets[0].session)
        ctx.note(f"quick run (--turns < {QUICK_BELOW_TURNS}): one compaction only, no policy table")
    compactions = load_compactions(data, probe_sets)
    meter, count = ("heuristic meter (utf16/4)", Pricer().text) if quick else token_counter()
    from benchmarks.fidelity_llm import URL_ENV, llm_candidate  # it imports this module's Candidate

    llm = llm_candidate()
    if llm is None:
        ctx.note(f"LLM summarizer: not run (set {URL_ENV} and its model to score it on the same probes)")
    rows = evaluate(compactions, probe_sets, count, CANDIDATES + ((llm,) if llm else ()))
    claude_got, claude_total = _pooled([r for r in rows if r.size == "claude"], None)
    for label, group in _groups(rows):
        if group[0].candidate != CANDIDATES[0].name:
            continue
        got, total = _pooled(group, None)
        ratio = (got / total) / max(claude_got / claude_total, 1e-9)
        ctx.add(Figure(f"recall.{group[0].size}", f"probe recall, {label}", "", Stat.of([got / total]),
                       baseline="Claude's summary", ratio=ratio, target=OVERALL_TARGET))
        for category in PROBE_CATEGORIES:
            got, total = _pooled(group, category)
            claude_category = _pooled([r for r in rows if r.size == "claude"], category)
            ctx.add(Figure(f"recall.{group[0].size}.{category}", f"  {category}", "", Stat.of([got / total]),
                           baseline="Claude's summary", target=CATEGORY_TARGET,
                           ratio=(got / total) / max(claude_category[0] / claude_category[1], 1e-9)))
    columns = tuple(label for label, _g in _groups(rows))
    table_rows = [(category, tuple(_pct(_pooled(g, category)) for _l, g in _groups(rows)))
                  for category in (*PROBE_CATEGORIES, None)]
    real = sum(1 for p in probe_sets if p.before_line is None)
    caption = (f"pooled over {len(compactions)} sessions (Claude's over the {real} real compactions); "
               f"tokens: {meter}")
    labelled = tuple((c or "overall", cells) for c, cells in table_rows)
    ctx.compare(Comparison("probe recall by category", caption, columns, labelled))
    ctx.note(f"probes: benchmarks/data/fidelity_probes.json sha256 {probe_digest()}")
    ctx.note(fidelity_markdown(rows))
    claude_sessions = {r.session for r in rows if r.size == "claude"}
    ctx.note(f"the {len(claude_sessions)} real compactions only, per category against Claude's own "
             "summaries:\n" + fidelity_markdown(real_compaction_rows(rows)))
    for name in dict.fromkeys(p.group for p in listed):
        ctx.note(f"{name} probes only:\n" + fidelity_markdown(group_rows(rows, listed, name)))
    if not quick:
        ctx.note(policy_markdown(policy_rows(compactions, probe_sets, count)))


SUITE: Final = Suite("fidelity", "probe recall of real compaction summaries, at Claude's size", _run)
