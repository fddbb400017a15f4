"""AgentlogHistory: Pydantic AI runs recorded as agentlog turns and restored as ``message_history``.

Offline, with pydantic-ai's ``TestModel`` and ``FunctionModel``. The restore is compared with what
pydantic-ai itself holds (``ModelMessagesTypeAdapter`` JSON), so "lossless" means byte-equal.
"""

from __future__ import annotations

import asyncio
import importlib.util
import signal
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaThinkingCalls, DeltaThinkingPart, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_core import PydanticSerializationError

from agentlog import (
    Compactor,
    ExtractiveSummarizer,
    InvalidEventError,
    SessionLockedError,
    SqliteStore,
    UsageError,
    check_invariants,
)
from agentlog.core.events import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TURN_END, USER_MESSAGE
from agentlog.integrations.pydantic_ai import AgentlogHistory
from tests.contract.conftest import StoreFactory

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _close_the_thread_loop() -> Iterator[None]:
    """pydantic-ai's sync methods (``run_stream_sync``) leave the thread's loop set, for reuse."""
    yield
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            loop = asyncio.get_event_loop()
    except RuntimeError:  # none set (asyncio.run unset it)
        return
    loop.close()
    asyncio.set_event_loop(None)


def dumped(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def tool_agent() -> Agent[None, str]:
    agent = Agent(TestModel(), system_prompt="Be brief.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return agent


def echo_model(seen: list[list[ModelMessage]] | None = None) -> FunctionModel:
    """A model that answers with the number of messages it was sent (and keeps what it saw)."""
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if seen is not None:
            seen.append(list(messages))
        return ModelResponse(parts=[TextPart(f"{len(messages)} messages")], model_name="echo")
    return FunctionModel(reply)


@contextmanager
def killed_after(code: str, url: str) -> Iterator[str]:
    """Run ``code`` with ``url`` in a child process; yield its first line, then SIGKILL it."""
    child = subprocess.Popen([sys.executable, "-c", code, url], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert child.stdout is not None
        yield child.stdout.readline().strip()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()


def types_of(history: AgentlogHistory) -> list[str]:
    return [event.type for event in history.live.session.events]


@pytest.fixture(params=["jsonl-zstd", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """The store contract suite's ``open_store`` fixture, over the durable backends."""
    return str(request.param)


def test_round_trip_record_restore_continue_fork(open_store: StoreFactory) -> None:
    agent = tool_agent()
    history = AgentlogHistory("chat", open_store())
    first = history.run_sync(agent, "add two numbers")
    assert dumped(history.messages()) == dumped(first.all_messages())
    second = history.run_sync(agent, "and again")
    assert len(second.all_messages()) > len(first.all_messages())
    assert dumped(history.messages()) == dumped(second.all_messages())
    kinds = types_of(history)
    assert kinds.count(TURN_END) == 2 and kinds.count(TOOL_CALL) == kinds.count(TOOL_RESULT) == 1
    headers = [e.data["header"] for e in history.live.session.events if e.type == "request/header"]
    assert [h.get("system") for h in headers] == ["Be brief."]  # the system prompt holds across runs
    assert [tool["name"] for tool in headers[0]["tools"]] == ["add"]
    assert headers[0]["tools"][0]["parameters"]["required"] == ("a", "b")
    check_invariants(history.live.session.events)
    boundary = next(e.seq for e in history.live.session.events if e.type == TURN_END)
    history.close()

    store = open_store()  # a restart: a new store instance over the same storage
    resumed = AgentlogHistory("chat", store)
    assert dumped(resumed.messages()) == dumped(second.all_messages())
    seen: list[list[ModelMessage]] = []
    third = resumed.run_sync(Agent(echo_model(seen)), "still there?")
    assert dumped(seen[0][:-1]) == dumped(second.all_messages())  # the model was sent the whole history
    assert dumped(resumed.messages()) == dumped(third.all_messages())
    latest = resumed.live.session.request_header()
    assert latest is not None and "tools" not in latest  # an agent without tools: the header says so
    resumed.close()

    fork = AgentlogHistory("chat-fork", store.fork("chat", boundary, "chat-fork"))
    assert dumped(fork.messages()) == dumped(first.all_messages())
    forked = fork.run_sync(Agent(echo_model()), "a different second question")
    assert dumped(fork.messages()) == dumped(forked.all_messages())
    assert dumped(forked.all_messages()[: len(first.all_messages())]) == dumped(first.all_messages())
    fork.live.close()
    parent = AgentlogHistory("chat", store)
    assert dumped(parent.messages()) == dumped(third.all_messages())  # the fork left the parent alone
    parent.close()


def test_each_reply_and_its_tool_calls_are_logged_before_the_tools_run(tmp_path: Path) -> None:
    history = AgentlogHistory("order", f"sqlite://{tmp_path / 'a.db'}")
    agent = Agent(TestModel())
    logged: list[list[str]] = []

    @agent.tool_plain
    def look() -> str:
        """Look around."""
        logged.append(types_of(history))
        return "a room"

    history.run_sync(agent, "look")
    assert logged[0][-2:] == [ASSISTANT_MESSAGE, TOOL_CALL]
    history.close()


def test_async_run_and_both_streaming_forms_record_what_pydantic_ai_holds(tmp_path: Path) -> None:
    history = AgentlogHistory("stream", f"sqlite://{tmp_path / 'a.db'}")
    agent = tool_agent()

    async def main() -> None:
        result = await history.run(agent, "first")
        assert dumped(history.messages()) == dumped(result.all_messages())
        async with history.run_stream(agent, "stream it") as stream:
            text = [chunk async for chunk in stream.stream_text()]
        assert text
        assert dumped(history.messages()) == dumped(stream.all_messages())

    asyncio.run(main())
    with history.run_stream_sync(agent, "and synchronously") as sync_stream:
        assert list(sync_stream.stream_text())
    assert dumped(history.messages()) == dumped(sync_stream.all_messages())
    assert types_of(history).count(TURN_END) == 3
    headers = [e.data["header"] for e in history.live.session.events if e.type == "request/header"]
    assert len(headers) == 1 and headers[0]["tools"][0]["name"] == "add"  # streams keep the run's tools
    check_invariants(history.live.session.events)
    history.close()


def test_a_tool_retry_is_a_failed_tool_result_and_round_trips(tmp_path: Path) -> None:
    history = AgentlogHistory("retry", f"sqlite://{tmp_path / 'a.db'}")
    agent = Agent(TestModel())
    calls: list[int] = []

    @agent.tool_plain
    def flaky(n: int) -> str:
        """Fails the first time."""
        calls.append(n)
        if len(calls) == 1:
            raise ModelRetry("try once more")
        return "ok"

    result = history.run_sync(agent, "call flaky")
    parts = [part for message in result.all_messages() for part in message.parts]
    assert [getattr(part, "outcome", None) for part in parts if isinstance(part, ToolReturnPart)] == [
        "retried", "success"]
    assert dumped(history.messages()) == dumped(result.all_messages())
    results = [e for e in history.live.session.events if e.type == TOOL_RESULT]
    assert [e.data["message"]["content"][0]["isError"] for e in results] == [True, False]
    history.close()


def test_an_output_validation_retry_is_a_user_message_and_round_trips(tmp_path: Path) -> None:
    history = AgentlogHistory("validate", f"sqlite://{tmp_path / 'a.db'}")
    agent = Agent(echo_model())
    tries: list[str] = []

    @agent.output_validator
    def check(output: str) -> str:
        tries.append(output)
        if len(tries) == 1:
            raise ModelRetry("say it again")
        return output

    result = history.run_sync(agent, "hello")
    assert dumped(history.messages()) == dumped(result.all_messages())
    users = [e for e in history.live.session.events if e.type == USER_MESSAGE]
    assert "say it again" in users[-1].data["content"][0]["text"]
    history.close()


def test_thinking_parts_become_reasoning_blocks_and_round_trip(tmp_path: Path) -> None:
    def think(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ThinkingPart("let me see", signature="sig-1"), TextPart("4")],
                             model_name="thinker")

    history = AgentlogHistory("think", f"sqlite://{tmp_path / 'a.db'}")
    result = history.run_sync(Agent(FunctionModel(think)), "2+2?")
    assert dumped(history.messages()) == dumped(result.all_messages())
    [reply] = [e for e in history.live.session.events if e.type == ASSISTANT_MESSAGE]
    assert [b["type"] for b in reply.data["message"]["content"]] == ["reasoning", "text"]
    response = result.all_messages()[1]
    assert isinstance(response, ModelResponse)
    assert reply.data["message"]["source"]["model"] == response.model_name
    assert reply.data["usage"]["inputTokens"] >= 0
    history.close()


def test_streamed_thinking_is_recorded_as_reasoning_and_round_trips(tmp_path: Path) -> None:
    async def stream(messages: list[ModelMessage], _: AgentInfo) -> AsyncIterator[str | DeltaThinkingCalls]:
        yield {0: DeltaThinkingPart(content="let me ")}
        yield {0: DeltaThinkingPart(content="see", signature="sig-1")}
        yield "4"

    history = AgentlogHistory("think-stream", f"sqlite://{tmp_path / 'a.db'}")

    async def main() -> list[ModelMessage]:
        async with history.run_stream(Agent(FunctionModel(stream_function=stream)), "2+2?") as result:
            assert await result.get_output() == "4"
        return result.all_messages()

    messages = asyncio.run(main())
    assert dumped(history.messages()) == dumped(messages)
    [reply] = [e for e in history.live.session.events if e.type == ASSISTANT_MESSAGE]
    assert [(b["type"], b["text"]) for b in reply.data["message"]["content"]] == [("reasoning", "let me see"),
                                                                                 ("text", "4")]
    history.close()


def test_after_compaction_the_history_is_what_the_surface_shows(tmp_path: Path) -> None:
    history = AgentlogHistory("long", f"jsonl://{tmp_path / 'store'}")
    agent = Agent(echo_model())
    for n in range(6):
        history.run_sync(agent, f"question {n}: " + "words " * 300)
    result = Compactor(ExtractiveSummarizer()).compact_now(history.live)
    assert result is not None and getattr(result, "compacted", True)
    restored = history.messages()
    surface = history.live.session.derive_messages()
    assert len(restored) == len(surface) < 12
    first = restored[0]
    assert isinstance(first, ModelRequest) and isinstance(first.parts[0], UserPromptPart)
    assert "question 0" in str(first.parts[0].content)  # the checkpoint summary, as the surface has it
    seen: list[list[ModelMessage]] = []
    history.run_sync(Agent(echo_model(seen)), "what did I ask first?")
    assert dumped(seen[0][:-1]) == dumped(restored)
    history.close()


def test_a_history_from_another_tool_maps_by_its_agentlog_content(tmp_path: Path) -> None:
    from agentlog import Recorder

    store = SqliteStore(tmp_path / "a.db")
    live = store.start("foreign")
    with Recorder(live).turn() as turn, turn.step() as step:
        step.user_message("hi")
        step.assistant(provider="p", model="m", content=[
            {"type": "reasoning", "text": "hm"},
            {"type": "tool-call", "id": "c1", "name": "ls", "arguments": "{}"}])
        step.tool_call("c1", "ls", "{}")
        step.tool_result("c1", "a.txt")
    history = AgentlogHistory("foreign", live)
    messages = history.messages()
    assert [type(m).__name__ for m in messages] == ["ModelRequest", "ModelResponse", "ModelRequest", ]
    assert isinstance(messages[1].parts[1], ToolCallPart) and isinstance(messages[1].parts[0], ThinkingPart)
    tool_return = messages[2].parts[0]
    assert isinstance(tool_return, ToolReturnPart)
    assert (tool_return.tool_name, tool_return.content, tool_return.tool_call_id) == ("ls", "a.txt", "c1")
    history.run_sync(Agent(echo_model()), "go on")
    live.close()
    store.close()


# -- bad input ---------------------------------------------------------------------------------------


def test_an_unserializable_message_is_refused_and_the_log_is_unchanged(tmp_path: Path) -> None:
    history = AgentlogHistory("bad", f"sqlite://{tmp_path / 'a.db'}")
    good = history.run_sync(Agent(echo_model()), "hi").all_messages()
    before = history.live.session.seq
    unserializable = ModelRequest(parts=[ToolReturnPart("t", content=object(), tool_call_id="c")])
    for bad, where in (([good[0], "not a message"], r"messages\[1\] is a str"),
                       ([unserializable], r"messages\[0\] cannot be serialized")):
        with pytest.raises(InvalidEventError, match=where):
            history.record(bad)  # type: ignore[arg-type]
    assert history.live.session.seq == before
    assert dumped(history.messages()) == dumped(good)
    for name in ("message_history", "conversation"):
        with pytest.raises(UsageError, match=f"do not give {name}"):
            history.run_sync(Agent(echo_model()), "x", **{name: []})
    history.close()


def test_a_closed_history_refuses_every_operation(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'a.db'}"
    history = AgentlogHistory("closed", url)
    good = history.run_sync(Agent(echo_model()), "hi").all_messages()
    history.close()
    history.close()
    agent = Agent(echo_model())
    for operation in (history.messages, lambda: history.record(good), lambda: history.run_sync(agent, "x")):
        with pytest.raises(UsageError, match="'closed' is closed"):
            operation()
    with pytest.raises(UsageError, match="'closed' is closed"), history.run_stream_sync(agent, "x"):
        pass
    reopened = AgentlogHistory("closed", url)
    assert dumped(reopened.messages()) == dumped(good)
    reopened.close()


HOLDER = """
import sys
from agentlog.store.urls import open_store
store = open_store(sys.argv[1])
live = store.start("held")
live.session.append("turn/start", {"turn": 1})
live.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
live.flush()
print("HELD", flush=True)
sys.stdin.read()
"""


def test_a_session_another_process_writes_is_refused_and_loses_nothing(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'a.db'}"
    with killed_after(HOLDER, url) as line:
        assert line == "HELD"
        with pytest.raises(SessionLockedError, match="open for writing by process"):
            AgentlogHistory("held", url)
    history = AgentlogHistory("held", url)
    assert types_of(history)[:2] == ["turn/start", "turn/end"]
    history.close()


def test_an_unserializable_tool_return_fails_the_run_and_the_history_stays_usable(tmp_path: Path) -> None:
    class Thing:
        pass

    def call_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1].parts[-1], UserPromptPart):
            return ModelResponse(parts=[ToolCallPart("thing", {}, tool_call_id="call-1")])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(call_then_answer))

    @agent.tool_plain
    def thing() -> object:
        """Returns something that is not JSON."""
        return Thing()

    history = AgentlogHistory("thing", f"sqlite://{tmp_path / 'a.db'}")
    with pytest.raises(PydanticSerializationError, match="Thing"):  # pydantic-ai's own, passed on as is
        history.run_sync(agent, "get the thing")
    events = history.live.session.events
    assert [e.type for e in events if e.type in (USER_MESSAGE, TOOL_CALL, TOOL_RESULT)] == [
        USER_MESSAGE, TOOL_CALL, TOOL_RESULT]
    result = next(e for e in events if e.type == TOOL_RESULT)
    assert result.data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"  # the recorder's answer to a cut call
    assert events[history.live.session.seq - 1].data["reason"]["kind"] == "error"
    check_invariants(events)
    restored = history.messages()
    assert [type(m).__name__ for m in restored] == ["ModelRequest", "ModelResponse", "ModelRequest"]
    answer = restored[2].parts[0]
    assert isinstance(answer, ToolReturnPart) and answer.tool_call_id == "call-1"
    assert history.run_sync(Agent(echo_model()), "go on").output == "3 messages"  # the prompt joins it
    history.close()


def test_a_failed_run_ends_its_turn_with_the_error_and_keeps_what_was_logged(tmp_path: Path) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("the model is down")

    history = AgentlogHistory("fail", f"sqlite://{tmp_path / 'a.db'}?write_delay_ms=60000")
    good = history.run_sync(Agent(echo_model()), "hi").all_messages()
    with pytest.raises(RuntimeError, match="the model is down"):
        history.run_sync(Agent(FunctionModel(broken)), "again")
    reader = SqliteStore(tmp_path / "a.db")  # what is on disk, read by another store
    stored = list(reader.load("fail").events)
    reader.close()
    assert stored[-1].type == TURN_END and stored[-1].data["reason"]["kind"] == "error"
    assert [e.data["content"][0]["text"] for e in stored if e.type == USER_MESSAGE] == ["hi", "again"]
    check_invariants(history.live.session.events)
    restored = history.messages()
    assert dumped(restored[: len(good)]) == dumped(good) and len(restored) == len(good) + 1
    history.run_sync(Agent(echo_model()), "and now?")  # the session goes on
    history.close()


CRASH_WORKER = """
import sys
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from agentlog.integrations.pydantic_ai import AgentlogHistory
history = AgentlogHistory("durable", sys.argv[1])
result = history.run_sync(Agent(TestModel()), "hello")
sys.stdout.write(result.all_messages_json().decode() + "\\n")
sys.stdout.flush()
sys.stdin.read()
"""


def test_a_recorded_run_is_durable_when_run_returns_even_if_the_process_is_killed(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'crash.db'}?write_delay_ms=60000"  # nothing flushes by itself
    with killed_after(CRASH_WORKER, url) as line:
        pass
    history = AgentlogHistory("durable", url)
    assert dumped(history.messages()).decode() == line
    history.close()


def test_a_stream_left_early_or_failed_keeps_its_prompt_and_ends_its_turn(tmp_path: Path) -> None:
    history = AgentlogHistory("left", f"sqlite://{tmp_path / 'a.db'}")
    agent = tool_agent()

    async def main() -> None:
        async with history.run_stream(agent, "never read"):
            pass
        with pytest.raises(ValueError, match="boom"):
            async with history.run_stream(agent, "fails"):
                raise ValueError("boom")

    asyncio.run(main())
    events = history.live.session.events
    assert [e.data["content"][0]["text"] for e in events if e.type == USER_MESSAGE] == ["never read", "fails"]
    ends = [e.data["reason"]["kind"] for e in events if e.type == TURN_END]
    assert ends == ["completed", "error"]
    check_invariants(events)
    history.run_sync(agent, "and now")  # the history goes on from there
    history.close()


def test_the_example_runs_offline_records_resumes_compacts_and_forks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = REPO / "examples" / "pydantic_ai_history.py"
    spec = importlib.util.spec_from_file_location("pydantic_ai_history", path)
    assert spec is not None and spec.loader is not None
    pydantic_ai_history = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pydantic_ai_history)
    url = f"jsonl://{tmp_path / 'store'}"
    pydantic_ai_history.main(["--store", url, "--id", "demo", "What time is it?"])
    pydantic_ai_history.main(["--store", url, "--id", "demo", *(f"question {n}" for n in range(6))])
    out = capsys.readouterr().out
    assert "session demo: 4 messages to resume from" in out and "session demo: 28 messages" in out
    assert "compacted: the history is now" in out and "fork demo-fork-" in out


