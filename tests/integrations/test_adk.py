"""AgentlogSessionService: ADK's session service on agentlog stores, beside what agentlog's tools see.

ADK's own contract tests run in tests/external/test_adk.py; here: durability across a restart on
every durable backend, the state scopes, the mapping onto turns, steps and messages (so
transcript, fork and the tool-pairing rules hold), and refusals that leave the log unchanged.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError as AdkSessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from agentlog import InvalidEventError, SessionLockedError, UsageError, check_invariants, transcript
from agentlog.core.events import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START, USER_MESSAGE
from agentlog.core.session import Session as LogSession
from agentlog.integrations.adk import AgentlogSessionService
from agentlog.integrations.adk_events import ADK_EVENT
from agentlog.integrations.adk_store import parse_session_id, session_log_id
from agentlog.store.sqlite.store import SqliteStore
from tests.contract.conftest import StoreFactory
from tests.integrations.helpers import assert_tool_pairs_hold

DURABLE_BACKENDS = ["jsonl-zstd", "sqlite", "postgres"]
APP, USER = "app", "alice"


@pytest.fixture(params=DURABLE_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The store contract suite's ``open_store`` fixture, over the durable backends."""
    return str(request.param)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def text(role: str, words: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=words)])


def invocation(number: int) -> list[Event]:
    """What ADK's runner appends for one prompt with one tool call: user, call, response, answer."""
    inv = f"inv-{number}"
    call = types.FunctionCall(id=f"call-{number}", name="lookup", args={"q": number})
    response = types.FunctionResponse(id=f"call-{number}", name="lookup", response={"result": number * 10})
    return [
        Event(invocation_id=inv, author="user", content=text("user", f"question {number}")),
        Event(invocation_id=inv, author="agent", model_version="gemini-test",
              content=types.Content(role="model", parts=[types.Part(text="let me look"),
                                                         types.Part(function_call=call)])),
        Event(invocation_id=inv, author="agent",
              content=types.Content(role="user", parts=[types.Part(function_response=response)])),
        Event(invocation_id=inv, author="agent", model_version="gemini-test",
              content=text("model", f"answer {number}"),
              actions=EventActions(state_delta={"answers": number, "temp:scratch": "x"})),
    ]


def restored(store: Any, sid: str) -> LogSession:
    inspection = store.load(session_log_id(APP, USER, sid))
    return LogSession.restore(inspection.header.id, inspection.events, inspection.header)


def test_a_session_survives_a_restart_and_reads_as_turns(open_store: StoreFactory) -> None:
    service = AgentlogSessionService(open_store())
    session = run(service.create_session(app_name=APP, user_id=USER, session_id="s1",
                                         state={"mood": "ok", "app:tier": "pro", "user:lang": "en"}))
    appended = [event for number in (1, 2) for event in invocation(number)]
    for event in appended:
        run(service.append_event(session, event))
    assert session.state["temp:scratch"] == "x"  # temp state: the in-memory session only

    store = open_store()  # a restart
    again = AgentlogSessionService(store)
    got = run(again.get_session(app_name=APP, user_id=USER, session_id="s1"))
    assert got is not None
    assert got.events == appended and got.last_update_time == appended[-1].timestamp
    assert got.state == {"mood": "ok", "answers": 2, "app:tier": "pro", "user:lang": "en"}
    assert all("temp:scratch" not in event.actions.state_delta for event in got.events)

    log = restored(store, "s1")
    check_invariants(log.events)
    assert_tool_pairs_hold(log)
    kinds = [event.type for event in log.events if event.type != ADK_EVENT]
    assert kinds.count(TURN_START) == kinds.count(TURN_END) == 2  # one turn a prompt, both closed
    assert kinds.count(TOOL_CALL) == kinds.count(TOOL_RESULT) == 2
    said = [(m["role"], [b.get("text") or b["type"] for b in m["content"]]) for m in transcript(log.events)]
    assert said[:4] == [("user", ["question 1"]), ("assistant", ["let me look", "tool-call"]),
                        ("user", ["tool-result"]), ("assistant", ["answer 1"])]
    listed = run(again.list_sessions(app_name=APP)).sessions
    assert [(s.id, s.user_id, s.events) for s in listed] == [("s1", USER, [])]
    assert listed[0].state == got.state


def test_state_scopes_and_deltas(tmp_path: Path) -> None:
    service = AgentlogSessionService(f"sqlite://{tmp_path / 'a.db'}")
    first = run(service.create_session(app_name=APP, user_id=USER, session_id="a", state={"app:k": 1}))
    run(service.append_event(first, Event(author="user", actions=EventActions(
        state_delta={"app:k": 2, "user:u": "x", "own": True, "temp:t": 0}))))
    same_user = run(service.create_session(app_name=APP, user_id=USER, session_id="b"))
    other_user = run(service.create_session(app_name=APP, user_id="bob", session_id="a"))
    other_app = run(service.create_session(app_name="other", user_id=USER, session_id="a"))
    assert same_user.state == {"app:k": 2, "user:u": "x"}
    assert other_user.state == {"app:k": 2}
    assert other_app.state == {}
    assert run(service.get_user_state(app_name=APP, user_id=USER)) == {"u": "x"}
    got = run(service.get_session(app_name=APP, user_id=USER, session_id="a"))
    assert got is not None and got.state == {"own": True, "app:k": 2, "user:u": "x"}
    assert run(service.get_session(app_name=APP, user_id="bob", session_id="a")).events == []
    run(service.close())


