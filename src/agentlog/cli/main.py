"""The ``agentlog`` command: each command is one library call plus rendering, in a module per topic."""

from __future__ import annotations

import sys

import click
from rich.table import Table

from agentlog.cli import lineage, serve, sessions
from agentlog.cli.app import State, cli, handled
from agentlog.cli.render import console, safe, summary


@click.command()
@click.pass_obj
@handled
def demo(state: State) -> None:
    """Record a scripted coding-agent session, SIGKILL it mid-turn, restore it and fork it.

    Runs offline (no network, no API key) in the default store or --store.
    """
    from agentlog.demo import run_demo

    console.print(f"[bold]agentlog demo[/bold] - store: {safe(state.store_url)}", markup=True)
    report = run_demo(state.store_url, log=lambda line: console.print(f"  • {line}"))
    console.print()
    table = Table(title="synthetic events written by crash recovery", title_justify="left")
    for column in ("seq", "type", "what"):
        table.add_column(column)
    for event in report.closers:
        table.add_row(str(event.seq), event.type, summary(event))
    console.print(table)
    console.print()
    console.print(f"session  {report.session_id}: {report.restored_messages} model messages after restore")
    console.print(f"         file: {report.session_path}")
    console.print(f"fork     {report.child_id}: {report.child_events} events, "
                  f"{report.child_messages} model messages (seeded up to seq {report.fork_boundary})")
    console.print(f"         file: {report.child_path}")
    console.print()
    console.print("next: " + f"agentlog show {report.session_id}   ·   agentlog verify {report.session_id}"
                  f"   ·   agentlog inspect {report.child_id}")


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                              "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(args: tuple[str, ...]) -> None:
    """Run the benchmarks (the same as ``python -m agentlog.bench``; see ``agentlog bench -h``)."""
    from agentlog.bench.__main__ import main as bench_main

    sys.exit(bench_main(list(args)))


for command in (
    demo, bench,
    sessions.list_sessions, sessions.show, sessions.verify, sessions.inspect,
    lineage.fork, lineage.materialize, lineage.delete,
    serve.serve,
):
    cli.add_command(command)


def main() -> None:
    """Run the command line."""
    cli()
