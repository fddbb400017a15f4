"""The viewer over plain HTTP: what each page says, headers, token, Host, methods, bad paths."""

from __future__ import annotations

import hashlib
import re
import signal
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from agentlog import Recorder, SessionHeader, open_store
from agentlog.store.base import Store
from agentlog.web import create_app
from agentlog.web.guard import check_token
from tests.web.conftest import root_of
from tests.web.stores import (
    CHILD,
    COMPACTED,
    CRASHED,
    HOSTILE_ID,
    PARENT,
    PAYLOADS,
    build_all,
    recording,
    two_turns,
)

DASH = "\u2013"
TOKEN = "s3cret-token-0123456789"


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under the store root with a digest of its bytes (lock files excluded)."""
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file() and ".agentlog" not in path.parts}


def _text(html: str) -> str:
    """The page's text roughly as a person reads it (tags dropped, entities kept)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_sessions_page_lists_every_session_with_title_status_and_fork(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    text = _text(page.text)
    for session_id in (CRASHED, COMPACTED, PARENT, CHILD):
        assert f'href="/s/{session_id}"' in page.text
    assert "5" in text.split("Sessions", 1)[1][:40]  # five sessions
    assert "The test for calc.divide fails." in text
    assert "crashed" in text and "ended" in text
    assert f'fork of <a href="/s/{PARENT}">{PARENT}</a>' in page.text


def test_sessions_page_filters_sorts_and_pages_on_the_server(client: TestClient) -> None:
    client.get("/")  # reads the summaries of the rows it shows (the indexer thread is off here)
    titled = client.get("/", params={"q": "DIVIDE FAILS"}).text  # titles, any case
    assert set(re.findall(r'<td class="id"><a href="/s/([^"]+)"', titled)) == {
        CHILD, COMPACTED, CRASHED, PARENT}
    by_id = client.get("/", params={"q": "session", "sort": "id", "order": "asc"}).text
    ids = re.findall(r'<td class="id"><a href="/s/([^"]+)"', by_id)
    assert ids == sorted(ids) and set(ids) == {CHILD, COMPACTED, CRASHED, PARENT}
    crashed = client.get("/", params={"q": "crashed-sess"}).text
    assert re.findall(r'<td class="id"><a href="/s/([^"]+)"', crashed) == [CRASHED]
    assert "1 of 5" in _text(crashed)
    empty = client.get("/", params={"q": "no such text anywhere"}).text
    assert "no session matches" in empty
    assert client.get("/", params={"page": "x"}).status_code == 400


def test_every_response_carries_the_security_headers(client: TestClient) -> None:
    for url in ("/", f"/s/{CRASHED}", f"/events/{CRASHED}", "/s/absent", "/static/viewer.css", "/nowhere"):
        response = client.get(url)
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy, url
        assert "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy, url
        assert response.headers["x-content-type-options"] == "nosniff", url
        assert response.headers["x-frame-options"] == "DENY", url


def test_only_get_is_served_and_nothing_is_written(client: TestClient, store_url: str) -> None:
    before = _snapshot(root_of(store_url))
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        for url in ("/", f"/s/{CRASHED}", f"/events/{CRASHED}", "/static/viewer.js"):
            assert client.request(method, url).status_code == 405, (method, url)
    for url in ("/", f"/s/{CRASHED}", f"/events/{CRASHED}", f"/s/{COMPACTED}", f"/s/{CHILD}",
                f"/unseen/{CRASHED}", "/search?q=divide", f"/search?q=divide&session={CRASHED}"):
        assert client.get(url).status_code == 200, url
    assert _snapshot(root_of(store_url)) == before  # the crashed session was not repaired


def test_a_foreign_host_header_is_refused_without_a_token(client: TestClient) -> None:
    assert client.get("/", headers={"host": "attacker.example"}).status_code == 421
    assert client.get("/", headers={"host": "localhost:8765"}).status_code == 200
    assert client.get("/", headers={"host": "[::1]:8765"}).status_code == 200


