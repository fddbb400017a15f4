"""What a summarizer is given and what it returns (spec compaction §2 S1-S4).

The engine builds a ``SummaryRequest`` from the shadowed span; any object with a ``summarize``
method can answer it, ``async def`` or plain ``def`` (``ExtractiveSummarizer`` offline, or a model).
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Any, Protocol

from agentlog.core.messages import Message

__all__ = [
    "SECTIONS", "SummaryRequest", "SummaryResult", "Summarizer", "SyncSummarizer", "check_summarizer",
    "run_summarizer",
]

SECTIONS: tuple[str, ...] = (
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code",
    "Errors and Fixes",
    "Pending Jobs",
    "Current Work",
    "Next Step",
    "Critical Context",
)
"""The checkpoint's eight sections, in order (spec compaction S3)."""


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """The input of one summarization.

    ``messages`` are the derived messages of the shadowed surface nodes, in surface order;
    ``system`` and ``tools`` come from the latest canonical request header (so a model call
    can reuse the provider's prompt cache); ``provider``/``model`` are the conversation's
    target from that header (S1), ``max_tokens`` the configured cap.
    """

    session_id: str
    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[Any, ...] | None = None
    provider: str | None = None
    model: str | None = None
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """A summary: text blocks (``{"type": "text", "text": ...}``) and how it was made.

    Recorded in ``compaction/summary`` (``provider``, ``model``, ``maxTokens``, ``usage``,
    ``rawOutput``, ``llmStreamCall``).
    """

    summary: tuple[Any, ...]
    provider: str
    model: str
    max_tokens: int | None = None
    usage: Any = None
    raw_output: tuple[Any, ...] | None = None
    llm_stream_call: bool = False


class Summarizer(Protocol):
    """Anything that turns a ``SummaryRequest`` into a ``SummaryResult``.

    Cancellation is asyncio's: cancelling the awaiting task cancels the summary.
    """

    async def summarize(self, request: SummaryRequest) -> SummaryResult: ...


class SyncSummarizer(Protocol):
    """A summarizer with a plain ``def summarize``: the Compactor runs it in a worker thread."""

    def summarize(self, request: SummaryRequest) -> SummaryResult: ...


def check_summarizer(summarizer: object) -> None:
    """Refuse, with a TypeError naming the type, an object without a callable ``summarize``."""
    method = getattr(summarizer, "summarize", None)
    if not callable(method):
        raise TypeError(f"a summarizer needs a summarize(request) method (async def, or def returning a "
                        f"SummaryResult); {type(summarizer).__name__} has none")


async def run_summarizer(summarizer: Summarizer | SyncSummarizer, request: SummaryRequest) -> object:
    """Call ``summarize``: awaited when it is ``async def``; a plain ``def`` runs in a worker thread
    (so a slow one does not stall the event loop), and an awaitable it returns is awaited."""
    method = summarizer.summarize
    if inspect.iscoroutinefunction(method):
        return await method(request)
    result: object = await asyncio.to_thread(method, request)
    if inspect.isawaitable(result):
        return await result
    return result
