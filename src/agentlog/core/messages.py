"""Messages derived from surface events, and the message-shape rules of restore.

A ``Message`` is the frozen object stored in the event itself: ``{id, role, content,
source}`` with content blocks (text, reasoning, image, tool-call, tool-result).
Deriving never copies, so a derived message *is* the logged object.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeAlias

from agentlog.core.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    STEP_END,
    TOOL_RESULT,
    TURN_END,
    USER_MESSAGE,
    Event,
)
from agentlog.core.jsonvalue import FrozenDict, freeze
from agentlog.core.surface import is_append_surface_event
from agentlog.errors import InvalidEventError

__all__ = [
    "Message",
    "check_message_shape",
    "derive_event_message",
    "event_message",
    "transcript",
    "transcript_with_partials",
]

Message: TypeAlias = FrozenDict
"""A frozen message object: ``{"id", "role", "content", "source", ...}``."""


def event_message(event: Event) -> Any:
    """The message object an event carries (``data`` for user/message), or None."""
    if event.type == USER_MESSAGE:
        return event.data
    if event.type in (ASSISTANT_MESSAGE, TOOL_RESULT) and isinstance(event.data, dict):
        return event.data.get("message")
    return None


def derive_event_message(event: Event) -> Message | None:
    """The model message of one surface event (spec D1), or None.

    ``user/message`` derives to its whole ``data``; ``assistant/message`` to
    ``data.message`` unless its content is empty; ``tool/result`` to ``data.message``.
    """
    kind = event.type
    if kind == USER_MESSAGE:
        data: Message = event.data
        return data
    if kind == ASSISTANT_MESSAGE:
        message = event.data.get("message") if isinstance(event.data, dict) else None
        if type(message) is not FrozenDict or not message.get("content"):
            return None
        return message
    if kind == TOOL_RESULT:
        message = event.data.get("message") if isinstance(event.data, dict) else None
        return message if type(message) is FrozenDict else None
    return None


def transcript(events: Iterable[Event]) -> list[Message]:
    """The human transcript: append-origin surface messages in log order (spec D5).

    Replacement nodes (compaction checkpoints, pruned results) are model-only and skipped,
    so a transcript never loses conversation the user already saw.
    """
    result: list[Message] = []
    for event in events:
        if is_append_surface_event(event):
            message = derive_event_message(event)
            if message is not None:
                result.append(message)
    return result


def transcript_with_partials(events: Iterable[Event]) -> list[Message]:
    """The transcript, plus the text a crash cut off before its step's ``assistant/message``:
    streamed ``text-delta`` chunks the user saw, as an assistant message marked ``partial``."""
    events = list(events)
    result: list[Message] = []
    pending: dict[tuple[Any, Any], list[str]] = {}

    def cut_off(key: tuple[Any, Any]) -> None:
        texts = pending.pop(key, None)
        if texts:
            result.append(freeze({"id": f"partial-{key[0]}-{key[1]}", "role": "assistant",
                                  "content": [{"type": "text", "text": "".join(texts)}],
                                  "source": {"kind": "model"}, "partial": True}))

    for event in events:
        data = event.data if isinstance(event.data, dict) else {}
        key = (data.get("turn"), data.get("step"))
        chunk = data.get("chunk")
        if event.type == ASSISTANT_CHUNK and isinstance(chunk, dict) and chunk.get("type") == "text-delta" \
                and isinstance(chunk.get("text"), str):
            pending.setdefault(key, []).append(chunk["text"])
        elif event.type == ASSISTANT_MESSAGE:
            pending.pop(key, None)  # answered: the message holds the text
        elif event.type == STEP_END:
            cut_off(key)
        elif event.type == TURN_END:
            for open_step in [k for k in pending if k[0] == key[0]]:
                cut_off(open_step)
        if is_append_surface_event(event):
            message = derive_event_message(event)
            if message is not None:
                result.append(message)
    for open_step in list(pending):
        cut_off(open_step)
    return result


def _nonempty_str(value: object) -> bool:
    return type(value) is str and value != ""


def check_message_shape(event_type: str, data: Any, subject: str) -> None:
    """The restore-time message rules (spec C6); ``subject`` names the event in errors."""
    message = data if event_type == USER_MESSAGE else (
        data.get("message") if isinstance(data, dict) else None
    )
    path = "data" if event_type == USER_MESSAGE else "data.message"

    def bad(detail: str, where: str = path) -> InvalidEventError:
        return InvalidEventError(f"{subject} {detail}", path=where)

    if not isinstance(message, dict) or not _nonempty_str(message.get("id")):
        raise bad("lacks an identified message")
    role = "assistant" if event_type == ASSISTANT_MESSAGE else "user"
    if message.get("role") != role:
        raise bad(f'message must have role "{role}"', f"{path}.role")
    source = message.get("source")
    if not isinstance(source, dict) or not _nonempty_str(source.get("kind")):
        raise bad("message has invalid source", f"{path}.source")
    content = message.get("content")
    if not isinstance(content, (list, tuple)):
        raise bad("message has invalid content", f"{path}.content")
    if event_type == ASSISTANT_MESSAGE:
        if source.get("kind") != "model" or not (
            _nonempty_str(source.get("provider")) and _nonempty_str(source.get("model"))
        ):
            raise bad("message must have model source", f"{path}.source")
    elif event_type == TOOL_RESULT:
        call_id = source.get("callId")
        if source.get("kind") != "tool" or not _nonempty_str(call_id):
            raise bad("message must have tool source", f"{path}.source")
        if (
            len(content) != 1
            or not isinstance(content[0], dict)
            or content[0].get("type") != "tool-result"
            or not isinstance(content[0].get("content"), (list, tuple))
        ):
            raise bad("message must contain one tool-result block", f"{path}.content")
        if content[0].get("toolCallId") != call_id:
            raise bad("message has mismatched tool call ids", f"{path}.content[0].toolCallId")
