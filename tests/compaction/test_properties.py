"""Property: no sequence of compactions and prunes ever splits a tool call from its result."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog import Session, SurfaceError
from agentlog.compaction.config import PrunerConfig
from agentlog.compaction.engine import Compactor
from agentlog.compaction.invariants import CompactionInvariantChecker, check_compaction_invariants
from agentlog.compaction.pruner import ToolResultPruner
from agentlog.core.invariants import InvariantChecker, check_invariants
from agentlog.errors import CompactionError
from agentlog.recording.recorder import Recorder, Turn
from tests.compaction.helpers import HEADER, FixedSummarizer, new_session, pairing_problems

PRUNER = ToolResultPruner(PrunerConfig(threshold_chars=120, head_chars=30, tail_chars=20))

step_calls = st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=3)
operations = st.one_of(
    st.tuples(st.just("turn"), step_calls, st.booleans(), st.integers(min_value=20, max_value=400)),
    st.tuples(st.just("prune")),
    st.tuples(st.just("manual")),
    st.tuples(st.just("overflow")),
    st.tuples(st.just("retain"), st.integers(min_value=0, max_value=600)),
    st.tuples(
        st.just("region"), st.integers(min_value=0, max_value=60), st.integers(min_value=0, max_value=60)
    ),
)


def steps(turn: Turn, calls: list[int], inject: bool, size: int, counter: list[int]) -> None:
    for index, count in enumerate(calls):
        with turn.step() as step:
            if index == 0:
                step.user_message("please " * (size // 7 + 1))
            step.request_header(HEADER)
            step.text_delta("t" * size)
            ids = []
            for _ in range(count):
                counter[0] += 1
                ids.append(f"call-{counter[0]}")
            content: list[Any] = [{"type": "text", "text": "t" * size}]
            content += [
                {"type": "tool-call", "id": ident, "name": "read", "arguments": "{}"} for ident in ids
            ]
            step.assistant(content=content)
            for position, ident in enumerate(ids):
                step.tool_call(ident, "read", "{}")
                if inject and position == 0 and count > 1:
                    step.user_message("injected between results")
                step.tool_result(ident, "r" * (size * 2))


def apply(
    operation: tuple[Any, ...], session: Session, recorder: Recorder, compactor: Compactor, counter: list[int]
) -> None:
    kind = operation[0]
    if kind == "turn":
        with recorder.turn() as turn:
            steps(turn, operation[1], operation[2], operation[3], counter)
        return
    if kind == "manual":
        try:
            compactor.compact_now(session)
        except CompactionError as exc:
            assert exc.code == "summary"
        return
    with recorder.turn() as turn:
        before = session.seq
        if kind == "prune":
            PRUNER.prune_session(session, compactor.meter)
        elif kind == "overflow":
            _attempt(lambda: compactor.compact_if_needed(session, "context-overflow"))
        elif kind == "retain":
            region = compactor.select_range(session, operation[1])
            if region is not None:
                _attempt(lambda: compactor.compact_region(session, region.start, region.end))
        else:
            nodes = list(session.surface.nodes)
            if nodes:
                first, last = sorted((operation[1] % len(nodes), operation[2] % len(nodes)))
                try:
                    compactor.compact_region(session, nodes[first], nodes[last])
                except SurfaceError:
                    assert session.seq == before  # an unbalanced span is refused before any write
                except CompactionError as exc:
                    assert exc.code == "summary"
        steps(turn, [0], False, 20, counter)


def _attempt(call: Any) -> None:
    try:
        call()
    except CompactionError as exc:
        assert exc.code == "summary"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operations, min_size=1, max_size=12))
def test_compactions_and_prunes_never_split_tool_pairs(program: list[tuple[Any, ...]]) -> None:
    session = new_session()
    InvariantChecker.attach(session)
    CompactionInvariantChecker.attach(session)
    recorder = Recorder(session)
    compactor = Compactor(FixedSummarizer(text="s"))
    counter = [0]
    for operation in program:
        apply(operation, session, recorder, compactor, counter)
        messages = session.derive_messages()
        assert pairing_problems(messages) == [], (operation, messages)
    check_invariants(session.events)
    assert check_compaction_invariants(session.events).bracket is None
    replayed = Session.restore(session.id, list(session.events), session.header)
    assert replayed.derive_messages() == session.derive_messages()