def test_get_session_config_filters_recent_and_after(tmp_path: Path) -> None:
    service = AgentlogSessionService(f"jsonl://{tmp_path / 'root'}")
    session = run(service.create_session(app_name=APP, user_id=USER, session_id="s"))
    for second in range(1, 6):
        run(service.append_event(session, Event(author="user", timestamp=float(second))))

    def stamps(**config: Any) -> list[float]:
        got = run(service.get_session(app_name=APP, user_id=USER, session_id="s",
                                      config=GetSessionConfig(**config)))
        return [event.timestamp for event in got.events]

    assert stamps() == [1, 2, 3, 4, 5]
    assert stamps(num_recent_events=0) == []
    assert stamps(num_recent_events=2) == [4, 5]
    assert stamps(after_timestamp=4.0) == [4, 5]
    assert stamps(num_recent_events=3, after_timestamp=4.5) == [5]
    run(service.close())


def test_sync_forms(tmp_path: Path) -> None:
    service = AgentlogSessionService(f"sqlite://{tmp_path / 'a.db'}")
    created = service.create_session_sync(app_name=APP, user_id=USER, session_id=" padded ", state={"k": 1})
    assert created.id == "padded"
    assert service.get_session_sync(app_name=APP, user_id=USER, session_id="padded") == created
    assert [s.id for s in service.list_sessions_sync(app_name=APP, user_id=USER).sessions] == ["padded"]
    service.delete_session_sync(app_name=APP, user_id=USER, session_id="padded")
    assert service.get_session_sync(app_name=APP, user_id=USER, session_id="padded") is None
    service.close_sync()


def test_ids_round_trip_whatever_they_hold() -> None:
    for parts in (("a/b", "u%2F", "s 1"), ("", "", ""), ("app", "user", "ü/ß")):
        assert parse_session_id(session_log_id(*parts)) == parts
    assert parse_session_id("adk-state/app") is None and parse_session_id("plain") is None


