"""Run the OpenAI Agents SDK's own session and runner tests with every ``SQLiteSession`` an AgentlogSession.

``python -m tests.external.agents_sdk`` (from the repository root, in the dev venv): downloads the
pinned openai-agents sdist with pip (``pip download --no-deps --no-binary :all:``; kept in
``$AGENTLOG_EXTERNAL_CACHE``, default ``~/.cache/agentlog/external``, and checked against its
sha256), unpacks its ``tests/`` into a temporary directory (nothing is copied into this
repository) and runs them there under pytest with the ``agents_sdk_swap`` plugin, which does the
substitution and picks the tests (see its docstring). Prints passed / failed / not applicable
and exits 1 on a failure or a stale not-applicable entry, 3 when the sdist cannot be had.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path

try:  # run as ``python -m tests.external.agents_sdk``, or imported by the plugin from this directory
    from tests.external.external_suite import Counts, cache_dir, run_pytest
    from tests.external.external_suite import main as run_main
except ImportError:
    from external_suite import Counts, cache_dir, run_pytest  # type: ignore[no-redef]
    from external_suite import main as run_main  # type: ignore[no-redef]

SDK = "openai-agents"
SDK_VERSION = "0.24.0"
SDIST = f"openai_agents-{SDK_VERSION}.tar.gz"
SDIST_SHA256 = "4b4b285f4fed81fdf1b4ac426a9101658d9cd29b4fb1aaeee18f639b77e704e3"
SESSION_FILES = (
    "tests/memory/test_session.py",
    "tests/memory/test_session_limit.py",
    "tests/memory/test_compaction_model_visibility.py",
    "tests/memory/test_compaction_suffix.py",
    "tests/memory/test_openai_responses_compaction_session.py",
    "tests/extensions/memory/test_encrypt_session.py",
)
"""The SDK's session test files: run whole."""
RUNNER_FILES = (
    "tests/test_agent_runner.py",
    "tests/test_agent_runner_streamed.py",
    "tests/test_max_turns.py",
    "tests/test_native_tool_failure_history.py",
    "tests/test_programmatic_tool_calling.py",
    "tests/test_run_impl_resume_paths.py",
    "tests/test_soft_cancel.py",
    "tests/test_tool_batch_failure_history.py",
    "tests/test_tool_failure_boundaries.py",
)
"""The runner test files that use SQLiteSession: only the tests whose source names it."""


class SdistUnavailableError(Exception):
    """The pinned sdist could not be downloaded (no index reachable)."""


def sdist(cache: Path) -> Path:
    """The pinned sdist, downloaded with pip unless the cache holds it; its sha256 checked."""
    archive = cache / SDIST
    if not archive.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                               "--no-binary", ":all:", f"{SDK}=={SDK_VERSION}", "--dest", str(cache)],
                              capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0 or not archive.is_file():
            said = done.stderr.strip().splitlines()
            raise SdistUnavailableError(f"pip download {SDK}=={SDK_VERSION} failed "
                                        f"({said[-1] if said else f'exit {done.returncode}'})")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise RuntimeError(f"{archive}: sha256 {digest}, expected {SDIST_SHA256}")
    return archive


def unpack(archive: Path, into: Path) -> Path:
    """The sdist's ``tests/`` and ``pyproject.toml`` (its pytest settings) under ``into``."""
    top = SDIST.removesuffix(".tar.gz")
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers()
                   if m.name == f"{top}/pyproject.toml" or m.name.startswith(f"{top}/tests/")]
        tar.extractall(into, members=members, filter="data")
    return into / top


def run_tests(root: Path) -> Counts:
    """Run the SDK's tests in ``root`` in a subprocess with the swap plugin; their outcomes counted."""
    return run_pytest(f"openai-agents {SDK_VERSION} tests on AgentlogSession", root, "agents_sdk_swap",
                      (*SESSION_FILES, *RUNNER_FILES))


def run() -> Counts:
    """Download (or reuse) the sdist, unpack it into a temporary directory and run its tests."""
    installed = version(SDK)
    if installed != SDK_VERSION:
        raise RuntimeError(f"{SDK} {installed} is installed; these tests are {SDK_VERSION}'s "
                           f"(pip install -e '.[dev]' pins it)")
    archive = sdist(cache_dir())
    with tempfile.TemporaryDirectory(prefix="agentlog-agents-sdk-") as temp:
        return run_tests(unpack(archive, Path(temp)))


def main() -> int:
    return run_main(run, SdistUnavailableError)


if __name__ == "__main__":
    sys.exit(main())
