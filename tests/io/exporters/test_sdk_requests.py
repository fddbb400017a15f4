"""Exports sent as they are by the real SDK clients to a local provider: it receives exactly the body."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import orjson
import pytest

from agentlog.io.exporters import export
from tests.integrations.server import Provider, serve, sse
from tests.io.exporters.sessions import sample_session


@pytest.fixture
def provider() -> Iterator[Provider]:
    yield from serve()


@pytest.mark.parametrize("view", ["surface", "log"])
def test_openai_chat_export_is_what_the_sdk_sends(provider: Provider, view: str) -> None:
    session = sample_session()
    body = orjson.loads(export(session.header, session.events, "openai-chat", view=view))  # type: ignore[arg-type]
    provider.queue(sse("openai_final_text"))
    client = openai.OpenAI(base_url=provider.base_url, api_key="k", max_retries=0, timeout=10)
    with client.chat.completions.create(model="deepseek-reasoner", stream=True, **body) as stream:
        assert [chunk for chunk in stream]
    sent = provider.requests[0]
    assert sent["messages"] == body["messages"] and sent["tools"] == body["tools"]
    assert any("reasoning_content" in message for message in sent["messages"]) == (view == "log")


@pytest.mark.parametrize("view", ["surface", "log"])
def test_anthropic_export_is_what_the_sdk_sends(provider: Provider, view: str) -> None:
    session = sample_session()
    body = orjson.loads(export(session.header, session.events, "anthropic", view=view))  # type: ignore[arg-type]
    provider.queue(sse("anthropic_final_text"))
    client = anthropic.Anthropic(base_url=provider.base_url.removesuffix("/v1"), api_key="k", max_retries=0,
                                 timeout=10)
    with client.messages.create(model="claude-sonnet-4-5", max_tokens=256, stream=True, **body) as stream:
        assert [event for event in stream]
    sent = provider.requests[0]
    assert {key: sent[key] for key in body} == body
    if view == "log":  # the signed reasoning goes back as a thinking block
        assert sent["messages"][1]["content"][0] == {"type": "thinking", "thinking": "Run the tests first.",
                                                     "signature": "c2lnbmF0dXJl"}
