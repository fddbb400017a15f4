"""Where ADK sessions and their shared state live in an agentlog store: ids, records, state folds.

An ADK session ``(app_name, user_id, session_id)`` is the agentlog session
``adk/<app>/<user>/<id>`` (each part percent-quoted, so ``/`` never occurs inside one). An app's
shared state (``app:`` keys) is the log ``adk-state/<app>``, a user's (``user:`` keys)
``adk-state/<app>/<user>``: ignorable ``adk/state`` deltas, folded in order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import quote, unquote

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader, now_ms
from agentlog.core.jsonvalue import freeze, thaw
from agentlog.errors import ConcurrentWriterError, SessionExistsError, SessionNotFoundError
from agentlog.integrations.adk_events import ADK_EVENT, ADK_SESSION, ADK_STATE, record
from agentlog.store.base import Store

__all__ = [
    "APP_PREFIX",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "Folded",
    "ScopeLogs",
    "app_log_id",
    "json_state",
    "parse_session_id",
    "session_log_id",
    "split_delta",
    "user_log_id",
]

APP_PREFIX: Final = "app:"
USER_PREFIX: Final = "user:"
TEMP_PREFIX: Final = "temp:"
_SESSIONS: Final = "adk"
_STATES: Final = "adk-state"


def session_log_id(app_name: str, user_id: str, session_id: str) -> str:
    """The agentlog id of an ADK session."""
    return "/".join((_SESSIONS, *(quote(part, safe="") for part in (app_name, user_id, session_id))))


def parse_session_id(log_id: str) -> tuple[str, str, str] | None:
    """``(app_name, user_id, session_id)`` of an agentlog id ``session_log_id`` made, else None."""
    parts = log_id.split("/")
    if len(parts) != 4 or parts[0] != _SESSIONS:
        return None
    return unquote(parts[1]), unquote(parts[2]), unquote(parts[3])


def app_log_id(app_name: str) -> str:
    return f"{_STATES}/{quote(app_name, safe='')}"


def user_log_id(app_name: str, user_id: str) -> str:
    return f"{app_log_id(app_name)}/{quote(user_id, safe='')}"


def split_delta(delta: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(app, user, session)`` parts of a state delta, prefixes removed; ``temp:`` keys dropped."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    session: dict[str, Any] = {}
    for key, value in delta.items():
        if key.startswith(APP_PREFIX):
            app[key.removeprefix(APP_PREFIX)] = value
        elif key.startswith(USER_PREFIX):
            user[key.removeprefix(USER_PREFIX)] = value
        elif not key.startswith(TEMP_PREFIX):
            session[key] = value
    return app, user, session


def json_state(state: Mapping[str, Any], where: str) -> Any:
    """``state`` as frozen JSON, or ``InvalidEventError`` naming the key that is not JSON."""
    return freeze(dict(state), root=where, what="ADK state must be JSON-serializable")


class Folded:
    """What a session's log says: its ADK events (as JSON), session state, last update time and
    revision (the seq of its last ADK record; -1 when the log holds no ``adk/session``)."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.events: list[dict[str, Any]] = []
        self.state: dict[str, Any] = {}
        self.last_update = 0.0
        self.revision = -1
        for event in events:
            if event.type == ADK_SESSION:
                self.revision = event.seq
                self.state = thaw(event.data["state"])
                self.last_update = float(event.data["createTime"])
            elif event.type == ADK_EVENT:
                self.revision = event.seq
                adk = thaw(event.data["event"])
                self.events.append(adk)
                delta = (adk.get("actions") or {}).get("state_delta") or {}
                self.state.update(split_delta(delta)[2])
                self.last_update = float(adk.get("timestamp", self.last_update))


class ScopeLogs:
    """The app and user state logs of one store: read (folded) and appended to (created on first use)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._next: dict[str, int] = {}

    def state(self, log_id: str) -> dict[str, Any]:
        """The folded state of one scope log ({} when it has none yet)."""
        try:
            events = self._store.inspect(log_id).events
        except SessionNotFoundError:
            return {}
        state: dict[str, Any] = {}
        for event in events:
            if event.type == ADK_STATE:
                state.update(thaw(event.data["delta"]))
        self._next[log_id] = len(events)
        return state

    def add(self, log_id: str, delta: Mapping[str, Any]) -> None:
        """Append one delta durably (retried once if another writer moved the log meanwhile)."""
        for attempt in (1, 2):
            seq = self._position(log_id)
            try:
                self._store.append(log_id, [record(ADK_STATE, seq, now_ms(), {"delta": delta})])
            except ConcurrentWriterError:
                self._next.pop(log_id, None)
                if attempt == 2:
                    raise
                continue
            self._next[log_id] = seq + 1
            return

    def _position(self, log_id: str) -> int:
        known = self._next.get(log_id)
        if known is not None:
            return known
        try:
            seq = len(self._store.inspect(log_id).events)
        except SessionNotFoundError:
            with contextlib.suppress(SessionExistsError):  # created here, nothing stored yet
                self._store.create(SessionHeader(id=log_id))
            seq = 0
        self._next[log_id] = seq
        return seq
