"""Google ADK in the ``peers`` suite: ``DatabaseSessionService`` on SQLite (aiosqlite), and
agentlog's ``AgentlogSessionService`` on an agentlog SQLite store, driven alike.

Events are appended one ``append_event`` each as ADK's runner does: the user's content
event on step 1, then per step the model's event (text, the function call, usage) and on
steps 1-3 the function-response event. A load is ``get_session``. ADK has no fork: the
suite copies the first T/2 turns' events into a new session, as a user would.
"""

from __future__ import annotations

import asyncio
import functools
import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
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

__all__ = ["SYSTEMS", "events_of", "fork", "load", "record"]

DB_FILE: Final = "adk.sqlite"
APP: Final = "agentlog-bench"
USER: Final = "user"
AGENT: Final = "coder"


def events_of(step: Step, invocation: str) -> list[Any]:
    """The ADK events one step appends (user content, model response, function response)."""
    types = module("google.genai.types")
    event_class = module("google.adk.events").Event
    events: list[Any] = []
    if step.prompt is not None:
        events.append(event_class(invocation_id=invocation, author=USER, content=types.Content(
            role="user", parts=[types.Part(text=step.prompt)])))
    parts = [types.Part(text=step.text)]
    if step.call is not None:
        parts.append(types.Part(function_call=types.FunctionCall(
            id=step.call.id, name=step.call.name, args=json.loads(step.call.arguments))))
    usage = step.usage
    events.append(event_class(
        invocation_id=invocation, author=AGENT, model_version=step.model,
        content=types.Content(role="model", parts=parts),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=usage.get("inputTokens"), candidates_token_count=usage.get("outputTokens"),
            cached_content_token_count=usage.get("cacheReadTokens")),
    ))
    if step.call is not None:
        events.append(event_class(invocation_id=invocation, author=AGENT, content=types.Content(
            role="user", parts=[types.Part(function_response=types.FunctionResponse(
                id=step.call.id, name=step.call.name, response={"result": step.call.result}))])))
    return events


def _database_service(path: Path) -> Any:
    return module("google.adk.sessions").DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{path}")


def _agentlog_service(path: Path) -> Any:
    return module("agentlog.integrations.adk").AgentlogSessionService(f"sqlite://{path}")


Service = Callable[[Path], Any]


async def _record(service_of: Service, path: Path, session_id: str, turns: Sequence[Turn]) -> float:
    start = time.perf_counter()
    service = service_of(path)
    try:
        session = await service.create_session(app_name=APP, user_id=USER, session_id=session_id)
        for turn in turns:
            invocation = f"e-{session_id}-{turn[0].turn}"
            for step in turn:
                for event in events_of(step, invocation):
                    await service.append_event(session, event)
    finally:
        await service.close()
    return time.perf_counter() - start


def _service_of(system: PeerSystem) -> Service:
    return _agentlog_service if system.variant == "agentlog" else _database_service


def record(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Record + persist ``turns`` turns: ``create_session``, then one ``append_event`` an event."""
    plan = conversation(turns)
    service_of = _service_of(system)
    if options.get("warmup"):
        scratch = workdir / "warmup"
        scratch.mkdir()
        asyncio.run(_record(service_of, scratch / DB_FILE, "warmup", conversation(1)))
        shutil.rmtree(scratch)
    seconds = asyncio.run(_record(service_of, workdir / DB_FILE, SESSION_ID, plan))
    return {"s": seconds, "bytes": directory_bytes(workdir),
            "items": sum(len(events_of(step, "")) for turn in plan for step in turn)}


async def _load(service_of: Service, path: Path, session_id: str) -> tuple[float, list[Any]]:
    """A new service, then ``get_session``; the model contents are the events' contents."""
    start = time.perf_counter()
    service = service_of(path)
    try:
        session = await service.get_session(app_name=APP, user_id=USER, session_id=session_id)
        contents = [event.content for event in session.events]
    finally:
        await service.close()
    return time.perf_counter() - start, contents


async def _copy_fork(service_of: Service, path: Path, count: int, child_id: str) -> tuple[float, int]:
    """Read the parent and append copies of its first ``count`` events to a new session."""
    start = time.perf_counter()
    service = service_of(path)
    try:
        parent = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION_ID)
        child = await service.create_session(app_name=APP, user_id=USER, session_id=child_id,
                                             state=dict(parent.state))
        for event in parent.events[:count]:
            await service.append_event(child, event.model_copy())
    finally:
        await service.close()
    seconds = time.perf_counter() - start
    _seconds, copied = await _load(service_of, path, child_id)
    return seconds, len(copied)


def _warm(service_of: Service, workdir: Path, fork: bool) -> None:
    warm_async_peer(lambda root: root / DB_FILE, functools.partial(_record, service_of),
                    functools.partial(_load, service_of), functools.partial(_copy_fork, service_of),
                    workdir, fork=fork)


def load(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Cold ``get_session`` of the recorded session."""
    service_of = _service_of(system)
    return load_async_peer(DB_FILE, functools.partial(_load, service_of),
                           functools.partial(_warm, service_of), workdir, options)


def fork(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Copy the first T/2 turns' events into a new session through the service (ADK has no fork)."""
    service_of = _service_of(system)
    prefix = sum(len(events_of(step, "")) for turn in conversation(fork_turn(turns)) for step in turn)
    return fork_async_peer(DB_FILE, functools.partial(_copy_fork, service_of),
                           functools.partial(_warm, service_of), prefix, workdir, options)


SYSTEMS: Final = {
    "adk-sqlite": PeerSystem(
        name="adk-sqlite", label="Google ADK, DatabaseSessionService on SQLite (aiosqlite)",
        stores="messages only (user, model and function-response events with usage); no stream chunks",
        fork_kind="copy: ADK has no fork", requires=("google.adk", "sqlalchemy", "aiosqlite"),
        record=record, load=load, fork=fork,
    ),
    "adk-agentlog": PeerSystem(
        name="adk-agentlog",
        label="Google ADK, agentlog's AgentlogSessionService on an agentlog SQLite store",
        stores="every ADK event whole, plus its turns, steps and messages; no stream chunks",
        fork_kind="copy through the service, as for adk-sqlite (agentlog's own fork is O(prefix))",
        requires=("google.adk", "agentlog.integrations.adk"), record=record, load=load, fork=fork,
        variant="agentlog",
    ),
}
