"""The memory of a resumed session as a user's process sees it (issue 15, target 3).

The scale suite runs this file's text with ``python -c TEXT SPEC`` (``-m`` would import the
package first): it imports the standard library and ``agentlog`` only, so the bench harness's own
imports do not count, and prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def _status_bytes(field_name: str) -> int:
    """A ``/proc/self/status`` size field in bytes (VmRSS: now; VmHWM: the peak). Not the
    runner's ``peak_rss``: importing the runner loads the harness (rich), and the first reading
    comes before ``import agentlog``."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field_name}")


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Import agentlog, open the session and derive its messages; each stage's RSS."""
    interpreter = _status_bytes("VmRSS")
    import agentlog

    idle = _status_bytes("VmRSS")
    store = agentlog.JsonlStore(spec["place"], compression=spec["compression"])
    start = time.perf_counter()
    live = store.open(spec["session"])
    messages = live.session.derive_messages()
    elapsed = time.perf_counter() - start
    result = {"s": elapsed, "interpreter_rss": interpreter, "rss_before": idle,
              "peak_rss": _status_bytes("VmHWM"), "events": live.session.seq, "messages": len(messages)}
    live.close()
    store.close()
    return result


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.argv[1]))), flush=True)