def test_the_token_is_checked_on_every_request(store: Store) -> None:
    with TestClient(create_app(store, token=TOKEN, index_in_background=False),
                    base_url="http://viewer.lan:8765") as client:
        for url in ("/", f"/s/{CRASHED}", "/static/viewer.css", f"/live/{CRASHED}"):
            assert client.get(url).status_code == 401, url
        assert client.get("/", headers={"authorization": "Bearer wrong-token-0123456789"}).status_code == 401
        assert client.get("/", params={"token": "nope"}).status_code == 401
        assert client.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
        adopted = client.get(f"/s/{CRASHED}", params={"token": TOKEN, "turn": "0"}, follow_redirects=False)
        assert adopted.status_code == 303
        assert adopted.headers["location"] == f"/s/{CRASHED}?turn=0"
        cookie = adopted.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert client.get(f"/s/{CRASHED}").status_code == 200  # the cookie from the redirect


def test_a_token_must_be_long_and_url_safe() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        check_token("short")
    with pytest.raises(ValueError, match="at least 16"):
        check_token("a token with spaces and ; semicolons")
    assert check_token(TOKEN) == TOKEN


@pytest.mark.parametrize("path", [
    "/s/..%2F..%2F..%2Fetc%2Fpasswd", "/s/%00", "/events/%2E%2E", "/s/" + "x" * 5000, "/s/%ED%A0%80",
    "/s/--tmp--%2Fcrashed-session", "/live/absent", "/unseen/absent", "/search?q=x&session=..%2Fetc",
])
def test_unknown_or_malformed_session_ids_are_404(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert "passwd" not in response.text or "not found" in response.text


def test_a_crashed_session_is_marked_and_never_repaired(client: TestClient) -> None:
    html = client.get(f"/s/{CRASHED}").text
    text = _text(html)
    assert "interrupted needs repair: turn 3 was left open" in text  # no writer holds it: not "open"
    assert "left open by a crash: a load would close it" in text
    assert "synthetic result (crash repair)" in text
    assert "not stored: a load would write it" in text
    assert "This page never writes them." in text


def test_a_compaction_is_drawn_as_a_bracket_with_its_shadowed_range(client: TestClient) -> None:
    html = client.get(f"/s/{COMPACTED}").text
    bracket = re.search(r'<aside class="compaction".*?</aside>', html, flags=re.DOTALL)
    assert bracket is not None
    text = _text(bracket.group(0))
    assert re.search(rf"shadowed: seq 2{DASH}83 \(13 surface messages, [\d,]+ tokens\)", text), text
    assert f'href="/events/{COMPACTED}?from=2#seq-2">original events' in bracket.group(0)
    assert "Primary Request and Intent" in text
    assert "compacted: no longer in the surface" in html
    surface = html.split('id="surface"', 1)[1]
    assert f"compaction checkpoint: replaces seq 2{DASH}83 (13 messages)" in surface
    assert "After the checkpoint: what changed?" in surface


def test_the_fork_tree_links_parent_and_children_with_boundaries(client: TestClient) -> None:
    child = client.get(f"/s/{CHILD}").text
    parent_link = f'<a href="/s/{PARENT}">{PARENT}</a>'
    assert parent_link in child
    assert re.search(r"fork of parent-session at seq \d+", _text(child))
    parent = client.get(f"/s/{PARENT}").text
    assert f'<a href="/s/{CHILD}">{CHILD}</a>' in parent
    boundary = int(re.search(r"forked at seq (\d+)", _text(parent)).group(1))  # type: ignore[union-attr]
    assert f"/events/{PARENT}?from={boundary}#seq-{boundary}" in parent


def test_the_event_inspector_pages_collapses_chunks_and_permalinks(client: TestClient, store: Store) -> None:
    events = store.inspect(COMPACTED).events
    html = client.get(f"/events/{COMPACTED}").text
    assert 'id="seq-0"' in html and 'href="#seq-0"' in html
    run = re.search(r'id="seq-(\d+)" class="event type-assistant-chunk".*?(\d+) stream chunks', html,
                    re.DOTALL)
    assert run is not None
    first, count = int(run.group(1)), int(run.group(2))
    assert all(events[seq].type == "assistant/chunk" for seq in range(first, first + count))
    assert events[first + count].type != "assistant/chunk"
    expanded = client.get(f"/events/{COMPACTED}", params={"from": first, "expand": "1"}).text
    for seq in range(first, first + count):
        assert f'id="seq-{seq}"' in expanded
    raw = re.search(r'id="seq-0".*?<pre class="raw">(.*?)</pre>', html, re.DOTALL)
    assert raw is not None and "&#34;type&#34;:&#34;turn/start&#34;" in raw.group(1)
    assert client.get(f"/events/{COMPACTED}", params={"from": "-1"}).status_code == 400


def test_hostile_content_is_escaped_and_controls_are_shown(client: TestClient, store_url: str) -> None:
    sessions = client.get("/").text
    html = client.get(f"/s/{quote(HOSTILE_ID, safe='')}").text
    events = client.get(f"/events/{quote(HOSTILE_ID, safe='')}").text
    for page in (sessions, html, events):
        assert "<script>window" not in page and "<img src=x" not in page and "<svg onload" not in page
        assert 'href="javascript:' not in page
        assert "\x1b" not in page and "\u202e" not in page and "\u2066" not in page
    assert "&lt;script&gt;window.__pwned = 1; alert(1)&lt;/script&gt;" in html
    assert "\\x1b[2J\\x1b]0;owned title\\x07 ANSI escapes" in html
    assert "RTL \\u202eoverride\\u202c" in html
    assert "{{ 7*7 }}" in _text(html).replace("&#34;", '"') or "{{ 7*7 }}" in html
    assert len(PAYLOADS) == len(re.findall(r'<section class="turn', html))


def test_fragments_page_the_transcript_and_surface(client: TestClient) -> None:
    fragment = client.get(f"/s/{CRASHED}", params={"fragment": "transcript", "turn": "1"}).text
    assert "<html" not in fragment and 'id="turn-2"' in fragment and 'id="turn-1"' not in fragment
    surface = client.get(f"/s/{CRASHED}", params={"fragment": "surface", "node": "3"}).text
    assert "<html" not in surface and 's-seq-' in surface


def test_a_deleted_session_is_404_after_it_was_viewed(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path}"
    from tests.web.stores import compacted_session

    compacted_session(url, "gone")
    with open_store(url, create=False) as store, TestClient(create_app(store, index_in_background=False),
                                                            base_url="http://127.0.0.1") as client:
        assert client.get("/s/gone").status_code == 200
        with open_store(url) as writer:
            writer.delete("gone")
        assert client.get("/s/gone").status_code == 404


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_every_page_works_on_the_database_stores(backend: str, tmp_path: Path) -> None:
    schema = None
    if backend == "postgres":
        from tests.store.pg_worker import Schema

        schema = Schema.new()
        url = schema.url
    else:
        url = f"sqlite://{tmp_path / 'viewer.db'}"
    try:
        build_all(url)
        with open_store(url, create=False) as store, TestClient(
                create_app(store, index_in_background=False), base_url="http://127.0.0.1") as client:
            listed = client.get("/").text
            assert len(re.findall(r'<tr class="session-row">', listed)) == 5
            assert "synthetic result (crash repair)" in client.get(f"/s/{CRASHED}").text
            assert '<aside class="compaction"' in client.get(f"/s/{COMPACTED}").text
            assert f'<a href="/s/{PARENT}">{PARENT}</a>' in client.get(f"/s/{CHILD}").text
            hostile = client.get(f"/s/{quote(HOSTILE_ID, safe='')}").text
            assert "&lt;script&gt;window.__pwned = 1" in hostile and "<script>window" not in hostile
            assert 'id="seq-0"' in client.get(f"/events/{COMPACTED}").text
    finally:
        if schema is not None:
            schema.drop()


def test_a_damaged_session_is_named_on_the_list_and_its_page_says_why(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path}?compression=none"
    from tests.web.stores import compacted_session

    compacted_session(url, "fine")
    compacted_session(url, "damaged")
    with open_store(url, create=False) as store:
        path = Path(store.locate(store.inspect("damaged").header))
    lines = path.read_bytes().split(b"\n")
    lines[len(lines) // 2] = b'{"type": "user/message", "seq": "not a number"'  # valid lines follow it
    path.write_bytes(b"\n".join(lines))
    with open_store(url, create=False) as store, TestClient(create_app(store, index_in_background=False),
                                                            base_url="http://127.0.0.1") as client:
        listed = client.get("/").text
        row = re.search(r'<tr class="session-row">\s*<td class="id"><a href="/s/damaged">.*?</tr>', listed,
                        re.DOTALL)
        assert row is not None and "unreadable" in row.group(0), listed
        page = client.get("/s/damaged")
        assert page.status_code == 500
        assert "cannot read this session" in page.text and "damaged" in page.text
        assert client.get("/s/fine").status_code == 200


def test_huge_content_is_clipped_on_the_page_and_whole_in_the_inspector(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path}"
    huge = "A" * 3_000_000
    with open_store(url) as store, store.start(SessionHeader(id="huge", cwd="/w")) as live, \
            Recorder(live).turn() as turn, turn.step() as step:
        step.user_message(huge)
        step.request_header({"config": {"provider": "p", "model": "m"}})
        step.text_delta("ok")
        step.assistant()
    with open_store(url, create=False) as store, TestClient(create_app(store, index_in_background=False),
                                                            base_url="http://127.0.0.1") as client:
        page = client.get("/s/huge")
        assert page.status_code == 200 and len(page.text) < 200_000
        assert "clipped here; the event inspector shows all of it" in page.text
        assert len(client.get("/").text) < 50_000


@pytest.mark.parametrize("session_id", ["dir/../x y", "?q=1#frag", "%2e%2e", "100% & more"])
def test_ids_with_url_syntax_round_trip_through_links(tmp_path: Path, session_id: str) -> None:
    url = f"jsonl://{tmp_path}"
    from tests.web.stores import compacted_session

    compacted_session(url, session_id)
    with open_store(url, create=False) as store, TestClient(create_app(store, index_in_background=False),
                                                            base_url="http://127.0.0.1") as client:
        link = re.search(r'<td class="id"><a href="([^"]+)"', client.get("/").text)
        assert link is not None
        page = client.get(link.group(1).replace("&amp;", "&"))
        assert page.status_code == 200
        assert f'<h1 class="session-id">{session_id.replace("&", "&amp;")}</h1>' in page.text


def test_ten_thousand_sessions_are_paged_filtered_and_sorted_on_the_server() -> None:
    from agentlog.store.memory import MemoryStore

    store = MemoryStore()
    for number in range(10_000):
        session_id = f"s{number:05d}"
        store.create(SessionHeader(id=session_id, cwd="/w", created_at=1_700_000_000_000 + number))
        store.append(session_id, [{"type": "user/message", "seq": 0, "time": 1_700_000_000_000 + number,
                                   "data": {"id": f"m{number}", "role": "user", "source": {"kind": "user"},
                                            "content": [{"type": "text", "text": f"task {number}"}]},
                                   "surfaceOp": "append"}])
    with TestClient(create_app(store, index_in_background=False), base_url="http://127.0.0.1") as client:
        first = client.get("/", params={"sort": "created", "order": "desc"}).text
        ids = re.findall(r'<td class="id"><a href="/s/([^"]+)"', first)
        assert ids == [f"s{number:05d}" for number in range(9_999, 9_949, -1)]
        assert "page 1 of 200" in _text(first) and "10,000" in first
        assert "summaries read: 50 / 10,000" in _text(first)  # only the shown rows were read
        last = client.get("/", params={"sort": "created", "order": "desc", "page": "200"}).text
        assert re.findall(r'<td class="id"><a href="/s/([^"]+)"', last)[-1] == "s00000"
        found = client.get("/", params={"q": "S09876"}).text
        assert re.findall(r'<td class="id"><a href="/s/([^"]+)"', found) == ["s09876"]
        assert "task 9876" in found
    store.close()


def _raw_get(base_url: str, target: str) -> tuple[int, dict[str, str]]:
    """Send ``GET target`` byte for byte (no client normalises it) and read the answer's head."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(base_url)
    with socket.create_connection((where.hostname, where.port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: viewer.lan\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    status_line, *lines = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers


@pytest.mark.parametrize(("target", "expected"), [
    ("//evil.example/?token=" + TOKEN, "/evil.example/"),
    ("///evil.example/x?token=" + TOKEN, "/evil.example/x"),
    ("/%2F%2Fevil.example/?token=" + TOKEN, "/%2F%2Fevil.example/"),
    ("/s/abc?turn=1&token=" + TOKEN, "/s/abc?turn=1"),
])
def test_the_token_redirect_stays_on_the_viewer(store: Store, target: str, expected: str) -> None:
    from tests.web.server import serving

    with serving(store, token=TOKEN, index_in_background=False) as base:
        status, headers = _raw_get(base, target)
    assert status == 303
    location = headers["location"]
    assert location == expected
    assert location.startswith("/") and not location.startswith(("//", "/\\"))


def _status(html: str, session_id: str | None = None) -> str:
    """The status badge of the session page, or of ``session_id``'s row on the sessions page."""
    if session_id is not None:
        html = html.split(f'href="/s/{quote(session_id, safe="")}"', 1)[1].split("</tr>", 1)[0]
    found = re.search(r'<span class="status status-[a-z]+"[^>]*>([^<]*)</span>', html)
    assert found is not None
    return found.group(1)


def test_the_status_comes_from_the_writer_lock_not_the_clock(tmp_path: Path) -> None:
    """A live writer's session is open however long its tool runs; SIGKILLed a second ago, it is
    interrupted at once, on the session page and on the sessions list."""
    url = f"jsonl://{tmp_path / 'store'}"
    two_turns(url, "slow-tool")
    two_turns(url, "done")
    with open_store(url, create=False) as store, recording(url, "slow-tool") as writer, \
            TestClient(create_app(store, index_in_background=False), base_url="http://127.0.0.1") as client:
        page = client.get("/s/slow-tool").text
        assert _status(page) == "open"
        assert f"turn 3 is being recorded by process {writer.pid}" in _text(page)
        assert 'class="recovery"' not in page  # no crash banner over a live writer
        assert _status(client.get("/").text, "slow-tool") == "open"
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        page = client.get("/s/slow-tool").text
        assert _status(page) == "interrupted"
        assert "needs repair: turn 3 was left open" in _text(page)
        assert "Turn 3 was left open" in _text(page)
        listed = client.get("/").text
        assert _status(listed, "slow-tool") == "interrupted"
        row = listed.split('href="/s/slow-tool"', 1)[1].split("</tr>")[0]
        assert "turn 3 was left open" in _text(row)
        assert _status(listed, "done") == "ended"


def test_a_live_writers_open_turn_is_not_shown_as_a_crash(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    two_turns(url, "slow-tool")
    with open_store(url, create=False) as store, recording(url, "slow-tool"), \
            TestClient(create_app(store, index_in_background=False), base_url="http://127.0.0.1") as client:
        text = _text(client.get("/s/slow-tool").text)
        assert "being recorded" in text
        assert "crash" not in text and "a load would write" not in text


def test_pages_show_json_and_omit_absent_fields_never_python_reprs(tmp_path: Path) -> None:
    """OpenAI-style tools (``{"type": "function", "function": {...}}``) and an imported subagent
    whose header names a parent but no fork boundary (Claude Code's sidechains)."""
    url = f"jsonl://{tmp_path / 'store'}"
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
             {"type": "custom", "grammar": "x"}]
    with open_store(url) as store:
        with store.start(SessionHeader(id="main")) as live, Recorder(live).turn() as turn, \
                turn.step() as step:
            step.user_message("hi")
            step.request_header({"config": {"provider": "p", "model": "m"}, "tools": tools})
            step.text_delta("hello")
            step.assistant()
        with store.start(SessionHeader(id="agent-sub", parent_session="main")) as live, \
                Recorder(live).turn() as turn, turn.step() as step:
            step.user_message("subtask")
    with open_store(url, create=False) as store, \
            TestClient(create_app(store, index_in_background=False), base_url="http://127.0.0.1") as client:
        pages = {path: client.get(path).text for path in ("/", "/s/main", "/s/agent-sub")}
    for path, html in pages.items():
        assert "FrozenDict" not in html and "FrozenList" not in html and "None" not in html, path
    tools_line = _text(pages["/s/main"]).split("tools:", 1)[1][:200]
    assert "read_file" in tools_line and '{"type":"custom","grammar":"x"}' in tools_line.replace("&#34;", '"')
    assert 'fork of <a href="/s/main">main</a>' in pages["/"]
    assert "fork of main" in _text(pages["/s/agent-sub"]) and "forked at seq" not in pages["/s/main"]
