"""OpenAI Agents SDK session on an agentlog store: a drop-in replacement for ``SQLiteSession``.

``AgentlogSession(session_id, store)`` implements the SDK's ``Session`` protocol. Items are
logged as agentlog turns and steps (``agentlog.integrations.responses_events``) and read back from
the surface exactly as they were added (``agentlog.integrations.responses_items``). ``pop_item``
and ``clear_session`` are surface replacements: the items leave what the model sees, while
the log, and so ``agentlog show`` and the human transcript, keeps everything. So is the
compaction the SDK's ``OpenAIResponsesCompactionSession`` and ``EncryptedSession`` run through
``_get_compaction_snapshot``, the hook they look up on the session they wrap.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
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
from agentlog.errors import MissingExtraError, UsageError
from agentlog.integrations.held_session import hold_session
from agentlog.integrations.responses_events import (
    append_events,
    next_turn,
    responses_events,
    unanswered_calls,
)
from agentlog.integrations.responses_items import REPLAY_KEY, items_of_message, split_items
from agentlog.store.base import Store
from agentlog.store.writer import LiveSession

try:
    from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "agentlog.integrations.openai_agents needs the OpenAI Agents SDK: pip install 'agentlog[agents]'"
    ) from exc

__all__ = ["EDIT_MODEL", "EDIT_PROVIDER", "AgentlogSession", "CompactionSnapshot"]

EDIT_PROVIDER: Final = "agentlog"
EDIT_MODEL: Final = "openai-agents-session"
"""The source of the assistant messages ``pop_item``/``clear_session`` log to replace surface items."""
T = TypeVar("T")
_ITEM_METHODS: Final = ("get_items", "add_items", "pop_item", "clear_session")
Row = tuple[int, int, Any]
"""A surface item: the seq of the message holding it, its index there, the item."""


@dataclass(frozen=True)
class CompactionSnapshot:
    """The latest items with a compare-and-swap replacement of their suffix (the SDK's snapshot shape).

    ``complete`` is True when ``items`` is the whole history. ``replace_suffix(start, output)``
    puts ``output`` in place of ``items[start:]`` and returns True, or returns False and changes
    nothing when that suffix is empty or no longer the session's latest items.
    """

    items: list[Any]
    complete: bool
    replace_suffix: Callable[[int, list[Any]], Awaitable[bool]]


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
                 session_settings: SessionSettings | dict[str, Any] | None = None) -> None:
        self.session_id = session_id
        self.session_settings: SessionSettings | None = (  # as SQLiteSession: TypeError on unknown keys
            SessionSettings() if session_settings is None else coerce_session_settings(session_settings))
        self.durable = durable
        self._provider, self._model = provider, model
        self._lock = threading.Lock()
        self._closed = False
        self._held = hold_session(session_id, store)
        self._live = self._held.live

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
            self._held.release()

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"AgentlogSession {self.session_id!r} is closed", session_id=self.session_id)

    async def _run(self, work: Callable[[Session], T], *, write: bool = True) -> T:
        """``work`` on the session in a worker thread, one operation at a time; writes flushed.

        A write that has started runs to its end even if the caller is cancelled: the
        cancellation reaches the caller only once the outcome is known (as with SQLiteSession).
        """
        def locked() -> T:
            with self._lock:
                self._check_open()
                result = work(self._live.session)
                if write and self.durable:
                    self._live.flush()
                return result

        if not write:
            return await asyncio.to_thread(locked)
        return await _settled(asyncio.ensure_future(asyncio.to_thread(locked)))

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
        self._check_open()  # before the empty-list shortcut: a closed session refuses that too
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

    # -- the compaction hook the SDK's wrappers look up ----------------------------------------

    async def _get_compaction_snapshot(self, limit: int, *,
                                       prune_prefix: Callable[[Any], bool] | None = None,
                                       ) -> CompactionSnapshot | None:
        """The latest ``limit`` items and an atomic replacement of their suffix (SQLiteSession's hook).

        ``replace_suffix`` checks, under the session's lock, that the suffix is still the
        latest items, then drops the leading items ``prune_prefix`` accepts (whole messages,
        up to the first it refuses), replaces the suffix with the output and flushes: one
        operation no other one interleaves with. Both are surface replacements; the log keeps
        the originals. None for a subclass that overrides an item method (it may transform
        items; an inherited snapshot would bypass that), as SQLiteSession does for subclasses.
        """
        if any(getattr(type(self), name) is not getattr(AgentlogSession, name) for name in _ITEM_METHODS):
            return None
        rows, complete = await self._run(lambda session: _tail(session, limit), write=False)

        async def replace_suffix(start: int, output: list[Any]) -> bool:
            expected = rows[start:]
            if not expected:
                return False
            checked = freeze(list(output), root="output", what="Responses items must be plain JSON")
            return await self._run(lambda session: self._replace(session, expected, checked, prune_prefix))

        return CompactionSnapshot([item for _, _, item in rows], complete, replace_suffix)

    def _replace(self, session: Session, expected: list[Row], output: Any,
                 prune_prefix: Callable[[Any], bool] | None) -> bool:
        current = _rows(session)
        if current[-len(expected):] != expected:
            return False
        responses_events(output)  # refuses bad output before anything is appended
        nodes = list(session.surface.nodes)
        first, index, _ = expected[0]
        suffix = nodes[nodes.index(first):]
        pruned = _expired_prefix(session, nodes[:nodes.index(first)], prune_prefix)
        if pruned:
            append_events(session, _edit(session, (ASSISTANT_MESSAGE, _assistant([], None)),
                                   Replace(pruned[0], pruned[-1]), pruned))
        event = session.events[first]
        message = derive_event_message(event)
        head = items_of_message(message)[:index] if message is not None else []
        replacement = _keeping(event.type, head, message)
        append_events(session, _edit(session, replacement, Replace(suffix[0], suffix[-1]), suffix))
        if output:
            self._append_items(session, output)
        return True

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
            replacement = _keeping(event.type, items[:-1], message)
            append_events(session, _edit(session, replacement, Replace(seq, seq), [seq]))
            return items[-1]
        return None

    def _clear(self, session: Session) -> None:
        nodes = list(session.surface.nodes)
        if nodes and any(items_of_message(m) for m in session.derive_messages()):
            append_events(session, _edit(session, (ASSISTANT_MESSAGE, _assistant([], None)),
                                   Replace(nodes[0], nodes[-1]), nodes))


async def _settled(task: asyncio.Future[T]) -> T:
    """``task``'s result once it is done, however often the caller is cancelled meanwhile; a
    cancellation is raised after that, so a caller never sees one while the outcome is unknown."""
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        task.exception()  # retrieved: the cancellation is what the caller gets
        raise cancelled
    return task.result()


def _rows(session: Session) -> list[Row]:
    """Every surface item, oldest first, with where it sits (what ``get_items`` returns, located)."""
    events = session.events
    rows: list[Row] = []
    for seq in session.surface.nodes:
        message = derive_event_message(events[seq])
        if message is not None:
            rows.extend((seq, index, item) for index, item in enumerate(items_of_message(message)))
    return rows


def _tail(session: Session, limit: int) -> tuple[list[Row], bool]:
    """The latest ``limit`` items and whether they are all there is."""
    rows = _rows(session)
    return (rows[-limit:] if limit > 0 else []), len(rows) <= max(limit, 0)


def _expired_prefix(session: Session, nodes: list[int], prune: Callable[[Any], bool] | None) -> list[int]:
    """The leading nodes whose items ``prune`` all accepts (empty ones pass), up to the last item it drops."""
    if prune is None:
        return []
    taken: list[int] = []
    last = 0
    for seq in nodes:
        message = derive_event_message(session.events[seq])
        items = items_of_message(message) if message is not None else []
        if not all(prune(item) for item in items):
            break
        taken.append(seq)
        last = len(taken) if items else last
    return taken[:last]


def _keeping(kind: str, items: list[Any], original: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """The message that replaces one of type ``kind`` with only ``items`` of it (none: an empty assistant)."""
    if items and kind != ASSISTANT_MESSAGE:
        return USER_MESSAGE, _user(items)
    return ASSISTANT_MESSAGE, _assistant(items, original)


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
