"""The reference agent loop: stream a step, run the tools the model asked for, repeat until it answers.

Every step goes through the OpenAI adapter (``chat_stream``), so the log holds each chunk, the
request is rebuilt from the log, and a context overflow is compacted and retried in the step;
the ``Recorder`` checkpoints before each request and each tool run, so a crash loses at most
the step in flight and ``store.open(id)`` closes it with synthetic results.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from agentlog.agent.tools import TOOLS, FileTools
from agentlog.core.header import SessionHeader
from agentlog.errors import MissingExtraError
from agentlog.integrations.openai_chat import chat_header, chat_stream, tool_calls
from agentlog.recording.recorder import Recorder

try:
    import openai
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "agentlog.agent.loop needs the openai SDK: pip install 'agentlog[openai]'") from exc

if TYPE_CHECKING:
    from agentlog.store.base import Store
    from agentlog.store.writer import LiveSession

__all__ = ["SYSTEM_PROMPT", "ChatAgent", "open_session", "read_prompts", "session_model"]

SYSTEM_PROMPT: Final = ("You are a coding agent. Read files and list directories under the project root "
                        "with your tools before you answer; answer concisely.")


class ChatAgent:
    """One model, one toolbox, one recorded session: ``run_turn(prompt)`` per user prompt.

    ``on_text`` receives the answer text as it streams in, and a newline after each turn ``chat``
    completes (print it terminal-safe); ``max_steps`` bounds the model calls of one turn (a model
    that never stops calling tools ends the turn ``error``, code ``STEP_LIMIT``); ``completed``
    counts the turns ``chat`` ran to their answer.
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
        self.completed = 0

    def chat(self, prompts: Iterable[str], *, on_error: Callable[[Exception], object]) -> int:
        """``run_turn`` for each prompt; a provider error goes to ``on_error`` and the next prompt runs.

        Returns how many turns failed. Each failed turn is in the log, ended ``error``. A provider
        error is one the adapter annotated (``llm_failure``): HTTP errors, a connection lost.
        """
        failed = 0
        for prompt in prompts:
            try:
                self.run_turn(prompt)
            except Exception as exc:
                if getattr(exc, "llm_failure", None) is None:
                    raise
                failed += 1
                on_error(exc)
                continue
            self.completed += 1
            if self.on_text is not None:
                self.on_text("\n")  # the answer is complete
        return failed

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


def open_session(store: Store, resume: str | None, *, cwd: str) -> LiveSession:
    """A new session in ``store``, or with ``resume`` a stored one reopened for writing.

    ``store.open`` commits crash repair first: a turn a crash left open is closed with a
    synthetic result for every tool call it left unanswered, so the next request is valid.
    """
    if resume:
        return store.open(resume)
    return store.start(SessionHeader(id=str(uuid.uuid4()), cwd=cwd))


def session_model(live: LiveSession) -> str | None:
    """The model of the session's latest request header: what a resumed session was talking to."""
    header = live.session.request_header()
    config = header.get("config") if header is not None else None
    model = config.get("model") if isinstance(config, dict) else None
    return model if isinstance(model, str) else None


def read_prompts(given: Iterable[str] = ()) -> Iterator[str]:
    """The ``given`` prompts, or when there are none one per line of stdin (blank lines skipped)."""
    given = list(given)
    if given:
        yield from given
        return
    while True:
        try:
            line = input("> " if sys.stdin.isatty() else "")
        except EOFError:
            return
        if line.strip():
            yield line
