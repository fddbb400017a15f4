"""Checkpoint policy: a Recorder over a LiveSession makes each model request and tool call durable."""

from __future__ import annotations

from pathlib import Path

from agentlog import JsonlStore, Recorder, SessionHeader

HEADER = {"config": {"provider": "p", "model": "m"}}


def test_recorder_flushes_before_the_model_request_and_before_the_tool_runs(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root", write_delay_ms=60_000)
    with store.start(SessionHeader(id="s", cwd="/w")) as live:
        recorder = Recorder(live)
        with recorder.turn() as turn, turn.step() as step:
            step.user_message("hi")
            step.request_header(HEADER)
            assert live.durable_seq == live.session.seq  # the request is durable before dispatch
            step.tool_call_delta("c1", "read_file", "{}")
            step.assistant()
            assert live.durable_seq < live.session.seq
            step.tool_call("c1", "read_file", "{}")
            assert live.durable_seq == live.session.seq  # the call is durable before the tool runs
            step.tool_result("c1", "ok")
    store.close()


def test_checkpoint_false_leaves_durability_to_the_write_behind_window(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "root", write_delay_ms=60_000)
    with store.start(SessionHeader(id="s", cwd="/w")) as live:
        recorder = Recorder(live, checkpoint=False)
        with recorder.turn() as turn, turn.step() as step:
            step.user_message("hi")
            step.request_header(HEADER)
            assert live.durable_seq == 0
    assert len(store.load("s").events) == 6
    store.close()
