"""Builders and tiny deterministic summarizers for the compaction tests."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentlog import Session
from agentlog.compaction.summary import SummaryRequest, SummaryResult
from agentlog.core.events import Event
from agentlog.recording.recorder import Recorder, Turn

HEADER: dict[str, Any] = {
    "config": {"provider": "p", "model": "m"},
    "system": "You are a careful coding agent.",
    "tools": [{"name": "read", "description": "Read a file.", "parameters": {"type": "object"}}],
}


def clock() -> Callable[[], int]:
    """A fake epoch-ms clock that moves 1 ms per event (so end.time > start.time)."""
    return itertools.count(1_000).__next__


def new_session(session_id: str = "c") -> Session:
    return Session.create(session_id, clock=clock())


def text_of(length: int, seed: str = "x") -> str:
    return (seed * length)[:length]


@dataclass
class FixedSummarizer:
    """Answers every request with one short text block; remembers what it was asked."""

    text: str | None = None
    provider: str = "sum-p"
    model: str = "sum-m"
    usage: Any = None
    raw_output: Any = None
    llm_stream_call: bool = False
    max_tokens: int | None = None
    requests: list[SummaryRequest] = field(default_factory=list)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        text = self.text if self.text is not None else f"Summary of {len(request.messages)} messages."
        return SummaryResult(
            summary=({"type": "text", "text": text},),
            provider=self.provider,
            model=self.model,
            max_tokens=self.max_tokens,
            usage=self.usage,
            raw_output=self.raw_output,
            llm_stream_call=self.llm_stream_call,
        )


@dataclass
class HookSummarizer(FixedSummarizer):
    """Runs ``during(request)`` (sync or async) while summarizing, then answers like FixedSummarizer."""

    during: Callable[[SummaryRequest], Any] | None = None

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.during is not None:
            outcome = self.during(request)
            if isinstance(outcome, Awaitable):
                await outcome
        return await super().summarize(request)


@dataclass
class FailingSummarizer:
    """Always raises ``error``."""

    error: BaseException
    calls: int = 0

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        raise self.error


class BlockingSummarizer(FixedSummarizer):
    """Waits on ``release`` (set by the test) before answering; ``entered`` is set on entry."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.entered.set()
        await self.release.wait()
        return await super().summarize(request)


def tool_step(
    turn: Turn,
    call_id: str,
    *,
    text: str = "thinking",
    result: str = "output",
    prompt: str | None = None,
    header: dict[str, Any] | None = None,
    usage: Any = None,
) -> None:
    """One closed step: optional prompt, header, a text delta, one tool call and its result."""
    with turn.step() as step:
        if prompt is not None:
            step.user_message(prompt)
        step.request_header(header or HEADER)
        step.text_delta(text)
        step.assistant(
            content=[
                {"type": "text", "text": text},
                {"type": "tool-call", "id": call_id, "name": "read", "arguments": '{"p":1}'},
            ],
            usage=usage,
        )
        step.tool_call(call_id, "read", '{"p":1}')
        step.tool_result(call_id, result)


def answer_step(
    turn: Turn,
    *,
    text: str = "done",
    prompt: str | None = None,
    header: dict[str, Any] | None = None,
    usage: Any = None,
) -> None:
    """One closed step that answers without calling a tool."""
    with turn.step() as step:
        if prompt is not None:
            step.user_message(prompt)
        step.request_header(header or HEADER)
        step.text_delta(text)
        step.assistant(usage=usage)


def record_turn(
    recorder: Recorder, index: int, *, tools: int = 1, size: int = 400, header: dict[str, Any] | None = None
) -> None:
    """A closed turn: a prompt, ``tools`` tool steps with ``size``-char results, then an answer."""
    with recorder.turn() as turn:
        fill(turn, index, tools=tools, size=size, header=header)


def fill(
    turn: Turn, index: int, *, tools: int = 1, size: int = 400, header: dict[str, Any] | None = None
) -> None:
    """The steps of ``record_turn`` inside an already open turn."""
    for number in range(tools):
        tool_step(
            turn,
            f"call-{index}-{number}",
            text=text_of(size // 2, "t"),
            result=text_of(size, "r"),
            prompt=f"prompt {index}: please look" if number == 0 else None,
            header=header,
        )
    answer_step(
        turn, text=text_of(size // 2, "a"), prompt=None if tools else f"prompt {index}", header=header
    )


def session_with_turns(count: int, *, tools: int = 1, size: int = 400) -> tuple[Session, Recorder]:
    session = new_session()
    recorder = Recorder(session)
    for index in range(1, count + 1):
        record_turn(recorder, index, tools=tools, size=size)
    return session, recorder


def types(events: Sequence[Event], start: int = 0) -> list[str]:
    return [event.type for event in events][start:]


def compaction_events(session: Session) -> list[Event]:
    return [event for event in session.events if event.type.startswith("compaction/")]


def run(coro: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coro

    return asyncio.run(main())


def pairing_problems(messages: Sequence[Any]) -> list[str]:
    """Tool calls without results and results without calls in derived messages (ids matched)."""
    calls: list[str] = []
    results: list[str] = []
    for message in messages:
        for block in message.get("content", ()):
            if block.get("type") == "tool-call":
                calls.append(block["id"])
            elif block.get("type") == "tool-result":
                results.append(block["toolCallId"])
    problems = [f"call {call} has no result" for call in calls if call not in results]
    problems += [f"result {result} has no call" for result in results if result not in calls]
    return problems
