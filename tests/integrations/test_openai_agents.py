"""AgentlogSession: the Agents SDK's Session protocol on every store, driven by the SDK's own Runner.

The expectations of the SDK's SQLiteSession tests (ordering, limit, pop on empty, clear,
isolated sessions, persistence) are checked here against agentlog stores, plus what agentlog
adds: the log keeps what pop/clear removed, items come back identical, durability per call.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, SQLiteSession, function_tool
from agents.memory import Session as SdkSession
from agents.memory import SessionSettings

from agentlog import (
    InvalidEventError,
    Recorder,
    SessionLockedError,
    SqliteStore,
    UsageError,
    check_invariants,
    thaw,
    transcript,
)
from agentlog.core.events import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, USER_MESSAGE
from agentlog.integrations.openai_agents import EDIT_PROVIDER, AgentlogSession
from tests.contract.conftest import StoreFactory
from tests.integrations.helpers import assert_tool_pairs_hold
from tests.integrations.server import Provider, json_reply, sse

DURABLE_BACKENDS = ["jsonl-zstd", "sqlite", "postgres"]
CONVERSATION = [
    {"role": "user", "content": "Message 1"},
    {"role": "assistant", "content": "Response 1"},
    {"role": "user", "content": "Message 2"},
    {"role": "assistant", "content": "Response 2"},
    {"role": "user", "content": "Message 3"},
    {"role": "assistant", "content": "Response 3"},
]
RICH = [  # what a Runner saves: reasoning, calls, outputs, output messages with ids and status
    {"role": "user", "content": "list src"},
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "list it"}],
     "encrypted_content": "gAAAA-1"},
    {"arguments": '{"path":"src"}', "call_id": "call_1", "name": "list_dir", "type": "function_call",
     "id": "fc_1", "status": "completed"},
    {"call_id": "call_1", "output": "main.py", "type": "function_call_output"},
    {"id": "msg_1", "content": [{"annotations": [], "text": "src holds main.py.", "type": "output_text",
                                 "logprobs": []}],
     "role": "assistant", "status": "completed", "type": "message"},
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(params=DURABLE_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The store contract suite's ``open_store`` fixture, over the durable backends."""
    return str(request.param)


def test_it_implements_the_sdk_session_protocol(tmp_path: Path) -> None:
    session = AgentlogSession("s", f"sqlite://{tmp_path / 'a.db'}")
    try:
        assert isinstance(session, SdkSession)
        assert session.session_id == "s" and session.session_settings == SessionSettings()
    finally:
        session.close()


def test_ordering_limit_and_items_identical(open_store: StoreFactory) -> None:
    session = AgentlogSession("count", open_store())

    async def main() -> None:
        await session.add_items(CONVERSATION[:2])
        await session.add_items(CONVERSATION[2:])
        assert await session.get_items() == CONVERSATION
        assert await session.get_items(limit=2) == CONVERSATION[-2:]
        assert await session.get_items(limit=4) == CONVERSATION[-4:]
        assert await session.get_items(limit=10) == CONVERSATION
        assert await session.get_items(limit=0) == []
        await session.add_items(RICH)
        assert await session.get_items() == CONVERSATION + RICH

    run(main())
    session.close()


def test_session_settings_limit_applies_unless_overridden(tmp_path: Path) -> None:
    session = AgentlogSession("s", f"sqlite://{tmp_path / 'a.db'}", session_settings=SessionSettings(limit=3))
    run(session.add_items(CONVERSATION))
    assert run(session.get_items()) == CONVERSATION[-3:]
    assert run(session.get_items(limit=1)) == CONVERSATION[-1:]
    session.close()


def test_session_settings_are_normalised_like_the_sdks(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'a.db'}"
    for given, expected in ((None, SessionSettings()), ({"limit": 2}, SessionSettings(limit=2)),
                            (SessionSettings(limit=1), SessionSettings(limit=1))):
        session = AgentlogSession("s", url, session_settings=given)  # type: ignore[arg-type]
        assert session.session_settings == expected
        session.close()
    with pytest.raises(TypeError, match="limt"):
        AgentlogSession("s", url, session_settings={"limt": 2})  # type: ignore[arg-type]
    AgentlogSession("s", url).close()  # the refused construction left no writer lock behind


