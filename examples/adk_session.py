"""A Google ADK agent whose sessions live in an agentlog store (runs offline: the model is scripted).

    pip install 'agentlog[adk]'
    python examples/adk_session.py                       # a JSONL store in a temporary directory
    python examples/adk_session.py --store sqlite:///adk.db

ADK's ``Runner`` drives an ``LlmAgent`` with one tool through two prompts; every event goes to
``AgentlogSessionService``. A second service (a restart) then reads the session back for ADK,
and the same log reads as agentlog turns: ``agentlog --store URL show adk/weather/alice/s1``.
Swap ``ScriptedModel()`` for a model name (``"gemini-2.5-flash"``) to talk to a real one.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types

from agentlog import open_store, transcript
from agentlog.integrations.adk import AgentlogSessionService
from agentlog.integrations.adk_store import session_log_id

APP, USER, SESSION = "weather", "alice", "s1"


def forecast(city: str) -> dict[str, Any]:
    """The tool: tomorrow's forecast for a city."""
    return {"city": city, "forecast": "sunny", "high_c": 21}


USAGE = types.GenerateContentResponseUsageMetadata(prompt_token_count=40, candidates_token_count=8)


class ScriptedModel(BaseLlm):
    """A model that calls ``forecast`` once per prompt, then answers from its result."""

    model: str = "scripted"

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1].parts or []
        result = next((part.function_response for part in last if part.function_response), None)
        if result is None:
            city = (last[0].text or "").split()[-1].strip("?")
            call = types.FunctionCall(name="forecast", args={"city": city})
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]),
                              usage_metadata=USAGE)
        else:
            answer = result.response or {}
            text = f"{answer.get('city')}: {answer.get('forecast')}, up to {answer.get('high_c')} °C."
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]),
                              usage_metadata=USAGE)


async def main(url: str) -> None:
    agent = LlmAgent(name="forecaster", model=ScriptedModel(), tools=[forecast],
                     instruction="Answer weather questions with the forecast tool.")
    async with AgentlogSessionService(url) as service:
        runner = Runner(agent=agent, app_name=APP, session_service=service)
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        for prompt in ("Weather in Paris?", "And in Oslo?"):
            message = types.Content(role="user", parts=[types.Part(text=prompt)])
            async for event in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
                if event.is_final_response() and event.content and event.content.parts:
                    print(f"{prompt} -> {event.content.parts[0].text}")

    async with AgentlogSessionService(url) as again:  # a restart: ADK reads the session back
        session = await again.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        print(f"ADK sees {len(session.events)} events in {session.id!r}")

    with open_store(url) as store:  # the same log as agentlog turns and messages
        log_id = session_log_id(APP, USER, SESSION)
        for said in transcript(store.load(log_id).events):
            kinds = ", ".join(block.get("text") or block["type"] for block in said["content"])
            print(f"  {said['role']:9} {kinds}")
        print(f"agentlog --store {url} show {log_id}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="an agentlog store URL (default: a JSONL store in a temporary "
                                        "directory)")
    options = parser.parse_args()
    asyncio.run(main(options.store or f"jsonl://{tempfile.mkdtemp(prefix='adk-example-')}"))
