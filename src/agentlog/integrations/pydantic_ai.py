"""Pydantic AI message history on an agentlog store: record runs, restore ``message_history``.

``AgentlogHistory(session_id, store)`` runs an agent on the session's history and records what the
run added as one agentlog turn (``agentlog.integrations.pydantic_ai_turns``): ``run``/``run_sync``
log each model reply, with its tool calls, before the tools run; ``run_stream``/``run_stream_sync``
log the run when its stream is done. ``messages()`` is the ``message_history`` the surface shows
(``agentlog.integrations.pydantic_ai_messages``), so fork, compaction and pops act on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

try:
    from pydantic_ai.agent import AbstractAgent
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.result import StreamedRunResult, StreamedRunResultSync
    from pydantic_ai.run import AgentRun, AgentRunResult
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from agentlog.errors import MissingExtraError

    raise MissingExtraError(
        "agentlog.integrations.pydantic_ai needs Pydantic AI: pip install 'agentlog[pydantic-ai]'"
    ) from exc

from agentlog.core.aio import run as run_coroutine
from agentlog.core.aio import running_loop
from agentlog.errors import UsageError
from agentlog.integrations.held_session import hold_session
from agentlog.integrations.pydantic_ai_messages import history_of
from agentlog.integrations.pydantic_ai_turns import TurnWriter, dump_messages
from agentlog.recording.recorder import Recorder
from agentlog.store.base import Store
from agentlog.store.writer import LiveSession

__all__ = ["AgentlogHistory", "history_of"]


class AgentlogHistory:
    """A Pydantic AI conversation kept in an agentlog session (JSONL, SQLite, PostgreSQL, memory).

    ``store`` is a ``Store``, a store URL or a ``LiveSession`` (e.g. from ``store.fork``). Given a
    store or URL, this object opens the session (creating it if new) and holds its writer lock until
    ``close()``; a session another process writes is refused (``SessionLockedError``). With
    ``durable=True`` each recorded turn is on disk when the call returns.
    """

    def __init__(self, session_id: str, store: Store | LiveSession | str, *, durable: bool = True) -> None:
        self.session_id = session_id
        self.durable = durable
        self._closed = False
        self._held = hold_session(session_id, store)
        self._live = self._held.live
        self._recorder = Recorder(self._live)

    @property
    def live(self) -> LiveSession:
        """The live agentlog session the messages are logged in."""
        return self._live

    def close(self) -> None:
        """Flush and release what this object opened; idempotent. Later calls are refused."""
        if self._closed:
            return
        self._closed = True
        self._held.release()

    def __enter__(self) -> AgentlogHistory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"AgentlogHistory {self.session_id!r} is closed", session_id=self.session_id)

    # -- restore and record ----------------------------------------------------------------------

    def messages(self) -> list[ModelMessage]:
        """The ``message_history`` to continue from: the surface as pydantic-ai messages, oldest first."""
        self._check_open()
        return history_of(self._live.session)

    def record(self, messages: Sequence[ModelMessage]) -> None:
        """Log ``messages`` (e.g. a run's ``new_messages()``) as one turn; a refused list logs nothing."""
        self._check_open()
        batch = list(messages)
        dumped = dump_messages(batch)
        with self._writing() as writer:
            for message, data in zip(batch, dumped, strict=True):
                writer.feed(message, data)

    @contextmanager
    def _writing(self) -> Iterator[TurnWriter]:
        """A new turn to feed; on every exit its pending parts are logged, the turn ends and, when
        durable, is flushed. On an exception the turn ends ``error`` and the open step closes as a
        failed one (a call left unanswered gets the recorder's outcome-unknown result), so a failed
        run is on disk, prompt and all, and its history is one a model accepts."""
        try:
            with self._recorder.turn() as turn:
                writer = TurnWriter(turn, self._live.session.request_header())
                try:
                    yield writer
                except BaseException:
                    writer.flush_pending()
                    raise
                writer.finish()
        finally:
            if self.durable:
                self._live.flush()

    # -- runs ------------------------------------------------------------------------------------

    async def run(self, agent: AbstractAgent[Any, Any], user_prompt: Any = None,
                  **kwargs: Any) -> AgentRunResult[Any]:
        """``agent.run`` on this history; each reply and its tool calls are logged before the tools run."""
        history = self._history(kwargs)
        with self._writing() as writer:
            done = 0
            async with agent.iter(user_prompt, message_history=history, **kwargs) as agent_run:
                try:
                    async for _node in agent_run:
                        tools = tool_definitions(agent_run)
                        writer.tools = writer.tools if tools is None else tools
                        done = self._feed(writer, agent_run.new_messages(), done)
                finally:  # a failed run keeps what it made (its prompt, a reply before the failure)
                    self._feed(writer, agent_run.new_messages(), done)
                result = agent_run.result
        if result is None:  # pragma: no cover - iter ran to its end, so the run has its result
            raise UsageError("the agent run ended without a result", session_id=self.session_id)
        return result

    def run_sync(self, agent: AbstractAgent[Any, Any], user_prompt: Any = None,
                 **kwargs: Any) -> AgentRunResult[Any]:
        """``run`` to completion on a new event loop, like every blocking agentlog call (refused inside
        a running loop: ``await history.run(...)`` there)."""
        if running_loop() is not None:
            raise UsageError("AgentlogHistory.run_sync() inside a running event loop; "
                             "use `await history.run(...)`",
                             session_id=self.session_id)
        return run_coroutine(self.run(agent, user_prompt, **kwargs))

    @asynccontextmanager
    async def run_stream(self, agent: AbstractAgent[Any, Any], user_prompt: Any = None,
                         **kwargs: Any) -> AsyncIterator[StreamedRunResult[Any, Any]]:
        """``agent.run_stream`` on this history; the run is logged when the ``async with`` block ends."""
        history = self._history(kwargs)
        with self._writing() as writer:
            async with agent.run_stream(user_prompt, message_history=history, **kwargs) as stream:
                try:
                    yield stream
                finally:
                    self._feed(writer, stream.new_messages(), 0)

    @contextmanager
    def run_stream_sync(self, agent: AbstractAgent[Any, Any], user_prompt: Any = None,
                        **kwargs: Any) -> Iterator[StreamedRunResultSync[Any, Any]]:
        """``agent.run_stream_sync`` on this history; the run is logged when the ``with`` block ends."""
        history = self._history(kwargs)
        with self._writing() as writer:
            stream = agent.run_stream_sync(user_prompt, message_history=history, **kwargs)
            try:
                yield stream
            finally:
                self._feed(writer, stream.new_messages(), 0)

    def _history(self, kwargs: dict[str, Any]) -> list[ModelMessage]:
        for name in ("message_history", "conversation"):  # pydantic-ai's two ways of giving a history
            if name in kwargs:
                raise UsageError(f"AgentlogHistory passes the session's history itself; do not give {name}",
                                 session_id=self.session_id)
        return self.messages()

    def _feed(self, writer: TurnWriter, messages: list[ModelMessage], done: int) -> int:
        """Log ``messages[done:]`` (serialized first, so a refused one leaves them all unlogged)."""
        fresh = messages[done:]
        for message, data in zip(fresh, dump_messages(fresh, done), strict=True):
            writer.feed(message, data)
        return len(messages)


def tool_definitions(agent_run: AgentRun[Any, Any]) -> list[dict[str, Any]] | None:
    """The function tools of the run's latest model request as agentlog header tools
    ``{name, description, parameters}`` (``[]``: none), or None where the run does not say yet
    (its state is read as pydantic-ai's instrumentation reads it)."""
    state = getattr(agent_run.ctx, "state", None)
    parameters = getattr(state, "last_model_request_parameters", None)
    tools = getattr(parameters, "function_tools", None)
    if tools is None:
        return None
    return [{"name": tool.name, "description": tool.description or "",
             "parameters": tool.parameters_json_schema} for tool in tools]
