"""mini-swe-agent trajectories (``*.traj.json``): the messages as one turn, ``info`` in the header.

Two shapes: the old bare list of messages (text actions in a fenced ``bash`` or
``mswea_bash_command`` block, observations
as ``user`` messages) and ``{"info", "messages", "trajectory_format"}`` (tool calling, with
per-message ``extra``: timestamps, the provider's raw response with its usage, return codes).
The final ``exit`` message (the submission) joins the turn, which ends ``completed``.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER, freeze
from agentlog.core.openai_wire import usage_from_openai as openai_usage
from agentlog.io.importers.builder import Imported, LogBuilder
from agentlog.io.importers.openai_chat import content_id
from agentlog.io.importers.source import SourceFile, json_document
from agentlog.io.importers.trajectory import Trajectory

__all__ = ["import_mini_swe_agent"]

EXPECTED: Final = ('a mini-swe-agent trajectory: {"info", "messages": [...], "trajectory_format"} or a JSON '
                   'list of {"role", "content"} messages')
_BASH: Final = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)


def _action(message: dict[str, Any]) -> tuple[str, str] | None:
    content = message.get("content")
    found = _BASH.findall(content) if isinstance(content, str) else []
    return ("bash", orjson.dumps({"command": found[0]}).decode()) if len(found) == 1 else None


def _usage(response: Any) -> dict[str, int] | None:
    """The usage of a litellm response dump (OpenAI's shape)."""
    usage = response.get("usage") if isinstance(response, dict) else None
    return openai_usage(usage) if isinstance(usage, dict) else None


def _extra(message: Any) -> dict[str, Any]:
    extra = message.get("extra") if isinstance(message, dict) else None
    return extra if isinstance(extra, dict) else {}


def _time(message: Any) -> int | None:
    """Epoch ms of a message's ``extra.timestamp`` (seconds), if it has one."""
    stamp = _extra(message).get("timestamp")
    if not isinstance(stamp, (int, float)) or isinstance(stamp, bool):
        return None
    return int(stamp * 1000) if 0 <= stamp * 1000 <= MAX_SAFE_INTEGER else None  # not NaN, not 1e308


def _fold(trajectory: Trajectory, messages: list[Any], times: list[int | None]) -> None:
    for index, message in enumerate(messages):
        extra = _extra(message)
        response = extra.get("response")
        if isinstance(response, dict) and isinstance(response.get("model"), str):
            trajectory.model = response["model"]
        if response is not None:
            trajectory.builder.note("raw provider response (usage and model kept)")
        code = extra.get("returncode")
        meta = {key: extra[key] for key in ("returncode", "exception_info", "raw_output") if extra.get(key)}
        trajectory.message(index, message, time=times[index], usage=_usage(response), meta=meta or None,
                           failed=type(code) is int and code != 0)


def import_mini_swe_agent(source: SourceFile) -> list[Imported]:
    """The session of one mini-swe-agent trajectory."""
    document = json_document(source, EXPECTED)
    messages = document if isinstance(document, list) else (
        document.get("messages") if isinstance(document, dict) else None)
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and "role" in m for m in messages):
        raise source.error(f"no list of messages with a role; expected {EXPECTED}")
    info = document.get("info") if isinstance(document, dict) else None
    config = info.get("config") if isinstance(info, dict) else None
    model = config.get("model") if isinstance(config, dict) else None
    name = model.get("model_name") if isinstance(model, dict) else None
    times = [_time(message) for message in messages]
    created = next((time for time in times if time is not None), 0)
    builder = LogBuilder(created)
    trajectory = Trajectory(source, builder, "mini-swe-agent", str(name or "unknown"), _action,
                            frozenset({"extra"}))
    _fold(trajectory, messages, times)
    origin: dict[str, Any] = {"format": "mini-swe-agent", "file": source.name}
    if isinstance(document, dict):
        origin.update({key: document[key] for key in ("instance_id", "trajectory_format", "info")
                       if document.get(key) is not None})
    header = SessionHeader(id=content_id("mini-swe-agent", source.data), created_at=created,
                           extra=freeze({"importedFrom": origin}))
    return [builder.finish(header, {"kind": "completed"})]
