"""What the OpenAI adapter tests share: SDK clients on the local provider, reading the log back."""

from __future__ import annotations

import json
from typing import Any

import openai

from agentlog import Session, thaw
from agentlog.compaction.pairing import PairingIndex
from agentlog.core.events import ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TOOL_RESULT, TURN_END
from agentlog.recording.recorder import Step
from tests.integrations.server import Provider

HTTP_ERRORS = [
    (429, "openai_rate_limit", {"retry-after-ms": "1500", "x-request-id": "req_429"},
     {"code": "RATE_LIMITED", "status": 429, "providerRetryAfterMs": 1500, "requestId": "req_429"}),
    (500, "openai_server_error", {"x-request-id": "req_500"},
     {"code": "SERVER_ERROR", "status": 500, "requestId": "req_500"}),
    (400, "openai_context_length", {}, {"code": "CONTEXT_WINDOW_EXCEEDED", "status": 400}),
]
"""(status, error fixture, response headers, the LlmFailure fields expected) of OpenAI HTTP errors."""


def client(provider: Provider) -> openai.OpenAI:
    return openai.OpenAI(base_url=provider.base_url, api_key="test-key", max_retries=0, timeout=10)


def aclient(provider: Provider) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=provider.base_url, api_key="test-key", max_retries=0, timeout=10)


def chunks(session: Session, start: int = 0) -> list[dict[str, Any]]:
    return [thaw(e.data["chunk"]) for e in session.events[start:] if e.type == ASSISTANT_CHUNK]


def messages(session: Session) -> list[dict[str, Any]]:
    return [thaw(e.data) for e in session.events if e.type == ASSISTANT_MESSAGE]


def turn_end(session: Session) -> dict[str, Any]:
    return thaw([e for e in session.events if e.type == TURN_END][-1].data["reason"])


def run_tools(step: Step) -> None:
    """Answer every tool call of the step's assistant message (log the call, then its result)."""
    assert step.message is not None
    for block in step.message.data["message"]["content"]:
        if block["type"] == "tool-call":
            step.tool_call(block["id"], block["name"], block["arguments"])
            path = json.loads(block["arguments"])["path"]
            step.tool_result(block["id"], f"output of {block['name']} {path}")


def assert_tool_pairs_hold(session: Session) -> None:
    """The surface passes the spec's tool-pairing balance, and (stricter) each result answers an open call."""
    nodes = list(session.surface.nodes)
    PairingIndex().refresh(nodes, 0, lambda seq: session.events[seq])  # raises "no matching tool-call"
    open_calls: set[str] = set()
    for seq in nodes:
        event = session.events[seq]
        if event.type == ASSISTANT_MESSAGE:
            open_calls.update(block["id"] for block in event.data["message"]["content"]
                              if block.get("type") == "tool-call")
        elif event.type == TOOL_RESULT:
            call_id = event.data["message"]["source"]["callId"]
            assert call_id in open_calls, f"tool/result at seq {seq} answers {call_id}, which is not open"
            open_calls.discard(call_id)
