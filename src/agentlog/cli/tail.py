"""``agentlog tail``: a session's last events, and with ``-f`` every new one as it is stored."""

from __future__ import annotations

import click

from agentlog.cli.app import State, handled, interrupted
from agentlog.cli.render import console, displayed, json_safe, plural, visible
from agentlog.core.events import Event
from agentlog.ops.follow import follow, last_events


def _print(session_id: str, event: Event, as_json: bool) -> None:
    if as_json:
        click.echo(json_safe(event.to_json().decode()))
    else:
        console.print(visible(f"{event.seq:>6}  {event.type:<18} {displayed(session_id, event)}".rstrip()))


@click.command()
@click.argument("session_id")
@click.option("-n", "--lines", "count", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many of the last events to print first.")
@click.option("-f", "--follow", "following", is_flag=True, help="Keep printing events as they are stored.")
@click.option("--idle-timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="With -f: stop after this long without a new event (default: never).")
@click.option("--json", "as_json", is_flag=True,
              help="Every event as one compact JSON line (as inspect --json).")
@click.pass_obj
@handled
def tail(state: State, session_id: str, count: int, following: bool, idle_timeout: float | None,
         as_json: bool) -> None:
    """Print the last events of SESSION_ID; with -f, follow it as a writer appends (Ctrl-C stops it:
    status 130 and how many new events it printed).

    Never writes: a crashed session shows what is stored (no repair). PostgreSQL wakes on
    NOTIFY; JSONL and SQLite are polled (a few stat calls while idle).
    """
    with state.store(create=False) as store:
        last = last_events(store, session_id, count)
        for event in last:
            _print(session_id, event, as_json)
        if not following:
            return
        start = last[-1].seq + 1 if last else len(store.read_from(session_id, 0).events)
        printed = 0
        try:
            for event in follow(store, session_id, start, idle_timeout=idle_timeout):
                printed += 1  # first: a Ctrl-C right after the line is written must not uncount it
                _print(session_id, event, as_json)
        except KeyboardInterrupt:
            interrupted(f"tail -f: stopped after {plural(printed, 'new event')} (Ctrl-C)")
