"""OpenAI Agents SDK session on an agentlog store: a drop-in replacement for ``SQLiteSession``.

``AgentlogSession(session_id, store)`` implements the SDK's ``Session`` protocol. Items are
logged as agentlog turns and steps (``agentlog.integrations.responses_events``) and read back from
the surface exactly as they were added (``agentlog.integrations.responses_items``). ``pop_item``
and ``clear_session`` are surface replacements: the items leave what the model sees, while
the log, and so ``agentlog show`` and the human transcript, keeps everything.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from agentlog.core.events import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Replace,
)
from agentlog.core.jsonvalue import freeze
from agentlog.core.messages import derive_event_message
from agentlog.core.session import Session
from agentlog.errors import MissingExtraError, SessionNotFoundError, UsageError
from agentlog.integrations.responses_events import (
    append_events,
    next_turn,
    responses_events,
    unanswered_calls,
)
from agentlog.integrations.responses_items import REPLAY_KEY, items_of_message, split_items
from agentlog.store.base import Store
from agentlog.store.urls import open_store
from agentlog.store.writer import LiveSession

try:
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "agentlog.integrations.openai_agents needs the OpenAI Agents SDK: pip install 'agentlog[agents]'"
    ) from exc

__all__ = ["EDIT_MODEL", "EDIT_PROVIDER", "AgentlogSession"]

EDIT_PROVIDER: Final = "agentlog"
EDIT_MODEL: Final = "openai-agents-session"
"""The source of the assistant messages ``pop_item``/``clear_session`` log to replace surface items."""
T = TypeVar("T")


class AgentlogSession:
    """The Agents SDK ``Session`` protocol on any agentlog store (JSONL, SQLite, PostgreSQL, memory).

    ``store`` is a ``Store``, a store URL (``"sqlite:///agent.db"``) or a ``LiveSession``. Given
    a store or URL, this object opens the session (creating it if new), holds its writer lock
    until ``close()`` and, for a URL, owns the store too; given a ``LiveSession`` the caller owns
    lock and closing. With ``durable=True`` (the default) every ``add_items``, ``pop_item`` and
    ``clear_session`` returns once its events are on disk; ``durable=False`` leaves them to the
    store's write-behind (a crash may lose the last ones). Operations run one at a time in a
    worker thread, so concurrent coroutines (or ``Runner.run_sync``) never interleave.
    """

    def __init__(self, session_id: str, store: Store | LiveSession | str, *, durable: bool = True,
                 provider: str = "openai", model: str = "unknown",
                 session_settings: SessionSettings | None = None) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.durable = durable
        self._provider, self._model = provider, model
        self._lock = threading.Lock()
        self._closed = False
        self._owned_store: Store | None = None
        if isinstance(store, LiveSession):
            if store.id != session_id:
                raise UsageError(f"session_id {session_id!r} does not match the live session {store.id!r}",
                                 session_id=session_id)
            self._live, self._owns_live = store, False
            return
        if isinstance(store, str):
            store = self._owned_store = open_store(store)
        try:
            try:
                live = store.open(session_id)
            except SessionNotFoundError:
                live = store.start(session_id)
        except BaseException:
            if self._owned_store is not None:
                self._owned_store.close()
            raise
        self._live, self._owns_live = live, True

    @property
    def live(self) -> LiveSession:
        """The live agentlog session the items are logged in."""
        return self._live

    def close(self) -> None:
        """Flush and release what this object opened (the live session, the store of a URL); idempotent.

        Every later operation is refused (``UsageError``) rather than accepted and never written.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._owns_live:
                    self._live.close()
            finally:
                if self._owned_store is not None:
                    self._owned_store.close()

    async def _run(self, work: Callable[[Session], T], *, write: bool = True) -> T:
        """``work`` on the session in a worker thread, one operation at a time; writes flushed."""
        def locked() -> T:
            with self._lock:
                if self._closed:
                    raise UsageError(f"AgentlogSession {self.session_id!r} is closed",
                                     session_id=self.session_id)
                result = work(self._live.session)
                if write and self.durable:
                    self._live.flush()
                return result

        return await asyncio.to_thread(locked)

    # -- the Session protocol ----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history as the items added (latest ``limit`` of them, oldest first)."""
        resolved = resolve_session_limit(limit, self.session_settings)

        items = await self._run(lambda session: [item for message in session.derive_messages()
                                                 for item in items_of_message(message)], write=False)
        if resolved is None or resolved < 0:
            return items
        return items[-resolved:] if resolved else []

    async def add_items(self, items: list[Any]) -> None:
        """Log ``items`` as closed turns; a refused batch (not JSON objects) leaves the log unchanged."""
        if not items:
            return
        checked = freeze(list(items), root="items", what="Responses items must be plain JSON")
        await self._run(lambda session: self._append_items(session, checked))

    async def pop_item(self) -> Any | None:
        """Remove the latest item from the surface and return it (None when there is none)."""
        return await self._run(self._pop)

    async def clear_session(self) -> None:
        """Remove every item from the surface; the log keeps them."""
        await self._run(self._clear)

    # -- logging -----------------------------------------------------------------------------

    def _append_items(self, session: Session, items: Any) -> None:
        events = responses_events(items, seq=session.seq, turn=next_turn(session), provider=self._provider,
                                  model=self._model, open_calls=unanswered_calls(session.derive_messages()))
        append_events(session, events)

    def _pop(self, session: Session) -> Any | None:
        events = session.events
        for seq in reversed(list(session.surface.nodes)):
            event = events[seq]
            message = derive_event_message(event)
            items = items_of_message(message) if message is not None else []
            if not items:
                continue
            rest = items[:-1]
            replacement = (USER_MESSAGE, _user(rest)) if rest and event.type != ASSISTANT_MESSAGE else (
                ASSISTANT_MESSAGE, _assistant(rest, message))
            append_events(session, _edit(session, replacement, Replace(seq, seq), [seq]))
            return items[-1]
        return None

    def _clear(self, session: Session) -> None:
        nodes = list(session.surface.nodes)
        if nodes and any(items_of_message(m) for m in session.derive_messages()):
            append_events(session, _edit(session, (ASSISTANT_MESSAGE, _assistant([], None)),
                                         Replace(nodes[0], nodes[-1]), nodes))


