"""Finding one's way in real sessions: search (the store's index or scan), the turn outline with
jump links, windowed transcripts, and permalinks that resolve to an element with their id."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from agentlog import Recorder, SessionHeader, open_store
from agentlog.web import create_app
from agentlog.web.views import TURNS_PAGE
from tests.web.stores import COMPACTED, CRASHED, PARENT

LONG = "long-session"


def _ids(html: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', html))


def _resolves(client: TestClient, page: str, href: str) -> bool:
    """``href`` (as found in ``page``) leads to a page holding an element with its fragment's id."""
    target, _, fragment = href.replace("&amp;", "&").partition("#")
    return fragment in _ids(client.get(target or page).text)


@pytest.fixture(scope="module")
def long_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A session of 3 windows of turns, one of which mentions a needle."""
    url = f"jsonl://{tmp_path_factory.mktemp('nav') / 'store'}"
    with open_store(url) as store, store.start(SessionHeader(id=LONG, cwd="/w")) as live:
        recorder = Recorder(live)
        for number in range(3 * TURNS_PAGE):
            with recorder.turn() as turn, turn.step() as step:
                step.user_message(f"question {number}" + (" about the zebra-needle" if number == 17 else ""))
                step.request_header({"config": {"provider": "p", "model": "m"}})
                step.text_delta(f"answer {number}")
                step.assistant()
    return url


@pytest.fixture
def long_client(long_url: str) -> Iterator[TestClient]:
    with open_store(long_url, create=False) as store, \
            TestClient(create_app(store, index_in_background=False), base_url="http://127.0.0.1") as client:
        yield client


def test_the_outline_lists_every_turn_and_each_link_lands_on_it(long_client: TestClient) -> None:
    page = f"/s/{LONG}"
    html = long_client.get(page).text
    outline = html.split('<nav class="outline"', 1)[1].split("</nav>", 1)[0]
    links = re.findall(r'href="([^"]*#turn-\d+)"', outline)
    assert len(links) == 3 * TURNS_PAGE
    assert "question 17 about the zebra-needle" in outline
    assert all(_resolves(long_client, page, href) for href in links)


def test_a_later_window_of_turns_links_back_to_the_earlier_ones(long_client: TestClient) -> None:
    html = long_client.get(f"/s/{LONG}", params={"turn": 2 * TURNS_PAGE}).text
    assert f'id="turn-{2 * TURNS_PAGE + 1}"' in html and 'id="turn-1"' not in html
    earlier = re.search(r'<a class="earlier" href="([^"]+)"', html)
    assert earlier is not None
    assert f'id="turn-{TURNS_PAGE + 1}"' in long_client.get(earlier.group(1).replace("&amp;", "&")).text


def test_the_outline_marks_compactions_forks_and_crashes(client: TestClient) -> None:
    def outline(session_id: str) -> str:
        html = client.get(f"/s/{quote(session_id, safe='')}").text
        return html.split('<nav class="outline"', 1)[1].split("</nav>", 1)[0]
    assert "compaction" in outline(COMPACTED)
    assert "fork" in outline(PARENT)
    assert "crash" in outline(CRASHED)


def test_search_within_a_session_and_across_sessions_links_to_each_hit(long_client: TestClient,
                                                                       client: TestClient) -> None:
    html = long_client.get("/search", params={"q": "ZEBRA-needle", "session": LONG}).text
    hits = re.findall(r'<a class="hit" href="([^"]+)"', html)
    assert len(hits) == 1 and "zebra-needle" in html
    assert _resolves(long_client, "/search", hits[0])
    across = client.get("/search", params={"q": "calc.divide"}).text
    linked = set(re.findall(r'<a class="hit" href="/events/([^"?]+)\?', across))
    assert {CRASHED, COMPACTED, PARENT} <= linked
    for href in re.findall(r'<a class="hit" href="([^"]+)"', across)[:20]:
        assert _resolves(client, "/search", href), href
    assert "no match" in client.get("/search", params={"q": "absent-text-xyz"}).text
    assert client.get("/search", params={"q": ""}).status_code == 200


def test_every_permalink_on_the_pages_resolves(client: TestClient, long_client: TestClient) -> None:
    for http, pages in ((client, [f"/s/{CRASHED}", f"/events/{CRASHED}", f"/s/{COMPACTED}",
                                  f"/events/{COMPACTED}", f"/s/{PARENT}"]),
                        (long_client, [f"/s/{LONG}", f"/events/{LONG}"])):
        for page in pages:
            html = http.get(page).text
            for href in set(re.findall(r'href="([^"]*#[a-z]+-[0-9a-z-]+)"', html)):
                assert _resolves(http, page, href), (page, href)


def test_a_session_permalink_to_any_seq_has_an_element_with_that_id(long_client: TestClient,
                                                                     tmp_path: Path) -> None:
    """``/s/<id>#seq-N``: the transcript marks the events of the turns it shows with ``seq-N``."""
    html = long_client.get(f"/s/{LONG}").text
    assert 'id="seq-2"' in html  # the first user message


class _Tree(HTMLParser):
    """``(depth, class, session id)`` of each ``li`` of the page's fork tree."""

    def __init__(self) -> None:
        super().__init__()
        self.depth, self.inside = 0, False
        self.nodes: list[tuple[int, str, str]] = []
        self._pending: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "ul" and "tree" in (found.get("class") or ""):
            self.inside = True
        if not self.inside:
            return
        if tag == "ul":
            self.depth += 1
        elif tag == "li":
            self._pending = found.get("class") or ""

    def handle_endtag(self, tag: str) -> None:
        if self.inside and tag == "ul":
            self.depth -= 1
            self.inside = self.depth > 0

    def handle_data(self, data: str) -> None:
        if self._pending is not None and data.strip():
            self.nodes.append((self.depth, self._pending, data.strip()))
            self._pending = None


def test_the_fork_tree_is_drawn_as_a_tree_of_the_whole_family(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    with open_store(url) as store:
        with store.start(SessionHeader(id="root")) as live:
            recorder = Recorder(live)
            for number in range(2):
                with recorder.turn() as turn, turn.step() as step:
                    step.user_message(f"q{number}")
                    step.request_header({"config": {"provider": "p", "model": "m"}})
                    step.text_delta("a")
                    step.assistant()
            end = live.session.seq - 1
        for parent, child in (("root", "a"), ("root", "b"), ("a", "a1")):
            with store.fork(parent, end, child):
                pass
    with open_store(url, create=False) as store, \
            TestClient(create_app(store, index_in_background=False), base_url="http://127.0.0.1") as client:
        tree = _Tree()
        tree.feed(client.get("/s/a").text)
    assert tree.nodes == [(1, "ancestor", "root"), (2, "this", "a"), (3, "child", "a1"), (2, "relative", "b")]


def test_what_the_model_no_longer_sees_lists_the_shadowed_messages(client: TestClient) -> None:
    session = client.get(f"/s/{COMPACTED}").text
    link = re.search(r'<a class="unseen" href="([^"]+)">([^<]+)</a>', session)
    assert link is not None and "13" in link.group(2)
    html = client.get(link.group(1)).text
    items = re.findall(r'<article class="msg[^"]*" id="u-seq-(\d+)"', html)
    assert len(items) == 13
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert "13 of 16 log messages are no longer in the surface" in text  # 3 appended after the checkpoint
    assert "replaced at #" in html
    for href in set(re.findall(r'href="([^"]*#seq-\d+)"', html)):
        assert _resolves(client, link.group(1), href), href
    nothing = client.get(f"/unseen/{CRASHED}").text
    assert "The model still sees every message of the log" in nothing