def test_an_unserializable_event_is_refused_and_loses_nothing(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    service = AgentlogSessionService(store)
    session = run(service.create_session(app_name=APP, user_id=USER, session_id="s"))
    run(service.append_event(session, invocation(1)[0]))
    before = list(store.load(session_log_id(APP, USER, "s")).events)
    bad = Event(author="agent", content=text("model", "hi"), custom_metadata={"handle": object()})
    with pytest.raises(InvalidEventError, match=r"ADK event .* of session 's' is not JSON-serializable"):
        run(service.append_event(session, bad))
    nan = Event(author="agent", actions=EventActions(state_delta={"x": float("nan")}))
    with pytest.raises(InvalidEventError):
        run(service.append_event(session, nan))
    assert len(session.events) == 1 and "x" not in session.state
    assert list(store.load(session_log_id(APP, USER, "s")).events) == before
    with pytest.raises(InvalidEventError, match="JSON"):
        run(service.create_session(app_name=APP, user_id=USER, session_id="t", state={"k": {1, 2}}))
    assert run(service.get_session(app_name=APP, user_id=USER, session_id="t")) is None
    run(service.append_event(session, invocation(1)[1]))  # the session still takes good events
    assert len(run(service.get_session(app_name=APP, user_id=USER, session_id="s")).events) == 2
    store.close()


def test_missing_existing_and_closed(tmp_path: Path) -> None:
    service = AgentlogSessionService(f"sqlite://{tmp_path / 'a.db'}")
    session = run(service.create_session(app_name=APP, user_id=USER, session_id="s"))
    with pytest.raises(AlreadyExistsError):
        run(service.create_session(app_name=APP, user_id=USER, session_id="s"))
    run(service.delete_session(app_name=APP, user_id=USER, session_id="s"))
    run(service.delete_session(app_name=APP, user_id=USER, session_id="never"))  # no error, as in ADK
    with pytest.raises(AdkSessionNotFoundError):
        run(service.append_event(session, invocation(1)[0]))
    assert run(service.get_session(app_name=APP, user_id=USER, session_id="s")) is None
    run(service.close())
    run(service.close())  # idempotent
    for call in (lambda: service.create_session(app_name=APP, user_id=USER),
                 lambda: service.get_session(app_name=APP, user_id=USER, session_id="s"),
                 lambda: service.append_event(session, invocation(2)[0])):
        with pytest.raises(UsageError, match="closed"):
            run(call())


def test_a_stale_session_object_is_refused(tmp_path: Path) -> None:
    service = AgentlogSessionService(f"sqlite://{tmp_path / 'a.db'}")
    created = run(service.create_session(app_name=APP, user_id=USER, session_id="s"))
    loaded = run(service.get_session(app_name=APP, user_id=USER, session_id="s"))
    run(service.append_event(loaded, invocation(1)[0]))
    with pytest.raises(StaleSessionError, match="modified in storage"):
        run(service.append_event(created, invocation(2)[0]))
    assert [e.invocation_id for e in run(service.get_session(app_name=APP, user_id=USER,
                                                               session_id="s")).events] == ["inv-1"]
    run(service.close())


def test_a_session_another_writer_holds_is_refused_whole(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    service = AgentlogSessionService(f"sqlite://{path}")
    session = run(service.create_session(app_name=APP, user_id=USER, session_id="s"))
    other = SqliteStore(path)
    live = other.open(session_log_id(APP, USER, "s"))  # another writer (here, another store) holds it
    with pytest.raises(SessionLockedError):
        run(service.append_event(session, invocation(1)[0]))
    live.close()
    other.close()
    assert session.events == []
    run(service.append_event(session, invocation(1)[0]))
    assert len(run(service.get_session(app_name=APP, user_id=USER, session_id="s")).events) == 1
    run(service.close())


def test_a_fork_is_an_adk_session(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    service = AgentlogSessionService(store)
    session = run(service.create_session(app_name=APP, user_id=USER, session_id="s", state={"k": 1}))
    for event in invocation(1) + invocation(2):
        run(service.append_event(session, event))
    parent = store.load(session_log_id(APP, USER, "s")).events
    first_turn_end = next(e.seq for e in parent if e.type == TURN_END)
    store.fork(session_log_id(APP, USER, "s"), first_turn_end, session_log_id(APP, USER, "s-fork")).close()
    child = run(service.get_session(app_name=APP, user_id=USER, session_id="s-fork"))
    assert child is not None and child.events == session.events[:4]
    assert child.state == {"k": 1, "answers": 1}
    run(service.append_event(child, invocation(3)[0]))  # it takes events of its own
    kinds = [e.type for e in restored(store, "s-fork").events]
    assert kinds[-2:] == [USER_MESSAGE, ADK_EVENT] or USER_MESSAGE in kinds
    assert ASSISTANT_MESSAGE in kinds
    store.close()


def test_a_reader_loading_mid_invocation_does_not_stop_the_next_event(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    service = AgentlogSessionService(store)
    session = run(service.create_session(app_name=APP, user_id=USER, session_id="s"))
    user, call, response, answer = invocation(1)
    for event in (user, call):
        run(service.append_event(session, event))
    store.load(session_log_id(APP, USER, "s"))  # a reader's load closes the open turn as interrupted
    for event in (response, answer):
        run(service.append_event(session, event))
    got = run(service.get_session(app_name=APP, user_id=USER, session_id="s"))
    assert got is not None and got.events == [user, call, response, answer]
    log = restored(store, "s")
    check_invariants(log.events)
    ends = [e.data["reason"]["kind"] for e in log.events if e.type == TURN_END]
    assert ends == ["interrupted", "completed"]  # the answer went on in a turn of its own
    store.close()


def test_the_example_runs_an_adk_runner_on_agentlog(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir(mode=0o700)
    url = f"sqlite://{tmp_path / 'db' / 'adk.db'}"
    example = Path(__file__).resolve().parents[2] / "examples" / "adk_session.py"
    done = subprocess.run([sys.executable, str(example), "--store", url], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Weather in Paris? -> Paris: sunny, up to 21 °C." in done.stdout
    assert "ADK sees 8 events in 's1'" in done.stdout
    store = SqliteStore(tmp_path / "db" / "adk.db")
    inspection = store.load(session_log_id("weather", "alice", "s1"))
    check_invariants(inspection.events)
    roles = [m["role"] for m in transcript(inspection.events)]
    assert roles == ["user", "assistant", "user", "assistant"] * 2
    store.close()


def test_two_services_on_one_store_take_turns(open_store: StoreFactory) -> None:
    """Two services (two store objects, as two processes have) on one session: the overtaken
    object is refused as stale with nothing written; reloaded, it appends after the other's event."""
    first, second = AgentlogSessionService(open_store()), AgentlogSessionService(open_store())
    mine = run(first.create_session(app_name=APP, user_id=USER, session_id="s"))
    run(first.append_event(mine, invocation(1)[0]))
    theirs = run(second.get_session(app_name=APP, user_id=USER, session_id="s"))
    run(second.append_event(theirs, invocation(1)[1]))
    with pytest.raises(StaleSessionError):
        run(first.append_event(mine, invocation(1)[2]))
    mine = run(first.get_session(app_name=APP, user_id=USER, session_id="s"))
    run(first.append_event(mine, invocation(1)[2]))
    got = run(second.get_session(app_name=APP, user_id=USER, session_id="s"))
    assert [len(e.content.parts) for e in got.events] == [1, 2, 1]
    check_invariants(open_store().load(session_log_id(APP, USER, "s")).events)