def test_pop_clear_and_the_log_keeps_everything(open_store: StoreFactory) -> None:
    store = open_store()
    session = AgentlogSession("pop", store)

    async def main() -> None:
        assert await session.pop_item() is None  # pop on empty
        await session.add_items(CONVERSATION[:3])
        assert await session.pop_item() == CONVERSATION[2]
        assert await session.get_items() == CONVERSATION[:2]
        assert await session.pop_item() == CONVERSATION[1]
        assert await session.pop_item() == CONVERSATION[0]
        assert await session.pop_item() is None
        assert await session.get_items() == []
        await session.add_items(RICH)
        assert await session.pop_item() == RICH[-1]
        assert await session.pop_item() == RICH[-2]
        assert await session.pop_item() == RICH[-3]  # out of a two-item assistant message (no edit source)
        assert await session.get_items() == RICH[:2]
        await session.clear_session()
        assert await session.get_items() == []
        await session.clear_session()  # clearing an empty session changes nothing
        await session.add_items(CONVERSATION[:1])
        assert await session.get_items() == CONVERSATION[:1]

    run(main())
    session.close()
    log = store.load("pop")
    check_invariants(log.events)
    texts = [block.get("text") for message in transcript(log.events) for block in message["content"]]
    assert {"Message 1", "Response 1", "Message 2", "src holds main.py."} <= set(texts)  # nothing lost
    edits = [e for e in log.events if e.type == ASSISTANT_MESSAGE
             and e.data["message"]["source"]["provider"] == EDIT_PROVIDER]
    assert len(edits) == 6 and all(e.surface_op != "append" for e in edits)


def test_persistence_across_reopen_and_sessions_isolated(open_store: StoreFactory) -> None:
    first, second = AgentlogSession("one", open_store()), AgentlogSession("two", open_store())
    run(first.add_items(RICH))
    run(second.add_items(CONVERSATION[:1]))
    run(second.add_items(CONVERSATION[1:2]))
    assert run(second.pop_item()) == CONVERSATION[1]
    first.close()
    second.close()
    reopened_one, reopened_two = AgentlogSession("one", open_store()), AgentlogSession("two", open_store())
    assert run(reopened_one.get_items()) == RICH
    assert run(reopened_two.get_items()) == CONVERSATION[:1]
    run(reopened_one.add_items(CONVERSATION[:1]))
    assert run(reopened_one.get_items()) == RICH + CONVERSATION[:1]
    reopened_one.close()
    reopened_two.close()


