"""The compaction transaction and its entry points (spec compaction §2 T1-T18, §3, §4).

Every entry point runs one transaction: validate the span, check the durable lock, append
``compaction/start``, summarize, check the summary shrinks the span and the surface did not
move, then append ``compaction/summary``, the checkpoint replace and ``compaction/end``. A
failure after the start closes the bracket exactly once with ``compaction/end{error}``; if
even that append fails the start stays orphaned, visibly holding the lock.

Loop contract (what ``Recorder`` does for you when given ``compactor=``)::

    result = await compactor.abefore_step(session)      # before each step/start (pressure)
    ...
    except ProviderError as exc:                        # inside the open step
        if await compactor.arecover_overflow(session, exc, attempts=n):
            n += 1                                      # surface replaced: rebuild, retry same step
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from agentlog.compaction.config import CompactionConfig, Policy
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
from agentlog.compaction.lock import LockState, LockTracker
from agentlog.compaction.pairing import PairingIndexes
from agentlog.compaction.pruner import ToolResultPruner
from agentlog.compaction.region import Region, select_compactable_range, validate_region
from agentlog.compaction.result import CompactionResult
from agentlog.compaction.summary import (
    Summarizer,
    SummaryRequest,
    SummaryResult,
    SyncSummarizer,
    check_summarizer,
    run_summarizer,
)
from agentlog.compaction.tokens import Measurement, TokenMeter, session_log
from agentlog.errors import (
    AgentlogError,
    CompactionError,
    SurfaceError,
    TargetPressureConfigError,
    UsageError,
)
from agentlog.events import USER_MESSAGE, Replace
from agentlog.jsonvalue import FrozenDict, freeze
from agentlog.messages import derive_event_message
from agentlog.session import Session

if TYPE_CHECKING:
    from agentlog.store.writer import LiveSession

__all__ = ["CONTEXT_OVERFLOW_CODE", "Compactor", "ContextWindow", "Trigger"]

logger = logging.getLogger("agentlog.compaction")

Trigger = Literal["pressure", "context-overflow"]
ContextWindow = int | Callable[[str, str], int | Awaitable[int | None] | None] | None
"""Capacity of a target: a fixed window, or ``(provider, model) -> window`` (sync or async)."""

CONTEXT_OVERFLOW_CODE: Final = "CONTEXT_WINDOW_EXCEEDED"
"""The LlmFailure code that starts overflow recovery."""

Stage = Literal["summary", "commit"]
Flush = Callable[[], Awaitable[None]]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Plan:
    """One transaction's parameters: span, owner mode, stability mode, flush, command id."""

    session: Session
    start: int
    end: int
    standalone: bool  # owner null + selected-span stability; else current turn + whole surface
    flush: Flush | None = None
    command_id: str | None = None


@dataclass(frozen=True, slots=True)
class _Prepared:
    """T6: the measured span and the summarizer's input."""

    measurement: Measurement
    first: int
    last: int
    span: tuple[int, ...]
    prices: tuple[int, ...]
    tokens: int
    request: SummaryRequest
    policy: Policy


def _cancelling() -> bool:
    """Has someone asked the running task to cancel (the caller's abort signal)?"""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _target(header: Any) -> tuple[str, str] | None:
    """The routed conversation target of a request header, when both parts are non-empty."""
    config = header.get("config") if isinstance(header, dict) else None
    provider = config.get("provider") if isinstance(config, dict) else None
    model = config.get("model") if isinstance(config, dict) else None
    if type(provider) is str and provider and type(model) is str and model:
        return provider, model
    return None


