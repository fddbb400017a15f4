"""Commands that read stored sessions: ``list``, ``show``, ``verify``, ``inspect``."""

from __future__ import annotations

import sys
from typing import Any

import click
import orjson
from rich.table import Table

from agentlog.cli.app import State, handled
from agentlog.cli.render import (
    columns,
    console,
    displayed,
    errors,
    iso,
    json_safe,
    plural,
    print_json,
    print_message,
    safe,
    summary,
    unreadable_json,
    visible,
)
from agentlog.errors import AgentlogError, SessionCorruptionError
from agentlog.store.base import Store
from agentlog.store.integrity import Integrity
from agentlog.store.records import Recovery


@click.command(name="list")
@click.option("--json", "as_json", is_flag=True,
              help='One JSON header per line; an unreadable session is {"id", "where", "error"}.')
@click.pass_obj
@handled
def list_sessions(state: State, as_json: bool) -> None:
    """List the sessions in the store (reads headers only).

    A session that cannot be read is listed on its own row with its error, after the others;
    the exit status is then 1.
    """
    with state.store(create=False) as store:
        listing = store.listing()
    headers = sorted((snapshot.header for snapshot in listing.snapshots),
                     key=lambda header: (header.created_at, header.id))
    if as_json:
        for header in headers:
            print_json(header.to_wire(), indent=False)
        for bad in listing.unreadable:
            print_json(unreadable_json(bad), indent=False)
    else:  # ids and paths are copied from here: never wrapped, never elided
        rows = [[header.id, iso(header.created_at), header.cwd or "", header.parent_session or ""]
                for header in headers]
        rows += [[bad.session_id or "?", "unreadable", f"error: {bad.error}", ""]
                 for bad in listing.unreadable]
        columns(("id", "created", "cwd", "parent"), rows)
    if listing.unreadable:
        count = len(listing.unreadable)
        errors.print(f"error: {count} session{'s' if count > 1 else ''} could not be read (listed above)")
        sys.exit(1)


@click.command()
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="The transcript as a JSON array of messages.")
@click.pass_obj
@handled
def show(state: State, session_id: str, as_json: bool) -> None:
    """Print the human transcript of a session (what the user saw, compaction aside); an answer a
    crash cut off mid-stream is shown as far as it streamed, marked partial."""
    from agentlog.core.messages import transcript_with_partials

    with state.store(create=False) as store:
        inspection = store.inspect(session_id)
    messages = transcript_with_partials(inspection.events)
    if as_json:
        print_json(messages)
        return
    for message in messages:
        print_message(message)


class _VerifyUsageError(click.UsageError):
    exit_code = 64  # EX_USAGE