CRASH_WORKER = """
import asyncio, json, sys, time
from agentlog.integrations.openai_agents import AgentlogSession
session = AgentlogSession("durable", sys.argv[1], durable=sys.argv[3] == "durable")
asyncio.run(session.add_items(json.loads(sys.argv[2])))
print("ADDED", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("mode", ["durable", "write-behind"])
def test_items_are_durable_when_add_items_returns_even_if_the_process_is_killed(tmp_path: Path,
                                                                                mode: str) -> None:
    url = f"sqlite://{tmp_path / 'crash.db'}?write_delay_ms=60000"  # nothing flushes by itself
    child = subprocess.Popen([sys.executable, "-c", CRASH_WORKER, url, json.dumps(RICH), mode],
                             stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ADDED"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
    session = AgentlogSession("durable", url)
    assert run(session.get_items()) == (RICH if mode == "durable" else [])
    session.close()


def test_concurrent_adds_from_two_coroutines_keep_each_batch_whole(open_store: StoreFactory) -> None:
    session = AgentlogSession("race", open_store())
    batches = [[{"role": "user", "content": f"{who} {n}"}, {"role": "assistant", "content": f"ok {who} {n}"}]
               for who in ("a", "b") for n in range(5)]

    async def writer(mine: list[list[dict[str, Any]]]) -> None:
        for batch in mine:
            await session.add_items(batch)

    async def main() -> None:
        await asyncio.gather(writer(batches[:5]), writer(batches[5:]))

    run(main())
    items = run(session.get_items())
    pairs = [items[i: i + 2] for i in range(0, len(items), 2)]
    assert sorted(map(str, pairs)) == sorted(map(str, batches))
    check_invariants(session.live.session.events)
    session.close()


def test_bad_items_are_refused_and_leave_the_log_unchanged(tmp_path: Path) -> None:
    session = AgentlogSession("bad", f"sqlite://{tmp_path / 'a.db'}")
    run(session.add_items(CONVERSATION[:1]))
    before = session.live.session.seq
    for bad, where in (([{"role": "user", "content": "ok"}, "not an item"], "item 1 is not an object"),
                       ([{"role": "user", "content": "\ud800"}], "items[0].content"),
                       ([{"role": "user", "content": float("inf")}], "items[0].content")):
        with pytest.raises(InvalidEventError) as refused:
            run(session.add_items(bad))
        assert where in str(refused.value)
    assert session.live.session.seq == before
    assert run(session.get_items()) == CONVERSATION[:1]
    session.close()


def test_a_second_writer_on_the_same_session_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'a.db'}"
    first = AgentlogSession("shared", url)
    with pytest.raises(SessionLockedError, match="open for writing by process"):
        AgentlogSession("shared", url)
    run(first.add_items(CONVERSATION[:1]))
    first.close()
    second = AgentlogSession("shared", url)
    assert run(second.get_items()) == CONVERSATION[:1]
    second.close()


def test_a_closed_session_refuses_every_operation(tmp_path: Path) -> None:
    session = AgentlogSession("closed", f"sqlite://{tmp_path / 'a.db'}")
    run(session.add_items(CONVERSATION[:1]))
    session.close()
    session.close()
    for operation in (session.add_items(CONVERSATION[1:2]), session.add_items([]), session.get_items(),
                      session.pop_item(), session.clear_session()):
        with pytest.raises(UsageError, match="'closed' is closed"):
            run(operation)
    reopened = AgentlogSession("closed", f"sqlite://{tmp_path / 'a.db'}")
    assert run(reopened.get_items()) == CONVERSATION[:1]
    reopened.close()


def test_a_cancelled_write_settles_before_the_cancellation_is_raised(tmp_path: Path) -> None:
    """As with SQLiteSession: a caller cancelled mid-write learns of it once the write is done."""
    session = AgentlogSession("cancel", f"sqlite://{tmp_path / 'a.db'}")

    async def main() -> None:
        session._lock.acquire()  # the write waits in its worker thread
        try:
            adding = asyncio.create_task(session.add_items(CONVERSATION[:1]))
            await asyncio.sleep(0.05)
            for _ in range(2):
                adding.cancel()
                await asyncio.sleep(0)
            assert not adding.done()
        finally:
            session._lock.release()
        with pytest.raises(asyncio.CancelledError):
            await adding
        assert await session.get_items() == CONVERSATION[:1]

    run(main())
    session.close()


def test_a_turn_left_open_by_another_writer_is_refused(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    live = store.start("open")
    Recorder(live.session).turn().start()
    session = AgentlogSession("open", live)
    with pytest.raises(UsageError, match=r"turn 1 .* is still open"):
        run(session.add_items(CONVERSATION[:1]))
    assert live.session.seq == 1
    session.close()  # the caller's live session stays open
    live.close()
    store.close()


# -- the SDK's Runner against a local Responses API server -----------------------------------------


@function_tool
def list_dir(path: str) -> str:
    """List a directory."""
    return "main.py"


def agent(provider: Provider) -> Agent[Any]:
    client = openai.AsyncOpenAI(base_url=provider.base_url, api_key="test-key", max_retries=0, timeout=10)
    return Agent(name="coder", instructions="You are terse.", tools=[list_dir],
                 model=OpenAIResponsesModel(model="gpt-5", openai_client=client))


NO_TRACING = RunConfig(tracing_disabled=True)


def test_runner_runs_remember_the_conversation(provider: Provider, open_store: StoreFactory) -> None:
    provider.queue(json_reply("responses_tools"), json_reply("responses_text"), json_reply("responses_text"))
    store = open_store()
    session = AgentlogSession("runner", store)
    coder = agent(provider)
    result = run(Runner.run(coder, "What is in src?", session=session, run_config=NO_TRACING))
    assert result.final_output == "src holds main.py."
    first_items = run(session.get_items())
    assert [item.get("type", "message") for item in first_items] == [
        "message", "reasoning", "message", "function_call", "function_call_output", "message"]
    result = run(Runner.run(coder, "And again?", session=session, run_config=NO_TRACING))
    sent = provider.requests[2]["input"]
    assert sent[: len(first_items)] == first_items  # history as the SDK saved it, reasoning included
    assert sent[-1] == {"role": "user", "content": "And again?"}
    assert provider.requests[1]["input"][-1] == {"call_id": "call_N1", "output": "main.py",
                                                 "type": "function_call_output"}
    session.close()
    log = open_store().load("runner")
    check_invariants(log.events)
    call = next(e for e in log.events if e.type == TOOL_CALL)
    assert thaw(call.data)["name"] == "list_dir"
    assert [e.type for e in log.events].count(TOOL_RESULT) == 1


def test_a_runner_honours_session_settings_given_as_a_dict(provider: Provider, tmp_path: Path) -> None:
    provider.queue(json_reply("responses_text"))
    session = AgentlogSession("limited", f"sqlite://{tmp_path / 'a.db'}", session_settings={"limit": 2})
    run(session.add_items(CONVERSATION))
    result = run(Runner.run(agent(provider), "And now?", session=session, run_config=NO_TRACING))
    assert result.final_output == "src holds main.py."
    assert provider.requests[0]["input"] == [*CONVERSATION[-2:], {"role": "user", "content": "And now?"}]
    session.close()


def test_a_streamed_run_and_a_sqlite_session_save_the_same_items(provider: Provider, tmp_path: Path) -> None:
    provider.queue(sse("responses_final_text"), sse("responses_final_text"))
    coder = agent(provider)

    async def streamed(session: Any) -> list[Any]:
        result = Runner.run_streamed(coder, "Hi", session=session, run_config=NO_TRACING)
        async for _event in result.stream_events():
            pass
        return list(await session.get_items())

    ours = AgentlogSession("same", f"jsonl://{tmp_path / 'root'}")
    theirs = SQLiteSession("same", tmp_path / "sdk.db")
    try:
        assert run(streamed(ours)) == run(streamed(theirs))
    finally:
        ours.close()
        theirs.close()


def test_importing_the_adapter_module_needs_the_sdk_only_there() -> None:
    code = ("import sys, agentlog.integrations.responses_items, agentlog.integrations.responses_events; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('agents', 'openai')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("edit", ["pop_item", "clear_session"])
def test_a_session_edited_by_pop_or_clear_can_still_be_compacted(tmp_path: Path, edit: str) -> None:
    from click.testing import CliRunner

    from agentlog.cli.main import cli

    url = f"jsonl://{tmp_path / 'store'}"
    session = AgentlogSession("edited", url)
    long = [{**item, "content": f"{item['content']} " + "words " * 200} for item in CONVERSATION]
    run(session.add_items(long[:4]))
    run(getattr(session, edit)())  # an assistant/message replacing nodes (sourceEventSeqs cite them)
    run(session.add_items([*long[4:], *long]))
    session.close()
    result = CliRunner().invoke(cli, ["--store", url, "compact", "edited", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["compacted"] is True


def test_an_output_whose_call_was_popped_leaves_a_compactable_session(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli.main import cli

    url = f"jsonl://{tmp_path / 'store'}"
    session = AgentlogSession("orphan", url)
    long = [{**item, "content": f"{item['content']} " + "words " * 200} for item in CONVERSATION]
    run(session.add_items([*long[:4], RICH[0], RICH[2]]))
    assert run(session.pop_item()) == RICH[2]  # the SDK retries the call: its output arrives later
    run(session.add_items([RICH[3], *long[4:]]))
    assert run(session.get_items()) == [*long[:4], RICH[0], RICH[3], *long[4:]]
    session.close()
    result = CliRunner().invoke(cli, ["--store", url, "compact", "orphan", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["compacted"] is True


OUTPUT = {"call_id": "call_1", "output": "main.py", "type": "function_call_output"}
LATER = {"role": "user", "content": "and now?"}


async def _popped(session: AgentlogSession) -> list[Any]:
    await session.add_items([RICH[0], RICH[1], RICH[2]])  # reasoning and call: one assistant message
    assert await session.pop_item() == RICH[2]
    return [RICH[0], RICH[1]]


async def _cleared(session: AgentlogSession) -> list[Any]:
    await session.add_items([RICH[0], RICH[2]])
    await session.clear_session()
    return []


async def _never_seen(session: AgentlogSession) -> list[Any]:
    await session.add_items(CONVERSATION[:2])
    return CONVERSATION[:2]


async def _answered_already(session: AgentlogSession) -> list[Any]:
    await session.add_items(RICH[:4])
    return RICH[:4]


@pytest.mark.parametrize("before", [_popped, _cleared, _never_seen, _answered_already],
                         ids=["popped", "cleared", "never-seen", "answered-already"])
def test_an_output_without_an_open_call_is_kept_but_sent_as_user_text(before: Any) -> None:
    from agentlog.integrations.openai_messages import chat_messages
    from agentlog.integrations.responses_items import to_responses_input

    session = AgentlogSession("orphan", "memory:")
    kept = run(before(session))
    run(session.add_items([OUTPUT, LATER]))
    assert run(session.get_items()) == [*kept, OUTPUT, LATER]  # what the SDK added minus what it popped
    live = session.live.session
    assert_tool_pairs_hold(live)
    check_invariants(live.events)
    logged = [e for e in live.events if e.type == USER_MESSAGE and e.data["source"].get("kind") == "tool"]
    assert len(logged) == 1 and logged[0].data["source"]["callId"] == "call_1"
    assert thaw(logged[0].data["content"]) == [  # the log keeps it, a tool's output
        {"type": "tool-result", "toolCallId": "call_1", "content": [{"type": "text", "text": "main.py"}],
         "isError": False}]
    sent = to_responses_input(live)
    assert sent.count(OUTPUT) == kept.count(OUTPUT)  # only an answer to an open call goes as an output
    assert {"role": "user", "content": "[result of tool call call_1]\nmain.py"} in sent
    chat = chat_messages(live.derive_messages())
    assert len([m for m in chat if m["role"] == "tool"]) == kept.count(OUTPUT)
    assert run(session.pop_item()) == LATER
    assert run(session.pop_item()) == OUTPUT  # popped like any item
    assert run(session.get_items()) == kept
    session.close()


def test_a_call_added_again_after_its_orphan_output_is_answered_by_the_next_output() -> None:
    session = AgentlogSession("retry", "memory:")
    run(session.add_items([RICH[0], RICH[2]]))
    run(session.pop_item())
    run(session.add_items([OUTPUT]))  # orphan: its call was popped
    run(session.add_items([RICH[2]]))  # the retry logs the call again
    run(session.add_items([RICH[3], RICH[4]]))
    assert run(session.get_items()) == [RICH[0], OUTPUT, RICH[2], RICH[3], RICH[4]]
    live = session.live.session
    assert_tool_pairs_hold(live)
    results = [e for e in live.events if e.type == TOOL_RESULT]
    assert len(results) == 1 and results[0].data["message"]["source"]["callId"] == "call_1"
    call = live.events[results[0].source_event_seqs[0]]
    assert thaw(call.data)["name"] == "list_dir" and thaw(call.data)["arguments"] == '{"path":"src"}'
    session.close()
