"""``agentlog stats``: turns, steps, tool calls, tokens and durations, per session and in total."""

from __future__ import annotations

import sys

import click

from agentlog.cli.app import State, handled, interrupted, stop_after_the_current_item
from agentlog.cli.progress import meter
from agentlog.cli.render import columns, console, errors, plural, print_json, unreadable_json, visible
from agentlog.ops.stats import SessionStats, StoreStats, store_stats


def duration(ms: int) -> str:
    """``950ms``, ``12.3s``, ``4m05s``, ``2h07m``, ``3d04h``: short and sortable by eye."""
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, second = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{second:02d}s"
    hours, minute = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minute:02d}m"
    days, hour = divmod(hours, 24)
    return f"{days}d{hour:02d}h"


def _row(label: str, stats: SessionStats) -> list[str]:
    interrupted = f" ({stats.interrupted_turns} interrupted)" if stats.interrupted_turns else ""
    turns = f"{stats.turns}{interrupted}"
    return [label, str(stats.events), turns, str(stats.steps), str(sum(stats.tool_calls.values())),
            str(stats.tool_errors), str(stats.input_tokens), str(stats.output_tokens),
            duration(stats.wall_ms), duration(stats.turn_ms), duration(stats.tool_ms)]


@click.command()
@click.argument("session_id", required=False)
@click.option("--json", "as_json", is_flag=True,
              help='One JSON object: {"sessions": [per session], "total": {...}, "unreadable": [...]}.')
@click.pass_obj
@handled
def stats(state: State, session_id: str | None, as_json: bool) -> None:
    """Turns, steps, tool calls by name, tokens in/out and durations of SESSION_ID, or of every
    session in the store with a total (never writes).

    Durations: wall is first to last event, turns is the time inside turns, tools the time
    from each tool call to its result. Exit status 1 when a session could not be read; 130 when
    Ctrl-C stopped it (the figures of the sessions read so far are shown, --json prints none).
    """
    with state.store(create=False) as store, meter("stats") as shown, \
            stop_after_the_current_item(None) as stopped:
        step = shown.tally("reading sessions", "sessions read")
        figures = store_stats(store, None if session_id is None else [session_id], progress=step,
                              stop=stopped)
    if figures.stopped:
        shown_here = "none shown (--json prints only a whole result)" if as_json else \
            "the figures of those are shown"
        if not as_json:
            _table(figures, session_id)
        interrupted(f"stats: interrupted after {step.so_far} sessions; {shown_here}")
    if as_json:
        print_json({"sessions": [each.to_json() for each in figures.sessions],
                    "total": figures.total.to_json(),
                    "unreadable": [unreadable_json(bad) for bad in figures.unreadable]})
    else:
        _table(figures, session_id)
    if figures.unreadable:
        for bad in figures.unreadable:
            errors.print(visible(f"error: {bad.session_id or bad.where}: {bad.error}"), soft_wrap=True)
        sys.exit(1)


def _table(figures: StoreStats, session_id: str | None) -> None:
    head = ("session", "events", "turns", "steps", "tool calls", "tool errors", "tokens in",
            "tokens out", "wall", "in turns", "in tools")
    rows = [_row(each.session_id or "", each) for each in figures.sessions]
    if session_id is None:
        rows.append(_row(f"total ({plural(figures.total.sessions, 'session')})", figures.total))
    columns(head, rows)
    if figures.total.tool_calls:
        console.print()
        columns(("tool", "calls"), [[name, str(count)] for name, count
                                    in figures.total.tool_calls.most_common()])