def _user(items: list[Any]) -> dict[str, Any]:
    blocks, shells = split_items(items)
    return {"id": str(uuid.uuid4()), "role": "user", "content": blocks,
            "source": {"kind": "user", "replayState": {REPLAY_KEY: shells}}}


def _assistant(items: list[Any], original: Mapping[str, Any] | None) -> dict[str, Any]:
    """An assistant message holding ``items`` (an empty one removes what it replaces from the surface)."""
    blocks, shells = split_items(items)
    source: dict[str, Any] = {"kind": "model", "provider": EDIT_PROVIDER, "model": EDIT_MODEL}
    if original is not None and items:
        source = {"kind": "model", "provider": original["source"]["provider"],
                  "model": original["source"]["model"]}
    if items:
        source["replayState"] = {REPLAY_KEY: shells}
    return {"id": str(uuid.uuid4()), "role": "assistant", "content": blocks, "source": source}


def _edit(session: Session, replacement: tuple[str, dict[str, Any]], op: Replace,
          shadowed: list[int]) -> list[dict[str, Any]]:
    """A turn of one step whose only message replaces surface nodes ``shadowed``."""
    turn = next_turn(session)
    kind, message = replacement
    data = message if kind == USER_MESSAGE else {"turn": turn, "step": 1, "message": message}
    plan = [(TURN_START, {"turn": turn}, None, None), (STEP_START, {"turn": turn, "step": 1}, None, None),
            (kind, data, op, shadowed), (STEP_END, {"turn": turn, "step": 1}, None, None),
            (TURN_END, {"turn": turn, "reason": {"kind": "completed"}}, None, None)]
    return [{"type": k, "data": d, "surfaceOp": o, "sourceEventSeqs": s} for k, d, o, s in plan]
