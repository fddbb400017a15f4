"""The compaction entry points and the pressure/overflow policy (spec compaction §2 T1-T4, §3, §4).

The transaction itself (T5-T18) is ``agentlog.compaction.transaction``.

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
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from agentlog.compaction.config import CompactionConfig
from agentlog.compaction.events import error_text, is_checkpoint_event
from agentlog.compaction.lock import LockState, LockTracker
from agentlog.compaction.pairing import PairingIndexes
from agentlog.compaction.pruner import ToolResultPruner
from agentlog.compaction.region import Region, select_compactable_range, validate_region
from agentlog.compaction.result import CompactionResult, CompactionSkipped
from agentlog.compaction.summary import (
    Summarizer,
    SummaryRequest,
    SyncSummarizer,
    check_summarizer,
)
from agentlog.compaction.tokens import Measurement, TokenMeter, session_log
from agentlog.compaction.transaction import Flush, Plan, Prepared, Transaction, cancelling, span_messages
from agentlog.core.session import Session
from agentlog.errors import (
    CompactionError,
    SurfaceError,
    TargetPressureConfigError,
    UsageError,
)

if TYPE_CHECKING:
    from agentlog.store.writer import LiveSession

__all__ = ["CONTEXT_OVERFLOW_CODE", "Compactor", "ContextWindow", "Trigger"]

logger = logging.getLogger("agentlog.compaction")

Trigger = Literal["pressure", "context-overflow"]
ContextWindow = int | Callable[[str, str], int | Awaitable[int | None] | None] | None
"""Capacity of a target: a fixed window, or ``(provider, model) -> window`` (sync or async)."""

CONTEXT_OVERFLOW_CODE: Final = "CONTEXT_WINDOW_EXCEEDED"
"""The LlmFailure code that starts overflow recovery."""

T = TypeVar("T")


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

    def manual_plan(self, session: Session) -> Region | CompactionSkipped | None:
        """What ``compact_now`` would do: the span to replace, why it declines, or None (nothing to compact).

        It declines when the span holds a previous checkpoint and nothing else new, or less than
        ``config.min_new_tokens`` of it: the summary of a summary loses detail for no gain.
        """
        measurement = self.meter.measure(session)
        region = self.select_range(session, 0, measurement)
        if region is None:
            return None
        last = self._pairing.of(session).position(region.end)
        log, nodes, prices = session_log(session), session.surface.nodes, measurement.nodes.prices
        minimum = self.config.min_new_tokens
        need, new, found = max(1, minimum), 0, []
        for position in range(last, -1, -1):  # newest first: enough new material ends the walk early
            seq = nodes[position]
            if is_checkpoint_event(log[seq]):
                found.append(seq)
                continue
            new += prices[position]
            if new >= need:
                return region
        if not found:
            return region
        checkpoints = tuple(reversed(found))
        which = ", ".join(str(seq) for seq in checkpoints)
        noun, at = ("checkpoint", "seq") if len(checkpoints) == 1 else ("checkpoints", "seqs")
        if new == 0:
            why = (f"the span seq {region.start}..{region.end} is only the previous {noun} ({at} {which}), "
                   "with nothing new since; re-summarizing it would lose detail for no gain")
        else:
            why = (f"the span seq {region.start}..{region.end} is the previous {noun} ({at} {which}) plus "
                   f"{new} tokens of new material, below min_new_tokens {minimum}")
        return CompactionSkipped(session.id, why, region, checkpoints, new)

    # -- entry points ----------------------------------------------------------------------------

    async def acompact_now(self, target: Session | LiveSession, *,
                           command_id: str | None = None) -> CompactionResult | CompactionSkipped | None:
        """Manual compaction of an idle session: everything but the newest unit (M1-M5).

        Writes a standalone ``turn: null`` bracket and, for a ``LiveSession``, flushes it. Returns
        None (writing nothing) when there is nothing to compact, and ``CompactionSkipped`` (writing
        nothing) when the span is a previous checkpoint with too little new (``manual_plan``).
        Raises ``CompactionError`` with ``code`` busy, cancelled, changed, summary, commit or
        persistence; cancelling the awaiting task re-raises ``CancelledError`` once the bracket is
        closed and flushed.
        """
        session, flush = _resolve(target)
        if command_id is not None and (type(command_id) is not str or not command_id):
            raise UsageError(f"command_id must be a non-empty string, got {command_id!r}",
                             session_id=session.id)
        if cancelling():
            raise asyncio.CancelledError()
        state = self.lock_state(session)
        self._check_unlocked(session, state)
        if state.turn_open:
            raise self._open_turn_busy(session, state)
        plan = self.manual_plan(session)
        if not isinstance(plan, Region):
            return plan
        return await self._transact(Plan(session, plan.start, plan.end, True, flush, command_id))

    async def acompact_region(self, target: Session | LiveSession, start: int, end: int) -> CompactionResult:
        """Compact the positional span ``start..end`` inside the open turn (M6); raw errors."""
        session, _ = _resolve(target)
        return await self._transact(Plan(session, start, end, False))

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
                    command_id: str | None = None) -> CompactionResult | CompactionSkipped | None:
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
        from agentlog.core.failure import llm_failure

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
            if session.surface.replace_generation != generation and not cancelling():
                logger.warning('session "%s": overflow compaction failed (%s); retrying from the replacement '
                               "surface", session.id, error_text(exc))
                return True
            logger.warning('session "%s": overflow compaction failed (%s); keeping the original error',
                           session.id, error_text(exc))
            return False
        return session.surface.replace_generation != generation and not cancelling()

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

    def _owner(self, plan: Plan, state: LockState) -> int | None:
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

    async def _transact(self, plan: Plan) -> CompactionResult:
        """T1-T18."""
        session = plan.session
        if plan.standalone and cancelling():
            raise asyncio.CancelledError()
        validate_region(self._pairing.of(session), plan.start, plan.end)
        state = self.lock_state(session)
        self._check_unlocked(session, state)
        owner = self._owner(plan, state)
        run = Transaction(self, plan, owner, str(uuid.uuid4()))
        return await run.execute()

    def _prepare(self, plan: Plan) -> Prepared:
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
            session_id=session.id, messages=span_messages(session, first, last, span),
            system=header.get("system") if header is not None else None,
            tools=header.get("tools") if header is not None else None,
            provider=provider, model=model, max_tokens=policy.max_tokens,
        )
        return Prepared(measurement, first, last, span, prices, sum(prices), request, policy)

    def _check_stable(self, plan: Plan, prepared: Prepared) -> None:
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