class _VerifyCommand(click.Command):
    """``verify`` reserves exit statuses 2 and 3 for "recovered" and "open": usage errors exit 64."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _VerifyUsageError(exc.format_message(), exc.ctx) from None


@click.command(cls=_VerifyCommand)
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True,
              help='One JSON object: {"id", "status": "ok"|"recovered"|"open"|"invalid", "events", '
                   '"surfaceNodes", "messages", "recovery", "writer", "integrity", "error"}.')
@click.pass_obj
@handled
def verify(state: State, session_id: str, as_json: bool) -> None:
    """Validate a session fully (restore rules + turn/step/tool invariants) without writing.

    Every stored event is validated: a JSONL validated-state checkpoint vouches for nothing here.
    Every stored byte (JSONL) or row (SQLite, PostgreSQL) is checked against the digest written
    with it: a changed byte is "invalid", naming the file and byte span (or the row). Bytes or
    rows written without one (by DSH, or before agentlog kept them) are named as unchecked.

    Reports a torn tail it ignored (bytes and offset in a file) and the interrupted turn that
    loading would close, with its synthetic events.

    \b
    Exit status:
      0  intact: every stored event is valid and no turn is left open
      1  invalid: corrupt, fails validation or the invariants, or not found
      2  readable but recovered: a torn tail is ignored and/or an interrupted
         turn would be closed (load/open commits that repair)
      3  open: a live process holds the session's writer lock, so its open turn
         is being recorded, not interrupted (read from /proc/locks, or pg_locks)
      64 usage error

    Where the writer cannot be told (no /proc/locks: not Linux), a turn another
    process is still recording looks interrupted (2).
    """
    try:
        counts, recovery, where, writer, integrity = _verified(state, session_id)
    except AgentlogError as exc:
        if not as_json:
            raise
        print_json({"id": session_id, "status": "invalid", "events": None, "surfaceNodes": None,
                    "messages": None, "recovery": None, "writer": None, "integrity": None, "scrubs": None,
                    "error": str(exc)})
        sys.exit(1)
    status, code = ("ok", 0) if recovery is None else ("recovered", 2) if writer is None else ("open", 3)
    scrubs = _scrubs(state, session_id)
    if as_json:
        print_json({"id": session_id, "status": status, **counts,
                    "recovery": None if recovery is None else recovery_json(recovery, where),
                    "writer": writer, "integrity": integrity.to_json(), "scrubs": scrubs, "error": None})
        sys.exit(code)
    described = (f"{plural(counts['events'], 'event')}, {plural(counts['surfaceNodes'], 'surface node')}, "
                 f"{plural(counts['messages'], 'model message')}")
    if recovery is None:
        console.print(f"[green]ok[/green] {safe(session_id)}: {described}", markup=True)
        console.print(f"  {visible(integrity.detail)}")
        if scrubs:
            console.print(f"  scrubbed {plural(len(scrubs), 'time')}, last at {iso(scrubs[-1]['at'])} "
                          f"({plural(len(scrubs[-1]['seqs']), 'event')} changed)")
        return
    if writer is not None:
        turn = "" if recovery.turn is None else f"turn {recovery.turn} is being recorded, "
        console.print(f"[cyan]open[/cyan] {safe(session_id)}: being written by process {writer} "
                      f"({turn}not interrupted: verify it once the writer closes it)", markup=True)
        console.print(f"  {visible(integrity.detail)}")
        sys.exit(3)
    console.print(f"[yellow]recovered[/yellow] {safe(session_id)}: readable; "
                  "loading it commits the repair below", markup=True)
    for line in recovery_lines(recovery, where):
        console.print(f"  {visible(line)}")
    console.print(f"  with the repair: {described}")
    console.print(f"  {visible(integrity.detail)}")
    sys.exit(2)


def _scrubs(state: State, session_id: str) -> list[dict[str, Any]]:
    """The session's scrub records (``agentlog scrub``), oldest first."""
    from agentlog.ops.scrub import scrub_journal

    with state.store(create=False) as store:
        return scrub_journal(store, session_id)


def _verified(state: State, session_id: str
              ) -> tuple[dict[str, int], Recovery | None, str | None, int | None, Integrity]:
    """Full validation of a stored session (a checkpoint vouches for nothing here): its counts,
    what a load would repair, its file, the pid of a live process writing it (None when none
    is, or that cannot be told) and what its integrity data says."""
    from agentlog.core.invariants import check_invariants
    from agentlog.core.session import Session
    from agentlog.store.writer_probe import writer_pid

    with state.store(create=False) as store:
        try:
            inspection = store.inspect(session_id, trust_checkpoint=False)  # every event, not a resume
            session = Session.restore(session_id, inspection.events, inspection.header)
            check_invariants(list(inspection.events))
        except AgentlogError as exc:
            raise _explained(store, session_id, exc) from None
        integrity = store.check_integrity(session_id, recovery=inspection.recovery)
        where = store.locate(inspection.header)
        try:
            writer = None if inspection.recovery is None else writer_pid(store, session_id)
        except OSError:
            writer = None
    counts = {"events": len(inspection.events), "surfaceNodes": len(session.surface.nodes),
              "messages": len(session.derive_messages())}
    return counts, inspection.recovery, where, writer, integrity


