"""The standard workload (``bench/WORKLOAD.md``): a seeded coding-agent session of T turns.

Each turn has four steps of 40 text-delta chunks; steps 1-3 call ``read_file``. 181 events a
turn plus one request header, in the order DSH's agent loop writes them. Text is drawn from a
fixed vocabulary with ``random.Random(seed)``, so a seed always gives the same session.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from agentlog.core.events import Event
from agentlog.core.jsonvalue import FrozenDict, freeze
from agentlog.core.session import Session
from agentlog.recording.recorder import Flush, Recorder, Step

__all__ = [
    "EVENTS_PER_TURN",
    "generation_seconds",
    "PROVIDER",
    "MODEL",
    "record_workload",
    "workload_events",
    "workload_header",
]

PROVIDER: Final = "deepseek"
MODEL: Final = "deepseek-chat"
STEPS: Final = 4
TOOL_STEPS: Final = 3
CHUNKS: Final = 40
CHUNK_CHARS: Final = 8
PROMPT_CHARS: Final = 300
SYSTEM_CHARS: Final = 2000
RESULT_CHARS: Final = 2000
ARGUMENT_CHARS: Final = 60
EVENTS_PER_TURN: Final = 181
"""Events of one turn; a session of T turns has ``181 * T + 1`` (the request header)."""

START_TIME: Final = 1767225600000
"""2026-01-01T00:00:00Z: the clock start of ``workload_events`` (and of DSH's fixtures)."""

_VOCABULARY: Final = (
    "the", "a", "an", "and", "or", "not", "of", "to", "in", "on", "for", "with", "by", "from", "at", "as",
    "is", "are", "be", "it", "this", "that", "we", "you", "can", "will", "let", "const", "function",
    "return", "await", "async", "import", "export", "class", "interface", "type", "string", "number",
    "boolean", "null", "undefined", "value", "index", "offset", "length", "limit", "budget", "window",
    "context", "surface", "event", "session", "turn", "step", "message", "chunk", "tool", "result", "error",
    "retry", "stream", "request", "header", "config", "provider", "model", "token", "cache", "buffer",
    "flush", "write", "read", "parse", "check", "build", "compile", "test", "fix", "update", "remove",
    "rename", "add", "change", "patch", "diff", "merge", "commit", "branch", "repository", "file", "path",
    "line", "column", "field", "object", "array", "method", "module", "package", "system", "user",
    "assistant", "summary", "prompt", "compaction", "replace", "append", "seq", "time", "timeout", "sync",
    "src/index.ts", "lib/util.py", "main.go", "Makefile", "README.md", "package.json", "tsconfig.json",
    "tests/spec.ts", "foldSurface", "deriveMessages", "writeBatch", "encodeFrame", "decodeRow",
    "loadSession", "handleRequest", "parseEvent", "build(),", "update();", "it.", "on,", "file.", "result,",
    "error.", "session,", "stream.",
)
_PATH_PARTS: Final = (
    "src", "lib", "tests", "docs", "internal", "pkg", "cmd", "app", "core", "session", "store", "codec",
    "surface", "events", "utils", "handlers", "models", "schema", "config", "adapters", "compaction",
)
_SYSTEM_INTRO: Final = "You are a coding agent working in the user's repository. "


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False,
    }}


_TOOLS: Final = (
    _tool("read_file", "Read a UTF-8 text file from the workspace and return it with line numbers.", {
        "path": {"type": "string", "description": "Workspace-relative file path."},
        "offset": {"type": "integer", "minimum": 0, "description": "First line to read (0-based)."},
        "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to return."},
    }, ["path"]),
    _tool("write_file", "Create or overwrite a UTF-8 text file in the workspace.", {
        "path": {"type": "string", "description": "Workspace-relative file path."},
        "content": {"type": "string", "description": "The complete new file content."},
    }, ["path", "content"]),
    _tool("run", "Run a shell command in the workspace and return its combined stdout and stderr.", {
        "command": {"type": "string", "description": "The command line to execute."},
        "timeoutMs": {"type": "integer", "minimum": 1, "description": "Wall-clock limit in milliseconds."},
    }, ["command"]),
)


