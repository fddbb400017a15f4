"""``python -m tests.web.writer URL SESSION TEXT``: another process appends a turn to a session.

Prints ``FLUSHED`` once the turn is durable, so the test can time how soon the page shows it.
"""

from __future__ import annotations

import sys

from agentlog import Recorder, open_store


def main(url: str, session_id: str, text: str) -> None:
    with open_store(url) as store, store.open(session_id) as live:
        recorder = Recorder(live)
        with recorder.turn() as turn, turn.step() as step:
            step.user_message(text)
            step.request_header({"config": {"provider": "p", "model": "m"}})
            step.text_delta(f"answer to {text}")
            step.assistant()
        live.flush()
        print("FLUSHED", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
