"""Summarizers: the offline extractive checkpoint, and the OpenAI-compatible client against a real
local HTTP server (127.0.0.1 only) that streams scripted SSE answers."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.compaction.reading import message_texts, tool_calls
from agentlog.compaction.summarizers import (
    SECTIONS,
    SUMMARY_INSTRUCTION,
    ExtractiveSummarizer,
    OpenAICompatibleSummarizer,
    to_openai_tools,
)
from agentlog.compaction.summary import SummaryRequest
from agentlog.core.jsonvalue import freeze
from agentlog.errors import MissingExtraError, SummarizerError
from tests.compaction.fake_openai import FakeServer, Reply, delta, stream_of

httpx = pytest.importorskip("httpx")


# -- message builders ----------------------------------------------------------------------------


def user(text: str, mid: str = "u") -> Any:
    return freeze({"id": mid, "role": "user", "content": [{"type": "text", "text": text}],
                   "source": {"kind": "user"}})


def assistant(*blocks: dict[str, Any], mid: str = "a") -> Any:
    return freeze({"id": mid, "role": "assistant", "content": list(blocks),
                   "source": {"kind": "model", "provider": "p", "model": "m"}})


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": json.dumps(args)}


def result(call_id: str, output: str, *, error: bool = False) -> Any:
    block: dict[str, Any] = {"type": "tool-result", "toolCallId": call_id, "content": [text(output)]}
    if error:
        block["isError"] = True
    return freeze({"id": f"r-{call_id}", "role": "user", "content": [block],
                   "source": {"kind": "tool", "callId": call_id}})


def checkpoint(summary: str) -> Any:
    return freeze({"id": "cp", "role": "user", "source": {"kind": "plugin", "plugin": "compact",
                                                           "compactionId": "c1"},
                   "content": [text("Earlier conversation, condensed.\n\n<compacted-summary>"), text(summary),
                               text("</compacted-summary>")]})


def conversation() -> list[Any]:
    return [
        user("Please add retry logic to the fetcher. You must not change the public API, and "
             "never retry POST requests."),
        assistant(text("Looking at the code."), call("c1", "Read", {"file_path": "/repo/src/fetch.py"})),
        result("c1", "def fetch(url): ..."),
        assistant(call("c2", "Bash", {"command": "pytest tests/test_fetch.py -q"})),
        result("c2", "E   AssertionError: expected 3 attempts\n1 failed, 4 passed", error=True),
        assistant(text("The retry count is off by one. Fixing the loop bound."),
                  call("c3", "Edit", {"file_path": "/repo/src/fetch.py", "old_string": "a",
                                      "new_string": "b"})),
        result("c3", "The file /repo/src/fetch.py has been updated."),
        assistant(call("c4", "TodoWrite", {"todos": [
            {"content": "Add retry loop", "status": "completed"},
            {"content": "Document the backoff in README.md", "status": "in_progress"},
            {"content": "Add a test for POST", "status": "pending"}]})),
        result("c4", "Todos updated"),
        assistant(call("c5", "Bash", {"command": "pytest -q"})),
        result("c5", "12 passed in 0.31s"),
    ]


def summarize_text(summarizer: ExtractiveSummarizer, messages: list[Any]) -> str:
    answer = asyncio.run(summarizer.summarize(SummaryRequest(session_id="s", messages=tuple(messages))))
    assert len(answer.summary) == 1 and answer.summary[0]["type"] == "text"
    return str(answer.summary[0]["text"])


# -- ExtractiveSummarizer ------------------------------------------------------------------------


def test_extractive_writes_the_eight_sections_in_order() -> None:
    out = summarize_text(ExtractiveSummarizer(max_ratio=None), conversation())
    positions = [out.index(f"## {name}\n") for name in SECTIONS]
    assert positions == sorted(positions)
    assert out.count("## ") == 8


def test_extractive_marks_empty_sections_none() -> None:
    hello = [user("Hello there, how are you doing today?")]
    out = summarize_text(ExtractiveSummarizer(max_ratio=None), hello)
    assert "## Errors and Fixes\n(none)" in out
    assert "## Files and Code\n(none)" in out


def test_extractive_quotes_requests_and_constraints_verbatim() -> None:
    out = summarize_text(ExtractiveSummarizer(max_ratio=None), conversation())
    assert ('"Please add retry logic to the fetcher. You must not change the public API, and never retry '
            'POST requests."') in out
    critical = out[out.index("## Critical Context"):]
    assert '"You must not change the public API, and never retry POST requests."' in critical


def test_extractive_keeps_paths_commands_errors_and_outcomes() -> None:
    out = summarize_text(ExtractiveSummarizer(max_ratio=None), conversation())
    files = out[out.index("## Files and Code"):out.index("## Errors and Fixes")]
    assert "`/repo/src/fetch.py` (Read, Edit)" in files
    assert "`tests/test_fetch.py`" in files
    errors = out[out.index("## Errors and Fixes"):out.index("## Pending Jobs")]
    assert "AssertionError: expected 3 attempts" in errors
    assert "The retry count is off by one." in errors  # the fix that followed
    assert "`pytest tests/test_fetch.py -q`" in out
    assert "`12 passed in 0.31s`" in out


def test_extractive_lists_open_items_of_the_latest_todo_list() -> None:
    out = summarize_text(ExtractiveSummarizer(max_ratio=None), conversation())
    pending = out[out.index("## Pending Jobs"):out.index("## Current Work")]
    assert "Document the backoff in README.md" in pending
    assert "Add a test for POST" in pending
    assert "[ ] Add retry loop" not in pending
    assert pending.index("[done] Add retry loop") > pending.index("Add a test for POST")  # demoted, kept
    next_step = out[out.index("## Next Step"):out.index("## Critical Context")]
    assert "Document the backoff in README.md" in next_step


def test_extractive_tracks_issue_tracker_claims() -> None:
    messages = [
        user("Work on the epic proj-9 and finish its tasks."),
        assistant(call("b1", "Bash", {"command": "bd update proj-9.1 --status in_progress"})),
        result("b1", "Updated proj-9.1"),
        assistant(call("b2", "Bash", {"command": "bd show proj-9.2"})),
        result("b2", "proj-9.2 · Wire the exporter into the CLI [P1]"),
        assistant(call("b3", "Bash", {"command": "bd close proj-9.1 && "
                                                 "bd update proj-9.2 --status=in_progress"})),
        result("b3", "Closed"),
    ]
    out = summarize_text(ExtractiveSummarizer(max_ratio=None), messages)
    pending = out.split("## Pending Jobs")[1].split("##")[0]
    assert "[in progress] proj-9.2: Wire the exporter into the CLI" in pending
    assert "[done] proj-9.1" in pending  # finished: demoted, not lost
    assert "[in progress] proj-9.1" not in pending


def test_extractive_merges_a_prior_checkpoint() -> None:
    prior = ("## Primary Request and Intent\n- User: \"Port the parser to Rust\"\n\n"
             "## Files and Code\n- `src/parser.rs` (Write)\n\n"
             "## Current Work\n- Was fixing the lexer\n\n"
             "## Critical Context\n- \"Always keep the grammar LL(1).\"\n")
    out = summarize_text(ExtractiveSummarizer(max_ratio=None), [checkpoint(prior), *conversation()])
    assert 'User: "Port the parser to Rust"' in out
    assert "`src/parser.rs` (Write)" in out
    assert '"Always keep the grammar LL(1)."' in out
    assert "Was fixing the lexer" not in out  # stale current work is replaced
    assert out.index("Port the parser to Rust") < out.index("Please add retry logic")


def test_extractive_fits_its_budget_dropping_low_priority_items_first() -> None:
    messages = [user("Refactor the storage layer. Do not touch the wire format.")]
    for index in range(200):
        read = call(f"r{index}", "Read", {"file_path": f"/repo/pkg/module_{index:03}.py"})
        messages.append(assistant(read))
        messages.append(result(f"r{index}", f"contents of module {index} " * 20))
    out = summarize_text(ExtractiveSummarizer(budget_chars=2_000, max_ratio=None), messages)
    assert len(out) <= 2_000
    assert '"Refactor the storage layer. Do not touch the wire format."' in out
    assert '"Do not touch the wire format."' in out
    assert "module_199.py" in out  # the newest reads survive longer than the oldest
    assert "module_000.py" not in out


def test_extractive_stays_within_its_share_of_a_large_input() -> None:
    messages = [user("Summarize the logs. Keep every error code.")]
    for index in range(60):
        messages.append(assistant(call(f"l{index}", "Bash", {"command": f"cat /var/log/app-{index}.log"})))
        messages.append(result(f"l{index}", f"line {index}: all good\n" * 40))
    input_chars = sum(len(t) for m in messages for t in message_texts(m))
    input_chars += sum(len(c.arguments) for m in messages for c in tool_calls(m))
    out = summarize_text(ExtractiveSummarizer(budget_chars=100_000, max_ratio=0.05), messages)
    assert len(out) <= max(1_000, input_chars // 20)
    assert '"Summarize the logs. Keep every error code."' in out


def test_extractive_is_deterministic() -> None:
    summarizer = ExtractiveSummarizer(budget_chars=1_500, max_ratio=None)
    assert summarize_text(summarizer, conversation()) == summarize_text(summarizer, conversation())


def test_extractive_records_provider_model_and_cap() -> None:
    request = SummaryRequest(session_id="s", messages=tuple(conversation()), max_tokens=512)
    answer = asyncio.run(ExtractiveSummarizer(max_ratio=None).summarize(request))
    assert (answer.provider, answer.model, answer.max_tokens) == ("agentlog", "extractive", 512)
    assert answer.llm_stream_call is False and answer.raw_output is None


def test_extractive_rejects_a_tiny_budget() -> None:
    with pytest.raises(ValueError, match="budget_chars"):
        ExtractiveSummarizer(budget_chars=300)


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=12),
       budget=st.integers(min_value=400, max_value=3_000))
def test_extractive_output_always_fits_the_budget(texts: list[str], budget: int) -> None:
    messages = [user(t, mid=str(i)) if i % 2 == 0 else assistant(text(t), mid=str(i))
                for i, t in enumerate(texts)]
    out = ExtractiveSummarizer(budget_chars=budget, max_ratio=None).summarize_text(messages)
    assert len(out) <= budget
    assert all(f"## {name}\n" in out for name in SECTIONS)


TOOLS = ({"name": "read", "description": "Read a file.",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},)


def request(messages: list[Any] | None = None, **extra: Any) -> SummaryRequest:
    fields: dict[str, Any] = {"session_id": "sess-1", "messages": tuple(messages or conversation()),
                              "system": "You are a careful agent.", "tools": freeze(list(TOOLS))}
    fields.update(extra)
    return SummaryRequest(**fields)


def summarizer(server: FakeServer, **options: Any) -> OpenAICompatibleSummarizer:
    options.setdefault("api_key_env", "AGENTLOG_TEST_KEY")
    options.setdefault("max_retries", 0)
    options.setdefault("timeout", 5.0)
    return OpenAICompatibleSummarizer(server.url, "deepseek-chat", **options)


# -- OpenAICompatibleSummarizer ------------------------------------------------------------------


def test_streams_the_summary_with_provider_model_cap_usage_and_raw_output(server: FakeServer) -> None:
    server.replies.append(stream_of("## Primary Request and Intent\n- retry logic", reasoning="thinking...",
                                    usage={"prompt_tokens": 1200, "completion_tokens": 300,
                                           "prompt_tokens_details": {"cached_tokens": 1000},
                                           "completion_tokens_details": {"reasoning_tokens": 40}}))
    answer = asyncio.run(summarizer(server, provider="deepseek", max_tokens=777).summarize(request()))
    assert [dict(b) for b in answer.summary] == [{"type": "text",
                                                   "text": "## Primary Request and Intent\n- retry logic"}]
    assert (answer.provider, answer.model, answer.max_tokens) == ("deepseek", "deepseek-chat", 777)
    assert dict(answer.usage) == {"inputTokens": 200, "outputTokens": 300, "cacheReadTokens": 1000,
                                  "reasoningTokens": 40}
    assert [b["type"] for b in answer.raw_output or ()] == ["reasoning", "text"]
    assert answer.raw_output is not None and answer.raw_output[0]["text"] == "thinking..."


def test_maps_deepseek_cache_hit_usage(server: FakeServer) -> None:
    server.replies.append(stream_of("summary text", usage={
        "prompt_tokens": 900, "completion_tokens": 50, "prompt_cache_hit_tokens": 640,
        "prompt_cache_miss_tokens": 260}))
    answer = asyncio.run(summarizer(server).summarize(request()))
    assert dict(answer.usage) == {"inputTokens": 260, "outputTokens": 50, "cacheReadTokens": 640}


def test_request_keeps_system_and_tools_and_appends_the_instruction(
        server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOG_TEST_KEY", "sk-test-123")
    server.replies.append(stream_of("ok summary"))
    asyncio.run(summarizer(server).summarize(request(max_tokens=4096)))
    received = server.received[0]
    assert received.path == "/v1/chat/completions"
    assert received.headers["authorization"] == "Bearer sk-test-123"
    body = received.body
    assert body["model"] == "deepseek-chat" and body["stream"] is True and body["max_tokens"] == 4096
    assert body["tools"] == [{"type": "function", "function": TOOLS[0]}]
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": "You are a careful agent."}
    assert messages[-1] == {"role": "user", "content": SUMMARY_INSTRUCTION}
    assert messages[1]["role"] == "user" and messages[1]["content"].startswith("Please add retry logic")
    assert messages[2] == {"role": "assistant", "content": "Looking at the code.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "Read",
                                                      "arguments": '{"file_path": "/repo/src/fetch.py"}'}}]}
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "def fetch(url): ..."}
    assert len(messages) == 1 + len(conversation()) + 1


def test_sends_no_authorization_without_a_key(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTLOG_TEST_KEY", raising=False)
    server.replies.append(stream_of("ok summary"))
    asyncio.run(summarizer(server).summarize(request(system=None, tools=None)))
    received = server.received[0]
    assert "authorization" not in received.headers
    assert "tools" not in received.body and received.body["messages"][0]["role"] == "user"
    assert received.body["max_tokens"] == 8192  # neither the summarizer nor the request set a cap


def test_a_second_length_finish_is_a_truncated_max_tokens_error(server: FakeServer) -> None:
    server.replies += [stream_of("## Primary Request and In", finish="length"),
                       stream_of("## Primary Req", finish="length")]
    with pytest.raises(SummarizerError, match="truncated at max_tokens=160, also when asked for at most 64 "
                                              "words") as caught:
        asyncio.run(summarizer(server, max_tokens=160).summarize(request()))
    assert caught.value.code == "MAX_TOKENS"
    assert len(server.received) == 2


def test_reasoning_without_text_is_no_text_summary_content(server: FakeServer) -> None:
    server.replies.append(stream_of("   ", reasoning="I will summarize"))
    with pytest.raises(SummarizerError, match="no text summary content") as caught:
        asyncio.run(summarizer(server).summarize(request()))
    assert caught.value.code == "EMPTY_SUMMARY"


def test_http_500_carries_status_and_provider_message(server: FakeServer) -> None:
    server.replies.append(Reply(status=500, body={"error": {"message": "upstream exploded"}}))
    with pytest.raises(SummarizerError, match="HTTP 500: upstream exploded") as caught:
        asyncio.run(summarizer(server).summarize(request()))
    assert (caught.value.code, caught.value.status) == ("SERVER_ERROR", 500)


def test_a_server_error_is_retried_then_succeeds(server: FakeServer) -> None:
    server.replies += [Reply(status=503, body={"error": "busy"}), stream_of("second try")]
    answer = asyncio.run(summarizer(server, max_retries=2, retry_backoff=0.01).summarize(request()))
    assert answer.summary[0]["text"] == "second try"
    assert len(server.received) == 2


def test_a_429_with_short_retry_after_is_retried(server: FakeServer) -> None:
    server.replies += [Reply(status=429, body={"error": {"message": "slow down"}},
                             headers={"Retry-After": "0"}),
                       stream_of("after waiting")]
    answer = asyncio.run(summarizer(server, max_retries=1).summarize(request()))
    assert answer.summary[0]["text"] == "after waiting"
    assert len(server.received) == 2


def test_a_429_asking_too_long_a_wait_fails_with_its_retry_after(server: FakeServer) -> None:
    server.replies.append(Reply(status=429, body={"error": {"message": "quota"}},
                                headers={"Retry-After": "120"}))
    with pytest.raises(SummarizerError, match="HTTP 429: quota") as caught:
        asyncio.run(summarizer(server, max_retries=3, max_retry_wait=5).summarize(request()))
    error = caught.value
    assert (error.code, error.status, error.retry_after_ms) == ("RATE_LIMITED", 429, 120_000)
    assert len(server.received) == 1


def test_a_context_length_400_is_context_window_exceeded(server: FakeServer) -> None:
    server.replies.append(Reply(status=400, body={"error": {"message": "This model's maximum context length "
                                                                      "is 65536 tokens"}}))
    with pytest.raises(SummarizerError) as caught:
        asyncio.run(summarizer(server).summarize(request()))
    error = caught.value
    assert (error.code, error.status, error.retryable) == ("CONTEXT_WINDOW_EXCEEDED", 400, False)


def test_an_error_event_mid_stream_is_a_provider_error(server: FakeServer) -> None:
    server.replies.append(Reply(chunks=[delta("partial"), {"error": {"message": "overloaded"}}], done=False))
    with pytest.raises(SummarizerError, match="overloaded") as caught:
        asyncio.run(summarizer(server).summarize(request()))
    assert caught.value.code == "PROVIDER_ERROR"


def test_a_stream_without_finish_reason_is_incomplete(server: FakeServer) -> None:
    server.replies.append(Reply(chunks=[delta("half a summ")]))
    with pytest.raises(SummarizerError, match="before a finish reason"):
        asyncio.run(summarizer(server).summarize(request()))


def test_a_stalled_stream_times_out(server: FakeServer) -> None:
    server.replies.append(Reply(chunks=[delta("late")], delay=2.0))
    started = time.monotonic()
    with pytest.raises(SummarizerError) as caught:
        asyncio.run(summarizer(server, timeout=0.3).summarize(request()))
    assert caught.value.code == "TIMEOUT"
    assert time.monotonic() - started < 1.9


def test_an_unreachable_endpoint_is_a_network_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = OpenAICompatibleSummarizer(f"http://127.0.0.1:{port}/v1", "m", max_retries=0, timeout=2)
    with pytest.raises(SummarizerError) as caught:
        asyncio.run(dead.summarize(request()))
    assert caught.value.code == "NETWORK" and caught.value.retryable


def test_cancelling_the_task_closes_the_stream(server: FakeServer) -> None:
    server.replies.append(Reply(chunks=[delta("x")] * 100, delay=0.05))

    async def scenario() -> None:
        task = asyncio.create_task(summarizer(server).summarize(request()))
        while not server.got_request.is_set():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert server.client_gone.wait(3), "the server kept streaming to a cancelled client"


def test_images_are_refused_as_unsupported_content(server: FakeServer) -> None:
    image = {"type": "image", "attachment": {"attachmentId": "a", "mediaType": "image/png", "bytes": 3,
                                             "width": 1, "height": 1}}
    pictured = freeze({"id": "i", "role": "user", "content": [text("look"), image],
                       "source": {"kind": "user"}})
    nested = freeze({"id": "t", "role": "user", "source": {"kind": "tool", "callId": "c9"},
                     "content": [{"type": "tool-result", "toolCallId": "c9", "content": [image]}]})
    for messages in ([pictured], [assistant(call("c9", "shot", {})), nested]):
        with pytest.raises(SummarizerError) as caught:
            asyncio.run(summarizer(server).summarize(request(messages)))
        assert caught.value.code == "UNSUPPORTED_CONTENT"
    assert server.received == []


def test_tool_schemas_convert_to_the_function_form() -> None:
    assert to_openai_tools([{"name": "t", "parameters": {"type": "object"}}]) == [
        {"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}]
    already = {"type": "function", "function": {"name": "u", "parameters": {}}}
    assert to_openai_tools([already]) == [already]


def test_the_provider_is_named_after_the_endpoint() -> None:
    assert OpenAICompatibleSummarizer("https://api.deepseek.com", "deepseek-chat").provider == "deepseek"
    assert OpenAICompatibleSummarizer("http://localhost:11434/v1", "qwen").provider == "ollama"
    assert OpenAICompatibleSummarizer("http://127.0.0.1:8000/v1", "m").provider == "openai-compatible"


def test_the_key_never_shows_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    assert "sk-secret" not in repr(OpenAICompatibleSummarizer("https://api.openai.com/v1", "gpt"))


def test_a_missing_httpx_names_the_llm_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'agentlog\[llm\]'"):
        OpenAICompatibleSummarizer("http://127.0.0.1:1/v1", "m")
