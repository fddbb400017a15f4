"""A coding agent with a crash-safe session: the code to copy when you build your own.

It talks to any OpenAI-compatible server (OpenAI, DeepSeek, vLLM, Ollama...) with streaming,
gives the model two read-only tools confined to one directory, and records everything into an
agentlog store. Kill it at any moment (even with SIGKILL, in the middle of a tool) and
``--resume ID`` continues the conversation: the interrupted turn is closed with synthetic tool
results, so the next request is one the provider accepts.

    pip install 'agentlog[openai]'
    export OPENAI_API_KEY=...
    python examples/coding_agent.py --model gpt-4o --root . "What does this project do?"
    python examples/coding_agent.py --resume <id printed above>      # prompts from stdin

Options: --base-url (e.g. https://api.deepseek.com), --store (default: $AGENTLOG_STORE or a
JSONL store in ./.agentlog), --context-window (tokens; compaction starts at 80 % of it).
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import openai

from agentlog import (
    AgentlogError,
    Compactor,
    ExtractiveSummarizer,
    LiveSession,
    Recorder,
    SessionHeader,
    Store,
    open_store,
)
from agentlog.agent.loop import ChatAgent
from agentlog.agent.tools import FileTools
from agentlog.cli.render import visible  # model output may carry terminal escapes: show them, never run them


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A coding agent over an OpenAI-compatible API, "
                                                 "recorded by agentlog.")
    parser.add_argument("prompts", nargs="*", metavar="PROMPT", help="one turn each (default: read stdin)")
    parser.add_argument("--model", help="model name (default when resuming: the session's)")
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"), help="API base URL")
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"),
                        help="API key (default: $OPENAI_API_KEY)")
    parser.add_argument("--root", default=".", help="the directory the tools may read (default: .)")
    parser.add_argument("--store", default=os.environ.get("AGENTLOG_STORE")
                        or f"jsonl://{Path('.agentlog').resolve()}", help="agentlog store URL")
    parser.add_argument("--resume", metavar="ID", help="continue a stored session (after a crash too)")
    parser.add_argument("--context-window", type=int, default=128_000, help="the model's context, tokens")
    return parser.parse_args(argv)


def open_session(store: Store, resume: str | None, root: Path) -> LiveSession:
    """A new session, or a stored one reopened for writing: ``open`` commits crash repair first."""
    if resume:
        return store.open(resume)  # an interrupted turn is closed with synthetic tool results
    return store.start(SessionHeader(id=str(uuid.uuid4()), cwd=str(root)))


def session_model(live: LiveSession) -> str | None:
    """The model of the session's latest request header (what a resumed session was talking to)."""
    header = live.session.request_header()
    config = header.get("config") if header is not None else None
    model = config.get("model") if isinstance(config, dict) else None
    return model if isinstance(model, str) else None


def read_prompts(prompts: list[str]) -> Iterator[str]:
    """The prompts given on the command line, else one per line of stdin (blank lines skipped)."""
    if prompts:
        yield from prompts
        return
    while True:
        try:
            line = input("> " if sys.stdin.isatty() else "")
        except EOFError:
            return
        if line.strip():
            yield line


def say(text: str) -> None:
    print(visible(text), end="", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = 0
    try:
        tools = FileTools(args.root)
        store = open_store(args.store)
        with open_session(store, args.resume, tools.root) as live:
            model = args.model or session_model(live)
            if model is None:
                raise SystemExit("error: --model is needed (the session has no model yet)")
            sid = visible(live.id)
            print(f"session {sid} (continue it with --resume {sid})", file=sys.stderr)
            client = openai.OpenAI(base_url=args.base_url, api_key=args.api_key or "none")
            # Compaction: before each step when the context passes 80 % of the window (the offline
            # extractive summarizer), and when the provider says the request did not fit.
            compactor = Compactor(ExtractiveSummarizer(), context_window=args.context_window)
            recorder = Recorder(live, compactor=compactor)  # checkpoints before each request and tool
            agent = ChatAgent(client, recorder, model=model, tools=tools, on_text=say)
            for prompt in read_prompts(args.prompts):
                try:
                    agent.run_turn(prompt)
                except openai.OpenAIError as exc:  # logged: the turn ended with reason error
                    print(f"\nerror: {visible(str(exc))}", file=sys.stderr)
                    status = 1
                    continue
                print()
    except AgentlogError as exc:
        print(f"error: {visible(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the turn was logged as aborted; the session is closed and durable
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
