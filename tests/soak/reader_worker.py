"""A reader process for the soak: reads a session that another process is writing, until told to stop.

Usage: python -m tests.soak.reader_worker STORE_URL SESSION_ID READS   (READS: comma-separated
``inspect``, ``read_from``, ``load``). Prints ``OK <reads>`` at the end, or ``FAIL <why>`` and
exits 1 at the first read that is not a prefix of the workload or a permitted refusal.
"""

from __future__ import annotations

import contextlib
import sys

from benchmarks.workload import workload_events

from agentlog.core.events import Event
from agentlog.core.invariants import check_invariants
from agentlog.core.repair import interrupted_turn_closers
from agentlog.errors import SessionLockedError, SessionNotFoundError
from agentlog.store.urls import open_store

EXPECTED = [(event.type, event.data) for event in workload_events(40, seed=7)]


def _check_prefix(events: list[Event]) -> None:
    """What a reader sees is the workload's prefix, then at most a balanced close (a repair that
    a ``load`` committed after the writer died, or closers ``inspect`` adds in memory)."""
    stored = [(event.type, event.data) for event in events]
    matching = next((index for index, pair in enumerate(stored)
                     if index >= len(EXPECTED) or pair != EXPECTED[index]), len(stored))
    if matching != len(stored):
        check_invariants(events)
        repair = interrupted_turn_closers(events[:matching])
        if [(e.type, e.data) for e in events[matching:]] != [(e.type, e.data) for e in repair]:
            raise AssertionError(f"event {matching} is neither the workload's nor a repair closer")


def main(url: str, session_id: str, reads: list[str]) -> None:
    count = 0
    stop = False
    while not stop:
        stop = sys.stdin.readable() and _stdin_closed()
        for read in reads:
            store = open_store(url)
            try:
                if read == "read_from":
                    _check_prefix(list(store.read_from(session_id, 0).events))
                elif read == "inspect":
                    _check_prefix(list(store.inspect(session_id).events))
                else:
                    with contextlib.suppress(SessionLockedError):  # the writer holds it: no repair
                        _check_prefix(list(store.load(session_id).events))
                count += 1
            except SessionNotFoundError:
                pass  # not materialized yet
            except Exception as exc:  # any other outcome is the finding
                sys.stdout.write(f"FAIL {read}: {type(exc).__name__}: {exc}\n")
                sys.stdout.flush()
                sys.exit(1)
            finally:
                store.close()
    sys.stdout.write(f"OK {count}\n")
    sys.stdout.flush()


def _stdin_closed() -> bool:
    import select

    ready, _, _ = select.select([sys.stdin], [], [], 0)
    return bool(ready) and not sys.stdin.buffer.read1(1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3].split(","))