def test_without_the_extra_the_import_names_it() -> None:
    code = ("import sys; sys.modules['pydantic_ai'] = None\n"
            "try:\n    import agentlog.integrations.pydantic_ai\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.startswith("MissingExtraError") and "agentlog[pydantic-ai]" in out.stdout


def test_run_sync_inside_a_running_loop_is_refused(tmp_path: Path) -> None:
    history = AgentlogHistory("loop", f"sqlite://{tmp_path / 'a.db'}")

    async def main() -> None:
        with pytest.raises(UsageError, match=r"await history\.run"):
            history.run_sync(Agent(echo_model()), "x")

    asyncio.run(main())
    assert history.live.session.seq == 0
    history.close()


MID_TOOL_WORKER = """
import sys, time
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel
from agentlog.integrations.pydantic_ai import AgentlogHistory

def model(messages, info):
    if isinstance(messages[-1].parts[-1], UserPromptPart):
        return ModelResponse(parts=[ToolCallPart("slow", {}, tool_call_id="call-1")])
    return ModelResponse(parts=[TextPart("done")])

agent = Agent(FunctionModel(model))

@agent.tool_plain
def slow() -> str:
    print("IN TOOL", flush=True)
    time.sleep(60)
    return "late"

AgentlogHistory("crash", sys.argv[1]).run_sync(agent, "run the slow tool")
"""


def test_a_process_killed_inside_a_tool_resumes_with_the_call_answered(tmp_path: Path) -> None:
    """The reply and its call are on disk before the tool runs; reopening repairs the cut turn."""
    url = f"sqlite://{tmp_path / 'crash.db'}?write_delay_ms=60000"  # only the recorder's checkpoints flush
    with killed_after(MID_TOOL_WORKER, url) as line:
        assert line == "IN TOOL"
    history = AgentlogHistory("crash", url)
    restored = history.messages()
    assert [type(m).__name__ for m in restored] == ["ModelRequest", "ModelResponse", "ModelRequest"]
    call = restored[1].parts[0]
    answer = restored[2].parts[0]
    assert isinstance(call, ToolCallPart) and call.tool_call_id == "call-1"
    assert isinstance(answer, ToolReturnPart) and answer.tool_call_id == "call-1"
    check_invariants(history.live.session.events)
    assert history.run_sync(Agent(echo_model()), "go on").output == "3 messages"
    history.close()


def test_a_turn_another_writer_left_open_is_refused_and_nothing_is_logged(tmp_path: Path) -> None:
    from agentlog import Recorder

    store = SqliteStore(tmp_path / "a.db")
    live = store.start("open")
    Recorder(live).turn().start()
    history = AgentlogHistory("open", live)
    for attempt in (lambda: history.run_sync(Agent(echo_model()), "x"),
                    lambda: history.record([ModelRequest(parts=[UserPromptPart("x")])])):
        with pytest.raises(UsageError, match=r"turn 1 is still open"):
            attempt()
    assert live.session.seq == 1
    history.close()  # the caller's live session stays open
    live.close()
    store.close()


def test_two_runs_at_once_on_one_history_the_second_is_refused(tmp_path: Path) -> None:
    history = AgentlogHistory("busy", f"sqlite://{tmp_path / 'a.db'}")
    agent = tool_agent()

    async def main() -> Any:
        async with history.run_stream(agent, "one"):
            with pytest.raises(UsageError, match="still open"):
                await history.run(agent, "two")

    asyncio.run(main())
    check_invariants(history.live.session.events)
    history.close()
