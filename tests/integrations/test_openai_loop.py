"""The README's OpenAI loop and ``chat_stream`` end to end, and the delta-split property."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import openai
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk

from agentlog import Recorder, thaw
from agentlog.compaction.engine import Compactor
from agentlog.core.events import ASSISTANT_MESSAGE
from agentlog.core.invariants import check_invariants
from agentlog.integrations.openai_chat import achat_stream, chat_header, record_chat_stream, tool_calls
from tests.compaction.helpers import FixedSummarizer, new_session, record_turn
from tests.integrations.server import Provider, error, sse

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_loop() -> dict[str, Any]:
    """The namespace of the README's OpenAI SDK example (the block that defines ``agent_turn``)."""
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
                if "def agent_turn" in b]
    namespace: dict[str, Any] = {}
    exec(compile(block, str(README), "exec"), namespace)
    return namespace


def test_the_readme_loop_runs_a_tool_turn_and_recovers_from_overflow(provider: Provider, capsys: Any) -> None:
    session = new_session()
    recorder = Recorder(session, compactor=Compactor(FixedSummarizer(), context_window=10**6))
    for index in (1, 2):
        record_turn(recorder, index, header=chat_header("gpt-4o"))
    provider.queue(error(400, "openai_context_length"), sse("openai_parallel_tools"),
                   sse("openai_final_text"))
    ran: list[tuple[str, dict[str, Any]]] = []

    def run_tool(name: str, arguments: dict[str, Any]) -> str:
        ran.append((name, arguments))
        return f"{name} ok"

    client = openai.OpenAI(base_url=provider.base_url, api_key="k", max_retries=0, timeout=10)
    readme_loop()["agent_turn"](client, recorder, "What is in a.txt?", run_tool)
    assert ran == [("read_file", {"path": "a.txt"}), ("list_dir", {"path": "."})]
    assert capsys.readouterr().out == "Let me look.a.txt says hello; the directory has two files."
    overflowed, retried, last = (r["messages"] for r in provider.requests)
    assert retried[0] == {"role": "system", "content": "You are a coding agent."}
    assert "<compacted-summary>" in retried[1]["content"] and len(retried) < len(overflowed)
    assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "tool"]
    assert provider.requests[1]["stream_options"] == {"include_usage": True}
    assert provider.requests[1]["tools"][0]["function"]["name"] == "read_file"
    check_invariants(session.events)


def test_achat_stream_records_an_async_tool_turn(provider: Provider) -> None:
    provider.queue(sse("openai_parallel_tools"))
    session = new_session()

    async def main() -> list[Any]:
        client = openai.AsyncOpenAI(base_url=provider.base_url, api_key="k", max_retries=0, timeout=10)
        async with Recorder(session).turn() as turn, turn.step() as step:
            step.user_message("go")
            await step.arequest_header(chat_header("gpt-4o"))
            received = [chunk async for chunk in await achat_stream(step, session, client, model="gpt-4o")]
            for call in tool_calls(step):
                step.tool_call(call["id"], call["name"], call["arguments"])
                step.tool_result(call["id"], "done")
        await client.close()
        return received

    received = asyncio.run(main())
    assert len(received) == 11 and all(type(chunk) is ChatCompletionChunk for chunk in received)
    (message,) = [e.data for e in session.events if e.type == ASSISTANT_MESSAGE]
    ids = [b["id"] for b in message["message"]["content"] if b["type"] == "tool-call"]
    assert ids == ["call_Kq1", "call_Zr2"]
    assert message["usage"]["inputTokens"] == 20
    check_invariants(session.events)


# -- any split of the streamed text and arguments records the same message -------------------------


def _chunk(delta: dict[str, Any], finish: str | None = None) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate({
        "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _splits(text: str) -> st.SearchStrategy[list[str]]:
    cuts = st.lists(st.integers(0, len(text)), max_size=6).map(lambda xs: sorted(set(xs)))
    return cuts.map(lambda at: [text[a:b] for a, b in zip([0, *at], [*at, len(text)], strict=True)])


PIECES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), reasoning=PIECES, text=PIECES, args=st.lists(PIECES, min_size=0, max_size=3))
def test_any_split_of_the_stream_assembles_the_same_message(data: st.DataObject, reasoning: str, text: str,
                                                           args: list[str]) -> None:
    stream: list[ChatCompletionChunk] = [_chunk({"role": "assistant", "content": ""})]
    stream += [_chunk({"reasoning_content": piece}) for piece in data.draw(_splits(reasoning))]
    stream += [_chunk({"content": piece}) for piece in data.draw(_splits(text))]
    for index, arguments in enumerate(args):
        head, *rest = data.draw(_splits(arguments))
        stream.append(_chunk({"tool_calls": [{"index": index, "id": f"id{index}", "type": "function",
                                              "function": {"name": f"tool{index}", "arguments": head}}]}))
        stream += [_chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                   for piece in rest]
    stream.append(_chunk({}, "tool_calls" if args else "stop"))
    session = new_session()
    with Recorder(session).turn() as turn, turn.step() as step:
        step.request_header(chat_header("m"))
        assert list(record_chat_stream(step, iter(stream))) == stream
        for call in tool_calls(step):
            step.tool_result(call["id"], "never ran", is_error=True,
                             error={"name": "Skipped", "code": "TOOL_NOT_STARTED"})
    (message,) = [e.data["message"] for e in session.events if e.type == ASSISTANT_MESSAGE]
    expected = [{"type": "reasoning", "text": reasoning}] if reasoning else []
    expected += [{"type": "text", "text": text}] if text else []
    expected += [{"type": "tool-call", "id": f"id{i}", "name": f"tool{i}", "arguments": a}
                 for i, a in enumerate(args)]
    assert thaw(message["content"]) == expected
