"""The ``agentlog`` command: each command is one library call plus rendering, in a module per topic."""

from __future__ import annotations

import shlex

import click
import orjson
from rich.table import Table

from agentlog.cli import (
    audit,
    chat,
    export,
    importing,
    lineage,
    scrub,
    search,
    serve,
    sessions,
    stats,
    tail,
    upkeep,
)
from agentlog.cli.app import State, cli, handled
from agentlog.cli.render import console, plural, print_json, safe, summary, visible
from agentlog.store.urls import default_store_url


@click.command()
@click.option("--json", "as_json", is_flag=True,
              help='One JSON object: {"session", "child", "sessionFile", "childFile", "closers", ...}.')
@click.pass_obj
@handled
def demo(state: State, as_json: bool) -> None:
    """Record a scripted coding-agent session, SIGKILL it mid-turn, restore it and fork it.

    Runs offline (no network, no API key) in the default store or --store; not memory:, since
    the killed recorder is a second process.
    """
    from agentlog.cli.demo import check_demo_store, run_demo

    check_demo_store(state.store_url)
    if as_json:
        report = run_demo(state.store_url, log=lambda line: None)
        print_json({"store": state.store_label, "session": report.session_id, "child": report.child_id,
                    "sessionFile": report.session_path, "childFile": report.child_path,
                    "recordedEvents": report.recorded_events,
                    "durableBeforeCrash": report.durable_before_crash,
                    "closers": [orjson.loads(event.to_json()) for event in report.closers],
                    "restoredMessages": report.restored_messages, "childEvents": report.child_events,
                    "childMessages": report.child_messages, "forkBoundary": report.fork_boundary})
        return
    console.print(f"[bold]agentlog demo[/bold] - store: {safe(state.store_label)}", markup=True)
    report = run_demo(state.store_url, log=lambda line: console.print(f"  • {line}"))
    console.print()
    table = Table(title="synthetic events written by crash recovery", title_justify="left")
    for column in ("seq", "type", "what"):
        table.add_column(column)
    for event in report.closers:
        table.add_row(str(event.seq), event.type, summary(event))
    console.print(table)
    console.print()
    restored = plural(report.restored_messages, "model message")
    console.print(f"session  {report.session_id}: {restored} after restore")
    if report.session_path is not None:
        console.print(f"         file: {visible(report.session_path)}")
    console.print(f"fork     {report.child_id}: {plural(report.child_events, 'event')}, "
                  f"{plural(report.child_messages, 'model message')} "
                  f"(seeded up to seq {report.fork_boundary})")
    if report.child_path is not None:
        console.print(f"         file: {visible(report.child_path)}")
    console.print()
    prefix = "agentlog"  # the hints name the store unless it is the one they would open anyway
    if state.store_url != default_store_url():
        prefix += f" --store {shlex.quote(state.store_url)}"
    console.print("next: " + "   ·   ".join(f"{prefix} {command}" for command in (
        f"show {report.session_id}", f"verify {report.session_id}", f"inspect {report.child_id}")),
        soft_wrap=True)


for command in (
    demo,
    sessions.list_sessions, sessions.show, sessions.verify, sessions.inspect,
    lineage.fork, lineage.materialize, lineage.delete,
    upkeep.repair, upkeep.compact, upkeep.gc, upkeep.check_upgrade, scrub.scrub,
    stats.stats, tail.tail, search.search,
    importing.import_sessions, export.export_session, audit.audit,
    chat.chat,
    serve.serve,
):
    cli.add_command(command)


def main() -> None:
    """Run the command line."""
    cli()
