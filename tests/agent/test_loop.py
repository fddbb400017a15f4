"""``ChatAgent`` in process: the step limit, tool errors as results, and a refused prompt."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from agentlog import InvalidEventError, LiveSession, MemoryStore, Recorder, check_invariants
from agentlog.agent.loop import ChatAgent, open_session, session_model
from agentlog.agent.tools import FileTools
from agentlog.core.events import TOOL_RESULT, TURN_END
from tests.integrations.server import Provider, sse


def agent(provider: Provider, root: Path, store: MemoryStore,
          max_steps: int = 25) -> tuple[ChatAgent, LiveSession]:
    """A new session of ``store`` and an agent recording into it (talking to the scripted provider)."""
    live = open_session(store, None, cwd=str(root))
    client = openai.OpenAI(base_url=provider.base_url, api_key="k", max_retries=0, timeout=10)
    return ChatAgent(client, Recorder(live), model="gpt-4o", tools=FileTools(root), max_steps=max_steps), live


def test_a_model_that_keeps_calling_tools_is_stopped_at_the_step_limit(provider: Provider,
                                                                       root: Path) -> None:
    provider.queue(sse("openai_parallel_tools"), sse("openai_parallel_tools"))
    store = MemoryStore()
    chat_agent, live = agent(provider, root, store, max_steps=2)
    failed = chat_agent.chat(["loop"], on_error=pytest.fail)
    assert failed == 0 and len(provider.requests) == 2
    events = store.load(live.id).events
    check_invariants(events)
    (end,) = [e.data["reason"] for e in events if e.type == TURN_END]
    assert end["kind"] == "error" and end["error"]["code"] == "STEP_LIMIT"


def test_tool_failures_are_error_results_and_the_loop_goes_on(provider: Provider, root: Path) -> None:
    (root / "a.txt").unlink()
    provider.queue(sse("openai_parallel_tools"), sse("openai_final_text"))
    store = MemoryStore()
    chat_agent, live = agent(provider, root, store)
    chat_agent.run_turn("What is in a.txt?")
    results = [e.data["message"]["content"][0] for e in store.load(live.id).events if e.type == TOOL_RESULT]
    assert [r["isError"] for r in results] == [True, False]
    assert provider.requests[-1]["messages"][-2]["content"] == (
        "error: read_file: 'a.txt': No such file or directory")


def test_a_prompt_the_log_refuses_fails_its_turn_with_the_reason(provider: Provider, root: Path) -> None:
    store = MemoryStore()
    chat_agent, live = agent(provider, root, store)
    with pytest.raises(InvalidEventError, match="surrogate"):
        chat_agent.run_turn("caf\udce9")  # what surrogateescape makes of a non-UTF-8 argument
    assert provider.requests == []
    (end,) = [e.data["reason"] for e in store.load(live.id).events if e.type == TURN_END]
    assert end["kind"] == "error"


def test_session_model_is_the_latest_headers(provider: Provider, root: Path) -> None:
    provider.queue(sse("openai_final_text"))
    store = MemoryStore()
    chat_agent, live = agent(provider, root, store)
    assert session_model(live) is None  # no request yet: a new session needs --model
    chat_agent.run_turn("hi")
    live.close()
    with open_session(store, live.id, cwd="unused when resuming") as resumed:
        assert session_model(resumed) == "gpt-4o"
