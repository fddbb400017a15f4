"""One compaction transaction from its start append to its outcome (spec compaction §2 T5-T18).

Its plan and prepared span, the summary checks of E3, the bracket closed exactly once on failure,
the flush awaited through a cancellation and the outcome's classification; the entry points and
the pressure/overflow policy that start a transaction live in ``engine``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agentlog.compaction.config import Policy
from agentlog.compaction.events import (
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    checkpoint_message,
    end_data,
    error_text,
    start_data,
    summary_data,
)
from agentlog.compaction.region import Region
from agentlog.compaction.result import CompactionResult
from agentlog.compaction.summary import (
    Summarizer,
    SummaryRequest,
    SummaryResult,
    SyncSummarizer,
    run_summarizer,
)
from agentlog.compaction.tokens import Measurement, TokenMeter, session_log
from agentlog.core.events import USER_MESSAGE, Replace
from agentlog.core.jsonvalue import FrozenDict, freeze
from agentlog.core.messages import derive_event_message
from agentlog.core.session import Session
from agentlog.errors import AgentlogError, CompactionError

__all__ = ["Flush", "Owner", "Plan", "Prepared", "Transaction", "cancelling", "span_messages"]

Stage = Literal["summary", "commit"]
Flush = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Plan:
    """One transaction's parameters: span, owner mode, stability mode, flush, command id."""

    session: Session
    start: int
    end: int
    standalone: bool  # owner null + selected-span stability; else current turn + whole surface
    flush: Flush | None = None
    command_id: str | None = None


@dataclass(frozen=True, slots=True)
class Prepared:
    """T6: the measured span and the summarizer's input."""

    measurement: Measurement
    first: int
    last: int
    span: tuple[int, ...]
    prices: tuple[int, ...]
    tokens: int
    request: SummaryRequest
    policy: Policy


def cancelling() -> bool:
    """Has someone asked the running task to cancel (the caller's abort signal)?"""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0



@dataclass(frozen=True, slots=True)
class _Summary:
    """A summarizer's result, checked and frozen for the log."""

    blocks: tuple[Any, ...]
    provider: str
    model: str
    max_tokens: int | None
    usage: Any
    raw_output: tuple[Any, ...] | None
    llm_stream_call: bool


def _checked_summary(result: object, session_id: str) -> _Summary:
    """E3's rules on a summary: text blocks with content, provider/model, rawOutput with the stream flag."""
    try:
        return _check_summary(result)
    except AgentlogError as exc:
        raise exc.locate(session_id=session_id) from None


def _check_summary(result: object) -> _Summary:
    if not isinstance(result, SummaryResult):
        raise CompactionError(f"summarizer returned {type(result).__name__}, not a SummaryResult",
                              code="summary")
    blocks = freeze(list(result.summary), root="summary", what="non-JSON summary")
    for index, block in enumerate(blocks):
        if not isinstance(block, dict) or block.get("type") != "text" or type(block.get("text")) is not str:
            raise CompactionError(f"summary block {index} is not a text block", code="summary")
    if not any(block["text"].strip() for block in blocks):
        raise CompactionError("no text summary content", code="summary")
    for name in ("provider", "model"):
        value = getattr(result, name)
        if type(value) is not str or not value:
            raise CompactionError(f"summary {name} must be a non-empty string, got {value!r}", code="summary")
    if result.max_tokens is not None and (type(result.max_tokens) is not int or result.max_tokens < 1):
        raise CompactionError(f"summary max_tokens must be a positive integer, got {result.max_tokens!r}",
                              code="summary")
    raw = None if result.raw_output is None else freeze(list(result.raw_output), root="rawOutput")
    if result.llm_stream_call and raw is None:
        raise CompactionError("llm_stream_call requires raw_output", code="summary")
    usage = None if result.usage is None else freeze(result.usage, root="usage")
    return _Summary(blocks, result.provider, result.model, result.max_tokens, usage, raw,
                    bool(result.llm_stream_call))


class Owner(Protocol):
    """What a transaction uses of its ``Compactor``: the summarizer, the meter, T6 and T10."""

    @property
    def summarizer(self) -> Summarizer | SyncSummarizer: ...
    @property
    def meter(self) -> TokenMeter: ...
    def _prepare(self, plan: Plan) -> Prepared: ...
    def _check_stable(self, plan: Plan, prepared: Prepared) -> None: ...


