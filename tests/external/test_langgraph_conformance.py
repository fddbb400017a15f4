"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``, pinned in
the dev extra) against ``AgentlogSaver`` on every store backend.

Each capability suite gets a fresh saver on a fresh store instance over the same storage, as
after a restart. Every base capability and every extended one the saver implements must pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES, BASE_CAPABILITIES

from agentlog.integrations.langgraph import AgentlogSaver
from tests.contract.conftest import StoreFactory


def test_conformance_suite_passes_every_capability(open_store: StoreFactory, backend: str) -> None:
    @checkpointer_test(name=f"AgentlogSaver[{backend}]")
    async def saver() -> AsyncIterator[AgentlogSaver]:
        instance = AgentlogSaver(open_store())
        yield instance
        instance.close()

    report = asyncio.run(validate(saver))
    results = report.to_dict()["results"]
    summary = {name: (result["tests_passed"], result["tests_failed"]) for name, result in results.items()}
    failures = [failure for result in results.values() for failure in result["failures"]]
    assert report.passed_all_base(), (summary, failures)
    assert report.passed_all(), (summary, failures)
    detected = {name for name, result in results.items() if result["detected"]}
    assert detected == {capability.value for capability in ALL_CAPABILITIES}
    assert {c.value for c in BASE_CAPABILITIES} <= set(results)
    assert all(passed > 0 and failed == 0 for passed, failed in summary.values()), summary
