"""The OpenAI Agents SDK's own session and runner tests pass with AgentlogSession in SQLiteSession's place.

Runs ``python -m tests.external.agents_sdk`` (about a minute; see that module) and prints its
counts. Without network outside CI (the pinned sdist cannot be downloaded) it skips; under CI it fails.
"""

from __future__ import annotations

import pytest

from tests.external.external_suite import check_suite


@pytest.mark.timeout(1800)
def test_the_agents_sdks_own_tests_pass_on_agentlog_session(capsys: pytest.CaptureFixture[str]) -> None:
    check_suite("tests.external.agents_sdk", capsys)
