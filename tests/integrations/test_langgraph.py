"""AgentlogSaver driven by real LangGraph graphs: round trips, linear storage, time travel,
human-in-the-loop interrupts, subgraph namespaces, thread copies and SIGKILL durability.

LangGraph's own conformance suite runs in tests/external/test_langgraph_conformance.py.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agentlog import SessionLockedError, check_invariants, thaw
from agentlog.integrations.langgraph import AgentlogSaver
from agentlog.integrations.langgraph_records import CHECKPOINT, EVENT_TYPES
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.writer import LiveSession
from tests.cli.conftest import invoke
from tests.contract.conftest import StoreFactory, backend  # noqa: F401 (open_store runs on every backend)
from tests.integrations.langgraph_graphs import (
    approval_graph,
    chat_graph,
    config,
    delta_chat_graph,
    react_graph,
    user,
)

REPO = Path(__file__).resolve().parents[2]


def record(saver: AgentlogSaver, thread: str, turns: range) -> Any:
    graph = chat_graph(saver)
    for turn in turns:
        graph.invoke(user(turn), config(thread))
    return graph


def contents(messages: list[Any]) -> list[tuple[str, Any, str | None]]:
    return [(message.type, message.content, message.id) for message in messages]


def checkpoint_events(saver: AgentlogSaver, thread: str) -> list[Any]:
    return [event for event in saver.store.inspect(thread).events if event.type == CHECKPOINT]


def directory_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


# -- round trips -------------------------------------------------------------------------------


def test_graph_state_round_trips_across_a_restart_on_every_backend(open_store: StoreFactory) -> None:
    saver = AgentlogSaver(open_store())
    graph = record(saver, "t1", range(1, 6))
    before = graph.get_state(config("t1"))
    history = [(state.config["configurable"]["checkpoint_id"], contents(state.values["messages"]))
               for state in graph.get_state_history(config("t1"))]
    saver.close()

    again = AgentlogSaver(open_store())
    graph = chat_graph(again)
    after = graph.get_state(config("t1"))
    assert contents(after.values["messages"]) == contents(before.values["messages"])
    assert len(after.values["messages"]) == 10
    assert [(state.config["configurable"]["checkpoint_id"], contents(state.values["messages"]))
            for state in graph.get_state_history(config("t1"))] == history
    graph.invoke(user(6), config("t1"))
    assert [m.content for m in graph.get_state(config("t1")).values["messages"][-2:]] == [
        user(6)["messages"][0].content, f"re: {user(6)['messages'][0].content}"]
    again.close()


def test_checkpoints_are_ignorable_plugin_events_and_messages_are_turns(open_store: StoreFactory) -> None:
    with AgentlogSaver(open_store()) as saver:
        record(saver, "t1", range(1, 3))
    events = open_store().load("t1").events
    plugin = [event for event in events if event.type.startswith("langgraph/")]
    assert {event.type for event in plugin} <= EVENT_TYPES and all(event.ignorable for event in plugin)
    check_invariants(events)
    assert [(m["role"], m["content"][0]["text"]) for m in transcript_messages(open_store(), "t1")] == [
        ("user", user(1)["messages"][0].content), ("assistant", f"re: {user(1)['messages'][0].content}"),
        ("user", user(2)["messages"][0].content), ("assistant", f"re: {user(2)['messages'][0].content}")]


def test_a_react_thread_reads_as_a_session_in_show_search_and_audit(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'root'}"
    with AgentlogSaver(url) as saver:
        graph = react_graph(saver)
        for turn in (1, 2):
            graph.invoke(user(turn), config("t1"))
        state = graph.get_state(config("t1")).values["messages"]
    with JsonlStore(tmp_path / "root") as store:
        check_invariants(store.load("t1").events)
        surface = transcript_messages(store, "t1")
    assert len(surface) == len(state) == 8
    assert [m["role"] for m in surface] == ["user", "assistant", "user", "assistant"] * 2
    assert surface[1]["content"][1] == {"type": "tool-call", "id": "call-1", "name": "read_file",
                                        "arguments": '{"path": "notes-1.md"}'}
    assert surface[1]["source"] == {"kind": "model", "provider": "deepseek", "model": "deepseek-chat",
                                    "replayState": surface[1]["source"]["replayState"]}
    assert surface[2]["source"]["kind"] == "tool" and surface[2]["source"]["callId"] == "call-1"
    shown = invoke(url, "show", "t1")
    assert shown.exit_code == 0 and "→ read_file" in shown.output and "contents of notes-1.md" in shown.output
    found = invoke(url, "search", "notes-5")
    assert found.exit_code == 0 and "3 messages in 1 session" in found.output
    audited = invoke(url, "audit", "t1")
    assert audited.exit_code == 0 and "reviewable" in audited.output


def test_a_message_agentlog_cannot_log_still_checkpoints(open_store: StoreFactory,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    odd = HumanMessage(content=[{"type": "image", "data": b"\x89PNG"}], id="odd")  # bytes: not JSON
    with AgentlogSaver(open_store()) as saver:
        graph = chat_graph(saver)
        graph.invoke({"messages": [odd]}, config("t1"))
        graph.invoke(user(2), config("t1"))
        messages = graph.get_state(config("t1")).values["messages"]
    assert messages[0].content == odd.content and len(messages) == 4
    assert "not logged as agentlog turns" in caplog.text
    events = open_store().load("t1").events
    check_invariants(events)
    assert [m["content"][0]["text"] for m in transcript_messages(open_store(), "t1")][-2:] == [
        user(2)["messages"][0].content, f"re: {user(2)['messages'][0].content}"]


def test_messages_can_stay_out_of_the_transcript(open_store: StoreFactory) -> None:
    with AgentlogSaver(open_store(), messages=False) as saver:
        record(saver, "t1", range(1, 3))
    assert {event.type for event in open_store().load("t1").events} <= EVENT_TYPES


def transcript_messages(store: Any, thread: str) -> list[Any]:
    """The messages a session shows (its surface), as ``agentlog show`` reads them."""
    with store.open(thread) as live:
        return list(live.session.derive_messages())


def test_values_the_serde_supports_round_trip_exactly(open_store: StoreFactory) -> None:
    values = {"bytes": b"\x00\xff", "tuple": (1, "a"), "when": datetime.datetime(2026, 12, 3, 10, 0),
              "set": {1, 2}, "message": AIMessage(content="hi", id="m1"), "big": 2**60, "float": 1.0,
              "flag": True, "nested": {"list": [1, [2, (3,)]]}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {name: 1 for name in values}
    metadata: Any = {"source": "input", "step": -1, "parents": {}, "pair": (1, 2), "big": 2**60}
    with AgentlogSaver(open_store()) as saver:
        stored = saver.put(config("t1") | {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}},
                           checkpoint, metadata, dict(checkpoint["channel_versions"]))
    with AgentlogSaver(open_store()) as saver:
        found = saver.get_tuple(stored)
    assert found is not None
    serde = saver.serde
    for name, value in values.items():  # what LangGraph's serde gives back (a tuple comes back a list)
        expected = serde.loads_typed(serde.dumps_typed(value))
        assert found.checkpoint["channel_values"][name] == expected
        assert type(found.checkpoint["channel_values"][name]) is type(expected), name
    assert found.metadata == serde.loads_typed(serde.dumps_typed(metadata))
    assert found.checkpoint["id"] == checkpoint["id"] and found.checkpoint["ts"] == checkpoint["ts"]


def test_async_graph_on_the_saver(open_store: StoreFactory) -> None:
    async def main() -> list[Any]:
        async with AgentlogSaver(open_store()) as saver:
            graph = chat_graph(saver)
            for turn in (1, 2, 3):
                await graph.ainvoke(user(turn), config("t1"))
            state = await graph.aget_state(config("t1"))
            return list(state.values["messages"])

    messages = asyncio.run(main())
    assert [m.id for m in messages] == ["user-1", "ai-1", "user-2", "ai-3", "user-3", "ai-5"]
    with AgentlogSaver(open_store()) as saver:
        assert contents(chat_graph(saver).get_state(config("t1")).values["messages"]) == contents(messages)


# -- linear storage ----------------------------------------------------------------------------


def test_a_growing_message_list_is_logged_as_its_new_messages(open_store: StoreFactory) -> None:
    with AgentlogSaver(open_store()) as saver:
        record(saver, "t1", range(1, 4))
        blobs = [blob for event in checkpoint_events(saver, "t1") for blob in thaw(event.data["blobs"])
                 if blob["channel"] == "messages"]
    assert "value" in blobs[0] and all("base" in blob for blob in blobs[1:])
    # items a task wrote (logged before the checkpoint) are named, not copied
    assert all(("items" in blob) != ("itemsOf" in blob) for blob in blobs[1:])
    assert any("itemsOf" in blob for blob in blobs[1:])
    with AgentlogSaver(open_store()) as saver:  # after a restart, the next turn still extends
        record(saver, "t1", range(4, 5))
        last = thaw(checkpoint_events(saver, "t1")[-1].data["blobs"])
    assert "base" in next(blob for blob in last if blob["channel"] == "messages")


def test_bytes_on_disk_grow_linearly_with_turns(tmp_path: Path) -> None:
    sizes = {}
    for turns in (50, 100):
        root = tmp_path / f"t{turns}"
        with AgentlogSaver(JsonlStore(root, compression="none")) as saver:
            record(saver, "t", range(1, turns + 1))
        sizes[turns] = directory_bytes(root)
    ratio = sizes[100] / sizes[50]
    assert 1.8 < ratio < 2.2, sizes  # whole lists in every checkpoint would make it about 4


def test_a_list_that_does_not_extend_is_logged_whole_and_rebuilds(open_store: StoreFactory) -> None:
    def steps(saver: Any) -> list[Any]:
        graph = chat_graph(saver)
        for turn in (1, 2, 3):
            graph.invoke(user(turn), config("t1"))
        graph.update_state(config("t1"), {"messages": [RemoveMessage(id="user-2")]})
        graph.invoke(user(4), config("t1"))
        return history(graph)

    with AgentlogSaver(open_store()) as saver:
        written = steps(saver)
    assert written == steps(InMemorySaver())
    assert "user-2" not in [message_id for _kind, _content, message_id in written[0][1]]
    with AgentlogSaver(open_store()) as saver:
        assert history(chat_graph(saver)) == written


def history(graph: Any, thread: str = "t1") -> list[Any]:
    """What LangGraph shows of a thread: each checkpoint's next nodes and messages, newest first."""
    return [(state.next, contents(state.values.get("messages", [])))
            for state in graph.get_state_history(config(thread))]


