#!/usr/bin/env bash
# Regenerate docs/screenshots/*.png: the viewer's browser tests save each page they load there.
set -euo pipefail
cd "$(dirname "$0")/.."
AGENTLOG_SCREENSHOTS="$PWD/docs/screenshots" .venv/bin/python -m pytest tests/web/test_browser.py -q \
  -k "sessions_page or bracket or crashed or hostile or fork_tree or permalink or writer_lock or search_outline or no_longer_sees" "$@"