class Compactor:
    """Shortens a session's surface with summaries, keeping every event (the compaction engine).

    ``summarizer`` answers ``SummaryRequest``s (``async def summarize``, or a plain ``def`` run in
    a worker thread); ``meter`` prices the surface (DSH's heuristic by
    default); ``pruner`` (optional) trims oversized tool results before the automatic paths
    summarize; ``context_window`` gives a target's capacity (else the latest ``request/context``).
    """

    def __init__(self, summarizer: Summarizer | SyncSummarizer, *, meter: TokenMeter | None = None,
                 config: CompactionConfig | None = None, pruner: ToolResultPruner | None = None,
                 context_window: ContextWindow = None) -> None:
        check_summarizer(summarizer)
        self.summarizer = summarizer
        self.meter = meter if meter is not None else TokenMeter()
        self.config = config if config is not None else CompactionConfig()
        self.pruner = pruner
        self.context_window = context_window
        self._locks: weakref.WeakKeyDictionary[Session, LockTracker] = weakref.WeakKeyDictionary()
        self._pairing = PairingIndexes()
        self._warned: set[str] = set()

    # -- reading ---------------------------------------------------------------------------------

    def lock_state(self, session: Session) -> LockState:
        """The durable lock of ``session`` (E8), folded incrementally."""
        tracker = self._locks.get(session)
        if tracker is None:
            tracker = self._locks[session] = LockTracker()
        return tracker.state(session_log(session))

    def select_range(self, session: Session, retain_tokens: int,
                     measurement: Measurement | None = None) -> Region | None:
        """R1-R5: the head span that leaves ``retain_tokens`` (and the newest unit), or None."""
        measured = measurement if measurement is not None else self.meter.measure(session)
        return select_compactable_range(session.surface.nodes, measured, self._pairing.of(session),
                                        retain_tokens)

    # -- entry points ----------------------------------------------------------------------------

    async def acompact_now(self, target: Session | LiveSession, *,
                           command_id: str | None = None) -> CompactionResult | None:
        """Manual compaction of an idle session: everything but the newest unit (M1-M5).

        Writes a standalone ``turn: null`` bracket and, for a ``LiveSession``, flushes it. Returns
        None (writing nothing) when there is nothing to compact. Raises ``CompactionError`` with
        ``code`` busy, cancelled, changed, summary, commit or persistence; cancelling the awaiting
        task re-raises ``CancelledError`` once the bracket is closed and flushed.
        """
        session, flush = _resolve(target)
        if command_id is not None and (type(command_id) is not str or not command_id):
            raise UsageError(f"command_id must be a non-empty string, got {command_id!r}",
                             session_id=session.id)
        if _cancelling():
            raise asyncio.CancelledError()
        state = self.lock_state(session)
        self._check_unlocked(session, state)
        if state.turn_open:
            raise self._open_turn_busy(session, state)
        region = self.select_range(session, 0)
        if region is None:
            return None
        return await self._transact(_Plan(session, region.start, region.end, True, flush, command_id))

    async def acompact_region(self, target: Session | LiveSession, start: int, end: int) -> CompactionResult:
        """Compact the positional span ``start..end`` inside the open turn (M6); raw errors."""
        session, _ = _resolve(target)
        return await self._transact(_Plan(session, start, end, False))

    async def acompact_if_needed(self, target: Session | LiveSession,
                                 trigger: Trigger) -> CompactionResult | None:
        """Automatic compaction inside the open turn: ``pressure`` (A3) or ``context-overflow`` (A4)."""
        session, _ = _resolve(target)
        if trigger == "pressure":
            return await self._pressure(session)
        if trigger == "context-overflow":
            return await self._overflow(session)
        raise UsageError(f"unknown compaction trigger {trigger!r}; expected 'pressure' or 'context-overflow'",
                         session_id=session.id)

    def compact_now(self, target: Session | LiveSession, *,
                    command_id: str | None = None) -> CompactionResult | None:
        """Blocking ``acompact_now`` (refused inside a running event loop)."""
        return _run_sync("compact_now", lambda: self.acompact_now(target, command_id=command_id))

    def compact_region(self, target: Session | LiveSession, start: int, end: int) -> CompactionResult:
        """Blocking ``acompact_region`` (refused inside a running event loop)."""
        return _run_sync("compact_region", lambda: self.acompact_region(target, start, end))

    def compact_if_needed(self, target: Session | LiveSession, trigger: Trigger) -> CompactionResult | None:
        """Blocking ``acompact_if_needed`` (refused inside a running event loop)."""
        return _run_sync("compact_if_needed", lambda: self.acompact_if_needed(target, trigger))

    # -- loop hooks ------------------------------------------------------------------------------

    async def abefore_step(self, target: Session | LiveSession) -> CompactionResult | None:
        """The pre-step hook (A2): pressure compaction that never fails the step.

        Call it after ``turn/start`` or the previous ``step/end`` and before ``step/start``.
        Failures are logged as warnings (a target's configuration problem once per target);
        only cancellation propagates.
        """
        session, _ = _resolve(target)
        if not self.config.auto:
            return None
        try:
            result = await self._pressure(session)
        except TargetPressureConfigError as exc:
            key = "/".join(_target(session.request_header()) or ("", ""))
            if key not in self._warned:
                self._warned.add(key)
                logger.warning('session "%s": compaction disabled for %s: %s', session.id, key, exc.detail)
            return None
        except Exception as exc:
            logger.warning('session "%s": pre-step compaction failed: %s', session.id, error_text(exc))
            return None
        if result is not None:
            logger.info('session "%s": compacted %d nodes (seqs %d..%d, ~%d tokens)', session.id,
                        len(result.shadowed_seqs), result.shadowed_range.start, result.shadowed_range.end,
                        result.shadowed_token_count)
        return result

    async def arecover_overflow(self, target: Session | LiveSession, error: BaseException, *,
                                attempts: int = 0) -> bool:
        """Context-overflow recovery (A4) inside the failed, still-open step.

        Returns True when the surface was replaced (the replace generation advanced), so the
        loop should rebuild its request and retry within the same step; ``attempts`` is the
        number of overflow retries already granted since the last successful response.
        """
        from agentlog.recorder import llm_failure

        session, _ = _resolve(target)
        if not self.config.auto or llm_failure(error).get("code") != CONTEXT_OVERFLOW_CODE:
            return False
        routed = _target(session.request_header())
        if routed is None or attempts >= self.config.resolve(*routed).max_overflow_retries:
            return False
        generation = session.surface.replace_generation
        try:
            await self._overflow(session)
        except Exception as exc:
            if session.surface.replace_generation != generation and not _cancelling():
                logger.warning('session "%s": overflow compaction failed (%s); retrying from the replacement '
                               "surface", session.id, error_text(exc))
                return True
            logger.warning('session "%s": overflow compaction failed (%s); keeping the original error',
                           session.id, error_text(exc))
            return False
        return session.surface.replace_generation != generation and not _cancelling()

    # -- automatic paths -------------------------------------------------------------------------

    async def _pressure(self, session: Session) -> CompactionResult | None:
        routed = _target(session.request_header())
        if routed is None:
            return None
        policy = self.config.resolve(*routed)
        measurement = self.meter.measure(session)
        window = await self._capacity(session, routed)
        self._check_unlocked(session, self.lock_state(session))
        name = "/".join(routed)
        if window is None:
            raise TargetPressureConfigError(f"no context capacity for {name}", session_id=session.id)
        budget = policy.scale(window, name)
        if measurement.total_tokens < budget.threshold_tokens:
            return None
        if self.pruner is not None:
            self.pruner.prune_session(session, self.meter)
            measurement = self.meter.measure(session)
            if measurement.total_tokens < budget.threshold_tokens:
                return None
        attempts = policy.compaction_retries + 1
        for attempt in range(attempts):
            region = self.select_range(session, budget.retain_tokens, measurement)
            if region is None:
                if attempt == 0:
                    return None
                break
            result = await self.acompact_region(session, region.start, region.end)
            measurement = self.meter.measure(session)
            if measurement.total_tokens < budget.threshold_tokens:
                return result
        raise CompactionError(
            f"still above threshold after {attempts} compaction attempts "
            f"({measurement.total_tokens} tokens >= threshold {budget.threshold_tokens})",
            session_id=session.id)

    async def _overflow(self, session: Session) -> CompactionResult | None:
        if _target(session.request_header()) is None:
            return None
        measurement = self.meter.measure(session)
        if self.pruner is not None:
            self.pruner.prune_session(session, self.meter)
            measurement = self.meter.measure(session)
        region = self.select_range(session, 0, measurement)
        if region is None:
            return None
        return await self.acompact_region(session, region.start, region.end)

    async def _capacity(self, session: Session, routed: tuple[str, str]) -> Any:
        """The target's context window: the configured one, else the latest matching ``request/context``."""
        source = self.context_window
        window: Any = None
        if callable(source):
            window = source(*routed)
            if inspect.isawaitable(window):
                window = await window
        elif source is not None:
            window = source
        if window is None:
            context = session.request_context()
            if isinstance(context, dict) and (context.get("provider"), context.get("model")) == routed:
                window = context.get("contextWindow")
        return window

    # -- the transaction -------------------------------------------------------------------------

    def _check_unlocked(self, session: Session, state: LockState) -> None:
        """T3: a live bracket makes every entry point busy."""
        if state.live:
            bracket = state.bracket
            assert bracket is not None
            raise CompactionError(
                f"compaction lock is already active: compaction {bracket.data.get('compactionId')!r} "
                f"started at seq {bracket.seq} is already in progress", session_id=session.id, code="busy")

    def _open_turn_busy(self, session: Session, state: LockState) -> CompactionError:
        turn = "" if state.open_turn is None else f" (turn {state.open_turn})"
        return CompactionError(f"the session already has an open turn{turn}; manual compaction runs between "
                               "turns", session_id=session.id, code="busy")

    def _owner(self, plan: _Plan, state: LockState) -> int | None:
        """T4: ``None`` for a standalone bracket, else the open turn's number."""
        session = plan.session
        if plan.standalone:
            if state.turn_open:
                raise self._open_turn_busy(session, state)
            return None
        if not state.turn_open:
            raise UsageError("no open turn: automatic and region compaction run inside an open turn",
                             session_id=session.id)
        if state.open_turn is None:
            raise UsageError("the open turn has no integer number", session_id=session.id)
        return state.open_turn

    async def _transact(self, plan: _Plan) -> CompactionResult:
        """T1-T18."""
        session = plan.session
        if plan.standalone and _cancelling():
            raise asyncio.CancelledError()
        validate_region(self._pairing.of(session), plan.start, plan.end)
        state = self.lock_state(session)
        self._check_unlocked(session, state)
        owner = self._owner(plan, state)
        run = _Run(self, plan, owner, str(uuid.uuid4()))
        return await run.execute()

    def _prepare(self, plan: _Plan) -> _Prepared:
        """T6: measure, slice the span, price it, build the summarizer input."""
        session = plan.session
        measurement = self.meter.measure(session)
        pairing = self._pairing.of(session)
        first, last = pairing.position(plan.start), pairing.position(plan.end)
        nodes = session.surface.nodes
        span = tuple(nodes[first : last + 1])
        if tuple(measurement.nodes.seqs.slice(first, last + 1)) != span:
            raise CompactionError("session surface changed: the token-meter surface does not match the span",
                                  session_id=session.id, code="changed")
        prices = tuple(measurement.nodes.prices.slice(first, last + 1))
        header = session.request_header()
        routed = _target(header)
        policy = self.config.resolve(*routed) if routed is not None else self.config.resolve(None, None)
        provider, model = routed if routed is not None else (None, None)
        if policy.summarization_provider:
            provider, model = policy.summarization_provider, policy.summarization_model
        request = SummaryRequest(
            session_id=session.id, messages=_span_messages(session, first, last, span),
            system=header.get("system") if header is not None else None,
            tools=header.get("tools") if header is not None else None,
            provider=provider, model=model, max_tokens=policy.max_tokens,
        )
        return _Prepared(measurement, first, last, span, prices, sum(prices), request, policy)

    def _check_stable(self, plan: _Plan, prepared: _Prepared) -> None:
        """T10: whole-surface vector equality, or the selected span's seqs and prices."""
        session = plan.session
        measurement = self.meter.measure(session)
        if not plan.standalone:
            if measurement.nodes != prepared.measurement.nodes:
                raise CompactionError("session surface changed during summarization", session_id=session.id,
                                      code="changed")
            return
        try:
            first, last = validate_region(self._pairing.of(session), plan.start, plan.end)
        except SurfaceError as exc:
            raise CompactionError(f"selected surface changed during summarization: {exc.detail}",
                                  session_id=session.id, code="changed") from exc
        if tuple(session.surface.nodes[first : last + 1]) != prepared.span:
            raise CompactionError("selected surface changed during summarization: the span changed",
                                  session_id=session.id, code="changed")
        if tuple(measurement.nodes.prices.slice(first, last + 1)) != prepared.prices:
            raise CompactionError("selected surface changed during summarization: span prices changed",
                                  session_id=session.id, code="changed")


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


