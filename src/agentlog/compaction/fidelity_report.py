"""DIAGNOSTIC: extracted-fact fidelity of Claude's and ``ExtractiveSummarizer``'s summaries.

Not the evaluation: it scores with the fact extractor the extractive summarizer is built from, so
it cannot tell a better summary from a worse one. The evaluation is ``python -m benchmarks
fidelity`` (hand-written probes). Run ``python -m agentlog.compaction.fidelity_report
[TRANSCRIPTS_DIR]``. Each Claude Code main
session under ``claude-code/marot__spotter`` holds one real compaction: a ``system`` line with
subtype ``compact_boundary``, then a ``user`` line with ``isCompactSummary: true`` carrying
Claude's summary. The history before the boundary is the shadowed range; both summaries are
scored against it with ``compaction_fidelity``. The extractive summary gets the same size budget
as Claude's.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentlog.compaction.fidelity_score import CATEGORIES, FidelityReport, compaction_fidelity
from agentlog.compaction.reading import NOTICE_PREFIXES, message_texts, tool_calls
from agentlog.compaction.summarizers import ExtractiveSummarizer
from agentlog.compaction.summary import SummaryRequest
from agentlog.core.jsonvalue import freeze
from agentlog.core.messages import Message

__all__ = [
    "ClaudeCompaction",
    "SessionFidelity",
    "claude_terms",
    "default_transcripts_dir",
    "fidelity_table",
    "load_claude_code_compaction",
    "main",
    "run",
    "spotter_sessions",
]

_SPOTTER = Path("claude-code/marot__spotter/test/fixtures/transcripts")


@dataclass(frozen=True, slots=True)
class ClaudeCompaction:
    """A Claude Code session cut at its compaction: the history before it and Claude's summary."""

    session_id: str
    messages: tuple[Message, ...]
    summary: str
    trigger: str | None
    pre_tokens: int | None
    cwd: str | None


def _user_source(line: dict[str, Any], text: str) -> dict[str, Any]:
    if line.get("isMeta") or text.lstrip().startswith(NOTICE_PREFIXES):
        return {"kind": "plugin", "plugin": "claude-code", "form": "notice"}
    return {"kind": "user"}


