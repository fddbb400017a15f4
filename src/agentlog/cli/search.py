"""``agentlog search``: find text in every session's messages."""

from __future__ import annotations

import sys

import click

from agentlog.cli.app import State, handled
from agentlog.cli.render import columns, console, errors, print_json, progress, unreadable_json, visible
from agentlog.ops.search import search_store


@click.command()
@click.argument("text")
@click.option("--session", "session_ids", multiple=True, metavar="ID",
              help="Search only this session (repeatable).")
@click.option("--json", "as_json", is_flag=True,
              help='One JSON object: {"query", "hits": [{"session", "seq", "type", "role", "snippet"}], '
                   '"unreadable": [...]}.')
@click.pass_obj
@handled
def search(state: State, text: str, session_ids: tuple[str, ...], as_json: bool) -> None:
    """Find TEXT (ignoring case) in the user, assistant and tool messages of every session.

    Each hit names its session and seq (agentlog inspect ID --from SEQ shows it in place).
    Exit status 1 when nothing matched or a session could not be read.
    """
    with state.store(create=False) as store, progress("searching") as step:
        found = search_store(store, text, session_ids=list(session_ids) or None, progress=step)
    if as_json:
        print_json({"query": text, "hits": [hit.to_json() for hit in found.hits],
                    "unreadable": [unreadable_json(bad) for bad in found.unreadable]})
    elif found.hits:
        columns(("session", "seq", "role", "snippet"),
                [[hit.session_id, str(hit.seq), hit.role, hit.snippet] for hit in found.hits])
        sessions = len({hit.session_id for hit in found.hits})
        console.print(f"{len(found.hits)} message{'' if len(found.hits) == 1 else 's'} "
                      f"in {sessions} session{'' if sessions == 1 else 's'}")
    else:
        errors.print("no message contains that text")
    for bad in found.unreadable:
        errors.print(visible(f"error: {bad.session_id or bad.where}: {bad.error}"), soft_wrap=True)
    if found.unreadable or not found.hits:
        sys.exit(1)
