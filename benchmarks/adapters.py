"""``adapters`` suite: recording overhead per streamed chunk (or event) beside the SDK's own parse of it.

The SDK cost is its ``Stream`` turning SSE bytes into chunk objects (SSE decode, JSON, model
construction) from an in-memory response; the recording cost is ``record_chat_stream`` /
``record_messages_stream`` / ``record_responses_stream`` over those parsed objects into an
in-memory session, assembly of the assistant message included. Target: recording <= 1x the
SDK's parse.
"""

from __future__ import annotations

import importlib
import itertools
import json
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from agentlog.core.session import Session
from agentlog.recording.recorder import Recorder, Step
from benchmarks.runner import TIMES, Context, Figure, Stat, Suite, Target

__all__ = ["SUITE"]

CHUNKS: Final = 2000
"""Chunks per streamed reply: text deltas, then two tool calls' argument deltas."""
OVERHEAD: Final = Target("<=", 1.0)


def _http() -> Any:
    """The HTTP client module the installed SDKs build responses with (httpx2, else httpx)."""
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


def _openai_sse(count: int) -> bytes:
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}

    def line(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return "data: " + json.dumps({**head, "choices": [choice]}) + "\n\n"

    parts = [line({"role": "assistant", "content": ""})]
    texts, calls = count * 3 // 4, count - count * 3 // 4 - 3
    parts += [line({"content": f"tok{i} "}) for i in range(texts)]
    for index in range(calls):
        call = {"index": index % 2, "function": {"arguments": f'"a{index}",'}}
        if index < 2:
            call.update(id=f"call_{index}", type="function", function={"name": "read", "arguments": "{"})
        parts.append(line({"tool_calls": [call]}))
    parts.append(line({}, "tool_calls"))
    usage = {"prompt_tokens": 10, "completion_tokens": count, "total_tokens": count + 10}
    parts.append("data: " + json.dumps({**head, "choices": [], "usage": usage}) + "\n\n")
    return "".join([*parts, "data: [DONE]\n\n"]).encode()


def _anthropic_sse(count: int) -> bytes:
    def event(data: dict[str, Any]) -> str:
        return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"

    message: dict[str, Any] = {"id": "m", "type": "message", "role": "assistant", "model": "claude",
                               "content": [], "stop_reason": None, "stop_sequence": None,
                               "usage": {"input_tokens": 10, "output_tokens": 1}}
    parts = [event({"type": "message_start", "message": message}),
             event({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}})]
    texts = count * 3 // 4
    parts += [event({"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": f"t{i} "}}) for i in range(texts)]
    parts.append(event({"type": "content_block_stop", "index": 0}))
    parts.append(event({"type": "content_block_start", "index": 1, "content_block": {
        "type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}}))
    parts += [event({"type": "content_block_delta", "index": 1,
                     "delta": {"type": "input_json_delta", "partial_json": f'"a{i}",'}})
              for i in range(count - texts - 6)]
    parts += [event({"type": "content_block_stop", "index": 1}),
              event({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                     "usage": {"output_tokens": count}}),
              event({"type": "message_stop"})]
    return "".join(parts).encode()


def _responses_sse(count: int) -> bytes:
    """A Responses API stream: a reasoning summary, output text, then one function call's arguments."""
    numbers = itertools.count()

    def event(kind: str, **data: Any) -> str:
        body = json.dumps({"type": kind, "sequence_number": next(numbers), **data})
        return f"event: {kind}\ndata: {body}\n\n"

    response: dict[str, Any] = {
        "id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress", "model": "gpt-5",
        "output": [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
        "incomplete_details": None, "usage": None}
    thoughts, texts = count // 8, count * 5 // 8
    arguments = [f'"a{i}",' for i in range(count - thoughts - texts - 12)]
    reasoning = {"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAAA",
                 "summary": [{"type": "summary_text", "text": "".join(f"r{i} " for i in range(thoughts))}]}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": [
        {"type": "output_text", "annotations": [], "text": "".join(f"tok{i} " for i in range(texts))}]}
    call = {"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_1",
            "name": "read", "arguments": "{" + "".join(arguments)}
    parts = [event("response.created", response=response),
             event("response.output_item.added", output_index=0, item={**reasoning, "summary": []})]
    parts += [event("response.reasoning_summary_text.delta", item_id="rs_1", output_index=0, summary_index=0,
                    delta=f"r{i} ") for i in range(thoughts)]
    parts += [event("response.output_item.done", output_index=0, item=reasoning),
              event("response.output_item.added", output_index=1, item={**message, "content": []})]
    parts += [event("response.output_text.delta", item_id="msg_1", output_index=1, content_index=0,
                    delta=f"tok{i} ", logprobs=[]) for i in range(texts)]
    parts += [event("response.output_item.done", output_index=1, item=message),
              event("response.output_item.added", output_index=2, item={**call, "arguments": "{"})]
    parts += [event("response.function_call_arguments.delta", item_id="fc_1", output_index=2, delta=delta)
              for delta in arguments]
    parts += [event("response.function_call_arguments.done", item_id="fc_1", output_index=2,
                    arguments=call["arguments"]),
              event("response.output_item.done", output_index=2, item=call)]
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": count,
             "output_tokens_details": {"reasoning_tokens": thoughts}, "total_tokens": count + 10}
    parts.append(event("response.completed", response={**response, "status": "completed",
                                                       "output": [reasoning, message, call], "usage": usage}))
    return "".join(parts).encode()


def _parse(sdk: Any, raw: bytes, cast_to: Any, url: str) -> tuple[float, list[Any]]:
    """Seconds the SDK's own ``Stream`` spends turning ``raw`` into objects, and the objects."""
    http = _http()
    client = sdk.OpenAI(api_key="k", base_url=url) if hasattr(sdk, "OpenAI") else sdk.Anthropic(
        api_key="k", base_url=url)
    response = http.Response(200, content=raw, headers={"content-type": "text/event-stream"},
                             request=http.Request("POST", url))
    start = time.perf_counter()
    items = list(sdk.Stream(cast_to=cast_to, response=response, client=client))
    elapsed = time.perf_counter() - start
    client.close()
    return elapsed, items


_ids = itertools.count()


def _record(items: list[Any], record: Callable[[Step, Any], Any], provider: str) -> float:
    """Seconds ``record`` spends relaying ``items`` into a fresh in-memory session."""
    session = Session.create(f"bench-adapters-{next(_ids)}")
    with Recorder(session).turn() as turn, turn.step() as step:
        step.user_message("go")
        step.request_header({"config": {"provider": provider, "model": "m"}})
        start = time.perf_counter()
        for _item in record(step, items):
            pass
        elapsed = time.perf_counter() - start
    return elapsed


def _provider(ctx: Context, name: str, parse: Callable[[], tuple[float, list[Any]]],
              record: Callable[[Step, Any], Any]) -> None:
    items: list[Any] = []

    def once() -> Mapping[str, float]:
        sdk_s, parsed = parse()
        items[:] = parsed
        return {"sdk": sdk_s / len(parsed), "record": _record(parsed, record, name) / len(parsed)}

    samples = ctx.measure(f"{name}: SDK parse and recording of {CHUNKS} chunks", once)
    sdk = Stat.of([value * 1e6 for value in samples["sdk"]])
    recorded = Stat.of([value * 1e6 for value in samples["record"]])
    ctx.add(Figure("sdk_us_per_chunk", f"{name} SDK: SSE bytes to chunk object", "µs", sdk,
                   group=name, is_baseline=True))
    ctx.add(Figure("record_us_per_chunk", f"{name}: recording one chunk (agentlog)", "µs", recorded,
                   group=name, baseline="the SDK's parse of that chunk",
                   ratio=recorded.median / max(sdk.median, 1e-12), ratio_target=OVERHEAD))
    ctx.note(f"{name}: {len(items)} chunks per reply; recording / SDK parse = "
             f"{statistics.median(samples['record']) / statistics.median(samples['sdk']):.2f}{TIMES}")


_CASES: Final = (
    ("openai", "openai", "openai.types.chat:ChatCompletionChunk",
     "agentlog.integrations.openai_chat:record_chat_stream", _openai_sse, "http://127.0.0.1:9/v1"),
    ("openai-responses", "openai", "openai.types.responses:ResponseStreamEvent",
     "agentlog.integrations.openai_responses:record_responses_stream", _responses_sse, "http://127.0.0.1:9/v1"),
    ("anthropic", "anthropic", "anthropic.types:RawMessageStreamEvent",
     "agentlog.integrations.anthropic_messages:record_messages_stream", _anthropic_sse, "http://127.0.0.1:9"),
)
"""Per adapter: its name, its SDK, the type the stream yields, the entry point, the reply, a base URL."""


def _load(path: str) -> Any:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def run(ctx: Context) -> None:
    """Both adapters whose SDK is installed; a missing SDK is a noted skip."""
    for name, package, cast_to, entry, reply, url in _CASES:
        try:
            sdk, item_type, record = importlib.import_module(package), _load(cast_to), _load(entry)
        except ImportError:
            ctx.note(f"{package} SDK not installed: pip install 'agentlog[{package}]'")
            continue
        raw = reply(CHUNKS)

        def parse(sdk: Any = sdk, raw: bytes = raw, item_type: Any = item_type,
                  url: str = url) -> tuple[float, list[Any]]:
            return _parse(sdk, raw, item_type, url)

        def phase(name: str = name, parse: Callable[[], tuple[float, list[Any]]] = parse,
                  record: Any = record) -> None:
            _provider(ctx, name, parse, record)

        ctx.attempt(name, phase)


SUITE: Final = Suite("adapters", "provider adapters: recording cost per streamed chunk vs the SDK's parse",
                     run)