class _Run:
    """The mutable state of one transaction from its start append to its return (T5-T18)."""

    def __init__(self, compactor: Compactor, plan: _Plan, owner: int | None, compaction_id: str) -> None:
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
            if plan.standalone and _cancelling():  # T9
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

    def _summary_data(self, summary: _Summary, prepared: _Prepared) -> FrozenDict:
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
        if self.plan.standalone and (_cancelling() or interrupted is not None):  # T15
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


def _span_messages(session: Session, first: int, last: int, span: tuple[int, ...]) -> tuple[Any, ...]:
    """The derived messages of the span's nodes, in surface order (nodes deriving none skipped).

    When every surface node derives a message, the session's derived history lines up with the
    surface and the span is a slice of it (O(1) to find when the loop keeps it current).
    """
    derived = session.derive_messages()
    if len(derived) == len(session.surface.nodes):
        return tuple(derived[first : last + 1])
    log = session_log(session)
    return tuple(message for seq in span if (message := derive_event_message(log[seq])) is not None)


def _resolve(target: Any) -> tuple[Session, Flush | None]:
    """A Session (no flush) or a LiveSession (its ``aflush``)."""
    if isinstance(target, Session):
        return target, None
    session, aflush = getattr(target, "session", None), getattr(target, "aflush", None)
    if isinstance(session, Session) and callable(aflush):
        return session, aflush
    raise UsageError(f"expected a Session or a LiveSession, got {type(target).__name__}")


def _run_sync(name: str, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run an async entry point to completion; refused where an event loop already runs."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    raise UsageError(f"Compactor.{name}() blocks and cannot run inside a running event loop; "
                     f"use `await compactor.a{name}(...)` instead")
