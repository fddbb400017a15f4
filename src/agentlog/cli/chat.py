"""``agentlog chat``: the reference coding agent (``agentlog.agent``) on the command line's store."""

from __future__ import annotations

import sys
from typing import Any

import click

from agentlog.cli.app import State, handled
from agentlog.cli.render import visible


@click.command()
@click.argument("prompts", nargs=-1)
@click.option("--model", help="Model name (default when resuming: the session's).")
@click.option("--base-url", envvar="OPENAI_BASE_URL", help="API base URL ($OPENAI_BASE_URL).")
@click.option("--api-key", envvar="OPENAI_API_KEY", help="API key ($OPENAI_API_KEY).")
@click.option("--root", default=".", show_default=True, type=click.Path(file_okay=False),
              help="The directory the tools (read_file, list_dir) may read.")
@click.option("--resume", metavar="ID", help="Continue a stored session (after a crash too).")
@click.option("--context-window", default=128_000, show_default=True, type=click.IntRange(min=1),
              help="The model's context window in tokens; compaction starts at 80 % of it.")
@click.pass_obj
@handled
def chat(state: State, prompts: tuple[str, ...], model: str | None, base_url: str | None,
         api_key: str | None, root: str, resume: str | None, context_window: int) -> None:
    """Chat with a coding agent over an OpenAI-compatible API, recorded in the store.

    Each PROMPT is one turn (none: read prompts from stdin, one per line). The model may read
    files and list directories under --root. Needs agentlog[openai]. The same agent as
    examples/coding_agent.py (agentlog.agent.loop).
    """
    from agentlog.agent.loop import ChatAgent, open_session, read_prompts, session_model  # needs the extra
    from agentlog.agent.tools import FileTools
    from agentlog.compaction.engine import Compactor
    from agentlog.compaction.summarizers import ExtractiveSummarizer
    from agentlog.recording.recorder import Recorder

    tools = FileTools(root)
    with open_session(state.store(), resume, cwd=str(tools.root)) as live:
        model = model or session_model(live)
        if model is None:
            raise click.UsageError("--model is needed (the session has no model yet)")
        click.echo(f"session {visible(live.id)} (continue it with --resume {visible(live.id)})", err=True)
        import openai  # present: agentlog.agent.loop imported it

        client = openai.OpenAI(base_url=base_url, api_key=api_key or "none")
        recorder = Recorder(live, compactor=Compactor(ExtractiveSummarizer(), context_window=context_window))
        agent = ChatAgent(client, recorder, model=model, tools=tools, on_text=_say)
        failed = agent.chat(read_prompts(prompts), on_error=_report)
    if failed:
        sys.exit(1)


def _say(text: str) -> None:
    click.echo(visible(text), nl=False)


def _report(error: Any) -> None:
    click.echo(f"\nerror: {visible(str(error))}", err=True)
