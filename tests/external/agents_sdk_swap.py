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
import json
import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import agents
import agents.memory
import pytest
from agents.memory import SessionSettings
from agents_sdk import RUNNER_FILES, SESSION_FILES  # this directory is on PYTHONPATH

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


def not_applicable() -> dict[str, str]:
    """The checked-in list: node id (or a test's id without its parameters) -> why it does not apply."""
    entries: dict[str, str] = {}
    for line in NOT_APPLICABLE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            node, _, reason = line.partition("|")
            entries[node.strip()] = reason.strip()
    return entries


def _names_sqlite_session(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    try:
        return function is not None and "SQLiteSession" in inspect.getsource(function)
    except (OSError, TypeError):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the session files and the runner tests that name SQLiteSession; skip what does not apply."""
    reasons = not_applicable()
    kept, dropped, matched = [], [], set()
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if not (path in SESSION_FILES or (path in RUNNER_FILES and _names_sqlite_session(item))):
            dropped.append(item)
            continue
        kept.append(item)
        entry = next((node for node in (item.nodeid, item.nodeid.split("[", 1)[0]) if node in reasons), None)
        if entry is not None:
            matched.add(entry)
            item.add_marker(pytest.mark.skip(reason=f"not applicable: {reasons[entry]}"))
    config.stash[_STALE] = sorted(set(reasons) - matched)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


_STALE = pytest.StashKey[list[str]]()
_results: dict[str, dict[str, Any]] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Note whether the test built an AgentlogSession; close the ones it left open."""
    _built.clear()
    try:
        return (yield)
    finally:
        _results.setdefault(item.nodeid, {})["agentlog"] = bool(_built)
        for session in _built:
            session.close()
        _built.clear()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _results.setdefault(report.nodeid, {"outcome": "passed"})
    if report.skipped:
        entry["outcome"] = "skipped"
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
        entry["reason"] = reason.removeprefix("Skipped: ")
    elif report.failed:
        entry["outcome"] = "failed"
    else:
        entry.setdefault("outcome", "passed")


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get("AGENTS_SDK_REPORT")
    if target:
        Path(target).write_text(json.dumps({"tests": _results, "stale": session.config.stash.get(_STALE, [])},
                                           indent=1), encoding="utf-8")
