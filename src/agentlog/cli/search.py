"""``agentlog search``: find text in every session's messages."""

from __future__ import annotations

import sys

import click

from agentlog.cli.app import State, handled, interrupted, stop_after_the_current_item
from agentlog.cli.progress import meter
from agentlog.cli.render import columns, console, errors, print_json, unreadable_json, visible
from agentlog.ops.search import SearchResult, search_store


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
    Exit status 1 when nothing matched or a session could not be read; 130 when Ctrl-C stopped
    it (the hits found so far are shown, --json prints none).
    """
    with state.store(create=False) as store, meter("search") as shown, \
            stop_after_the_current_item(None) as stopped:
        step = shown.tally("searching", "sessions searched")
        found = search_store(store, text, session_ids=list(session_ids) or None, progress=step, stop=stopped)
    if found.stopped:
        count = len(found.hits)
        hits = f"{count:,} match{'' if count == 1 else 'es'}" + ("" if as_json else " shown")
        if not as_json:
            _print_hits(found)
        interrupted(f"search: interrupted after {step.so_far} sessions; {hits}"
                    + (" (--json prints only a whole result)" if as_json else ""))
    if as_json:
        print_json({"query": text, "hits": [hit.to_json() for hit in found.hits],
                    "unreadable": [unreadable_json(bad) for bad in found.unreadable]})
    elif found.hits:
        _print_hits(found)
        sessions = len({hit.session_id for hit in found.hits})
        console.print(f"{len(found.hits)} message{'' if len(found.hits) == 1 else 's'} "
                      f"in {sessions} session{'' if sessions == 1 else 's'}")
    else:
        errors.print("no message contains that text")
    for bad in found.unreadable:
        errors.print(visible(f"error: {bad.session_id or bad.where}: {bad.error}"), soft_wrap=True)
    if found.unreadable or not found.hits:
        sys.exit(1)


def _print_hits(found: SearchResult) -> None:
    if found.hits:
        columns(("session", "seq", "role", "snippet"),
                [[hit.session_id, str(hit.seq), hit.role, hit.snippet] for hit in found.hits])
