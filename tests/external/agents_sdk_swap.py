"""Pytest plugin for the Agents SDK's own tests: every ``SQLiteSession`` they name is an AgentlogSession.

Loaded with ``-p agents_sdk_swap`` into a pytest run inside an unpacked openai-agents sdist (see
``agents_sdk.py``). The substitution: before any test module is imported, the public names
``agents.SQLiteSession`` and ``agents.memory.SQLiteSession`` (the two the SDK's tests import) are
bound to ``SwappedSQLiteSession``, an ``AgentlogSession`` with ``SQLiteSession``'s constructor:
``db_path=":memory:"`` is a fresh in-memory agentlog store, a file path is an agentlog SQLite store
in that file. The SDK's own modules keep the real class (they import it from
``agents.memory.sqlite_session``), so its ``isinstance(..., SQLiteSession)`` checks still see the
original. The plugin also selects the tests (``agents_sdk.SESSION_FILES`` whole, of
``RUNNER_FILES`` only the tests whose source names ``SQLiteSession``), skips the ones listed as
not applicable, and writes each test's outcome, and whether it built an AgentlogSession, to
``$AGENTS_SDK_REPORT``.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator
from pathlib import Path
from typing import Any

import agents
import agents.memory
import pytest
from agents.memory import SessionSettings
from agents_sdk import RUNNER_FILES, SESSION_FILES  # this directory is on PYTHONPATH
from external_suite import noting_agentlog, read_not_applicable, record_outcome, select, write_report

from agentlog.integrations.openai_agents import AgentlogSession

NOT_APPLICABLE = Path(__file__).with_name("agents_sdk_not_applicable.txt")

_built: list[AgentlogSession] = []


class SwappedSQLiteSession(AgentlogSession):
    """``SQLiteSession(session_id, db_path, ..., session_settings)`` on agentlog (the tables are ignored)."""

    def __init__(self, session_id: str, db_path: str | Path = ":memory:",
                 sessions_table: str = "agent_sessions", messages_table: str = "agent_messages",
                 session_settings: SessionSettings | dict[str, Any] | None = None) -> None:
        self.db_path = db_path
        url = "memory:" if str(db_path) == ":memory:" else f"sqlite://{Path(db_path).resolve()}"
        super().__init__(session_id, url, session_settings=session_settings)
        _built.append(self)


agents.SQLiteSession = SwappedSQLiteSession  # type: ignore[attr-defined,misc]
agents.memory.SQLiteSession = SwappedSQLiteSession  # type: ignore[attr-defined,misc]


def _names_sqlite_session(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    try:
        return function is not None and "SQLiteSession" in inspect.getsource(function)
    except (OSError, TypeError):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the session files and the runner tests that name SQLiteSession; skip what does not apply."""
    def keep(item: pytest.Item) -> bool:
        path = item.nodeid.split("::", 1)[0]
        return path in SESSION_FILES or (path in RUNNER_FILES and _names_sqlite_session(item))

    select(config, items, keep, read_not_applicable(NOT_APPLICABLE))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Note whether the test built an AgentlogSession; close the ones it left open."""
    with noting_agentlog(item, _built):
        try:
            return (yield)
        finally:
            for session in _built:
                session.close()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    record_outcome(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    write_report(session)
