"""SWE-agent trajectories (``*.traj``): the ``history`` chat as one turn, ``info`` in the header.

Function-calling runs keep their ``tool_calls``/``tool`` pairs; text-action runs get a
``tool-call`` block named ``action`` holding the reply's ``action`` text, answered by the
observation that follows it. ``trajectory`` repeats the history step by step (with the
environment ``state``) and is counted, not kept, except for the observation of the action that
ended the run (``submit``), which only it holds; ``replay_config`` gives the model name.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import freeze
from agentlog.io.importers.builder import Imported, LogBuilder, text_blocks
from agentlog.io.importers.openai_chat import content_id
from agentlog.io.importers.source import SourceFile, json_document
from agentlog.io.importers.trajectory import Trajectory

__all__ = ["import_swe_agent"]

EXPECTED: Final = ('a SWE-agent trajectory: a JSON object with "history" (chat messages with role, content, '
                   'action, tool_calls) and optionally "trajectory", "info", "replay_config"')
_KNOWN: Final = frozenset({"agent", "message_type", "thought", "action", "is_demo"})


def _model(document: dict[str, Any]) -> str:
    config = document.get("replay_config")
    if isinstance(config, str):
        try:
            config = orjson.loads(config)
        except orjson.JSONDecodeError:
            return "unknown"
    model = config.get("agent", {}).get("model", {}) if isinstance(config, dict) else {}
    return str(model.get("name") or "unknown") if isinstance(model, dict) else "unknown"


def _action(message: dict[str, Any]) -> tuple[str, str] | None:
    action = message.get("action")
    if not isinstance(action, str) or not action:
        return None
    return "action", orjson.dumps({"action": action}).decode()


def _final_observation(document: dict[str, Any], trajectory: Trajectory) -> None:
    """Answer the last action with the last trajectory step's observation: the run ended on that
    action (``submit``), so the history never got its observation."""
    steps = document.get("trajectory")
    last = steps[-1] if isinstance(steps, list) and steps else None
    if trajectory.pending is None or not isinstance(last, dict):
        return
    reply = next(message for message in reversed(document["history"])
                 if isinstance(message, dict) and message.get("role") == "assistant")
    observation = last.get("observation")
    if isinstance(observation, str) and last.get("action") == reply.get("action"):
        trajectory.builder.tool_result(trajectory.pending, text_blocks(observation), id="trajectory-last")
        trajectory.pending = None


def import_swe_agent(source: SourceFile) -> list[Imported]:
    """The session of one SWE-agent trajectory."""
    document = json_document(source, EXPECTED)
    if not isinstance(document, dict) or not isinstance(document.get("history"), list):
        raise source.error(f"no \"history\" list; expected {EXPECTED}")
    builder = LogBuilder(0)
    trajectory = Trajectory(source, builder, "swe-agent", _model(document), _action, _KNOWN)
    for index, message in enumerate(document["history"]):
        trajectory.message(index, message)
    _final_observation(document, trajectory)
    if isinstance(document.get("trajectory"), list) and document["trajectory"]:
        builder.note("trajectory steps (repeat the history, with the environment state)",
                     len(document["trajectory"]))
    for key in sorted(set(document) - {"history", "trajectory", "info", "replay_config", "environment"}):
        builder.note(f"top-level key {key!r}")
    origin: dict[str, Any] = {"format": "swe-agent", "file": source.name}
    for key in ("environment", "info"):
        if document.get(key) is not None:
            origin[key] = document[key]
    header = SessionHeader(id=content_id("swe-agent", source.data), created_at=0,
                           extra=freeze({"importedFrom": origin}))
    return [builder.finish(header, {"kind": "completed"})]
