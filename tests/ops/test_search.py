"""``agentlog.ops.search``: hits name the session and seq; snippets hold the match."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentlog import MemoryStore, Recorder, SessionHeader
from agentlog.ops.search import find_in_events, search_store, snippet


@given(st.text(max_size=200), st.text(min_size=1, max_size=20), st.text(max_size=200))
def test_a_snippet_holds_the_whole_match(before: str, match: str, after: str) -> None:
    text = before + match + after
    piece = snippet(text, len(before), len(match))
    assert " ".join(match.split()) in piece
    assert len(piece) <= len(match) + 2 * 40 + 2


def test_case_folding_that_changes_lengths_still_points_at_the_match() -> None:
    store = MemoryStore()
    with store.start(SessionHeader(id="s")) as live, Recorder(live).turn() as turn:
        turn.user_message("İİİİ Straße needle")
    (hit,) = find_in_events("s", store.inspect("s").events, "NEEDLE")
    assert hit.seq == 1 and hit.role == "user" and hit.snippet.endswith("needle")
    assert search_store(store, "straße").hits[0].snippet.startswith("İİİİ")
