"""Google ADK session service on an agentlog store: ``AgentlogSessionService(store)``.

A ``BaseSessionService`` over any store URL (``jsonl:``, ``sqlite:``, ``postgresql:``,
``memory:``). Every ADK event is kept whole in the session's log and mapped onto agentlog turns,
steps and messages (``agentlog.integrations.adk_events``), so ``agentlog show``, search, export,
fork and compaction work on ADK sessions; ids and shared state: ``agentlog.integrations.adk_store``.
Every write is durable when its call returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from agentlog.core.header import SessionHeader, now_ms
from agentlog.core.jsonvalue import freeze
from agentlog.errors import (
    ConcurrentWriterError,
    InvalidEventError,
    MissingExtraError,
    SessionExistsError,
    SessionNotFoundError,
    UsageError,
)
from agentlog.integrations.adk_events import AdkEvents
from agentlog.integrations.adk_store import (
    APP_PREFIX,
    TEMP_PREFIX,
    USER_PREFIX,
    Folded,
    ScopeLogs,
    app_log_id,
    json_state,
    parse_session_id,
    session_log_id,
    split_delta,
    user_log_id,
)
from agentlog.store.base import Store
from agentlog.store.urls import open_store

try:
    from google.adk.errors._stale_session_error import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import SessionNotFoundError as AdkSessionNotFoundError
    from google.adk.events.event import Event
    from google.adk.sessions.base_session_service import (
        BaseSessionService,
        GetSessionConfig,
        ListSessionsResponse,
    )
    from google.adk.sessions.session import Session
    from pydantic_core import PydanticSerializationError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "agentlog.integrations.adk needs Google ADK: pip install 'agentlog[adk]'"
    ) from exc

__all__ = ["AgentlogSessionService"]

T = TypeVar("T")
STALE_MESSAGE = ("The session has been modified in storage since it was loaded. "
                 "Please reload the session before appending more events.")


class AgentlogSessionService(BaseSessionService):
    """ADK's session service on an agentlog store (a ``Store`` or a store URL, which it then owns).

    Operations run one at a time in a worker thread. A session object that another writer has
    overtaken (its revision is not the stored one) is refused with ADK's ``StaleSessionError``;
    an event that is not JSON-serializable with ``InvalidEventError``, and nothing is written.
    """

    def __init__(self, store: Store | str) -> None:
        self._owned = isinstance(store, str)
        self._store: Store = open_store(store) if isinstance(store, str) else store
        self._scopes = ScopeLogs(self._store)
        self._builders: dict[str, AdkEvents] = {}
        self._lock = threading.Lock()
        self._closed = False

    @property
    def store(self) -> Store:
        """The agentlog store the sessions live in."""
        return self._store

    # -- plumbing ----------------------------------------------------------------------------

    def _locked(self, work: Callable[[], T]) -> T:
        with self._lock:
            if self._closed:
                raise UsageError("AgentlogSessionService is closed")
            return work()

    async def _run(self, work: Callable[[], T]) -> T:
        return await asyncio.to_thread(self._locked, work)

    def _merged(self, app_name: str, user_id: str, state: dict[str, Any]) -> dict[str, Any]:
        merged = dict(state)
        merged.update({APP_PREFIX + k: v for k, v in self._scopes.state(app_log_id(app_name)).items()})
        user = self._scopes.state(user_log_id(app_name, user_id))
        merged.update({USER_PREFIX + k: v for k, v in user.items()})
        return merged

    def _read(self, log_id: str) -> Folded | None:
        """The folded session, None when it is missing."""
        try:
            folded = Folded(self._store.inspect(log_id).events)
        except SessionNotFoundError:
            return None
        return folded if folded.revision >= 0 else None

    def _builder(self, log_id: str) -> AdkEvents | None:
        builder = self._builders.get(log_id)
        if builder is None:
            try:
                builder = AdkEvents.resume(self._store.inspect(log_id).events)
            except SessionNotFoundError:
                return None
            if builder.last_record < 0:
                return None
            self._builders[log_id] = builder
        return builder

    # -- create ------------------------------------------------------------------------------

    async def create_session(self, *, app_name: str, user_id: str, state: dict[str, Any] | None = None,
                             session_id: str | None = None) -> Session:
        return await self._run(lambda: self._create(app_name, user_id, state, session_id))

    def create_session_sync(self, *, app_name: str, user_id: str, state: dict[str, Any] | None = None,
                            session_id: str | None = None) -> Session:
        return self._locked(lambda: self._create(app_name, user_id, state, session_id))

    def _create(self, app_name: str, user_id: str, state: dict[str, Any] | None,
                session_id: str | None) -> Session:
        sid = (session_id.strip() if session_id else "") or str(uuid.uuid4())
        app, user, own = split_delta(state or {})
        frozen_own, frozen_app, frozen_user = (json_state(part, "state") for part in (own, app, user))
        log_id = session_log_id(app_name, user_id, sid)
        created = now_ms() / 1000
        builder = AdkEvents()
        wire = builder.session_record({"appName": app_name, "userId": user_id, "id": sid,
                                       "state": frozen_own, "createTime": created}, now_ms())
        try:
            self._store.create(SessionHeader(id=log_id))
            self._store.append(log_id, wire)
        except (SessionExistsError, ConcurrentWriterError):
            raise AlreadyExistsError(f"Session with id {sid} already exists.") from None
        self._builders[log_id] = builder
        if frozen_app:
            self._scopes.add(app_log_id(app_name), frozen_app)
        if frozen_user:
            self._scopes.add(user_log_id(app_name, user_id), frozen_user)
        session = Session(id=sid, app_name=app_name, user_id=user_id,
                          state=self._merged(app_name, user_id, dict(own)), last_update_time=created)
        session._storage_update_marker = str(builder.last_record)
        return session

    # -- read --------------------------------------------------------------------------------

    async def get_session(self, *, app_name: str, user_id: str, session_id: str,
                          config: GetSessionConfig | None = None) -> Session | None:
        return await self._run(lambda: self._get(app_name, user_id, session_id, config))

    def get_session_sync(self, *, app_name: str, user_id: str, session_id: str,
                         config: GetSessionConfig | None = None) -> Session | None:
        return self._locked(lambda: self._get(app_name, user_id, session_id, config))

    def _get(self, app_name: str, user_id: str, session_id: str,
             config: GetSessionConfig | None) -> Session | None:
        sid = session_id.strip() if session_id else session_id
        folded = self._read(session_log_id(app_name, user_id, sid))
        if folded is None:
            return None
        events = folded.events
        if config is not None:
            if config.num_recent_events is not None:
                events = events[-config.num_recent_events:] if config.num_recent_events else []
            if config.after_timestamp is not None:
                events = [event for event in events if event.get("timestamp", 0) >= config.after_timestamp]
        session = Session(id=sid, app_name=app_name, user_id=user_id,
                          state=self._merged(app_name, user_id, folded.state),
                          events=[Event.model_validate(event) for event in events],
                          last_update_time=folded.last_update)
        session._storage_update_marker = str(folded.revision)
        return session

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        return await self._run(lambda: self._list(app_name, user_id))

    def list_sessions_sync(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        return self._locked(lambda: self._list(app_name, user_id))

    def _list(self, app_name: str, user_id: str | None) -> ListSessionsResponse:
        sessions: list[Session] = []
        for header in self._store.list():
            named = parse_session_id(header.id)
            if named is None or named[0] != app_name or (user_id is not None and named[1] != user_id):
                continue
            folded = self._read(header.id)
            if folded is None:
                continue
            sessions.append(Session(id=named[2], app_name=app_name, user_id=named[1],
                                    state=self._merged(app_name, named[1], folded.state),
                                    last_update_time=folded.last_update))
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self._run(lambda: self._scopes.state(user_log_id(app_name, user_id)))

    # -- delete ------------------------------------------------------------------------------

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await self._run(lambda: self._delete(app_name, user_id, session_id))

    def delete_session_sync(self, *, app_name: str, user_id: str, session_id: str) -> None:
        self._locked(lambda: self._delete(app_name, user_id, session_id))

    def _delete(self, app_name: str, user_id: str, session_id: str) -> None:
        log_id = session_log_id(app_name, user_id, session_id.strip() if session_id else session_id)
        self._builders.pop(log_id, None)
        with contextlib.suppress(SessionNotFoundError):  # ADK: deleting a missing session is no error
            self._store.delete(log_id)

    # -- append ------------------------------------------------------------------------------

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        await self._run(lambda: self._append(session, event))
        return event

    def _append(self, session: Session, event: Event) -> None:
        """Write the event durably, then apply it to ``session`` (nothing changes on a refusal)."""
        delta = dict(event.actions.state_delta) if event.actions and event.actions.state_delta else {}
        kept = {key: value for key, value in delta.items() if not key.startswith(TEMP_PREFIX)}
        json_state(kept, "state_delta")  # ADK's JSON form would turn NaN into null, a set into a list
        data = _event_json(event, kept, session.id)
        app, user, _own = split_delta(kept)
        log_id = session_log_id(session.app_name, session.user_id, session.id)
        builder = self._write_event(session, log_id, data)
        if app:
            self._scopes.add(app_log_id(session.app_name), json_state(app, "state_delta"))
        if user:
            self._scopes.add(user_log_id(session.app_name, session.user_id), json_state(user, "state_delta"))
        for key, value in delta.items():  # temp state lives in the in-memory session only
            if key.startswith(TEMP_PREFIX):
                session.state[key] = value
        if event.actions and event.actions.state_delta:
            event.actions.state_delta = kept
        self._commit_event_to_session(session, event)
        session.last_update_time = event.timestamp
        session._storage_update_marker = str(builder.last_record)

    def _write_event(self, session: Session, log_id: str, data: Any) -> AdkEvents:
        """Append the event's wire events; once more on a fresh position if only a repair moved the log.

        A reader's ``load`` closes a turn left open between two events (as interrupted): the
        session's ADK revision is unchanged, so the event goes after those closers.
        """
        for attempt in (1, 2):
            builder = self._builder(log_id)
            if builder is None:
                raise AdkSessionNotFoundError(f"Session {session.id} not found.")
            self._check_current(session, builder, log_id)
            try:  # a refused batch drops the builder: the next append resumes from the stored log
                self._store.append(log_id, builder.adk_event(data, now_ms()))
            except ConcurrentWriterError:
                self._builders.pop(log_id, None)
                if attempt == 2:
                    raise StaleSessionError(STALE_MESSAGE) from None
                continue
            except BaseException:
                self._builders.pop(log_id, None)
                raise
            return builder
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_current(self, session: Session, builder: AdkEvents, log_id: str) -> None:
        """Refuse a session object that another writer has overtaken (ADK's optimistic check)."""
        marker = session._storage_update_marker
        if marker is not None:
            if marker != str(builder.last_record):
                raise StaleSessionError(STALE_MESSAGE)
            return
        read = self._read(log_id)
        stored = read.events if read is not None else []
        if session.events and (not stored or stored[-1].get("id") != session.events[-1].id):
            raise StaleSessionError(STALE_MESSAGE)
        if not session.events and stored:
            raise StaleSessionError(STALE_MESSAGE)

    # -- lifetime ----------------------------------------------------------------------------

    async def close(self) -> None:
        """Release the store when this service opened it (from a URL); idempotent."""
        await asyncio.to_thread(self.close_sync)

    def close_sync(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._builders.clear()
            if self._owned:
                self._store.close()

    async def __aenter__(self) -> AgentlogSessionService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def _event_json(event: Event, kept: dict[str, Any], session_id: str) -> Any:
    """The event's lossless JSON form with ``kept`` as its state delta; a clear error when it has none."""
    actions = event.actions.model_copy(update={"state_delta": kept}) if event.actions else None
    try:
        data = event.model_copy(update={"actions": actions}).model_dump(mode="json", exclude_none=True)
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise InvalidEventError(f"ADK event {event.id} of session {session_id!r} is not JSON-serializable: "
                                f"{exc}", session_id=session_id) from None
    return freeze(data, root="event", what=f"ADK event {event.id} is not losslessly JSON-serializable")