def test_a_pruned_thread_keeps_its_latest_state_and_goes_on(open_store: StoreFactory) -> None:
    with AgentlogSaver(open_store()) as saver:
        graph = record(saver, "t1", range(1, 4))
        state = contents(graph.get_state(config("t1")).values["messages"])
        saver.prune(["t1"])
    with AgentlogSaver(open_store()) as saver:  # the values extend blobs of removed checkpoints
        graph = chat_graph(saver)
        assert contents(graph.get_state(config("t1")).values["messages"]) == state
        assert len(list(saver.list(config("t1")))) == 1
        graph.invoke(user(4), config("t1"))
    with AgentlogSaver(open_store()) as saver:
        assert len(chat_graph(saver).get_state(config("t1")).values["messages"]) == 8


def test_a_delta_channel_rebuilds_through_pruned_checkpoints(open_store: StoreFactory) -> None:
    with AgentlogSaver(open_store()) as saver:
        graph = delta_chat_graph(saver)
        for turn in (1, 2, 3):
            graph.invoke(user(turn), config("t1"))
        state = contents(graph.get_state(config("t1")).values["messages"])
        base = BaseCheckpointSaver.get_delta_channel_history(saver, config=config("t1"),
                                                             channels=["messages"])
        assert saver.get_delta_channel_history(config=config("t1"), channels=["messages"]) == base
        saver.prune(["t1"])
        assert len(list(saver.list(config("t1")))) == 1
    assert len(state) == 6
    with AgentlogSaver(open_store()) as saver:
        graph = delta_chat_graph(saver)
        assert contents(graph.get_state(config("t1")).values["messages"]) == state
        graph.invoke(user(4), config("t1"))
        assert len(graph.get_state(config("t1")).values["messages"]) == 8


