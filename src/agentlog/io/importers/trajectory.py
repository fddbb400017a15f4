"""Agent trajectories (SWE-agent, mini-swe-agent): one task, so one turn of many steps.

Both keep a chat history: ``system``, the task as ``user`` message(s), then ``assistant`` replies
each followed by what the environment answered — a ``tool`` message for a function call, or,
in text-action mode, a ``user`` observation of the command the reply chose. A text action
becomes a ``tool-call`` block (``action`` gives its text) so that its observation is its
``tool/result``; any other later ``user`` message (format errors, demonstrations) joins the turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentlog.io.importers.builder import LogBuilder
from agentlog.io.importers.openai_chat import message_content, tool_call_blocks
from agentlog.io.importers.source import SourceFile

__all__ = ["Trajectory"]


@dataclass(slots=True)
class Trajectory:
    """Folds one trajectory's messages into ``builder``; formats supply their own readings."""

    source: SourceFile
    builder: LogBuilder
    provider: str
    model: str
    action: Callable[[dict[str, Any]], tuple[str, str] | None] = lambda message: None
    """A text-mode reply's command as ``(tool name, arguments JSON)``, or None."""
    known: frozenset[str] = frozenset()
    """Message keys a format reads itself (not counted as unmapped)."""
    pending: str | None = None
    replies: int = 0
    opened: bool = field(default=False)

    def message(self, index: int, message: Any, *, time: int | None = None,
                usage: Mapping[str, Any] | None = None, meta: Any = None, failed: bool = False) -> None:
        """One history message; ``time``, ``usage``, ``meta`` and ``failed`` come from the format's extras."""
        builder = self.builder
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            builder.note("message without a role")
            return
        builder.at(time)
        role = message["role"]
        for key in sorted(set(message) - self.known - {"role", "content", "tool_calls", "tool_call_id",
                                                       "tool_call_ids"}):
            if message[key] is not None:
                builder.note(f"{role} message key {key!r}")
        content = message_content(message.get("content"), builder, role)
        if role == "system":
            builder.system("\n".join(block["text"] for block in content))
        elif role == "assistant":
            self._reply(index, message, content, usage)
        elif role == "tool":
            for call_id in self._answered_ids(index, message):
                builder.tool_result(str(call_id or ""), content, id=f"m{index}:{call_id}", is_error=failed,
                                    meta=meta)
        elif role == "user" and self.pending is not None:
            builder.tool_result(self.pending, content, id=f"m{index}", is_error=failed, meta=meta)
            self.pending = None
        else:  # the task opens the one turn; later user messages join it
            source = None if role == "user" else {"kind": "plugin", "plugin": "import", "role": role}
            builder.user(content, id=f"m{index}", source=source, new_turn=not self.opened)
            self.opened = True

    def _answered_ids(self, index: int, message: dict[str, Any]) -> list[Any]:
        """The call ids a ``tool`` message answers: ``tool_call_ids`` (a list), else ``tool_call_id``."""
        ids = message.get("tool_call_ids")
        if not ids:
            return [message.get("tool_call_id")]
        if not isinstance(ids, list) or not all(isinstance(each, str | int) for each in ids):
            shape = type(ids).__name__ if not isinstance(ids, list) else "list holding a non-id"
            raise self.source.error(f'history message {index}: "tool_call_ids" is a {shape}; expected a list '
                                    "of tool call ids")
        return ids

    def _reply(self, index: int, message: dict[str, Any], content: list[Any],
               usage: Mapping[str, Any] | None) -> None:
        blocks = [*content, *tool_call_blocks(message, self.builder)]
        self.pending = None
        if not any(block["type"] == "tool-call" for block in blocks):
            action = self.action(message)
            if action is not None:
                self.pending = f"action-{index}"
                blocks.append({"type": "tool-call", "id": self.pending, "name": action[0],
                               "arguments": action[1]})
        self.builder.reply(blocks, id=f"m{index}", provider=self.provider, model=self.model, usage=usage)
        self.opened = True
        self.replies += 1
