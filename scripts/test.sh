#!/usr/bin/env bash
# Install agentlog with its dev tools into .venv, then lint, type-check and run the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# The viewer's browser tests drive Debian's chromium (Playwright cannot download its own build here).
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  (apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 \
    && apt-get install -y -q chromium >/dev/null 2>&1; }) || echo "warning: could not install chromium" >&2
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
.venv/bin/ruff check src tests benchmarks examples scripts
.venv/bin/mypy
.venv/bin/lint-imports --no-cache  # the layer contract (pyproject.toml [tool.importlinter])
.venv/bin/python -m pytest "$@"
