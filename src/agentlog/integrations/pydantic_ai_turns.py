"""One Pydantic AI run's ``ModelMessage``s written as an agentlog turn (through the ``Recorder``).

Each ``ModelResponse`` is a step: the request parts the model had not seen yet (the prompt, a retry
prompt) are its ``user/message``, the response its ``assistant/message`` (with usage), each
``ToolCallPart`` a ``tool/call``; the next request's ``ToolReturnPart``/``RetryPromptPart`` that
answer those calls are the step's ``tool/result``s. Every message keeps pydantic-ai's own JSON
(``agentlog.integrations.pydantic_ai_messages``), so a restore gives back what pydantic-ai wrote.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
)

from agentlog.integrations.pydantic_ai_messages import (
    REPLAY_KEY,
    assistant_blocks,
    dump_message,
    is_failed_return,
    part_blocks,
    usage_of,
)
from agentlog.recording.recorder import Step, Turn

__all__ = ["DEFAULT_MODEL", "DEFAULT_PROVIDER", "TurnWriter", "dump_messages"]

DEFAULT_PROVIDER = "pydantic-ai"
DEFAULT_MODEL = "unknown"
"""The source a reply gets when pydantic-ai does not name its provider or model."""

Pending = tuple[str, dict[str, Any], int, Any, list[dict[str, Any]]]
"""A request part waiting for its step: the request's key and other fields, its index, JSON, blocks."""


class TurnWriter:
    """Feeds ModelMessages, in order, into one open ``Turn``; ``finish`` logs what is still pending.

    ``system`` and ``tools`` start as the latest request header's: a history's system prompt parts
    sit in its first request only (a request's ``instructions`` replace them), and the tools are
    known only where the run says them (``tools``, set by the caller before a reply is fed).
    """

    def __init__(self, turn: Turn, header: Any = None) -> None:
        self.turn = turn
        self.step: Step | None = None
        self.pending: list[Pending] = []
        system = header.get("system") if header is not None else None
        self.system: str | None = system if isinstance(system, str) else None
        tools = header.get("tools") if header is not None else None
        self.tools: list[dict[str, Any]] | None = [dict(tool) for tool in tools] if tools else None
        self.open_calls: set[str] = set()

    def feed(self, message: ModelMessage, dumped: dict[str, Any]) -> None:
        """Log ``message`` (``dumped`` is its ``dump_message`` JSON, made before anything is appended)."""
        if isinstance(message, ModelResponse):
            self._response(message, dumped)
        else:
            self._request(message, dumped)

    def finish(self) -> None:
        """Log request parts no reply followed (inside the last step, or as the turn's own message)
        and end the last step."""
        self.flush_pending()
        if self.step is not None:
            self.step.end()
            self.step = None

    def _request(self, request: ModelRequest, dumped: dict[str, Any]) -> None:
        key = str(uuid.uuid4())
        envelope = {name: value for name, value in dumped.items() if name != "parts"}
        if request.instructions:
            self.system = request.instructions
        system = [part.content for part in request.parts if isinstance(part, SystemPromptPart)]
        if system and not request.instructions:
            self.system = "\n\n".join(system)
        for index, (part, part_json) in enumerate(zip(request.parts, dumped["parts"], strict=True)):
            call_id = getattr(part, "tool_call_id", None)
            if (self.step is not None and isinstance(part, ToolReturnPart | RetryPromptPart)
                    and call_id in self.open_calls):
                record = {"key": key, "message": envelope, "parts": [[index, part_json]]}
                self.step.tool_result(call_id, part_blocks(part), is_error=is_failed_return(part),
                                      meta={REPLAY_KEY: record})
                self.open_calls.discard(call_id)
            else:
                self.pending.append((key, envelope, index, part_json, part_blocks(part)))

    def _response(self, response: ModelResponse, dumped: dict[str, Any]) -> None:
        if self.step is not None:
            self.step.end()
        step = self.step = self.turn.step().start()
        self.open_calls = set()
        self.flush_pending()
        provider = response.provider_name or DEFAULT_PROVIDER
        model = response.model_name or DEFAULT_MODEL
        header: dict[str, Any] = {"config": {"provider": provider, "model": model}}
        if self.system:
            header["system"] = self.system
        if self.tools:
            header["tools"] = self.tools
        step.request_header(header)
        step.assistant(provider=provider, model=model, usage=usage_of(response),
                       content=assistant_blocks(response), replay_state={REPLAY_KEY: {"message": dumped}})
        for part in response.parts:
            if isinstance(part, ToolCallPart):
                step.tool_call(part.tool_call_id, part.tool_name, part.args_as_json_str())
                self.open_calls.add(part.tool_call_id)

    def flush_pending(self) -> None:
        """One ``user/message`` per request among the pending parts (in the open step, else the turn)."""
        groups: list[list[Pending]] = []
        for item in self.pending:
            if groups and groups[-1][0][0] == item[0]:
                groups[-1].append(item)
            else:
                groups.append([item])
        self.pending = []
        where: Step | Turn = self.step if self.step is not None else self.turn
        for group in groups:
            key, envelope = group[0][0], group[0][1]
            record = {"key": key, "message": envelope,
                      "parts": [[index, part] for _, _, index, part, _ in group]}
            blocks = [block for *_, part_blocks_ in group for block in part_blocks_]
            where.user_message(blocks, source={"kind": "user", "replayState": {REPLAY_KEY: record}})


def dump_messages(messages: list[ModelMessage], first: int = 0) -> list[dict[str, Any]]:
    """Every message's JSON, refused as a whole (naming ``messages[i]``) if one cannot be serialized."""
    return [dump_message(message, f"messages[{first + index}]") for index, message in enumerate(messages)]
