"""``importers`` suite: importing the largest real transcript of each format beside parsing its JSON.

The floor is ``orjson.loads`` of the file (each line of a JSONL file); the import is the format's
importer (parse, map, build the validated ``Event``s); the save is ``save_imported`` into a fresh
JSONL zstd store (the cold append checks the log as a load would, then compresses and fsyncs) of
at most ``SAVED`` sessions, so its ratio is to parsing the whole file only when the file holds one.
The files come from ``../shared/data`` beside the repository (``$AGENTLOG_SHARED_DATA``).
Beside them, ``openai-responses`` imports generated item lists of ``SCALES`` sizes (one long
turn of tool rounds, the shape that was quadratic): items/s at each shows whether it is linear.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any, Final

import orjson

from agentlog.io.importers import IMPORTERS, SourceFile, save_imported
from agentlog.store.urls import open_store
from benchmarks.runner import TIMES, Context, Figure, Stat, Suite, Target

__all__ = ["SUITE"]

CASES: Final = (
    ("claude-code", "transcripts/claude-code/marot__spotter/test/fixtures/transcripts/"
                    "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"),
    ("codex", "transcripts/codex-rollout/jnarowski__agentcmd/packages/agent-cli-sdk/tests/fixtures/codex/"
              "full/rollout-2025-09-24T19-22-20-01997e76-d124-7592-9cac-2ec05abbca08.jsonl"),
    ("openai-chat", "transcripts/openai-chat-tool-calls/sierra-research__tau-bench/historical_trajectories/"
                    "gpt-4o-airline.json"),
)
IMPORT_OVER_PARSE: Final = Target("<=", 10.0)
SAVED: Final = 20
"""Sessions of a file that the save phase writes (tau-bench holds 200; each costs its own fsyncs)."""


SCALES: Final = (8_000, 32_000)
"""Generated ``openai-responses`` item counts measured in one run."""


def responses_items(count: int) -> list[dict[str, Any]]:
    """A user prompt, then rounds of reasoning, a function call, its output and a reply (one turn)."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    round_ = 0
    while len(items) < count:
        items += [
            {"type": "reasoning", "id": f"rs_{round_}",
             "summary": [{"type": "summary_text", "text": "Look."}]},
            {"type": "function_call", "id": f"fc_{round_}", "call_id": f"call_{round_}", "name": "read_file",
             "arguments": f'{{"path": "src/module_{round_}.py"}}'},
            {"type": "function_call_output", "call_id": f"call_{round_}",
             "output": "def f():\n    return 1\n"},
            {"type": "message", "role": "assistant", "id": f"msg_{round_}",
             "content": [{"type": "output_text", "text": f"Read module {round_}.", "annotations": []}]},
        ]
        round_ += 1
    return items[:count]


def _scaling(ctx: Context) -> None:
    importer = IMPORTERS["openai-responses"]
    rates: list[float] = []
    for count in SCALES:
        data = orjson.dumps(responses_items(count))
        source = SourceFile(f"generated-{count}.json", data)

        def once(source: SourceFile = source, data: bytes = data) -> Mapping[str, float]:
            parse = _parse(data, jsonl=False)
            start = time.perf_counter()
            importer(source)
            return {"parse": parse, "import": time.perf_counter() - start}

        samples = ctx.measure(f"openai-responses: {count:,} generated items", once)
        parse = Stat.of([v * 1e3 for v in samples["parse"]])
        rate = Stat.of([count / seconds for seconds in samples["import"]])
        key, floor = f"openai-responses_{count // 1000}k", f"orjson.loads of the {count:,} items"
        ctx.add(Figure(f"{key}_parse_ms", f"openai-responses: {floor}", "ms", parse,
                       group="openai-responses scaling", is_baseline=True))
        ratio = statistics.median(samples["import"]) / max(statistics.median(samples["parse"]), 1e-9)
        ctx.add(Figure(f"{key}_items_per_s", f"openai-responses: import {count:,} generated items (one turn)",
                       "items/s", rate, group="openai-responses scaling", baseline=floor, ratio=ratio))
        rates.append(rate.median)
    ctx.note(f"openai-responses: {SCALES[-1]:,} items import at {rates[-1] / rates[0]:.2f} of the item rate "
             f"of {SCALES[0]:,} (1.00 = linear)")


def shared_data() -> Path:
    """``$AGENTLOG_SHARED_DATA``, else ``../shared/data`` beside the repository."""
    configured = os.environ.get("AGENTLOG_SHARED_DATA")
    return Path(configured) if configured else Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _parse(data: bytes, jsonl: bool) -> float:
    start = time.perf_counter()
    if jsonl:
        for line in data.splitlines():
            if line.strip():
                orjson.loads(line)
    else:
        orjson.loads(data)
    return time.perf_counter() - start


def _case(ctx: Context, fmt: str, path: Path) -> None:
    data = path.read_bytes()
    source = SourceFile(str(path), data)
    importer = IMPORTERS[fmt]
    counts: dict[str, int] = {}

    def once() -> Mapping[str, float]:
        parse = _parse(data, path.suffix == ".jsonl")
        start = time.perf_counter()
        sessions = importer(source)
        imported = time.perf_counter() - start
        counts["events"] = sum(len(session.events) for session in sessions)
        counts["sessions"] = len(sessions)
        target = ctx.workdir / f"store-{fmt}"
        shutil.rmtree(target, ignore_errors=True)
        start = time.perf_counter()
        with open_store(f"jsonl://{target}") as store:
            for session in sessions[:SAVED]:
                save_imported(store, session)
        return {"parse": parse, "import": imported, "save": time.perf_counter() - start}

    samples = ctx.measure(f"{fmt}: {path.name} ({len(data) / 1e6:.1f} MB)", once)
    parse, imported, saved = (Stat.of([v * 1e3 for v in samples[k]]) for k in ("parse", "import", "save"))
    ctx.add(Figure(f"{fmt}_parse_ms", f"{fmt}: orjson.loads of the file", "ms", parse, group=fmt,
                   is_baseline=True))
    ratio = imported.median / max(parse.median, 1e-9)
    ctx.add(Figure(f"{fmt}_import_ms", f"{fmt}: import ({counts['events']} events)", "ms", imported,
                   group=fmt, baseline="orjson.loads of the file", ratio=ratio,
                   ratio_target=IMPORT_OVER_PARSE))
    total = counts["sessions"]
    written = f"{min(SAVED, total)} of its {total} sessions" if total > 1 else "it"
    ctx.add(Figure(f"{fmt}_save_ms", f"{fmt}: save {written} into a JSONL zstd store", "ms", saved, group=fmt,
                   baseline="orjson.loads of the file", ratio=saved.median / max(parse.median, 1e-9)))
    ctx.note(f"{fmt}: {path.name}, {len(data):,} bytes, {counts['events']:,} events; import / parse = "
             f"{ratio:.1f}{TIMES}")


def run(ctx: Context) -> None:
    """Each case whose file is present; an absent corpus is a noted skip."""
    root = shared_data()
    for fmt, relative in CASES:
        path = root / relative
        if not path.is_file():
            ctx.note(f"{fmt}: {path} not found (set AGENTLOG_SHARED_DATA)")
            continue
        ctx.attempt(fmt, partial(_case, ctx, fmt, path))
    ctx.attempt("openai-responses scaling", partial(_scaling, ctx))


SUITE: Final = Suite("importers", "importing real transcripts: import and save vs parsing their JSON", run)