# -- time travel, copies, human in the loop, subgraphs -----------------------------------------


def test_a_fork_from_a_past_checkpoint_leaves_the_main_branch_as_it_was(open_store: StoreFactory) -> None:
    with AgentlogSaver(open_store()) as saver:
        graph = record(saver, "t1", range(1, 5))
        main_line = contents(graph.get_state(config("t1")).values["messages"])
        past = next(state for state in graph.get_state_history(config("t1"))
                    if len(state.values["messages"]) == 4 and not state.next)
        graph.invoke({"messages": [HumanMessage(content="another way", id="branch")]}, past.config)
        branch = contents(graph.get_state(config("t1")).values["messages"])
        assert branch[:4] == main_line[:4] and branch[4][1:] == ("another way", "branch")
    with AgentlogSaver(open_store()) as saver:
        graph = chat_graph(saver)
        old = graph.get_state(config("t1", main_line_id := past.config["configurable"]["checkpoint_id"]))
        assert contents(old.values["messages"]) == main_line[:4] and main_line_id
        tips = [state for state in graph.get_state_history(config("t1"))
                if contents(state.values["messages"]) == main_line]
        assert tips, "the main branch's last checkpoint is still there"


def test_a_branch_from_a_past_checkpoint_is_logged_as_an_extension(open_store: StoreFactory) -> None:
    with AgentlogSaver(open_store()) as saver:
        record(saver, "t1", range(1, 6))
        past = [found for found in saver.list(config("t1"), filter={"source": "loop"})][4]
    with AgentlogSaver(open_store()) as saver:  # a new saver, as after a restart
        graph = chat_graph(saver)
        old = contents(graph.get_state(past.config).values["messages"])
        graph.get_state(config("t1"))  # the latest is read too
        branch = graph.update_state(past.config, {"messages": []}, as_node="reply")
        assert contents(graph.get_state(branch).values["messages"]) == old
        last = thaw(checkpoint_events(saver, "t1")[-1].data["blobs"])
    assert [blob.keys() >= {"base"} for blob in last if blob["channel"] == "messages"] == [True]


