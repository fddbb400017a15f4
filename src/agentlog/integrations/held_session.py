"""The live session a framework drop-in writes: opened from a store or URL (created if new), or given.

Shared by the drop-ins (``openai_agents``, ``pydantic_ai``) so each opens, owns and releases its
session the same way: a store or URL means the drop-in holds the writer lock until it releases
(and closes the store a URL opened); a given ``LiveSession`` stays the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentlog.errors import SessionNotFoundError, UsageError
from agentlog.store.base import Store
from agentlog.store.urls import open_store
from agentlog.store.writer import LiveSession

__all__ = ["HeldSession", "hold_session"]


@dataclass(frozen=True, slots=True)
class HeldSession:
    """A live session and what of it the holder owns: the session itself, the store of a URL."""

    live: LiveSession
    owns_live: bool
    owned_store: Store | None

    def release(self) -> None:
        """Flush and close what the holder owns (the caller's ``LiveSession`` stays open)."""
        try:
            if self.owns_live:
                self.live.close()
        finally:
            if self.owned_store is not None:
                self.owned_store.close()


def hold_session(session_id: str, store: Store | LiveSession | str) -> HeldSession:
    """``session_id`` opened for writing in ``store`` (started if new); a second writer is refused."""
    if isinstance(store, LiveSession):
        if store.id != session_id:
            raise UsageError(f"session_id {session_id!r} does not match the live session {store.id!r}",
                             session_id=session_id)
        return HeldSession(store, False, None)
    target = open_store(store) if isinstance(store, str) else store
    owned = target if isinstance(store, str) else None
    try:
        try:
            live = target.open(session_id)
        except SessionNotFoundError:
            live = target.start(session_id)
    except BaseException:
        if owned is not None:
            owned.close()
        raise
    return HeldSession(live, True, owned)