def _tool_result_text(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "text":
            blocks.append({"type": "text", "text": str(block.get("text", ""))})
        elif isinstance(block, dict):
            blocks.append({"type": str(block.get("type", "unknown"))})
    return blocks


def _assistant_blocks(content: Any) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else [{"type": "text", "text": str(content)}]:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            blocks.append({"type": "text", "text": block.get("text", "")})
        elif kind == "thinking":
            blocks.append({"type": "reasoning", "text": block.get("thinking", "")})
        elif kind == "tool_use":
            arguments = orjson.dumps(block.get("input", {})).decode()
            blocks.append({"type": "tool-call", "id": block.get("id", ""), "name": block.get("name", ""),
                           "arguments": arguments})
    return blocks


def _user_messages(line: dict[str, Any]) -> Iterator[dict[str, Any]]:
    content = line["message"].get("content")
    uid = str(line.get("uuid", ""))
    if isinstance(content, str):
        yield {"id": uid, "role": "user", "content": [{"type": "text", "text": content}],
               "source": _user_source(line, content)}
        return
    texts: list[dict[str, Any]] = []
    for index, block in enumerate(content if isinstance(content, list) else ()):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            call_id = str(block.get("tool_use_id", ""))
            result: dict[str, Any] = {"type": "tool-result", "toolCallId": call_id,
                                      "content": _tool_result_text(block.get("content"))}
            if block.get("is_error") is True:
                result["isError"] = True
            yield {"id": f"{uid}-{index}", "role": "user", "content": [result],
                   "source": {"kind": "tool", "callId": call_id}}
        elif block.get("type") == "text":
            texts.append({"type": "text", "text": str(block.get("text", ""))})
    if texts:
        joined = "".join(t["text"] for t in texts)
        yield {"id": uid, "role": "user", "content": texts, "source": _user_source(line, joined)}


def load_claude_code_compaction(path: Path) -> ClaudeCompaction:
    """Read a Claude Code JSONL session: main-chain messages before its compact boundary + summary.

    Assistant lines that share a message id (Claude Code writes one line per block) are merged.
    A prompt typed while the agent worked is logged only as a ``queue-operation`` enqueue (it
    reaches the model inside the turn), so it becomes a user message at that point.
    """
    messages: list[dict[str, Any]] = []
    summary: str | None = None
    trigger: str | None = None
    pre_tokens: int | None = None
    cwd: str | None = None
    seen_boundary = False
    with path.open("rb") as handle:
        for raw in handle:
            line = orjson.loads(raw)
            if not isinstance(line, dict) or line.get("isSidechain"):
                continue
            kind = line.get("type")
            if cwd is None and isinstance(line.get("cwd"), str):
                cwd = line["cwd"]
            if kind == "system" and line.get("subtype") == "compact_boundary":
                seen_boundary = True
                meta = line.get("compactMetadata") or {}
                trigger, pre_tokens = meta.get("trigger"), meta.get("preTokens")
            elif seen_boundary:
                if kind == "user" and line.get("isCompactSummary"):
                    content = line["message"]["content"]
                    summary = content if isinstance(content, str) else "\n".join(
                        b.get("text", "") for b in content if isinstance(b, dict))
                    break
            elif kind == "assistant":
                message = line["message"]
                blocks = _assistant_blocks(message.get("content"))
                mid = str(message.get("id") or line.get("uuid"))
                if messages and messages[-1]["id"] == mid and messages[-1]["role"] == "assistant":
                    messages[-1]["content"].extend(blocks)
                else:
                    messages.append({"id": mid, "role": "assistant", "content": blocks, "source": {
                        "kind": "model", "provider": "anthropic", "model": str(message.get("model"))}})
            elif kind == "user":
                messages.extend(_user_messages(line))
            elif kind == "queue-operation" and line.get("operation") == "enqueue":
                text = line.get("content")
                if isinstance(text, str) and text.strip() and not text.lstrip().startswith(NOTICE_PREFIXES):
                    messages.append({"id": f"queued-{len(messages)}", "role": "user",
                                     "content": [{"type": "text", "text": text}], "source": {"kind": "user"}})
    if summary is None:
        raise ValueError(f"{path}: no compact_boundary followed by an isCompactSummary message")
    frozen = tuple(freeze(m, root="message") for m in messages if m["content"])
    return ClaudeCompaction(path.stem, frozen, summary, trigger, pre_tokens, cwd)


@dataclass(frozen=True, slots=True)
class SessionFidelity:
    """Both summaries of one compaction, scored."""

    session_id: str
    shadowed_messages: int
    claude_chars: int
    extractive_chars: int
    claude: FidelityReport
    extractive: FidelityReport
    claude_terms: int
    """Code spans and paths Claude's summary quotes that occur verbatim in the history."""
    claude_terms_kept: int
    """How many of those the extractive summary also contains (a check the metric did not pick)."""


_BACKTICKED = re.compile(r"`([^`\n]{3,100})`")


def _history_text(messages: Sequence[Message]) -> str:
    parts = [t for m in messages for t in message_texts(m)]
    parts += [c.arguments for m in messages for c in tool_calls(m)]
    return "\n".join(parts)


def claude_terms(summary: str, history: str) -> list[str]:
    """Backticked spans of a summary that occur verbatim in the history, in first-seen order."""
    seen: dict[str, None] = {}
    for term in _BACKTICKED.findall(summary):
        if term.strip() == term and term in history:
            seen.setdefault(term, None)
    return list(seen)


def default_transcripts_dir() -> Path:
    """``../shared/data/transcripts`` beside the working directory or beside the repository."""
    candidates = [
        Path.cwd().parent / "shared" / "data" / "transcripts",
        Path(__file__).resolve().parents[4] / "shared" / "data" / "transcripts",
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return candidates[0]


def spotter_sessions(transcripts: Path) -> list[Path]:
    """The five main sessions with a real compaction, sorted by name."""
    return sorted((transcripts / _SPOTTER).glob("*.jsonl"))


def _score(compaction: ClaudeCompaction) -> SessionFidelity:
    summarizer = ExtractiveSummarizer(budget_chars=len(compaction.summary))
    request = SummaryRequest(session_id=compaction.session_id, messages=compaction.messages)
    result = asyncio.run(summarizer.summarize(request))
    extractive = "".join(b["text"] for b in result.summary)
    terms = claude_terms(compaction.summary, _history_text(compaction.messages))
    return SessionFidelity(
        session_id=compaction.session_id,
        shadowed_messages=len(compaction.messages),
        claude_chars=len(compaction.summary),
        extractive_chars=len(extractive),
        claude=compaction_fidelity(compaction.messages, compaction.summary, project_root=compaction.cwd),
        extractive=compaction_fidelity(compaction.messages, extractive, project_root=compaction.cwd),
        claude_terms=len(terms),
        claude_terms_kept=sum(1 for t in terms if t in extractive),
    )


def run(transcripts: Path) -> list[SessionFidelity]:
    """Score Claude's and the extractive summaries of every spotter compaction."""
    paths = spotter_sessions(transcripts)
    if not paths:
        raise FileNotFoundError(f"no Claude Code sessions under {transcripts / _SPOTTER}")
    return [_score(load_claude_code_compaction(path)) for path in paths]


def _cell(report: FidelityReport, category: str) -> str:
    score = report.category(category)
    if not score.total:
        return "-"
    strict = score.exact + score.normalized
    found = strict + score.partial
    return f"{strict}/{found}/{score.total}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def fidelity_table(results: Sequence[SessionFidelity]) -> str:
    """The Markdown tables: per session and category, then totals per category."""
    head = "| session | summarizer | chars | " + " | ".join(CATEGORIES) + " | overall strict | overall |"
    lines = [head, "|" + "---|" * (len(CATEGORIES) + 5)]
    for result in results:
        for name, report, chars in (("Claude", result.claude, result.claude_chars),
                                    ("extractive", result.extractive, result.extractive_chars)):
            cells = " | ".join(_cell(report, c) for c in CATEGORIES)
            lines.append(f"| {result.session_id[:8]} | {name} | {chars:,} | {cells} | "
                         f"{_pct(report.strict_score)} | {_pct(report.score)} |")
    lines += ["", "| category | facts | Claude strict | Claude found | extractive strict | extractive found |"
              "\n|---|---|---|---|---|---|"]
    for category in CATEGORIES:
        total = sum(r.claude.category(category).total for r in results)
        row = [category, str(total)]
        for pick in ("claude", "extractive"):
            scores = [getattr(r, pick).category(category) for r in results]
            strict = sum(s.exact + s.normalized for s in scores)
            found = strict + sum(s.partial for s in scores)
            row += [_pct(strict / total if total else None), _pct(found / total if total else None)]
        lines.append("| " + " | ".join(row) + " |")
    terms = sum(r.claude_terms for r in results)
    kept = sum(r.claude_terms_kept for r in results)
    per_session = ", ".join(f"{r.session_id[:8]} {r.claude_terms_kept}/{r.claude_terms}" for r in results)
    share = _pct(kept / terms if terms else None)
    lines += ["", "Cross-check (facts this metric does not pick): of the backticked spans (code, "
              "identifiers, paths) in Claude's summaries that occur verbatim in the history, the "
              f"extractive summaries contain {kept}/{terms} ({share}); per session: {per_session}."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the fidelity tables (and, with ``--missing``, the constraints each summary lost)."""
    parser = argparse.ArgumentParser(prog="python -m agentlog.compaction.fidelity_report",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("transcripts", nargs="?", type=Path, default=None,
                        help="the transcripts directory (default: ../shared/data/transcripts)")
    parser.add_argument("--missing", action="store_true", help="list the facts each summary lost")
    args = parser.parse_args(argv)
    results = run(args.transcripts or default_transcripts_dir())
    print("DIAGNOSTIC ONLY (scored with the summarizer's own fact extractor); the evaluation is "
          "`python -m benchmarks fidelity`.\n")
    print("Cells: strict (exact or normalized) / found (strict + partial) / facts.\n")
    print(fidelity_table(results))
    if args.missing:
        for result in results:
            for name, report in (("Claude", result.claude), ("extractive", result.extractive)):
                print(f"\n## {result.session_id} — {name}: missing")
                for item in report.items:
                    if item.match is None:
                        print(f"- [{item.category}] {item.text[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
