"""LangGraph in the ``peers`` suite: a graph whose state holds ``messages``, one checkpoint per step.

Each turn is one ``graph.invoke`` with the user's message; the graph's single ``step`` node is
one model step (the assistant message and, on steps 1-3, the tool's result), and loops while
the last message is a tool result, as a ReAct agent does. LangGraph writes a checkpoint for the
input, for the super-step that applies it, and for each model step: six a turn. Savers:
``SqliteSaver`` on a file, ``PostgresSaver`` on this machine's PostgreSQL; state channel:
``add_messages`` (the whole list in every checkpoint) or the ``DeltaChannel`` (beta) with
LangGraph's batch message reducer; and agentlog's own ``AgentlogSaver`` on a JSONL zstd store
(``add_messages``, logged as the new messages of each checkpoint). Fork = time travel:
``update_state`` on the checkpoint that ended turn T/2, which writes a new branch checkpoint.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
import typing
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Final

from benchmarks.peer_common import (
    SESSION_ID,
    PeerSystem,
    Step,
    Turn,
    conversation,
    fork_turn,
    items_per_turn,
    module,
)
from benchmarks.runner import current_rss, directory_bytes, peak_rss

__all__ = ["CHECKPOINTS_PER_TURN", "SYSTEMS", "fork", "load", "messages_of", "record"]

CHECKPOINTS_PER_TURN: Final = 6
"""input + the super-step that applies it + four model steps."""
DB_FILE: Final = "checkpoints.sqlite"


def messages_of(step: Step) -> list[Any]:
    """The LangChain messages one step adds to the state (user prompt, reply, tool result)."""
    messages_module = module("langchain_core.messages")
    out: list[Any] = []
    if step.prompt is not None:
        out.append(messages_module.HumanMessage(content=step.prompt, id=step.prompt_id))
    usage = step.usage
    call = step.call
    calls = [] if call is None else [
        {"id": call.id, "name": call.name, "args": json.loads(call.arguments), "type": "tool_call"}]
    inputs, outputs = usage.get("inputTokens", 0), usage.get("outputTokens", 0)
    out.append(messages_module.AIMessage(
        content=step.text, id=step.message_id, tool_calls=calls,
        response_metadata={"model_provider": step.provider, "model_name": step.model, "finish_reason":
                           "tool_calls" if calls else "stop"},
        usage_metadata={"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs,
                        "input_token_details": {"cache_read": usage.get("cacheReadTokens", 0)}},
    ))
    if step.call is not None:
        out.append(messages_module.ToolMessage(content=step.call.result, tool_call_id=step.call.id,
                                               name=step.call.name, id=step.call.result_id))
    return out


def _builder(system: PeerSystem, steps: Iterator[Step] | None) -> Any:
    """The graph: START -> step, step -> step while the last message is a tool result, else END."""
    graph_module = module("langgraph.graph")
    message_module = module("langgraph.graph.message")
    if system.variant.endswith("delta"):
        channel = module("langgraph.channels.delta").DeltaChannel(message_module._messages_delta_reducer)
    else:
        channel = message_module.add_messages
    typed_dict: Any = typing.TypedDict
    state = typed_dict("State", {"messages": typing.Annotated[list, channel]})
    tool_message = module("langchain_core.messages").ToolMessage

    def step(_state: Mapping[str, Any]) -> dict[str, Any]:
        if steps is None:
            raise RuntimeError("this graph only reads and forks")
        plan = next(steps)
        replies = messages_of(plan)
        return {"messages": replies[1:] if plan.prompt is not None else replies}

    def route(current: Mapping[str, Any]) -> Any:
        return "step" if isinstance(current["messages"][-1], tool_message) else graph_module.END

    builder = graph_module.StateGraph(state)
    builder.add_node("step", step)
    builder.add_edge(graph_module.START, "step")
    builder.add_conditional_edges("step", route, ["step", graph_module.END])
    return builder


@contextmanager
def _saver(system: PeerSystem, workdir: Path, options: Mapping[str, Any]) -> Iterator[Any]:
    """A fresh checkpointer on the run's database (closed on exit)."""
    if _on_agentlog(system):
        saver_class = module("agentlog.integrations.langgraph").AgentlogSaver
        with saver_class(f"jsonl://{workdir / 'agentlog'}") as saver:
            yield saver
        return
    if system.postgres:
        saver_class = module("langgraph.checkpoint.postgres").PostgresSaver
        manager: AbstractContextManager[Any] = saver_class.from_conn_string(str(options["dsn"]))
        with manager as saver:
            saver.setup()
            yield saver
        return
    saver_class = module("langgraph.checkpoint.sqlite").SqliteSaver
    connection = sqlite3.connect(str(workdir / DB_FILE), check_same_thread=False)
    try:
        yield saver_class(connection)
    finally:
        connection.close()