def _prose(rng: random.Random, length: int, *, lines: bool = False, prefix: str = "") -> str:
    """Exactly ``length`` characters of vocabulary words (in lines of nine words if ``lines``)."""
    text = prefix
    while len(text) < length:
        words = rng.choices(_VOCABULARY, k=max(8, (length - len(text)) // 5))
        if lines:
            rows = (" ".join(words[i : i + 9]) for i in range(0, len(words), 9))
            body = "\n".join(("", "  ", "    ")[n % 3] + row for n, row in enumerate(rows))
        else:
            body = " ".join(words)
        text = text + body + ("\n" if lines else " ")
    return text[:length]


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _arguments(rng: random.Random) -> str:
    """A ``read_file`` argument string of exactly 60 characters: ``{"path":"<49 chars>"}``."""
    room = ARGUMENT_CHARS - len('{"path":""}') - len(".py")
    path = "/".join(rng.choices(_PATH_PARTS, k=12))[:room].rstrip("/").ljust(room, "x")
    return orjson.dumps({"path": path + ".py"}).decode()


def workload_header(seed: int = 0) -> FrozenDict:
    """The request header of the workload: deepseek-chat, a 2,000-char system prompt, 3 tools."""
    rng = random.Random(f"agentlog-workload-header-{seed}")
    header: FrozenDict = freeze({
        "config": {"provider": PROVIDER, "model": MODEL, "maxTokens": 8192},
        "system": _prose(rng, SYSTEM_CHARS, lines=True, prefix=_SYSTEM_INTRO),
        "tools": list(_TOOLS),
    })
    return header


@dataclass(frozen=True, slots=True)
class _StepPlan:
    """Everything one step of the workload logs, drawn before recording it."""

    prompt: str | None
    prompt_id: str
    chunks: tuple[str, ...]
    message_id: str
    call: tuple[str, str] | None  # (call id, arguments)
    result: str
    result_id: str
    usage: dict[str, int]


def _plan_turn(rng: random.Random, turn: int, index: int) -> list[_StepPlan]:
    """The four steps of turn ``turn`` (the ``index``-th turn of this recording, from 1)."""
    plans = []
    for step in range(1, STEPS + 1):
        tool = step <= TOOL_STEPS
        text = _prose(rng, CHUNKS * CHUNK_CHARS)
        input_tokens = 2700 + 900 * (index - 1) + 600 * (step - 1)
        plans.append(_StepPlan(
            prompt=_prose(rng, PROMPT_CHARS) if step == 1 else None,
            prompt_id=_uuid(rng),
            chunks=tuple(text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)),
            message_id=_uuid(rng),
            call=(f"call_{turn}_{step}_{rng.getrandbits(24):06x}", _arguments(rng)) if tool else None,
            result=_prose(rng, RESULT_CHARS, lines=True) if tool else "",
            result_id=_uuid(rng),
            usage={"inputTokens": input_tokens, "outputTokens": 110 if tool else 80,
                   "cacheReadTokens": input_tokens - 700},
        ))
    return plans


def _record_step(step: Step, header: FrozenDict, plan: _StepPlan) -> None:
    if plan.prompt is not None:
        step.user_message(plan.prompt, id=plan.prompt_id)
    step.request_header(header)
    for piece in plan.chunks:
        step.text_delta(piece)
    content: list[dict[str, Any]] = [{"type": "text", "text": "".join(plan.chunks)}]
    if plan.call is not None:
        call_id, arguments = plan.call
        content.append({"type": "tool-call", "id": call_id, "name": "read_file", "arguments": arguments})
    step.assistant(provider=PROVIDER, model=MODEL, usage=plan.usage, content=content, id=plan.message_id)
    if plan.call is not None:
        call_id, arguments = plan.call
        step.tool_call(call_id, "read_file", arguments)
        step.tool_result(call_id, plan.result, id=plan.result_id)


def generation_seconds(turns: int, seed: int = 0) -> float:
    """Seconds the workload spends drawing the text of ``turns`` turns: not recording, so record
    figures subtract it."""
    rng = random.Random(seed)
    start = time.perf_counter()
    workload_header(seed)
    for index in range(1, turns + 1):
        _plan_turn(rng, index, index)
    return time.perf_counter() - start


def record_workload(session: Session, turns: int, *, seed: int = 0, flush: Flush | None = None,
                    checkpoint: Flush | None = None, check_invariants: bool | None = None) -> None:
    """Append ``turns`` turns of the standard workload to ``session`` through a ``Recorder``.

    ``flush`` runs after every ``turn/end`` (WORKLOAD.md's "durable per turn");
    ``checkpoint`` is the recorder's flush (before each model request and tool call);
    ``check_invariants`` is the recorder's (default: checked).
    """
    if type(turns) is not int or turns < 0:
        raise ValueError(f"turns must be a non-negative int, got {turns!r}")
    rng = random.Random(seed)
    header = workload_header(seed)
    recorder = Recorder(session, flush=checkpoint, check_invariants=check_invariants)
    for index in range(1, turns + 1):
        with recorder.turn() as turn:
            for plan in _plan_turn(rng, turn.number, index):
                with turn.step() as step:
                    _record_step(step, header, plan)
        if flush is not None:
            flush()


def workload_events(turns: int, seed: int = 0, *,
                    clock: Callable[[], int] | None = None) -> list[Event]:
    """The events of a fresh T-turn workload session (clock: +1 ms per event from 2026-01-01)."""
    session = Session.create("workload", clock=clock or itertools.count(START_TIME).__next__)
    record_workload(session, turns, seed=seed)
    return list(session.events)
