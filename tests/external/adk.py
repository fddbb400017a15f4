"""Run Google ADK's own session-service tests with ``AgentlogSessionService`` in their parametrisation.

``python -m tests.external.adk`` (from the repository root, in the dev venv). The google-adk
sdist ships no tests, so they are read from a checkout of google/adk-python at the pinned tag:
``$AGENTLOG_ADK_TESTS`` (the checkout's root), default ``<cache>/adk-python-<version>`` under
``$AGENTLOG_EXTERNAL_CACHE`` (default ``~/.cache/agentlog/external``); make one with
``git clone --depth 1 --branch v2.13.0 https://github.com/google/adk-python <that directory>``.
``TEST_FILES`` are copied into a temporary directory (nothing into this repository) and run
there under pytest with the ``adk_swap`` plugin, which adds agentlog to the ``session_service``
fixture's parameters (see its docstring). Prints passed / failed / not applicable and exits 1 on
a failure or a stale not-applicable entry, 3 when no checkout is there.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

try:  # run as ``python -m tests.external.adk``, or imported by the plugin from this directory
    from tests.external.external_suite import Counts, cache_dir, run_pytest
    from tests.external.external_suite import main as run_main
except ImportError:
    from external_suite import Counts, cache_dir, run_pytest  # type: ignore[no-redef]
    from external_suite import main as run_main  # type: ignore[no-redef]

ADK = "google-adk"
ADK_VERSION = "2.13.0"
TEST_FILES = ("tests/unittests/sessions/test_session_service.py",)
"""ADK's session-service contract tests: the ones taking ``session_service`` run on agentlog."""
PYTEST_INI = "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
"""ADK's own pytest settings that these tests need (its async fixtures are plain ``pytest.fixture``)."""


class TestsUnavailableError(Exception):
    """No checkout of ADK's tests is there to run."""


def checkout() -> Path:
    """The adk-python checkout the tests come from."""
    configured = os.environ.get("AGENTLOG_ADK_TESTS")
    root = Path(configured) if configured else cache_dir() / f"adk-python-{ADK_VERSION}"
    missing = [name for name in TEST_FILES if not (root / name).is_file()]
    if missing:
        raise TestsUnavailableError(
            f"no ADK tests at {root} ({missing[0]} missing; the google-adk sdist ships none): "
            f"git clone --depth 1 --branch v{ADK_VERSION} https://github.com/google/adk-python {root}, "
            "or set AGENTLOG_ADK_TESTS to a checkout")
    return root


def run() -> Counts:
    installed = version(ADK)
    if installed != ADK_VERSION:
        raise RuntimeError(f"{ADK} {installed} is installed; these tests are {ADK_VERSION}'s "
                           f"(pip install -e '.[dev]' pins it)")
    source = checkout()
    with tempfile.TemporaryDirectory(prefix="agentlog-adk-") as temp:
        root = Path(temp)
        for name in TEST_FILES:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, root / name)
        (root / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
        return run_pytest(f"google-adk {ADK_VERSION} session-service tests on AgentlogSessionService",
                          root, "adk_swap", TEST_FILES)


def main() -> int:
    return run_main(run, TestsUnavailableError)


if __name__ == "__main__":
    sys.exit(main())