class Transaction:
    """The mutable state of one transaction from its start append to its return (T5-T18)."""

    def __init__(self, compactor: Owner, plan: Plan, owner: int | None, compaction_id: str) -> None:
        self.compactor = compactor
        self.plan = plan
        self.session = plan.session
        self.owner = owner
        self.id = compaction_id
        self.stage: Stage = "summary"
        self.failure: BaseException | None = None
        self.closed = False

    async def execute(self) -> CompactionResult:
        session, plan = self.session, self.plan
        start = session.append(COMPACTION_START, start_data(self.id, plan.command_id, self.owner))  # T5
        result: CompactionResult | None = None
        end_attempted = False
        try:
            prepared = self.compactor._prepare(plan)  # T6
            answer = await run_summarizer(self.compactor.summarizer, prepared.request)  # T7
            summary = _checked_summary(answer, session.id)
            checkpoint = checkpoint_message(summary.blocks, self.id, plan.command_id)
            price = self.compactor.meter.estimate_message(checkpoint)  # T8
            if price >= prepared.tokens:
                raise CompactionError(
                    f"summary is not smaller than the shadowed content ({price} tokens >= {prepared.tokens} "
                    "tokens)", session_id=session.id, code="summary")
            if plan.standalone and cancelling():  # T9
                raise asyncio.CancelledError()
            self.compactor._check_stable(plan, prepared)  # T10
            self.stage = "commit"  # T11
            summary_event = session.append(COMPACTION_SUMMARY, self._summary_data(summary, prepared))
            placed = session.append(USER_MESSAGE, checkpoint, surface_op=Replace(plan.start, plan.end),
                                    source_event_seqs=(start.seq, summary_event.seq, *prepared.span))
            end_attempted = True
            end = session.append(COMPACTION_END, end_data(self.id, plan.command_id, self.owner))  # T12
            self.closed = True
            result = CompactionResult(self.id, plan.command_id, start.seq, summary_event.seq, placed.seq,
                                      end.seq, summary.blocks, Region(plan.start, plan.end), prepared.span,
                                      prepared.tokens)
        except BaseException as exc:  # T13: every failure closes the bracket exactly once
            self.failure = exc
            if end_attempted:
                self.stage = "commit"
            else:
                self._close_with_error(exc)
        flush_failure, interrupted = await self._flush()  # T14
        return self._outcome(result, flush_failure, interrupted)

    def _summary_data(self, summary: _Summary, prepared: Prepared) -> FrozenDict:
        return summary_data(
            self.id, self.plan.command_id, summary=summary.blocks, shadowed_seqs=prepared.span,
            shadowed_tokens=prepared.tokens, provider=summary.provider, model=summary.model,
            raw_output=summary.raw_output, llm_stream_call=summary.llm_stream_call,
            max_tokens=summary.max_tokens, usage=summary.usage,
        )

    def _close_with_error(self, failure: BaseException) -> None:
        try:
            self.session.append(COMPACTION_END, end_data(self.id, self.plan.command_id, self.owner,
                                                         error_text(failure)))
            self.closed = True
        except BaseException as exc:  # the start stays orphaned: the lock stays visibly held
            self.failure = exc
            self.stage = "commit"

    async def _flush(self) -> tuple[BaseException | None, asyncio.CancelledError | None]:
        """T14: await the flush of a closed bracket to the end, even through a cancellation."""
        flush = self.plan.flush
        if flush is None or not self.closed:
            return None, None
        future = asyncio.ensure_future(flush())
        interrupted: asyncio.CancelledError | None = None
        while not future.done():
            try:
                await asyncio.wait({future})
            except asyncio.CancelledError as exc:
                interrupted = exc
        if future.cancelled():
            return asyncio.CancelledError(), interrupted
        return future.exception(), interrupted

    def _outcome(self, result: CompactionResult | None, flush_failure: BaseException | None,
                 interrupted: asyncio.CancelledError | None) -> CompactionResult:
        """T15-T18: abort > failure class > persistence."""
        failure, session = self.failure, self.session
        if self.plan.standalone and (cancelling() or interrupted is not None):  # T15
            if isinstance(failure, asyncio.CancelledError):
                raise failure
            raise interrupted or asyncio.CancelledError()
        if failure is not None:  # T16
            classified = failure if not self.plan.standalone else self._classified(failure)
            if classified is failure:
                raise failure
            raise classified from failure
        if flush_failure is not None:  # T17
            raise CompactionError(f"compaction committed but the flush failed: {error_text(flush_failure)}",
                                  session_id=session.id, code="persistence") from flush_failure
        if interrupted is not None:
            raise interrupted
        assert result is not None
        return result

    def _classified(self, failure: BaseException) -> BaseException:
        """The standalone classification of a failure (busy/cancelled/changed/summary/commit)."""
        session = self.session
        if isinstance(failure, asyncio.CancelledError):
            return CompactionError(f"compaction cancelled: {error_text(failure)}", session_id=session.id,
                                   code="cancelled")
        if self.stage == "commit":
            code = "commit"
        elif isinstance(failure, CompactionError) and failure.code == "changed":
            code = "changed"
        else:
            code = "summary"
        if isinstance(failure, CompactionError) and failure.code == code:
            return failure
        detail = failure.detail if isinstance(failure, AgentlogError) else error_text(failure)
        return CompactionError(f"compaction failed ({code}): {detail}", session_id=session.id, code=code)


def span_messages(session: Session, first: int, last: int, span: tuple[int, ...]) -> tuple[Any, ...]:
    """The derived messages of the span's nodes, in surface order (nodes deriving none skipped).

    When every surface node derives a message, the session's derived history lines up with the
    surface and the span is a slice of it (O(1) to find when the loop keeps it current).
    """
    derived = session.derive_messages()
    if len(derived) == len(session.surface.nodes):
        return tuple(derived[first : last + 1])
    log = session_log(session)
    return tuple(message for seq in span if (message := derive_event_message(log[seq])) is not None)