def test_copy_thread_forks_the_session_and_the_source_can_then_be_deleted(open_store: StoreFactory) -> None:
    with AgentlogSaver(open_store()) as saver:
        graph = record(saver, "source", range(1, 4))
        saver.copy_thread("source", "copy")
        graph.invoke(user(4), config("copy"))
        assert open_store().list_snapshots()  # both are stored
        headers = {header.id: header for header in saver.store.list()}
        assert headers["copy"].parent_session == "source"
        saver.delete_thread("source")
        assert saver.get_tuple(config("source")) is None
    with AgentlogSaver(open_store()) as saver:
        messages = chat_graph(saver).get_state(config("copy")).values["messages"]
    assert [m.id for m in messages] == ["user-1", "ai-1", "user-2", "ai-3", "user-3", "ai-5", "user-4",
                                        "ai-7"]


@pytest.mark.parametrize("subgraph", [False, True], ids=["graph", "subgraph"])
def test_an_interrupt_resumes_after_a_restart(open_store: StoreFactory, subgraph: bool) -> None:
    with AgentlogSaver(open_store()) as saver:
        graph = approval_graph(saver, subgraph=subgraph)
        paused = graph.invoke(user(1), config("t1"))
        assert paused["__interrupt__"][0].value["question"] == "send it?"
        state = graph.get_state(config("t1"), subgraphs=True)
        assert state.next == (("inner",) if subgraph else ("approval",))
        if subgraph:
            child = state.tasks[0].state
            assert child is not None and child.config["configurable"]["checkpoint_ns"].startswith("inner:")
            assert child.next == ("approval",)
    with AgentlogSaver(open_store()) as saver:
        graph = approval_graph(saver, subgraph=subgraph)
        done = graph.invoke(Command(resume="yes"), config("t1"))
        assert [m.content for m in done["messages"]][-1] == "decision: yes"
        assert not graph.get_state(config("t1")).next
        namespaces = {event.data["ns"] for event in checkpoint_events(saver, "t1")}
    assert (len(namespaces) > 1) is subgraph


