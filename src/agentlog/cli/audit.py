"""``agentlog audit``: is a session reviewable? The seed's checklist as a table, or JSON."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import orjson
from rich.markup import escape
from rich.table import Table

from agentlog.cli.app import State, handled
from agentlog.cli.render import console, print_json, safe, visible
from agentlog.errors import UsageError

_STYLE = {"ok": "[green]ok[/green]", "problem": "[red]problem[/red]", "skipped": "[dim]n/a[/dim]"}


def _tools(path: Path | None) -> list[Any] | None:
    """The current tool schemas from a JSON file: a list of agentlog or Chat Completions tools."""
    if path is None:
        return None
    try:
        tools = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"--tools {path}: not JSON ({exc})") from None
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise UsageError(f"--tools {path}: expected a JSON array of tool objects")
    for index, tool in enumerate(tools):
        function = tool.get("function", tool) if tool.get("type") == "function" else tool
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise UsageError(f"--tools {path}: tool [{index}] has no name")
    return tools


@click.command(name="audit")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object (checks and timeline).")
@click.option("--timeline", is_flag=True, help="Also list the inputs, results and tool calls in order.")
@click.option("--tools", "tools_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A JSON array of the tools the agent has now, to compare with the recorded ones.")
@click.option("--model", default=None, metavar="PROVIDER/MODEL", help="The model route the agent uses now.")
@click.option("--preset", default=None, metavar="NAME", help="The agent preset the agent uses now.")
@click.option("--rotation", is_flag=True,
              help="Also list, per secret found (redacted), the sessions (this one and its forks) and seqs "
                   "where it occurs: what to rotate, and what agentlog scrub --secret-from-audit removes.")
@click.pass_obj
@handled
def audit(state: State, session_id: str, as_json: bool, timeline: bool, tools_file: Path | None,
          model: str | None, preset: str | None, rotation: bool) -> None:
    """Check that a session is reviewable (never writes to the store).

    \b
    order          inputs, model results and tool calls in order (the invariants)
    tool-results   every tool call has a result or an explicit interruption
    turns          every turn ended; crash-closed turns are marked interrupted
    restore-drift  the recorded cwd (and git HEAD/dirty state when the header
                   recorded it), model route, preset and tools against now
    fork-lineage   a fork's parent exists and its prefix is a stable one
    compaction     no replacement splits a tool call from its result
    secrets        secrets in the log, by kind and location (never the secret)

    Exit status: 0 no problem found, 1 problems found (or the session cannot be read).
    """
    from agentlog.audit import audit_session

    tools = _tools(tools_file)
    from agentlog.ops.scrub import secret_locations

    with state.store(create=False) as store:
        report = audit_session(store, session_id, tools=tools, model=model, preset=preset)
        located = secret_locations(store, [session_id]) if rotation else None
    if as_json:
        print_json(report.to_json() if located is None else {**report.to_json(), "rotation": located})
    else:
        verdict = "[green]reviewable[/green]" if report.clean else "[red]problems found[/red]"
        console.print(f"[bold]audit[/bold] {safe(session_id)}: {verdict}", markup=True)
        table = Table()
        for column in ("check", "status", "finding"):
            table.add_column(column, overflow="fold")
        for check in report.checks:
            table.add_row(check.name, _STYLE[check.status], safe(check.summary))
        console.print(table, markup=True)
        for check in report.checks:
            problems_only = check.status == "problem"
            for item in (item for item in check.items if item.problem or not problems_only):
                where = escape(f" [seq {item.seq}]") if item.seq is not None else ""
                mark = "[red]✗[/red]" if item.problem else "·"
                console.print(f"  {mark} {check.name}: {safe(item.text)}{where}", markup=True)
        if timeline:
            rows = Table(title="timeline", title_justify="left")
            for column in ("seq", "kind", "what"):
                rows.add_column(column, overflow="fold")
            for entry in report.timeline:
                rows.add_row(str(entry.seq), visible(entry.kind), visible(entry.text))
            console.print(rows)
        if located is not None:
            console.print(f"secrets to rotate: {len(located)}" + (" (shown redacted)" if located else ""))
            for secret in located:
                places = "; ".join(f"{visible(place['id'])}: " + ", ".join(
                    (["header"] if place["header"] else []) + [f"seq {seq}" for seq in place["seqs"]])
                    for place in secret["sessions"])
                console.print(f"  {visible(secret['secret'])}: {places}")
    if not report.clean:
        sys.exit(1)
