"""How far the DSH token heuristic is from DeepSeek's real tokenizer on real transcripts.

Run ``python -m agentlog.compaction.tokenizer_report [TRANSCRIPTS_DIR]`` (needs the ``tokens``
extra). For the text of every message in every transcript (text and reasoning blocks, tool-call
arguments, tool-result text), it compares the heuristic ``ceil(UTF-16 code units / 4)`` (spec §6,
without the fixed per-block overhead) with the exact DeepSeek count, and prints the relative
error ``(heuristic - exact) / exact`` per source format: mean, median and p90 of its absolute
value, the signed mean, and the total-token ratio.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentlog.compaction.fidelity_report import default_transcripts_dir

__all__ = [
    "SourceError",
    "count_pairs",
    "heuristic_tokens",
    "main",
    "measure",
    "source_texts",
    "texts_of_file",
    "token_table",
]

Counter = Callable[[str], int]
_SUFFIXES = (".jsonl", ".json", ".traj")


def heuristic_tokens(text: str) -> int:
    """DSH's estimate for one text: ceil(UTF-16 code units / 4)."""
    units = len(text.encode("utf-16-le")) // 2
    return (units + 3) // 4


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                yield item["text"]
            elif isinstance(item, str):
                yield item


def _claude_code(lines: list[Any]) -> Iterator[str]:
    for line in lines:
        message = line.get("message") if isinstance(line, dict) else None
        if line.get("type") not in ("user", "assistant") or not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str):
            yield content
            continue
        for block in content if isinstance(content, list) else ():
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                yield block.get("text", "")
            elif kind == "thinking":
                yield block.get("thinking", "")
            elif kind == "tool_use":
                yield orjson.dumps(block.get("input", {})).decode()
            elif kind == "tool_result":
                yield from _strings(block.get("content"))


def _codex(lines: list[Any]) -> Iterator[str]:
    for line in lines:
        payload = line.get("payload") if isinstance(line, dict) else None
        if line.get("type") != "response_item" or not isinstance(payload, dict):
            continue
        kind = payload.get("type")
        if kind == "message":
            yield from _strings(payload.get("content"))
        elif kind == "reasoning":
            yield from _strings(payload.get("summary"))
        elif kind == "function_call":
            yield str(payload.get("arguments", ""))
        elif kind == "function_call_output":
            output = payload.get("output")
            yield output if isinstance(output, str) else orjson.dumps(output).decode()


def _chat_messages(messages: Any) -> Iterator[str]:
    """OpenAI-style ``{role, content, tool_calls}`` messages (tau-bench, SWE-agent, mini-swe-agent)."""
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict):
            continue
        yield from _strings(message.get("content"))
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                yield function["arguments"]


def _dsh(lines: list[Any]) -> Iterator[str]:
    for event in lines:
        if not isinstance(event, dict) or event.get("type") not in ("user/message", "assistant/message",
                                                                     "tool/result"):
            continue
        data = event.get("data")
        message = data if event["type"] == "user/message" else (data or {}).get("message")
        for block in (message or {}).get("content") or ():
            kind = block.get("type") if isinstance(block, dict) else None
            if kind in ("text", "reasoning"):
                yield block.get("text", "")
            elif kind == "tool-call":
                arguments = block.get("arguments")
                yield arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
            elif kind == "tool-result":
                yield from _strings(block.get("content"))


def texts_of_file(source: str, path: Path) -> list[str]:
    """The non-empty message texts of one transcript file of a source format."""
    raw = path.read_bytes()
    if path.suffix == ".jsonl":
        lines = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
        walker = {"claude-code": _claude_code, "codex-rollout": _codex, "deepseek-harness": _dsh}[source]
        texts = list(walker(lines))
    else:
        document = orjson.loads(raw)
        if source == "openai-chat-tool-calls":
            texts = [t for run in document for t in _chat_messages(run.get("traj"))]
        elif isinstance(document, dict):
            texts = list(_chat_messages(document.get("history")))
        else:
            texts = list(_chat_messages(document))
    return [t for t in texts if t]


def source_texts(transcripts: Path) -> dict[str, list[str]]:
    """Every source format directory and the message texts of all its files."""
    found: dict[str, list[str]] = {}
    for directory in sorted(p for p in transcripts.iterdir() if p.is_dir()):
        files = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
        found[directory.name] = [t for f in files for t in texts_of_file(directory.name, f)]
    return found


@dataclass(frozen=True, slots=True)
class SourceError:
    """The heuristic's error on one source's texts."""

    source: str
    texts: int
    exact_tokens: int
    heuristic_tokens: int
    mean_abs: float
    median_abs: float
    p90_abs: float
    mean_signed: float


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    index = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[index]


def count_pairs(texts: Sequence[str], count: Counter) -> list[tuple[int, int]]:
    """``(exact, heuristic)`` token counts of each text."""
    return [(count(text), heuristic_tokens(text)) for text in texts]


def measure(source: str, pairs: Sequence[tuple[int, int]]) -> SourceError:
    """Relative errors ``(heuristic - exact) / exact`` over the texts with at least one token."""
    errors = [(guess - exact) / exact for exact, guess in pairs if exact]
    absolute = sorted(abs(e) for e in errors)
    return SourceError(
        source=source,
        texts=len(errors),
        exact_tokens=sum(exact for exact, _guess in pairs),
        heuristic_tokens=sum(guess for _exact, guess in pairs),
        mean_abs=sum(absolute) / len(absolute) if absolute else math.nan,
        median_abs=_quantile(absolute, 0.5),
        p90_abs=_quantile(absolute, 0.9),
        mean_signed=sum(errors) / len(errors) if errors else math.nan,
    )


def token_table(rows: Sequence[SourceError]) -> str:
    """The Markdown table of the measurements."""
    lines = ["| source | texts | exact tokens | heuristic / exact (total) | mean abs err | median abs err "
             "| p90 abs err | mean signed err |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        ratio = row.heuristic_tokens / row.exact_tokens if row.exact_tokens else math.nan
        lines.append(f"| {row.source} | {row.texts:,} | {row.exact_tokens:,} | {ratio:.2f} | "
                     f"{100 * row.mean_abs:.1f}% | {100 * row.median_abs:.1f}% | {100 * row.p90_abs:.1f}% | "
                     f"{100 * row.mean_signed:+.1f}% |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the heuristic-versus-exact table per source and overall."""
    parser = argparse.ArgumentParser(prog="python -m agentlog.compaction.tokenizer_report",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("transcripts", nargs="?", type=Path, default=None,
                        help="the transcripts directory (default: ../shared/data/transcripts)")
    args = parser.parse_args(argv)
    from agentlog.compaction.tokenizer import deepseek_counter

    count = deepseek_counter()
    by_source = source_texts(args.transcripts or default_transcripts_dir())
    pairs = {source: count_pairs(texts, count) for source, texts in by_source.items()}
    rows = [measure(source, found) for source, found in pairs.items()]
    rows.append(measure("all", [pair for found in pairs.values() for pair in found]))
    print(token_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