def test_a_thread_another_saver_holds_is_read_but_not_written(open_store: StoreFactory) -> None:
    with AgentlogSaver(open_store()) as holder:
        record(holder, "t1", range(1, 3))
        expected = contents(chat_graph(holder).get_state(config("t1")).values["messages"])
        with AgentlogSaver(open_store()) as reader:
            found = reader.get_tuple(config("t1"))
            assert found is not None and contents(found.checkpoint["channel_values"]["messages"]) == expected
            assert len(list(reader.list(config("t1")))) == len(list(holder.list(config("t1"))))
            with pytest.raises(SessionLockedError):
                chat_graph(reader).invoke(user(3), config("t1"))
    with AgentlogSaver(open_store()) as later:  # the holder closed: now it can write
        chat_graph(later).invoke(user(3), config("t1"))


def test_only_max_threads_sessions_stay_open(open_store: StoreFactory) -> None:
    with AgentlogSaver(open_store(), max_threads=2) as saver:
        for thread in ("a", "b", "c"):
            record(saver, thread, range(1, 2))
        assert [thread.live is not None for thread in saver._threads.values()] == [True, True]
        with AgentlogSaver(open_store()) as other:  # "a" was closed: another saver can write it
            chat_graph(other).invoke(user(2), config("a"))
        assert [len(chat_graph(saver).get_state(config(t)).values["messages"]) for t in "abc"] == [4, 2, 2]


def test_a_put_whose_flush_fails_is_not_kept_and_the_thread_goes_on(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite://{tmp_path / 'c.db'}?write_delay_ms=60000"
    with AgentlogSaver(url) as saver:
        graph = record(saver, "t1", range(1, 3))
        before = list(saver.list(config("t1")))
        real_flush = LiveSession.flush

        def failing(live: LiveSession) -> None:
            raise OSError("disk full")

        monkeypatch.setattr(LiveSession, "flush", failing)
        with pytest.raises(OSError, match="disk full"):
            graph.invoke(user(3), config("t1"), durability="sync")
        monkeypatch.setattr(LiveSession, "flush", real_flush)
        assert [found.config for found in saver.list(config("t1"))] == [found.config for found in before]
        graph.invoke(user(3), config("t1"))
        assert len(graph.get_state(config("t1")).values["messages"]) == 6
    with AgentlogSaver(url) as saver:
        assert len(chat_graph(saver).get_state(config("t1")).values["messages"]) == 6


# -- durability --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl-zstd", "sqlite"])
def test_sigkill_loses_no_acknowledged_checkpoint(tmp_path: Path, kind: str) -> None:
    url = (f"jsonl://{tmp_path / 'root'}" if kind == "jsonl-zstd" else f"sqlite://{tmp_path / 'c.db'}")
    url += "?write_delay_ms=60000"  # nothing reaches the disk unless put flushes it
    child = subprocess.Popen([sys.executable, "-m", "tests.integrations.langgraph_graphs", url, "t1", "400"],
                             stdout=subprocess.PIPE, text=True, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    acknowledged: list[str] = []
    try:
        assert child.stdout is not None
        while len(acknowledged) < 60:
            line = child.stdout.readline()
            assert line.startswith("ACK "), line
            acknowledged.append(line.split()[1])
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
    with AgentlogSaver(url) as saver:
        found = {checkpoint: saver.get_tuple(config("t1", checkpoint)) for checkpoint in acknowledged}
        assert all(found.values()), [key for key, value in found.items() if value is None]
        latest = saver.get_tuple(config("t1"))
        assert latest is not None and latest.checkpoint["id"] >= acknowledged[-1]
        graph = chat_graph(saver)
        graph.invoke(user(999), config("t1"))  # the thread goes on after the crash
        assert graph.get_state(config("t1")).values["messages"][-1].content.startswith("re: turn 999")
