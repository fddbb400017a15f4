"""OpenAI Agents SDK in the ``peers`` suite: ``SQLiteSession`` with Responses-API items.

Each step adds its items with one ``add_items`` call (the user message on step 1, the
assistant ``message`` output item, and on steps 1-3 the ``function_call`` and its
``function_call_output``); a load is ``get_items()``. The SDK has no fork: the suite copies
the first T/2 turns' items into a new session of the same database, as a user would.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from benchmarks.peer_common import (
    SESSION_ID,
    PeerSystem,
    Step,
    Turn,
    conversation,
    fork_async_peer,
    fork_turn,
    load_async_peer,
    module,
    warm_async_peer,
)
from benchmarks.runner import directory_bytes

__all__ = ["SYSTEMS", "fork", "items_of", "load", "record"]

DB_FILE: Final = "agents.sqlite"


def items_of(step: Step) -> list[dict[str, Any]]:
    """The Responses-API items one step adds to the session."""
    items: list[dict[str, Any]] = []
    if step.prompt is not None:
        items.append({"role": "user", "content": step.prompt})
    items.append({"id": f"msg_{step.message_id.replace('-', '')}", "type": "message", "role": "assistant",
                  "status": "completed",
                  "content": [{"type": "output_text", "text": step.text, "annotations": [], "logprobs": []}]})
    if step.call is not None:
        call = step.call
        items.append({"id": f"fc_{call.id}", "type": "function_call", "call_id": call.id, "name": call.name,
                      "arguments": call.arguments, "status": "completed"})
        items.append({"type": "function_call_output", "call_id": call.id, "output": call.result})
    return items


def _session(path: Path, session_id: str) -> Any:
    return module("agents.memory").SQLiteSession(session_id, str(path))


async def _record(path: Path, session_id: str, turns: Sequence[Turn]) -> float:
    start = time.perf_counter()
    session = _session(path, session_id)
    try:
        for turn in turns:
            for step in turn:
                await session.add_items(items_of(step))
    finally:
        session.close()
    return time.perf_counter() - start


def record(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Record + persist ``turns`` turns: one ``add_items`` a step."""
    plan = conversation(turns)
    if options.get("warmup"):
        scratch = workdir / "warmup"
        scratch.mkdir()
        asyncio.run(_record(scratch / DB_FILE, "warmup", conversation(1)))
        shutil.rmtree(scratch)
    seconds = asyncio.run(_record(workdir / DB_FILE, SESSION_ID, plan))
    return {"s": seconds, "bytes": directory_bytes(workdir),
            "items": sum(len(items_of(step)) for turn in plan for step in turn)}


async def _load(path: Path, session_id: str) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    session = _session(path, session_id)
    try:
        items = list(await session.get_items())
    finally:
        session.close()
    return time.perf_counter() - start, items


async def _copy_fork(path: Path, count: int, child_id: str) -> tuple[float, int]:
    """Read the parent's items and add the first ``count`` to a new session: the SDK's fork."""
    start = time.perf_counter()
    parent = _session(path, SESSION_ID)
    child = _session(path, child_id)
    try:
        items = await parent.get_items()
        await child.add_items(list(items[:count]))
    finally:
        parent.close()
        child.close()
    seconds = time.perf_counter() - start
    _seconds, copied = await _load(path, child_id)
    return seconds, len(copied)


def _warm(workdir: Path, fork: bool) -> None:
    warm_async_peer(lambda root: root / DB_FILE, _record, _load, _copy_fork, workdir, fork=fork)


def load(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Cold ``get_items()`` of the recorded session."""
    return load_async_peer(DB_FILE, _load, _warm, workdir, options)


def fork(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Copy the first T/2 turns' items into a new session (the SDK has no fork)."""
    prefix = sum(len(items_of(step)) for turn in conversation(fork_turn(turns)) for step in turn)
    return fork_async_peer(DB_FILE, _copy_fork, _warm, prefix, workdir, options)


SYSTEMS: Final = {
    "openai-agents-sqlite": PeerSystem(
        name="openai-agents-sqlite", label="OpenAI Agents SDK, SQLiteSession (Responses-API items)",
        stores="messages only (user, assistant message, function_call, function_call_output items); "
               "no usage, no stream chunks",
        fork_kind="copy: the SDK has no fork", requires=("agents",), record=record, load=load, fork=fork,
    ),
}
