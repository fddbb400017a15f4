"""Pytest plugin for ADK's own session-service tests: agentlog joins their ``session_service`` fixture.

Loaded with ``-p adk_swap`` into a pytest run over ADK's test files (see ``adk.py``). The
substitution: when a test module defining a ``session_service`` fixture is imported, that
fixture is replaced by one with the same parameters plus ``agentlog-memory``, ``agentlog-jsonl``,
``agentlog-sqlite`` and ``agentlog-postgresql`` (a fresh store each, PostgreSQL in a throwaway
schema of ``$AGENTLOG_TEST_POSTGRES``, default the local test server); ADK's own parameters still
go to ADK's fixture. Only the agentlog parameters are run. A test that does not take the fixture
builds a named ADK service itself (``DatabaseSessionService`` internals, ``InMemorySessionService``
aliasing, ...): it is skipped as not applicable, naming that service. ``adk_not_applicable.txt``
lists fixture tests that do not apply. Each outcome goes to the report (``external_suite``).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import uuid
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import pytest
from external_suite import (
    NOT_APPLICABLE_PREFIX,
    noting_agentlog,
    read_not_applicable,
    record_outcome,
    select,
    write_report,
)

from agentlog.integrations.adk import AgentlogSessionService

NOT_APPLICABLE = Path(__file__).with_name("adk_not_applicable.txt")
FIXTURE = "session_service"
BACKENDS = ("agentlog-memory", "agentlog-jsonl", "agentlog-sqlite", "agentlog-postgresql")
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
_SERVICES = re.compile(r"\b(\w+SessionService)\(")
_used: list[str] = []


@contextlib.asynccontextmanager
async def agentlog_service(backend: str, tmp_path: Path) -> AsyncIterator[AgentlogSessionService]:
    """An AgentlogSessionService on a fresh store of ``backend``."""
    schema = None
    if backend == "agentlog-memory":
        url = "memory:"
    elif backend == "agentlog-jsonl":
        url = f"jsonl://{tmp_path / 'agentlog-jsonl'}"
    elif backend == "agentlog-sqlite":
        url = f"sqlite://{tmp_path / 'agentlog.db'}"
    else:
        dsn = os.environ.get("AGENTLOG_TEST_POSTGRES") or DEFAULT_DSN
        schema = f"agentlog_adk_{uuid.uuid4().hex[:12]}"
        url = f"{dsn}?schema={schema}"
    service = AgentlogSessionService(url)
    _used.append(backend)
    try:
        yield service
    finally:
        await service.close()
        if schema is not None:
            import psycopg

            with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def swap(module: Any) -> None:
    """Replace the module's ``session_service`` fixture by one that also yields agentlog services."""
    definition = getattr(module, FIXTURE, None)
    if definition is None or not hasattr(definition, "_get_wrapped_function"):
        return
    original = definition._get_wrapped_function()
    params = [*(definition._fixture_function_marker.params or ()), *BACKENDS]

    @pytest.fixture(params=params, ids=str, name=FIXTURE)
    async def session_service(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
        if request.param in BACKENDS:
            async with agentlog_service(request.param, tmp_path) as service:
                yield service
        else:
            async for service in original(request, tmp_path):
                yield service

    setattr(module, FIXTURE, session_service)


class SwappedModule(pytest.Module):
    """A test module whose ``session_service`` fixture is swapped as it is imported."""

    def _getobj(self) -> Any:
        module = super()._getobj()
        swap(module)
        return module


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    return SwappedModule.from_parent(parent, path=module_path)


def _services_named(item: pytest.Item) -> str:
    function = getattr(item, "function", None)
    try:
        names = sorted(set(_SERVICES.findall(inspect.getsource(function)))) if function else []
    except (OSError, TypeError):
        names = []
    return ", ".join(names) or "no session service"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the agentlog parameters of fixture tests; skip the tests without the fixture."""
    def keep(item: pytest.Item) -> bool:
        if FIXTURE not in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.skip(
                reason=f"{NOT_APPLICABLE_PREFIX}not parametrised over session services; it builds "
                       f"{_services_named(item)} itself"))
            return True
        callspec = getattr(item, "callspec", None)
        return callspec is not None and callspec.params.get(FIXTURE) in BACKENDS

    select(config, items, keep, read_not_applicable(NOT_APPLICABLE))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Note whether the test ran on an agentlog service."""
    with noting_agentlog(item, _used):
        return (yield)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    record_outcome(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    write_report(session)
