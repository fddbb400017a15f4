"""``agentlog.ops.stats``: per-session folds and their totals."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import MemoryStore, Recorder, SessionHeader
from agentlog.ops.stats import SessionStats, session_stats, store_stats, total_stats


def _record(store: MemoryStore, sid: str, tools: list[str], error_at: int | None) -> None:
    with store.start(SessionHeader(id=sid)) as live:
        recorder = Recorder(live)
        for number, tool in enumerate(tools):
            with recorder.turn() as turn, turn.step() as step:
                step.user_message(f"do {tool}")
                step.request_header({"config": {"provider": "p", "model": "m"}})
                step.tool_call_delta(f"c{number}", tool, "{}")
                step.assistant(usage={"inputTokens": 10 + number, "outputTokens": 2, "cacheReadTokens": 1})
                step.tool_call(f"c{number}", tool, "{}")
                step.tool_result(f"c{number}", "done", is_error=number == error_at)


tool_lists = st.lists(st.sampled_from(["read", "write", "grep"]), min_size=1, max_size=4)


@settings(max_examples=25, deadline=None)
@given(st.lists(tool_lists, min_size=1, max_size=4), st.integers(min_value=-1, max_value=3))
def test_figures_follow_what_was_recorded_and_totals_add_up(sessions: list[list[str]], error_at: int) -> None:
    store = MemoryStore()
    for index, tools in enumerate(sessions):
        _record(store, f"s{index}", tools, error_at)
    figures = store_stats(store)
    assert [each.session_id for each in figures.sessions] == [f"s{i}" for i in range(len(sessions))]
    for each, tools in zip(figures.sessions, sessions, strict=True):
        assert each.turns == each.steps == each.user_messages == each.assistant_messages == len(tools)
        assert dict(each.tool_calls) == {name: tools.count(name) for name in set(tools)}
        assert each.tool_errors == (1 if 0 <= error_at < len(tools) else 0)
        assert each.input_tokens == sum(10 + n for n in range(len(tools)))
        assert each.output_tokens == 2 * len(tools) and each.cache_read_tokens == len(tools)
        assert each.turn_ms <= each.wall_ms and each.tool_ms <= each.turn_ms
    total = figures.total
    assert total.sessions == len(sessions) and total.session_id is None
    assert total.turns == sum(len(tools) for tools in sessions)
    assert sum(total.tool_calls.values()) == total.turns
    assert total_stats([total]).to_json() == {**total.to_json()}  # a total of one total is itself


def test_an_empty_log_has_zero_figures() -> None:
    assert session_stats("e", []).to_json() == SessionStats("e").to_json()
    assert total_stats([]).sessions == 0
