"""Sessions with chosen text in every searchable place, and the check that index hits equal scan hits."""

from __future__ import annotations

import json
from collections.abc import Sequence

from hypothesis import strategies as st

from agentlog import Recorder, SessionHeader
from agentlog.ops.search import Hit, search_store
from agentlog.store.base import Store

TRICKY = ("\u0130", "\u0131", "i", "I", "\u017f", "s", "S", "\u212a", "k", "K", "\u03c3", "\u03c2",
          "\u03a3", "\ufb05", "\ufb06", "\u00df", "\u1e9e", "\u00b5", "\u03bc", "\u00e9", "\u00c9",
          "\u4e2d", "\U0001f600", "\x00", "\n", " ", '"', "'", "*", "-", "%", "_", "\\", "^", ":", "(",
          ")", "NEAR", "AND", "OR", "NOT", "a", "b", "ab")
"""Fragments where case folding, FTS syntax or LIKE patterns could make an index differ from the scan."""

texts = st.lists(st.sampled_from(TRICKY) | st.text(max_size=3), max_size=12).map("".join)
"""Message text built mostly from the tricky fragments."""


def record(store: Store, session_id: str, parts: Sequence[str], *, ended: bool = True) -> None:
    """One session of two turns with ``parts`` as user text, answer, reasoning, tool arguments and result."""
    chosen = [*parts, "", "", "", "", ""][:5]
    with store.start(SessionHeader(id=session_id)) as live:
        recorder = Recorder(live)
        with recorder.turn() as turn:
            with turn.step() as step:
                step.user_message(chosen[0] or "hello")
                step.reasoning_delta(chosen[2] or "thinking")
                step.text_delta(chosen[1] or "looking")
                arguments = json.dumps({"q": chosen[3]})
                step.tool_call_delta("c1", "grep", arguments)
                step.assistant(provider="p", model="m")
                step.tool_call("c1", "grep", arguments)
                step.tool_result("c1", chosen[4] or "nothing")
            with turn.step() as step:
                step.text_delta(chosen[1] + " done")
                step.assistant(provider="p", model="m")
        if not ended:
            turn = recorder.turn().start()
            turn.user_message(chosen[0] + " again")


def outcome(store: Store, text: str, *, scan: bool,
            session_ids: Sequence[str] | None = None) -> tuple[list[Hit], list[str]]:
    """The hits of ``search_store`` and its unreadable sessions (id and error), index or scan."""
    result = search_store(store, text, scan=scan, session_ids=session_ids)
    return result.hits, [f"{bad.session_id}: {bad.error!r}" for bad in result.unreadable]


def hits(store: Store, text: str, *, scan: bool, session_ids: Sequence[str] | None = None) -> list[Hit]:
    """The hits of ``search_store`` over readable sessions, through the index or by scanning them all."""
    found, unreadable = outcome(store, text, scan=scan, session_ids=session_ids)
    assert not unreadable, unreadable
    return found


def assert_index_equals_scan(store: Store, text: str, session_ids: Sequence[str] | None = None) -> list[Hit]:
    """Index and scan agree on ``text`` (hits and unreadable sessions); returns the hits."""
    scanned = outcome(store, text, scan=True, session_ids=session_ids)
    assert outcome(store, text, scan=False, session_ids=session_ids) == scanned
    return scanned[0]
