"""Google ADK's own session-service tests pass with AgentlogSessionService added to their parametrisation.

Runs ``python -m tests.external.adk`` (about 20 s; see that module) and prints its counts. The
google-adk sdist ships no tests and CI reaches no git host, so without a checkout of ADK's tests
(``$AGENTLOG_ADK_TESTS`` or the cache) it skips, under CI too, saying how to get one.
"""

from __future__ import annotations

import pytest

from tests.external.external_suite import check_suite


@pytest.mark.timeout(1800)
def test_adks_own_session_service_tests_pass_on_agentlog(capsys: pytest.CaptureFixture[str]) -> None:
    check_suite("tests.external.adk", capsys, skip_unavailable_in_ci=True)
