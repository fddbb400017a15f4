"""What every provider adapter's loop needs from a step, whatever the SDK."""

from __future__ import annotations

from agentlog.jsonvalue import FrozenDict
from agentlog.recorder import Step

__all__ = ["tool_calls"]


def tool_calls(step: Step) -> list[FrozenDict]:
    """The ``tool-call`` blocks ``{id, name, arguments}`` of the step's assistant message, in order."""
    message = step.message
    if message is None:
        return []
    return [block for block in message.data["message"]["content"] if block.get("type") == "tool-call"]