def _config(thread: str = SESSION_ID, checkpoint: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint is not None:
        configurable["checkpoint_id"] = checkpoint
    return {"configurable": configurable}


def _record_turns(system: PeerSystem, saver: Any, turns: Sequence[Turn], thread: str) -> None:
    human = module("langchain_core.messages").HumanMessage
    steps = iter([step for turn in turns for step in turn])
    graph = _builder(system, steps).compile(checkpointer=saver)
    config = _config(thread)
    for turn in turns:
        first = turn[0]
        graph.invoke({"messages": [human(content=first.prompt, id=first.prompt_id)]}, config)


def _postgres_bytes(saver: Any) -> int:
    """Bytes of the saver's tables in the run's own database (heap, TOAST and indexes)."""
    with saver.conn.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS bytes FROM pg_class c "
                       "JOIN pg_namespace n ON n.oid = c.relnamespace "
                       "WHERE n.nspname = 'public' AND c.relkind = 'r'")
        row = cursor.fetchone()
    return int(row["bytes"])


def _bytes(system: PeerSystem, workdir: Path, options: Mapping[str, Any]) -> int:
    if system.postgres:
        with _saver(system, workdir, options) as saver:
            return _postgres_bytes(saver)
    return directory_bytes(workdir)


def record(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Record + persist ``turns`` turns: one ``invoke`` a turn, a checkpoint per super-step."""
    plan = conversation(turns)
    if options.get("warmup"):
        scratch = workdir / "warmup"
        scratch.mkdir()
        with _saver(system, scratch, options) as saver:
            _record_turns(system, saver, conversation(1), "warmup")
            saver.delete_thread("warmup")
        shutil.rmtree(scratch)
    start = time.perf_counter()
    with _saver(system, workdir, options) as saver:
        _record_turns(system, saver, plan, SESSION_ID)
    seconds = time.perf_counter() - start
    with _saver(system, workdir, options) as saver:
        checkpoints = _count(system, saver)
    return {"s": seconds, "bytes": _bytes(system, workdir, options),
            "items": sum(items_per_turn(turn) for turn in plan), "checkpoints": checkpoints}


def _on_agentlog(system: PeerSystem) -> bool:
    return system.variant.startswith("agentlogsaver")


def _count(system: PeerSystem, saver: Any) -> int:
    """Checkpoints of the recorded thread (counted in SQL or in the log: listing them would decode each)."""
    if _on_agentlog(system):
        return sum(event.type == "langgraph/checkpoint" for event in saver.store.inspect(SESSION_ID).events)
    if system.postgres:
        with saver.conn.cursor() as cursor:
            cursor.execute("SELECT count(*) AS n FROM checkpoints WHERE thread_id = %s", (SESSION_ID,))
            return int(cursor.fetchone()["n"])
    return int(saver.conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = ?",
                                  (SESSION_ID,)).fetchone()[0])


def _load(system: PeerSystem, workdir: Path, options: Mapping[str, Any]) -> tuple[float, list[Any]]:
    """A new saver and graph, then ``get_state``: the messages to send to the model."""
    start = time.perf_counter()
    with _saver(system, workdir, options) as saver:
        graph = _builder(system, None).compile(checkpointer=saver)
        messages = list(graph.get_state(_config()).values["messages"])
    return time.perf_counter() - start, messages


def _checkpoint_at_turn_end(system: PeerSystem, saver: Any, turn: int, thread: str = SESSION_ID) -> str:
    """The id of the checkpoint that ended ``turn`` (found by its step number, not timed)."""
    step = CHECKPOINTS_PER_TURN * turn - 2
    if _on_agentlog(system):
        rows = [found.config["configurable"]["checkpoint_id"] for found in saver.list(
            _config(thread), filter={"source": "loop", "step": step})]
    elif system.postgres:
        with saver.conn.cursor() as cursor:
            cursor.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s "
                           "AND checkpoint_ns = '' AND metadata->>'source' = 'loop' "
                           "AND (metadata->>'step')::int = %s", (thread, step))
            rows = [row["checkpoint_id"] for row in cursor.fetchall()]
    else:
        rows = [row[0] for row in saver.conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
            "AND json_extract(metadata, '$.source') = 'loop' AND json_extract(metadata, '$.step') = ?",
            (thread, step))]
    if len(rows) != 1:
        raise RuntimeError(f"expected one checkpoint at step {step}, found {len(rows)}")
    return str(rows[0])


def _fork(system: PeerSystem, workdir: Path, options: Mapping[str, Any], turns: int) -> tuple[float, int]:
    """Time travel: a new saver and graph, then ``update_state`` on the checkpoint ending turn T/2."""
    with _saver(system, workdir, options) as saver:
        past = _config(checkpoint=_checkpoint_at_turn_end(system, saver, fork_turn(turns)))
    start = time.perf_counter()
    with _saver(system, workdir, options) as saver:
        graph = _builder(system, None).compile(checkpointer=saver)
        branch = graph.update_state(past, {"messages": []}, as_node="step")
    seconds = time.perf_counter() - start
    with _saver(system, workdir, options) as saver:
        graph = _builder(system, None).compile(checkpointer=saver)
        count = len(graph.get_state(branch).values["messages"])
    return seconds, count


def _warm(system: PeerSystem, workdir: Path, options: Mapping[str, Any], fork: bool) -> None:
    """Run the phase's code once on a scratch T = 2 thread (imports, lazy set-up), discarded."""
    scratch = workdir / "warmup-child"
    scratch.mkdir()
    thread = "warmup-child"
    with _saver(system, scratch, options) as saver:
        _record_turns(system, saver, conversation(2), thread)
        graph = _builder(system, None).compile(checkpointer=saver)
        graph.get_state(_config(thread))
        if fork:
            past = _config(thread, _checkpoint_at_turn_end(system, saver, 1, thread))
            graph.update_state(past, {"messages": []}, as_node="step")
        saver.delete_thread(thread)
    shutil.rmtree(scratch)


def load(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Cold ``get_state`` of the recorded thread with a new saver and graph."""
    if options.get("warmup"):
        _warm(system, workdir, options, fork=False)
    before = current_rss()
    seconds, messages = _load(system, workdir, options)
    return {"load_s": seconds, "rss_before": before, "peak_rss": peak_rss(), "items": len(messages)}


def fork(system: PeerSystem, turns: int, workdir: Path, options: Mapping[str, Any]) -> dict[str, float]:
    """Time travel: ``update_state`` on the checkpoint that ended turn T/2 (a new branch)."""
    if options.get("warmup"):
        _warm(system, workdir, options, fork=True)
    size = _bytes(system, workdir, options)
    seconds, forked = _fork(system, workdir, options, turns)
    expected = sum(items_per_turn(turn) for turn in conversation(fork_turn(turns)))
    if forked != expected:
        raise RuntimeError(f"the time-travel fork holds {forked} messages, expected {expected}")
    return {"fork_s": seconds, "fork_bytes": _bytes(system, workdir, options) - size, "fork_items": forked}


def _system(name: str, saver: str, channel: str, *, postgres: bool, requires: str) -> PeerSystem:
    variant = "delta" if channel == "delta" else "add"
    what = ("DeltaChannel (beta): writes per step, a snapshot every 100 updates" if variant == "delta"
            else "add_messages: the new messages of each checkpoint" if saver == "AgentlogSaver"
            else "add_messages: the whole message list in every checkpoint")
    return PeerSystem(
        name=name, label=f"LangGraph {saver}, {what}", variant=f"{saver.lower()}-{variant}",
        stores="messages only (user, assistant with tool calls and usage, tool results), "
               f"in {CHECKPOINTS_PER_TURN} checkpoints a turn; no stream chunks",
        fork_kind="time travel: update_state on a past checkpoint",
        requires=("langgraph", "langchain_core", requires), record=record, load=load, fork=fork,
        postgres=postgres,
    )


SYSTEMS: Final = {
    system.name: system for system in (
        _system("langgraph-agentlog", "AgentlogSaver", "add", postgres=False,
                requires="agentlog.integrations.langgraph"),
        _system("langgraph-sqlite", "SqliteSaver", "add", postgres=False,
                requires="langgraph.checkpoint.sqlite"),
        _system("langgraph-sqlite-delta", "SqliteSaver", "delta", postgres=False,
                requires="langgraph.checkpoint.sqlite"),
        _system("langgraph-postgres", "PostgresSaver", "add", postgres=True,
                requires="langgraph.checkpoint.postgres"),
        _system("langgraph-postgres-delta", "PostgresSaver", "delta", postgres=True,
                requires="langgraph.checkpoint.postgres"),
    )
}
