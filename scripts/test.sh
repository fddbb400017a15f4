#!/usr/bin/env bash
# Install agentlog with its dev tools into .venv, then lint, type-check and run the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
.venv/bin/ruff check src tests examples
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
