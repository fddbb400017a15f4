"""The reference agent loop: stream a step, run the tools the model asked for, repeat until it answers.

Every step goes through the OpenAI adapter (``chat_stream``), so the log holds each chunk, the
request is rebuilt from the log, and a context overflow is compacted and retried in the step;
the ``Recorder`` checkpoints before each request and each tool run, so a crash loses at most
the step in flight and ``store.open(id)`` closes it with synthetic results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import openai

from agentlog.adapters.openai_chat import chat_header, chat_stream, tool_calls
from agentlog.agent.tools import TOOLS, FileTools
from agentlog.recorder import Recorder

__all__ = ["SYSTEM_PROMPT", "ChatAgent"]

SYSTEM_PROMPT: Final = ("You are a coding agent. Read files and list directories under the project root "
                        "with your tools before you answer; answer concisely.")


class ChatAgent:
    """One model, one toolbox, one recorded session: ``run_turn(prompt)`` per user prompt.

    ``on_text`` receives the streamed answer text as it arrives (print it, made terminal-safe);
    ``max_steps`` bounds the model calls of one turn (a model that never stops calling tools
    ends the turn ``error``, code ``STEP_LIMIT``).
    """

    def __init__(self, client: openai.OpenAI, recorder: Recorder, *, model: str, tools: FileTools,
                 system: str = SYSTEM_PROMPT, provider: str = "openai", max_steps: int = 25,
                 on_text: Callable[[str], object] | None = None) -> None:
        self.client = client
        self.recorder = recorder
        self.model = model
        self.tools = tools
        self.header: dict[str, Any] = chat_header(model, provider=provider, system=system, tools=TOOLS)
        self.max_steps = max_steps
        self.on_text = on_text

    def run_turn(self, prompt: str) -> None:
        """One user turn; a provider error ends the turn ``error`` and is raised (``llm_failure`` set)."""
        with self.recorder.turn() as turn:
            turn.user_message(prompt)
            for _ in range(self.max_steps):
                with turn.step() as step:
                    step.request_header(self.header)  # logged only when it changed
                    for chunk in chat_stream(step, self.recorder.session, self.client, model=self.model):
                        text = chunk.choices[0].delta.content if chunk.choices else None
                        if text and self.on_text is not None:
                            self.on_text(text)
                    calls = tool_calls(step)
                    for call in calls:
                        step.tool_call(call["id"], call["name"], call["arguments"])  # durable first
                        output = self.tools.run(call["name"], call["arguments"])
                        step.tool_result(call["id"], output.text, is_error=output.is_error)
                if not calls:
                    return
            turn.fail({"message": f"the model was still calling tools after {self.max_steps} steps",
                       "code": "STEP_LIMIT"})
