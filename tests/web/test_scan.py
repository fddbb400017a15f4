"""The viewer's pure parts: the log index against the session's own fold, chunk runs, rows, chart."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.workload import record_workload, workload_events
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import Recorder, Session, SessionHeader, open_store
from agentlog.core.packed import ChunkRun, EventsView
from agentlog.store.records import Recovery
from agentlog.web.chart import MAX_POINTS, pressure_chart
from agentlog.web.rows import PAGE_SIZE, SORTS, Row, Summary, select, status_of
from agentlog.web.scan import Bracket, StepPoint, index_session, title_of
from agentlog.web.views import event_rows, surface_items, turn_views
from tests.strategies import fixed_clock, interleaved, run_ops, session_ops


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_index_surface_is_the_sessions_surface(data: st.DataObject) -> None:
    ops = data.draw(interleaved(data.draw(session_ops())))
    session = Session.create("s", clock=fixed_clock())
    run_ops(session, ops)
    index = index_session(session.events)
    assert index.nodes == list(session.surface.nodes)
    shown = [item.seq for item in surface_items(session.events, index, 0, len(index.nodes))]
    assert shown == [seq for seq in session.surface.nodes
                     if session.events[seq].type != "assistant/message" or
                     session.events[seq].data["message"]["content"]]
    for seq in index.shadowed_by:
        assert seq not in session.surface.nodes


def test_the_index_of_a_packed_cold_read_equals_the_live_one(tmp_path: Path) -> None:
    with open_store(f"jsonl://{tmp_path}") as store, store.start(SessionHeader(id="w")) as live:
        record_workload(live.session, 6)
        live.flush()
        hot = index_session(live.session.events)
    with open_store(f"jsonl://{tmp_path}", create=False) as store:
        events = store.inspect("w").events
    assert isinstance(events, EventsView)
    cold = index_session(events)
    assert (cold.nodes, cold.shadowed_by, cold.title, cold.model) == (
        hot.nodes, hot.shadowed_by, hot.title, hot.model)
    assert [(s.number, s.start, s.stop, s.steps, s.reason) for s in cold.turns] == \
           [(s.number, s.start, s.stop, s.steps, s.reason) for s in hot.turns]
    assert cold.steps == hot.steps and len(cold.steps) == sum(span.steps for span in cold.turns)
    assert [span.number for span in cold.turns] == [1, 2, 3, 4, 5, 6]
    assert sum(1 for _, slot in events.entries() if isinstance(slot, ChunkRun)) > 0


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 3), st.integers(0, 60), st.integers(1, 80), st.booleans())
def test_entries_visit_every_seq_once_and_rows_cover_the_range(turns: int, start: int, count: int,
                                                               expand: bool) -> None:
    events = workload_events(turns)
    session = Session.restore("w", [event.to_wire() for event in events], SessionHeader(id="w"))
    view = session.events
    seen: list[int] = []
    for seq, slot in view.entries():
        seen.extend(range(seq, slot.seq0 + slot.count) if isinstance(slot, ChunkRun) else [seq])
    assert seen == list(range(len(view)))
    rows = event_rows(view, start, expand=expand, count=count)
    covered = [seq for row in rows for seq in range(row.seq, row.seq + row.count)]
    assert covered == list(range(min(start, len(view)), min(len(view), start + len(covered))))
    assert len(rows) <= count
    if expand:
        assert all(row.count == 1 for row in rows)


def test_turn_views_page_by_turn_and_keep_log_order() -> None:
    events = workload_events(12)
    index = index_session(events)
    views = turn_views(events, index, 10)
    assert [view.span.number for view in views] == [11, 12]
    seqs = [item.seq for view in views for item in view.items]  # type: ignore[union-attr]
    assert seqs == sorted(seqs) and all(seq >= views[0].span.start for seq in seqs)


def _row(number: int, title: str, *, summary: bool = True) -> Row:
    header = SessionHeader(id=f"s{number:03d}", created_at=number, cwd=f"/w/{number % 3}")
    read = Summary(title, "m", number % 5, number * 10, number * 100, number * 1000, None)
    return Row(header, read if summary else None)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 999), st.text(max_size=8), st.booleans()), max_size=130,
                unique_by=lambda item: item[0]),
       st.sampled_from(["", "a", "S0", "/w/1", "Z"]), st.sampled_from(sorted(SORTS)), st.booleans())
def test_select_filters_sorts_and_pages_every_match_once(items: list[tuple[int, str, bool]], query: str,
                                                         sort: str, descending: bool) -> None:
    rows = [_row(number, title, summary=read) for number, title, read in items]
    pages = [select(rows, query, sort, descending, page) for page in range(1, 6)]
    first = pages[0]
    expected = [row for row in rows if query.casefold() in
                "\n".join([row.header.id, row.header.cwd or "", row.summary.title if row.summary else "",
                           "m" if row.summary else ""]).casefold()]
    assert first.matched == len(expected) and first.total == len(rows)
    assert first.pages == max(1, -(-len(expected) // PAGE_SIZE))
    shown = [row for page in pages[: first.pages] for row in page.rows]
    assert sorted(row.header.id for row in shown) == sorted(row.header.id for row in expected)
    keys = [SORTS[sort](row) for row in shown]
    assert keys == sorted(keys, reverse=descending)
    assert all(len(page.rows) <= PAGE_SIZE for page in pages)


def test_status_tells_open_interrupted_ended_and_error_apart() -> None:
    closers = workload_events(1)[-1:]
    open_turn = Recovery(10, False, None, None, (), tuple(closers))  # closes turn 1
    torn = Recovery(10, True, 120, 7, (), ())
    assert status_of(None, None, "completed") == ("ended", "every turn is closed")
    assert status_of(None, 42, "completed") == ("open", "process 42 holds the writer lock (between turns)")
    assert status_of(open_turn, 42, None) == ("open", "turn 1 is being recorded by process 42")
    assert status_of(open_turn, None, None) == (
        "interrupted", "needs repair: turn 1 was left open; loading it writes 1 synthetic event")
    assert status_of(torn, None, "completed") == (
        "interrupted", "needs repair: a torn tail is ignored (7 bytes at offset 120)")
    assert status_of(None, None, "error") == ("error", "the last turn ended in an error")
    assert status_of(None, None, "interrupted") == (
        "error", "the last turn was interrupted (closed by crash repair)")


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=2000))
def test_the_chart_samples_long_sessions_and_holds_numbers_only(values: list[tuple[int, int]]) -> None:
    points = [StepPoint(seq, None, provider or None, estimate)
              for seq, (provider, estimate) in enumerate(values)]
    svg = pressure_chart(points, [Bracket('<script>"&', 0)], 65536)
    drawn = re.search(r'class="estimated" d="([^"]*)"', svg)
    assert drawn is not None and drawn.group(1).count("L") + 1 == min(len(points), MAX_POINTS)
    assert "<script>" not in svg and "&lt;script&gt;&quot;&amp;" in svg
    assert f"{len(points):,} steps" in svg
    assert pressure_chart([], [], None) == ""


def test_titles_skip_the_boilerplate_agents_wrap_around_the_users_words() -> None:
    def blocks(*texts: str) -> list[dict[str, str]]:
        return [{"type": "text", "text": text} for text in texts]
    assert title_of(blocks("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>",
                           "Fix the flaky test")) == "Fix the flaky test"
    assert title_of(blocks("<user_instructions>be terse</user_instructions>\n\nRename foo to bar")) == (
        "Rename foo to bar")
    assert title_of(blocks("<command-name>/clear</command-name>\n<command-message>clear</command-message>"
                           "\n<command-args></command-args>")) == ""
    assert title_of(blocks("Caveat: The messages below were generated by the user while running local "
                           "commands. DO NOT respond to these messages.")) == ""
    assert title_of(blocks("<system-reminder>x</system-reminder>Why does <div> wrap?")) == (
        "Why does <div> wrap?")
    assert title_of(blocks("<div>my html</div> question")) == "<div>my html</div> question"  # a user's own


def test_the_title_is_the_first_user_message_with_words_of_the_user() -> None:
    with open_store("memory:") as store, store.start(SessionHeader(id="t")) as live:
        recorder = Recorder(live)
        for text in ("<environment_context><cwd>/w</cwd></environment_context>", "Add a --json flag"):
            with recorder.turn() as turn, turn.step() as step:
                step.user_message(text)
                step.request_header({"config": {"provider": "p", "model": "m"}})
                step.text_delta("ok")
                step.assistant()
        events = live.session.events
        assert index_session(events, len(events)).title == "Add a --json flag"


def test_the_chart_has_axes_labels_and_a_hover_value_per_point() -> None:
    points = [StepPoint(10 * n, n // 3 + 1, 1000 + 500 * n if n % 2 else None, 900 + 480 * n)
              for n in range(12)]
    svg = pressure_chart(points, [], 65536)
    ticks = re.findall(r'<text class="tick-y"[^>]*>([^<]+)</text>', svg)
    assert len(ticks) >= 3 and ticks[0] == "0"
    assert re.findall(r'<text class="tick-x"[^>]*>([^<]+)</text>', svg)[0] == "seq 0"
    assert '<text class="axis-title"' in svg and "tokens" in svg
    hovers = re.findall(r'<circle class="point"[^>]*><title>([^<]+)</title></circle>', svg)
    assert len(hovers) == len(points)
    assert hovers[1] == "seq 10 · turn 1 · provider 1,500 · estimate 1,380 tokens"
    assert hovers[0] == "seq 0 · turn 1 · estimate 900 tokens"  # no provider usage: omitted
