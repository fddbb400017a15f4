"""The live feed: catch-up pages that add up to the log, and many clients of a long session
costing about what one does (a real ``agentlog serve`` process, its RSS and ``/`` latency)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.live_feeds import SESSION_ID, build_session, run

from agentlog import open_store
from agentlog.core.events import ASSISTANT_CHUNK
from agentlog.web.live import CATCH_UP_SLOTS, catch_up_page, shown
from agentlog.web.viewer import Viewer


def test_the_catch_up_pages_add_up_to_every_shown_event(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    stored = build_session(url, 10 * CATCH_UP_SLOTS)
    with open_store(url, create=False) as store:
        loaded = Viewer(store).load(SESSION_ID)
        rows, cursor, pages = [], 0, 0
        while cursor < stored:
            page, following = catch_up_page(loaded, cursor)
            assert following > cursor and page, cursor
            rows += page
            cursor, pages = following, pages + 1
        assert catch_up_page(loaded, cursor) == ([], cursor)
        expected = [shown(event) for event in loaded.inspection.events if event.type != ASSISTANT_CHUNK]
    assert pages > 1
    assert [row for row in rows if row["type"] != ASSISTANT_CHUNK] == expected
    assert rows[-1]["seq"] == stored - 1


def test_many_clients_catching_up_on_a_long_session_share_the_work(tmp_path: Path) -> None:
    """40 clients of ``/live/<id>?from=0`` on a 20,000-event session (before: each read the whole
    log into memory; the issue's 150 clients on 100,000 events took the server to 3.6 GB)."""
    result = run(str(tmp_path / "store"), events=20_000, clients=40, seconds=60, rss_limit_mb=1500)
    assert result["caught_up"] == 40 and not result["client_errors"], result
    assert result["rss_ratio"] <= 2, result
    assert max(result["index_s_while_connected"] + result["index_s_during_catch_up"]) < 1, result
