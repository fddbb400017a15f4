"""``agentlog chat``: the reference coding agent (``agentlog.agent``) on the command line's store."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from typing import Any

import click

from agentlog.cli.app import State, handled, interrupted
from agentlog.cli.render import plural, visible
from agentlog.core.events import TURN_START
from agentlog.errors import SessionNotFoundError, UsageError


@click.command()
@click.argument("prompts", nargs=-1)
@click.option("--model", help="Model name (default when resuming: the session's).")
@click.option("--base-url", envvar="OPENAI_BASE_URL", help="API base URL ($OPENAI_BASE_URL).")
@click.option("--api-key", envvar="OPENAI_API_KEY", help="API key ($OPENAI_API_KEY).")
@click.option("--root", default=None, type=click.Path(file_okay=False),
              help="The directory the tools (read_file, list_dir) may read (default: the current one; "
                   "with --resume: the session's recorded working directory).")
@click.option("--resume", metavar="ID", help="Continue a stored session (after a crash too).")
@click.option("--context-window", default=128_000, show_default=True, type=click.IntRange(min=1),
              help="The model's context window in tokens; compaction starts at 80 % of it.")
@click.pass_obj
@handled
def chat(state: State, prompts: tuple[str, ...], model: str | None, base_url: str | None,
         api_key: str | None, root: str | None, resume: str | None, context_window: int) -> None:
    """Chat with a coding agent over an OpenAI-compatible API, recorded in the store.

    Each PROMPT is one turn (none: read prompts from stdin, one per line). The model may read
    files and list directories under --root. A new session in which no turn completed (the
    first request failed) is not kept. Ctrl-C stops it (status 130), the turn under way closed as
    aborted, and says how to resume. Needs agentlog[openai]. The same agent as
    examples/coding_agent.py (agentlog.agent.loop).
    """
    from agentlog.agent.loop import ChatAgent, open_session, read_prompts, session_model  # needs the extra
    from agentlog.agent.tools import FileTools
    from agentlog.compaction.engine import Compactor
    from agentlog.compaction.summarizers import ExtractiveSummarizer
    from agentlog.recording.recorder import Recorder

    with state.store() as store:
        tools = None if resume else FileTools(root or ".")  # checked before a session is started
        with open_session(store, resume, cwd=str(tools.root) if tools else "") as live:
            tools = tools or FileTools(root or _recorded_cwd(live.id, live.session.header.cwd))
            model = model or session_model(live)
            if model is None:
                raise click.UsageError("--model is needed (the session has no model yet)")
            agent: ChatAgent | None = None
            failed, stopped = 0, False
            try:  # from the banner on, a Ctrl-C is the way to stop: it ends in the summary below
                click.echo(f"session {visible(live.id)} in {visible(state.store_label)}, tools reading "
                           f"{visible(str(tools.root))} (continue it with --resume {visible(live.id)})",
                           err=True)
                import openai  # present: agentlog.agent.loop imported it

                client = openai.OpenAI(base_url=base_url, api_key=api_key or "none")
                compactor = Compactor(ExtractiveSummarizer(), context_window=context_window)
                recorder = Recorder(live, compactor=compactor)
                agent = ChatAgent(client, recorder, model=model, tools=tools, on_text=_say)
                report = functools.partial(_report, str(client.base_url))
                failed = agent.chat(read_prompts(prompts), on_error=report)
            except KeyboardInterrupt:  # the recorder closed the turn under way as aborted
                stopped = True
            turns = sum(1 for event in live.session.events if event.type == TURN_START)
        completed = 0 if agent is None else agent.completed
        if resume is None and (turns == 0 if stopped else completed == 0):  # no junk session
            with contextlib.suppress(SessionNotFoundError):  # none stored yet: created with its first event
                store.delete(live.id)
            if stopped:
                interrupted(f"chat: stopped (Ctrl-C); no turn was recorded, so session {visible(live.id)} "
                            "was not kept")
            click.echo(f"session {visible(live.id)} not kept: no turn completed", err=True)
        if stopped:
            interrupted(f"chat: stopped (Ctrl-C); session {visible(live.id)} holds {plural(turns, 'turn')}; "
                        f"resume with agentlog chat --resume {visible(live.id)}")
    if failed:
        sys.exit(1)


def _recorded_cwd(session_id: str, cwd: str | None) -> str:
    """The working directory a resumed session recorded, where its tools read before."""
    if not cwd:
        raise UsageError("the session recorded no working directory: name one with --root DIR",
                         session_id=session_id)
    if not os.path.isdir(cwd):
        raise UsageError(f"the session's working directory {cwd!r} is no longer a directory: name one "
                         "with --root DIR", session_id=session_id)
    return cwd


def _say(text: str) -> None:
    click.echo(visible(text), nl=False)


def _report(base_url: str, error: Any) -> None:
    """One line per failed turn; a server that cannot be reached is named, with where to point instead."""
    import openai

    text = str(error)
    if isinstance(error, openai.APIConnectionError) and not isinstance(error, openai.APITimeoutError):
        text = (f"cannot reach the API at {base_url} ({text.rstrip('.')}): point --base-url "
                "($OPENAI_BASE_URL) at an OpenAI-compatible server, with its key in --api-key "
                "($OPENAI_API_KEY)")
    elif isinstance(error, openai.AuthenticationError):
        text += f" (the key for {base_url}: --api-key or $OPENAI_API_KEY)"
    click.echo(f"\nerror: {visible(text)}", err=True)
