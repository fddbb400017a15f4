"""A scrub in a subprocess that SIGKILLs itself at a given point of the JSONL rewrite."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from agentlog.ops.scrub import scrub
from agentlog.ops.scrub_text import Secrets
from agentlog.store.urls import open_store


def main(url: str, session_id: str, secret: str, point: str) -> None:
    with open_store(url) as store:
        fs: Any = store._fs  # type: ignore[attr-defined]
        replace = fs.replace

        def killing_replace(source: str, target: str) -> None:
            if point == "before-rename":
                os.kill(os.getpid(), signal.SIGKILL)
            replace(source, target)
            if point == "after-rename":
                os.kill(os.getpid(), signal.SIGKILL)

        fs.replace = killing_replace
        scrub(store, [session_id], Secrets.of([(secret, "key")]))


if __name__ == "__main__":
    main(*sys.argv[1:5])
