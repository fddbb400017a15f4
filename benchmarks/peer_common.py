"""What every peer of the ``peers`` suite records: the standard workload as plain steps.

The steps are read back from agentlog's own recording of the workload (``workload_events``),
so every library stores the same prompts, texts, tool calls and results; only agentlog also
keeps the stream chunks, the request header and the turn/step markers.
"""

from __future__ import annotations

import asyncio
import importlib
import shutil
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agentlog.core.events import ASSISTANT_MESSAGE, TOOL_RESULT, TURN_END, USER_MESSAGE
from agentlog.core.jsonvalue import thaw
from benchmarks.runner import current_rss, directory_bytes, peak_rss
from benchmarks.workload import workload_events

__all__ = [
    "fork_async_peer",
    "load_async_peer",
    "warm_async_peer",
    "SESSION_ID",
    "ToolCall",
    "Step",
    "Turn",
    "Phase",
    "PeerSystem",
    "conversation",
    "module",
    "fork_turn",
    "items_per_turn",
]

SESSION_ID: Final = "bench-peers"
"""The session / thread / conversation id every system records under."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One ``read_file`` call of a step and the text it returned."""

    id: str
    name: str
    arguments: str
    result: str
    result_id: str


@dataclass(frozen=True, slots=True)
class Step:
    """One model step: the user prompt (first step of a turn), the reply, and its tool call."""

    turn: int
    number: int
    prompt: str | None
    prompt_id: str | None
    text: str
    message_id: str
    provider: str
    model: str
    usage: Mapping[str, int]
    call: ToolCall | None


Turn = tuple[Step, ...]
Phase = Callable[["PeerSystem", int, Path, Mapping[str, Any]], dict[str, float]]
"""A measured phase of one system, run inside a child process."""


def conversation(turns: int, seed: int = 0) -> list[Turn]:
    """The ``turns`` turns of the standard workload as steps (what a peer can store of them)."""
    result: list[Turn] = []
    steps: list[Step] = []
    prompt: tuple[str, str] | None = None
    pending: dict[str, Any] | None = None
    for event in workload_events(turns, seed):
        if event.type == USER_MESSAGE:
            prompt = (_text(event.data["content"]), str(event.data["id"]))
        elif event.type == ASSISTANT_MESSAGE:
            if pending is not None:
                steps.append(_step(pending, None))
            pending = {"data": thaw(event.data), "prompt": prompt}
            prompt = None
        elif event.type == TOOL_RESULT and pending is not None:
            steps.append(_step(pending, thaw(event.data["message"])))
            pending = None
        if event.type == TURN_END:
            if pending is not None:
                steps.append(_step(pending, None))
                pending = None
            result.append(tuple(steps))
            steps = []
    return result


def _text(content: Sequence[Any]) -> str:
    return "".join(str(block["text"]) for block in content if block.get("type") == "text")


def _step(pending: Mapping[str, Any], result: Mapping[str, Any] | None) -> Step:
    data = pending["data"]
    message = data["message"]
    calls = [block for block in message["content"] if block.get("type") == "tool-call"]
    call = None
    if calls:
        if result is None:
            raise ValueError(f"turn {data['turn']} step {data['step']}: a tool call without its result")
        block = result["content"][0]
        call = ToolCall(str(calls[0]["id"]), str(calls[0]["name"]), str(calls[0]["arguments"]),
                        _text(block["content"]), str(result["id"]))
    prompt = pending["prompt"]
    source = message.get("source", {})
    return Step(
        turn=int(data["turn"]), number=int(data["step"]),
        prompt=None if prompt is None else prompt[0], prompt_id=None if prompt is None else prompt[1],
        text=_text(message["content"]), message_id=str(message["id"]),
        provider=str(source.get("provider", "")), model=str(source.get("model", "")),
        usage={str(key): int(value) for key, value in data.get("usage", {}).items()}, call=call,
    )


def items_per_turn(turn: Turn) -> int:
    """Messages a turn adds to a peer's history: the prompt, each reply, each tool result."""
    return sum((step.prompt is not None) + 1 + (step.call is not None) for step in turn)


def fork_turn(turns: int) -> int:
    """The turn whose end every system forks at: T/2 (at least 1), as in the store suite."""
    return max(1, turns // 2)


@dataclass(frozen=True, slots=True)
class PeerSystem:
    """One library configuration the suite measures, and how to drive it in a child process.

    ``record``, ``load`` and ``fork`` each take ``(system, turns, workdir, options)`` and return
    named numbers; ``requires`` are modules that must import for the system to run.
    """

    name: str
    label: str
    stores: str
    fork_kind: str
    requires: tuple[str, ...]
    record: Phase
    load: Phase
    fork: Phase
    postgres: bool = False
    variant: str = ""
    is_agentlog: bool = False


def module(name: str) -> Any:
    """Import a peer's module by name (peers are optional: nothing imports them at load time)."""
    return importlib.import_module(name)


def warm_async_peer(
    db_path: Callable[[Path], Path],
    record: Callable[[Path, str, Any], Coroutine[Any, Any, Any]],
    load: Callable[[Path, str], Coroutine[Any, Any, Any]],
    copy_fork: Callable[[Path, int, str], Coroutine[Any, Any, Any]],
    workdir: Path,
    *,
    fork: bool,
) -> None:
    """Run an async peer's phase code once on a scratch T = 2 database (imports, lazy set-up), discarded."""
    scratch = workdir / "warmup-child"
    scratch.mkdir()
    asyncio.run(record(db_path(scratch), SESSION_ID, conversation(2)))
    asyncio.run(load(db_path(scratch), SESSION_ID))
    if fork:
        asyncio.run(copy_fork(db_path(scratch), 1, "warmup-fork"))
    shutil.rmtree(scratch)


_Load = Callable[[Path, str], Coroutine[Any, Any, tuple[float, list[Any]]]]
_CopyFork = Callable[[Path, int, str], Coroutine[Any, Any, tuple[float, int]]]
_Warm = Callable[[Path, bool], None]


def load_async_peer(db_file: str, load: _Load, warm: _Warm, workdir: Path,
                    options: Mapping[str, Any]) -> dict[str, float]:
    """The load phase of an async SQLite peer: a cold read of the recorded session."""
    if options.get("warmup"):
        warm(workdir, False)
    before = current_rss()
    seconds, items = asyncio.run(load(workdir / db_file, SESSION_ID))
    return {"load_s": seconds, "rss_before": before, "peak_rss": peak_rss(), "items": len(items)}


def fork_async_peer(db_file: str, copy_fork: _CopyFork, warm: _Warm, prefix: int, workdir: Path,
                    options: Mapping[str, Any]) -> dict[str, float]:
    """The fork phase of an async SQLite peer that has no fork: copy ``prefix`` items to a new session."""
    if options.get("warmup"):
        warm(workdir, True)
    size = directory_bytes(workdir)
    seconds, copied = asyncio.run(copy_fork(workdir / db_file, prefix, f"fork-{options.get('run', 0)}"))
    if copied != prefix:
        raise RuntimeError(f"the copied session holds {copied} items, expected {prefix}")
    return {"fork_s": seconds, "fork_bytes": directory_bytes(workdir) - size, "fork_items": copied}
