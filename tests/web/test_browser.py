"""The viewer in a real browser (Debian's chromium driven by Playwright): what a person sees.

Every page is loaded against real stores (the demo's sessions, a SIGKILLed recorder, a fork, a
compaction, hostile content, an imported Claude Code transcript); a writer subprocess appends
while a page is open; hostile strings must show as text while a page-level flag and a dialog
listener prove that nothing ran.
Screenshots go to ``$AGENTLOG_SCREENSHOTS`` when set (``scripts/screenshots.sh``), else to tmp.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from agentlog import Recorder, SessionHeader, open_store
from agentlog.cli.demo import record_turn
from agentlog.cli.render import visible
from agentlog.store.base import Store
from tests.web.server import CHROMIUM, ensure_chromium, launch, serving
from tests.web.stores import COMPACTED, CRASHED, HOSTILE_ID, PARENT, PAYLOADS, recording, two_turns

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
REPO = Path(__file__).resolve().parents[2]
DASH = "\u2013"
FLAG = "Object.defineProperty(window, '__dialogs', {value: [], writable: false});"


@pytest.fixture(scope="module")
def browser(store_url: str) -> Iterator[Any]:
    """Chromium; the shared store is built first (its compaction refuses to run inside the event
    loop that Playwright's sync API keeps running)."""
    if not os.path.exists(ensure_chromium()):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing (scripts/test.sh installs Debian's chromium)")
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium")
    with playwright_api.sync_playwright() as playwright:
        chromium = launch(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    tab.dialogs = []
    tab.errors = []
    tab.on("dialog", lambda dialog: (tab.dialogs.append(dialog.message), dialog.dismiss()))
    tab.on("pageerror", lambda error: tab.errors.append(str(error)))
    tab.on("console", lambda message: tab.errors.append(message.text) if message.type == "error" else None)
    try:
        yield tab
    finally:
        context.close()


@pytest.fixture(scope="module")
def base(store_url: str) -> Iterator[str]:
    with open_store(store_url, create=False) as store, serving(store) as url:
        yield url


def _shots(tmp_path: Path) -> Path:
    target = Path(os.environ.get("AGENTLOG_SCREENSHOTS") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    return target


def test_sessions_page_shows_every_session_and_links_to_it(page: Any, base: str, tmp_path: Path) -> None:
    page.goto(base + "/")
    rows = page.locator("tr.session-row")
    assert rows.count() == 5
    assert "5" in page.inner_text("#session-count")
    assert page.locator("tr.session-row", has_text=PARENT).count() == 2  # the parent and its fork
    page.screenshot(path=str(_shots(tmp_path) / "sessions.png"))
    page.fill("#filter", "compacted")
    page.click("button[type=submit]")
    assert page.locator("tr.session-row").count() == 1
    page.click(f"text={COMPACTED}")
    page.wait_for_url(f"{base}/s/{COMPACTED}")
    assert page.inner_text("h1") == COMPACTED
    assert page.errors == []


def test_session_page_shows_transcript_surface_bracket_and_chart(page: Any, base: str,
                                                                   tmp_path: Path) -> None:
    page.goto(f"{base}/s/{COMPACTED}")
    page.screenshot(path=str(_shots(tmp_path) / "session-compacted.png"))
    bracket = page.locator("aside.compaction")
    assert bracket.count() == 1
    assert f"shadowed: seq 2{DASH}83 (13 surface messages" in bracket.inner_text()
    bracket.locator("a.original").click()
    page.wait_for_url(f"{base}/events/{COMPACTED}?from=2#seq-2")
    assert page.locator("#seq-2").is_visible()
    page.go_back()
    surface = page.locator("#surface")
    assert f"compaction checkpoint: replaces seq 2{DASH}83" in surface.inner_text()
    assert surface.locator("article.msg").count() == 4  # checkpoint, answer, new question, new answer
    assert page.locator("#transcript article.shadowed").count() == 13
    assert page.locator("svg.chart path.estimated").count() == 1
    assert page.locator("svg.chart line.compaction").count() == 1
    assert page.locator("svg.chart text.tick-y").count() >= 3  # a labelled token axis
    hover = page.locator("svg.chart circle.point title").first.text_content() or ""
    assert hover.startswith("seq ") and "estimate" in hover and "tokens" in hover
    assert page.errors == []


def test_crashed_session_marks_repair_and_synthetic_results(page: Any, base: str, tmp_path: Path) -> None:
    page.goto(f"{base}/s/{CRASHED}")
    turn = page.locator("section.turn.crash-closed")
    assert turn.count() == 1
    assert "left open by a crash" in turn.inner_text()
    synthetic = page.locator("#transcript article.synthetic")
    assert synthetic.count() == 1
    assert "not stored: a load would write it" in synthetic.inner_text()
    assert "was left open" in page.inner_text("p.recovery")
    page.screenshot(path=str(_shots(tmp_path) / "session-crashed.png"))


def test_reasoning_is_collapsed_until_opened(page: Any, base: str) -> None:
    page.goto(f"{base}/s/{quote(HOSTILE_ID, safe='')}")
    reasoning = page.locator("#transcript details.reasoning").first
    assert not reasoning.locator("pre").is_visible()
    reasoning.locator("summary").click()
    assert reasoning.locator("pre").is_visible()
    assert "thinking about" in reasoning.locator("pre").inner_text()


def test_hostile_content_is_shown_as_text_and_never_runs(page: Any, base: str, tmp_path: Path) -> None:
    page.add_init_script(FLAG)
    quoted = quote(HOSTILE_ID, safe="")
    for url in ("/", f"/s/{quoted}", f"/events/{quoted}", f"/events/{quoted}?expand=1",
                f"/s/{quoted}?fragment=transcript"):
        page.goto(base + url)
        page.wait_for_load_state("networkidle")
        assert page.evaluate("window.__pwned") is None, url
        assert page.dialogs == [], url
    page.goto(f"{base}/s/{quoted}")
    transcript = page.inner_text("#transcript")
    for payload in PAYLOADS:  # every one shown as the text it is, controls as escapes
        assert visible(payload) in transcript, payload
    assert "<script>window.__pwned = 1; alert(1)</script>" in transcript
    assert '<img src=x onerror="window.__pwned=2;alert(2)">' in transcript
    assert "\\x1b[2J\\x1b]0;owned title\\x07 ANSI escapes" in transcript
    assert "RTL \\u202eoverride\\u202c" in transcript
    assert page.locator("#transcript a[href^='javascript:']").count() == 0
    assert page.locator("#transcript img, #transcript script, #transcript svg").count() == 0
    assert page.inner_text("h1") == HOSTILE_ID.replace("\u202e", "\\u202e").replace("\x1b", "\\x1b")
    page.screenshot(path=str(_shots(tmp_path) / "session-hostile.png"))
    assert page.evaluate("window.__pwned") is None and page.dialogs == []


def test_fork_tree_links_both_ways(page: Any, base: str, tmp_path: Path) -> None:
    page.goto(f"{base}/s/{PARENT}")
    child = page.locator(".tree li.child a").first
    child_id = child.inner_text()
    child.click()
    page.wait_for_url(f"{base}/s/{child_id}")
    assert "fork of parent-session at seq" in page.inner_text(".tree li.this")
    page.screenshot(path=str(_shots(tmp_path) / "session-fork.png"))
    page.locator(".tree li.ancestor a").click()
    page.wait_for_url(f"{base}/s/{PARENT}")


def test_permalink_into_a_collapsed_chunk_run_opens_it(page: Any, base: str, store: Store,
                                                       tmp_path: Path) -> None:
    events = store.inspect(COMPACTED).events
    chunk = next(event.seq for event in events if event.type == "assistant/chunk" and
                 events[event.seq - 1].type == "assistant/chunk")
    page.goto(f"{base}/events/{COMPACTED}#seq-{chunk}")
    page.wait_for_url(f"{base}/events/{COMPACTED}?from={chunk}&expand=1#seq-{chunk}")
    row = page.locator(f"#seq-{chunk}")
    assert row.is_visible() and "assistant/chunk" in row.inner_text()
    page.goto(f"{base}/events/{COMPACTED}#seq-13")
    page.locator("#seq-13 summary").click()
    page.screenshot(path=str(_shots(tmp_path) / "events.png"))


def _long_session(url: str, session_id: str, turns: int) -> None:
    with open_store(url) as store, store.start(SessionHeader(id=session_id, cwd="/work")) as live:
        recorder = Recorder(live)
        for number in range(turns):
            record_turn(recorder, number % 2, seed=number)


def test_scrolling_loads_more_turns_without_loading_everything(page: Any, tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'long'}"
    _long_session(url, "long", 25)
    with open_store(url, create=False) as store, serving(store, index_in_background=False) as base:
        page.goto(f"{base}/s/long")
        assert page.locator("#transcript section.turn").count() == 10
        assert page.locator("#surface article.msg").count() == 40
        for expected in (20, 25):
            page.locator("#transcript a.more").scroll_into_view_if_needed()
            expect(page.locator("#transcript section.turn")).to_have_count(expected)
        assert page.locator("#transcript a.more").count() == 0
        assert page.locator("#turn-25").is_visible()


@pytest.mark.parametrize("backend", ["jsonl", "sqlite", "postgres"])
def test_a_write_by_another_process_shows_up_within_two_seconds(page: Any, tmp_path: Path,
                                                                 backend: str) -> None:
    if backend == "postgres":
        from tests.store.pg_worker import Schema

        schema = Schema.new()
        url = schema.url
    else:
        url = f"jsonl://{tmp_path / 'live'}" if backend == "jsonl" else f"sqlite://{tmp_path / 'live.db'}"
    try:
        _long_session(url, "live", 1)
        with open_store(url, create=False) as store, serving(store, index_in_background=False) as base:
            page.goto(f"{base}/s/live")
            page.locator("#session[data-live-state=connected]").wait_for()
            before = page.inner_text("#event-count")
            text = f"live message {random.randrange(10**9)}"
            writer = subprocess.Popen([sys.executable, "-m", "tests.web.writer", url, "live", text],
                                      stdout=subprocess.PIPE, text=True, cwd=REPO)
            assert writer.stdout is not None
            with writer:
                assert writer.stdout.readline().strip() == "FLUSHED"
                flushed = time.monotonic()
                page.locator("#live-items", has_text=text).wait_for(timeout=2000)
                arrived = time.monotonic() - flushed
                writer.wait(timeout=30)
            assert arrived < 2.0
            assert page.inner_text("#event-count") != before
            assert page.locator("#live-items article.role-user", has_text=text).count() == 1
    finally:
        if backend == "postgres":
            schema.drop()


def test_every_page_fetches_only_its_own_assets(page: Any, base: str) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    for url in ("/", f"/s/{CRASHED}", f"/events/{CRASHED}"):
        page.goto(base + url)
        page.wait_for_load_state("networkidle")
    assert requested and all(url.startswith(base) for url in requested), requested
    assert page.errors == []


def test_the_demo_store_shows_its_repaired_crash_and_its_fork(page: Any, tmp_path: Path) -> None:
    from agentlog.cli.demo import run_demo

    url = f"jsonl://{tmp_path / 'demo'}"
    report = run_demo(url, log=lambda line: None)
    with open_store(url, create=False) as store, serving(store) as base:
        page.goto(base + "/")
        expect(page.locator("tr.session-row")).to_have_count(2)
        page.click(f"td.id a >> text='{report.session_id}'")
        crashed = page.locator("section.turn.crash-closed")
        assert "closed by crash repair" in crashed.inner_text()
        assert page.locator("#transcript article.synthetic").count() == len(
            [event for event in report.closers if event.type == "tool/result"])
        assert page.locator("#transcript span.badge.pending").count() == 0  # the repair is stored
        page.locator(".tree li.child a").first.click()
        page.wait_for_url(f"{base}/s/{quote(report.child_id, safe='')}")
        assert f"at seq {report.fork_boundary + 1}" in page.inner_text(".tree li.this")
        assert "Instead of coverage, just list the test files." in page.inner_text("#transcript")
        assert page.errors == []


def test_an_imported_claude_code_transcript_shows_claudes_compaction(page: Any, tmp_path: Path,
                                                                      shared_data: Path) -> None:
    """A real transcript brought in by ``agentlog import claude-code``: its compaction is bracketed."""
    from agentlog.io.importers import IMPORTERS, SourceFile, save_imported

    path = next((shared_data / "transcripts/claude-code/marot__spotter").rglob("4d5611e5-*.jsonl"))
    (imported,) = IMPORTERS["claude-code"](SourceFile(str(path), path.read_bytes()))
    url = f"jsonl://{tmp_path / 'imported'}"
    with open_store(url) as store:
        assert save_imported(store, imported) == "imported"
    with open_store(url, create=False) as store, serving(store) as base:
        page.goto(base + "/")
        expect(page.locator("tr.session-row")).to_have_count(1)
        page.click(f"td.id a >> text='{imported.header.id}'")
        bracket = page.locator("aside.compaction")
        assert bracket.count() == 1
        assert f"shadowed: seq 1{DASH}325" in bracket.inner_text()
        assert "compaction checkpoint" in page.inner_text("#surface")
        assert page.errors == [] and page.dialogs == []


def test_the_status_follows_the_writer_lock_of_a_real_process(page: Any, tmp_path: Path) -> None:
    """A recorder in the middle of a slow tool is open; SIGKILLed, the same session is interrupted
    on its page and on the sessions list at once (no two-minute guess)."""
    url = f"jsonl://{tmp_path / 'store'}"
    two_turns(url, "slow-tool")
    two_turns(url, "finished")
    with open_store(url, create=False) as store, serving(store) as base, \
            recording(url, "slow-tool") as writer:
        page.goto(f"{base}/s/slow-tool")
        expect(page.locator("#status")).to_have_text("open")
        assert f"being recorded by process {writer.pid}" in page.inner_text("dl.facts")
        assert page.locator("p.recovery").count() == 0 and page.locator("section.crash-closed").count() == 0
        page.screenshot(path=str(_shots(tmp_path) / "session-live.png"))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        page.reload()
        expect(page.locator("#status")).to_have_text("interrupted")
        assert "needs repair: turn 3 was left open" in page.inner_text("dl.facts")
        assert "Turn 3 was left open" in page.inner_text("p.recovery")
        page.goto(base + "/")
        row = page.locator("tr.session-row", has_text="slow-tool")
        expect(row.locator("span.status")).to_have_text("interrupted")
        assert "turn 3 was left open" in row.inner_text()
        finished = page.locator("tr.session-row", has_text="finished")
        expect(finished.locator("span.status")).to_have_text("ended")
        page.screenshot(path=str(_shots(tmp_path) / "sessions-status.png"))
        assert page.errors == []


def test_search_outline_and_permalinks_find_their_place(page: Any, base: str, tmp_path: Path) -> None:
    """Search from the sessions page, open a hit; jump through the outline; a session permalink
    to a seq the window does not show lands on that event in the inspector."""
    page.goto(base + "/")
    page.fill("#search", "calc.divide")
    page.press("#search", "Enter")
    page.wait_for_url(f"{base}/search?q=calc.divide")
    assert int(page.inner_text("#hit-count").split()[0]) >= 3
    page.screenshot(path=str(_shots(tmp_path) / "search.png"))
    hit = page.locator("a.hit").first
    target = hit.get_attribute("href")
    assert target is not None
    hit.click()
    seq = target.rsplit("#seq-", 1)[1]
    expect(page.locator(f"#seq-{seq}")).to_be_visible()
    page.goto(f"{base}/s/{COMPACTED}")
    outline = page.locator("nav.outline")
    expect(outline.locator("li")).to_have_count(3)
    assert "compaction" in outline.inner_text()
    page.screenshot(path=str(_shots(tmp_path) / "session-outline.png"))
    outline.locator("a", has_text="turn 3").click()
    assert page.url.endswith("#turn-3")
    expect(page.locator("#turn-3")).to_be_in_viewport()
    page.goto(f"{base}/s/{COMPACTED}#seq-0")  # turn/start: no message, so the inspector shows it
    page.wait_for_url(f"{base}/events/{COMPACTED}?from=0#seq-0")
    expect(page.locator("#seq-0")).to_be_visible()
    assert page.errors == []


def test_the_fork_tree_draws_the_whole_family(page: Any, tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    two_turns(url, "root")
    with open_store(url) as store:
        end = len(store.inspect("root").events) - 1
        for parent, child in (("root", "fork-a"), ("root", "fork-b"), ("fork-a", "fork-a1")):
            with store.fork(parent, end, child):
                pass
    with open_store(url, create=False) as store, serving(store) as base:
        page.goto(f"{base}/s/fork-a")
        expect(page.locator(".tree li.this")).to_contain_text("fork of root at seq")
        expect(page.locator(".tree li.ancestor > a").first).to_have_text("root")
        expect(page.locator(".tree li.this li.child > a").first).to_have_text("fork-a1")
        expect(page.locator(".tree li.ancestor li.relative > a").first).to_have_text("fork-b")
        page.locator(".tree").screenshot(path=str(_shots(tmp_path) / "fork-tree.png"))
        page.locator(".tree li.relative > a").first.click()
        page.wait_for_url(f"{base}/s/fork-b")
        assert page.errors == []


def test_what_the_model_no_longer_sees(page: Any, base: str, tmp_path: Path) -> None:
    page.goto(f"{base}/s/{COMPACTED}")
    page.click("a.unseen")
    page.wait_for_url(f"{base}/unseen/{COMPACTED}")
    expect(page.locator("div.unseen article.msg")).to_have_count(13)
    assert "13 of 16 log messages" in page.inner_text("#unseen-count")
    page.screenshot(path=str(_shots(tmp_path) / "unseen.png"))
    page.locator("p.bracket-ref a").first.click()
    expect(page.locator("tr.event.target, #events")).not_to_have_count(0)
    assert page.errors == []


def test_a_long_session_is_read_in_windows_of_turns(page: Any, tmp_path: Path) -> None:
    """The outline jumps into a later window; the window links back to the earlier turns."""
    from agentlog.web.views import TURNS_PAGE

    url = f"jsonl://{tmp_path / 'store'}"
    turns = 3 * TURNS_PAGE
    with open_store(url) as store, store.start(SessionHeader(id="long", cwd="/w")) as live:
        recorder = Recorder(live)
        for number in range(turns):
            with recorder.turn() as turn, turn.step() as step:
                step.user_message(f"question {number + 1}")
                step.request_header({"config": {"provider": "p", "model": "m"}})
                step.text_delta(f"answer {number + 1}")
                step.assistant()
    with open_store(url, create=False) as store, serving(store) as base:
        page.goto(f"{base}/s/long")
        expect(page.locator("nav.outline li")).to_have_count(turns)
        expect(page.locator("#transcript section.turn")).to_have_count(TURNS_PAGE)  # one window, not all
        page.locator("nav.outline a", has_text=f"turn {turns - 1}").click()
        page.wait_for_url(f"{base}/s/long?turn={2 * TURNS_PAGE}#turn-{turns - 1}")
        expect(page.locator(f"#turn-{turns - 1}")).to_be_in_viewport()
        assert page.locator("#turn-1").count() == 0
        page.click("a.earlier")
        page.wait_for_url(f"{base}/s/long?turn={TURNS_PAGE}&node=0")
        expect(page.locator(f"#turn-{TURNS_PAGE + 1}")).to_be_attached()
        assert page.errors == []
