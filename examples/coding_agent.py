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
from pathlib import Path

import openai

from agentlog import AgentlogError, Compactor, ExtractiveSummarizer, Recorder, open_store
from agentlog.agent.loop import ChatAgent, open_session, read_prompts, session_model
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
    args = parser.parse_args(argv)
    if args.context_window < 1:
        parser.error("--context-window must be a positive number of tokens")
    return args


def say(text: str) -> None:
    """Stream the answer to the terminal as it arrives."""
    print(visible(text), end="", flush=True)


def report(error: Exception) -> None:
    """A failed turn (rate limit, server error, dropped stream): it is in the log, ended ``error``."""
    print(f"\nerror: {visible(str(error))}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        tools = FileTools(args.root)  # read_file and list_dir, confined to --root
        store = open_store(args.store)
        with open_session(store, args.resume, cwd=str(tools.root)) as live:  # --resume: crash repair first
            model = args.model or session_model(live)
            if model is None:
                raise SystemExit("error: --model is needed (the session has no model yet)")
            sid = visible(live.id)
            print(f"session {sid} (continue it with --resume {sid})", file=sys.stderr)
            client = openai.OpenAI(base_url=args.base_url, api_key=args.api_key or "none")
            # Compaction: before each step once the context passes 80 % of the window (offline
            # extractive summarizer), and inside the step when the provider says it did not fit.
            compactor = Compactor(ExtractiveSummarizer(), context_window=args.context_window)
            recorder = Recorder(live, compactor=compactor)  # checkpoints before each request and tool
            agent = ChatAgent(client, recorder, model=model, tools=tools, on_text=say)
            failed = agent.chat(read_prompts(args.prompts), on_error=report)  # prompts: args, else stdin
    except AgentlogError as exc:
        print(f"error: {visible(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the turn was logged as aborted; the session is closed and durable
        return 130
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
