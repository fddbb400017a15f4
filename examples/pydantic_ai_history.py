"""A Pydantic AI agent whose message history lives in an agentlog store: record, resume, fork, compact.

Runs offline as it is (a scripted ``FunctionModel`` that calls the tool once, then answers); give
``--model`` (e.g. ``openai:gpt-4o``, with that provider's extra and key) to talk to a real model.

    pip install 'agentlog[pydantic-ai]'
    python examples/pydantic_ai_history.py --store jsonl://.agentlog "What time is it in Paris?"
    python examples/pydantic_ai_history.py --store jsonl://.agentlog --id <id printed above> "And Tokyo?"
"""

from __future__ import annotations

import argparse
import uuid

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentlog import CompactionError, Compactor, ExtractiveSummarizer, open_store
from agentlog.integrations.pydantic_ai import AgentlogHistory


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Ask for the clock once per prompt, then answer with what it said."""
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart):
        return ModelResponse(parts=[TextPart(f"The clock says {last.content}.")], model_name="scripted")
    return ModelResponse(parts=[ToolCallPart("clock", {"city": "Paris"})], model_name="scripted")


def build_agent(model: Model | str) -> Agent[None, str]:
    agent = Agent(model, instructions="Answer in one sentence.")

    @agent.tool_plain
    def clock(city: str) -> str:
        """The local time in a city."""
        return f"12:00 in {city}"

    return agent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A Pydantic AI agent with its history in agentlog.")
    parser.add_argument("prompts", nargs="*", default=["What time is it in Paris?"], metavar="PROMPT")
    parser.add_argument("--store", default="memory:", help="agentlog store URL (default: memory:)")
    parser.add_argument("--id", help="the session to resume (default: a new one)")
    parser.add_argument("--model", help="a pydantic-ai model name (default: the offline scripted model)")
    args = parser.parse_args(argv)
    agent = build_agent(args.model or FunctionModel(scripted))
    session_id = args.id or f"pydantic-ai-{uuid.uuid4().hex[:8]}"
    store = open_store(args.store)
    try:
        with AgentlogHistory(session_id, store) as history:
            for prompt in args.prompts:
                print(f"> {prompt}\n{history.run_sync(agent, prompt).output}")
            print(f"session {session_id}: {len(history.messages())} messages to resume from")
            try:  # a checkpoint replaces the older messages on the surface; the log keeps them
                Compactor(ExtractiveSummarizer()).compact_now(history.live)
                print(f"compacted: the history is now {len(history.messages())} messages")
            except CompactionError as exc:  # e.g. too short to gain from a summary
                print(f"not compacted: {exc}")
            boundary = history.live.session.seq - 1
        fork_id = f"{session_id}-fork-{uuid.uuid4().hex[:4]}"
        with AgentlogHistory(fork_id, store.fork(session_id, boundary, fork_id)) as fork:
            print(f"fork {fork_id}: {fork.run_sync(agent, 'And in Tokyo?').output}")
            fork.live.close()
    finally:
        store.close()


if __name__ == "__main__":
    main()