def _explained(store: Store, session_id: str, error: AgentlogError) -> AgentlogError:
    """The error of a session that does not read back, led by where its bytes or rows differ from
    what was written when its integrity data says so (the cause, not the symptom)."""
    try:
        store.check_integrity(session_id)
    except SessionCorruptionError as changed:
        return SessionCorruptionError(f"{changed.detail} (reading them: {error})", session_id=session_id,
                                      file=changed.file, offset=changed.offset)
    except AgentlogError:
        pass
    return error


def recovery_json(recovery: Recovery, where: str | None) -> dict[str, Any]:
    """The ``--json`` shape of a recovery (``verify``, ``repair``)."""
    return {"intact": recovery.intact, "torn": recovery.torn, "file": where,
            "tornOffset": recovery.torn_offset, "tornBytes": recovery.torn_bytes,
            "recovered": len(recovery.recovered), "interruptedTurn": recovery.turn,
            "closers": [orjson.loads(event.to_json()) for event in recovery.closers]}


def recovery_lines(recovery: Recovery, where: str | None, *, done: bool = False) -> list[str]:
    """What ``verify`` says about a recovery: intact prefix, torn tail, salvaged and synthetic events;
    ``done``: said of a repair already written (``repair``), not of one a load would do."""
    span = f" (seq 0..{recovery.intact - 1})" if recovery.intact else ""
    lines = [f"intact: {plural(recovery.intact, 'event')}{span}"]
    first_lost = recovery.intact + len(recovery.recovered)
    if recovery.torn and recovery.torn_bytes is not None:
        lines.append(f"torn tail: {plural(recovery.torn_bytes, 'byte')} {'cut' if done else 'ignored'} "
                     f"after byte {recovery.torn_offset}"
                     + (f" of {where}" if where else ""))
    elif recovery.torn:
        lines.append(f"torn tail: the stored rows from seq {first_lost} on are "
                     f"{'dropped' if done else 'ignored'}")
    if recovery.recovered:
        lines.append(f"recovered from the torn tail: {plural(len(recovery.recovered), 'complete event')} "
                     f"(seq {recovery.intact}..{first_lost - 1}), re-written by the repair")
    if recovery.closers:
        lines.append(f"interrupted turn {recovery.turn} {'was' if done else 'would be'} closed by "
                     f"{plural(len(recovery.closers), 'synthetic event')}:")
        lines.extend(f"  seq {event.seq} {event.type}  {summary(event)}".rstrip()
                     for event in recovery.closers)
    return lines


@click.command()
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Every event as one compact JSON line.")
@click.option("--from", "from_seq", type=int, default=0, help="Start at this seq.")
@click.pass_obj
@handled
def inspect(state: State, session_id: str, as_json: bool, from_seq: int) -> None:
    """List a session's events (never writes, even for a crashed session)."""
    with state.store(create=False) as store:
        inspection = store.inspect(session_id)
    events = [event for event in inspection.events if event.seq >= from_seq]
    if as_json:
        out = sys.stdout
        for event in events:
            out.write(json_safe(event.to_json().decode()) + "\n")
        return
    header = inspection.header
    lineage = f"  parent {header.parent_session}@{header.seed_length}" if header.parent_session else ""
    console.print(f"[bold]{safe(header.id)}[/bold]  created {iso(header.created_at)}  "
                  f"cwd {safe(header.cwd or '-')}{safe(lineage)}", markup=True)
    table = Table()
    for column in ("seq", "type", "surface", "summary"):
        table.add_column(column)
    for event in events:
        op = event.surface_op
        surface = "" if op is None else ("append" if op == "append" else f"replace {op.start}..{op.end}")
        table.add_row(str(event.seq), visible(event.type), surface, visible(displayed(session_id, event)))
    console.print(table)
