"""The ``agentlog`` command: each command is one library call plus rendering.

Errors from the library become a one-line message and exit status 1 (2 for usage errors);
a raw traceback is shown only with ``--debug``.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click
import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentlog import __version__
from agentlog.errors import AgentlogError
from agentlog.jsonvalue import dumps
from agentlog.store.base import Store
from agentlog.store.records import Recovery
from agentlog.store.urls import default_store_url, open_store

F = TypeVar("F", bound=Callable[..., Any])

console = Console(highlight=False, markup=False, soft_wrap=True)  # never break ids and paths
errors = Console(stderr=True, highlight=False, markup=False)


class _State:
    """Options shared by every command."""

    def __init__(self, store_url: str, debug: bool) -> None:
        self.store_url = store_url
        self.debug = debug

    def store(self, *, create: bool = True) -> Store:
        """The store; read-only commands pass ``create=False`` so that they never create or change it."""
        return open_store(self.store_url, create=create)


def _handled(command: F) -> F:
    """Turn library errors into one clear line and a non-zero exit status."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        state = click.get_current_context().find_object(_State)
        try:
            return command(*args, **kwargs)
        except (click.ClickException, click.Abort):
            raise  # click reports these itself (usage errors, a declined confirmation)
        except BrokenPipeError:  # the reader went away (`agentlog list | head -1`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(1)
        except AgentlogError as exc:
            if state is not None and state.debug:
                raise
            errors.print(f"[red]error:[/red] {_safe(str(exc))}", markup=True, soft_wrap=True)
            sys.exit(1)
        except (OSError, RuntimeError, ValueError) as exc:
            if state is not None and state.debug:
                raise
            errors.print(f"[red]error:[/red] {type(exc).__name__}: {_safe(str(exc))}", markup=True,
                         soft_wrap=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentlog")
@click.option("--store", "store_url", envvar="AGENTLOG_STORE", default=None, metavar="URL",
              help="Store URL: jsonl:///dir (default: under the user data dir), sqlite:///file.db, "
                   "postgresql://user@host/db, memory:. Also $AGENTLOG_STORE.")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, store_url: str | None, debug: bool) -> None:
    """Crash-safe, event-sourced sessions for LLM agents."""
    ctx.obj = _State(store_url or default_store_url(), debug)


@cli.command()
@click.pass_obj
@_handled
def demo(state: _State) -> None:
    """Record a scripted coding-agent session, SIGKILL it mid-turn, restore it and fork it.

    Runs offline (no network, no API key) in the default store or --store.
    """
    from agentlog.demo import run_demo

    console.print(f"[bold]agentlog demo[/bold] - store: {_safe(state.store_url)}", markup=True)
    report = run_demo(state.store_url, log=lambda line: console.print(f"  • {line}"))
    console.print()
    table = Table(title="synthetic events written by crash recovery", title_justify="left")
    for column in ("seq", "type", "what"):
        table.add_column(column)
    for event in report.closers:
        table.add_row(str(event.seq), event.type, _summary(event))
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


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                              "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(args: tuple[str, ...]) -> None:
    """Run the benchmarks (the same as ``python -m agentlog.bench``; see ``agentlog bench -h``)."""
    from agentlog.bench.__main__ import main as bench_main

    sys.exit(bench_main(list(args)))


@cli.command(name="list")
@click.option("--json", "as_json", is_flag=True,
              help='One JSON header per line; an unreadable session is {"id", "where", "error"}.')
@click.pass_obj
@_handled
def list_sessions(state: _State, as_json: bool) -> None:
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
            sys.stdout.write(orjson.dumps(header.to_wire()).decode() + "\n")
        for bad in listing.unreadable:
            row = {"id": bad.session_id, "where": bad.where, "error": str(bad.error)}
            sys.stdout.write(orjson.dumps(row).decode() + "\n")
    else:
        table = Table()
        for column in ("id", "created", "cwd", "parent"):
            table.add_column(column, overflow="fold")  # ids are copied from here: never elide them
        for header in headers:
            table.add_row(_visible(header.id), _iso(header.created_at), _visible(header.cwd or ""),
                          _visible(header.parent_session or ""))
        for bad in listing.unreadable:
            table.add_row(_visible(bad.session_id or "?"), "unreadable", _visible(f"error: {bad.error}"), "")
        console.print(table)
    if listing.unreadable:
        count = len(listing.unreadable)
        errors.print(f"error: {count} session{'s' if count > 1 else ''} could not be read (listed above)")
        sys.exit(1)


@cli.command()
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="The transcript as a JSON array of messages.")
@click.pass_obj
@_handled
def show(state: _State, session_id: str, as_json: bool) -> None:
    """Print the human transcript of a session (what the user saw, compaction aside)."""
    from agentlog.messages import transcript

    with state.store(create=False) as store:
        inspection = store.inspect(session_id)
    messages = transcript(inspection.events)
    if as_json:
        sys.stdout.write(_indented(messages) + "\n")
        return
    for message in messages:
        _print_message(message)


class _VerifyUsageError(click.UsageError):
    exit_code = 64  # EX_USAGE


class _VerifyCommand(click.Command):
    """``verify`` reserves exit status 2 for "recovered": its usage errors exit 64 (EX_USAGE)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _VerifyUsageError(exc.format_message(), exc.ctx) from None


@cli.command(cls=_VerifyCommand)
@click.argument("session_id")
@click.pass_obj
@_handled
def verify(state: _State, session_id: str) -> None:
    """Validate a session fully (restore rules + turn/step/tool invariants) without writing.

    Reports a torn tail it ignored (bytes and offset in a file) and the interrupted turn that
    loading would close, with its synthetic events.

    \b
    Exit status:
      0  intact: every stored event is valid and no turn is left open
      1  invalid: corrupt, fails validation or the invariants, or not found
      2  readable but recovered: a torn tail is ignored and/or an interrupted
         turn would be closed (load/open commits that repair)
      64 usage error

    A turn that another process is still recording looks interrupted here too.
    """
    from agentlog.invariants import check_invariants
    from agentlog.session import Session

    with state.store(create=False) as store:
        inspection = store.inspect(session_id)
        where = store.locate(inspection.header)
    session = Session.restore(session_id, inspection.events, inspection.header)
    check_invariants(list(inspection.events))
    counts = (f"{len(inspection.events)} events, {len(session.surface.nodes)} surface nodes, "
              f"{len(session.derive_messages())} model messages")
    recovery = inspection.recovery
    if recovery is None:
        console.print(f"[green]ok[/green] {_safe(session_id)}: {counts}", markup=True)
        return
    console.print(f"[yellow]recovered[/yellow] {_safe(session_id)}: readable; "
                  "loading it commits the repair below", markup=True)
    for line in _recovery_lines(recovery, where):
        console.print(f"  {_visible(line)}")
    console.print(f"  with the repair: {counts}")
    sys.exit(2)


def _recovery_lines(recovery: Recovery, where: str | None) -> list[str]:
    """What ``verify`` says about a recovery: intact prefix, torn tail, salvaged and synthetic events."""
    span = f" (seq 0..{recovery.intact - 1})" if recovery.intact else ""
    lines = [f"intact: {recovery.intact} events{span}"]
    first_lost = recovery.intact + len(recovery.recovered)
    if recovery.torn and recovery.torn_bytes is not None:
        lines.append(f"torn tail: {recovery.torn_bytes} bytes ignored after byte {recovery.torn_offset}"
                     + (f" of {where}" if where else ""))
    elif recovery.torn:
        lines.append(f"torn tail: the stored rows from seq {first_lost} on are ignored")
    if recovery.recovered:
        lines.append(f"recovered from the torn tail: {len(recovery.recovered)} complete events "
                     f"(seq {recovery.intact}..{first_lost - 1}), re-written by the repair")
    if recovery.closers:
        lines.append(f"interrupted turn {recovery.turn} would be closed by "
                     f"{len(recovery.closers)} synthetic events:")
        lines.extend(f"  seq {event.seq} {event.type}  {_summary(event)}".rstrip()
                     for event in recovery.closers)
    return lines


@cli.command()
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Every event as one compact JSON line.")
@click.option("--from", "from_seq", type=int, default=0, help="Start at this seq.")
@click.pass_obj
@_handled
def inspect(state: _State, session_id: str, as_json: bool, from_seq: int) -> None:
    """List a session's events (never writes, even for a crashed session)."""
    with state.store(create=False) as store:
        inspection = store.inspect(session_id)
    events = [event for event in inspection.events if event.seq >= from_seq]
    if as_json:
        out = sys.stdout
        for event in events:
            out.write(event.to_json().decode() + "\n")
        return
    header = inspection.header
    lineage = f"  parent {header.parent_session}@{header.seed_length}" if header.parent_session else ""
    console.print(f"[bold]{_safe(header.id)}[/bold]  created {_iso(header.created_at)}  "
                  f"cwd {_safe(header.cwd or '-')}{_safe(lineage)}", markup=True)
    table = Table()
    for column in ("seq", "type", "surface", "summary"):
        table.add_column(column)
    for event in events:
        op = event.surface_op
        surface = "" if op is None else ("append" if op == "append" else f"replace {op.start}..{op.end}")
        table.add_row(str(event.seq), _visible(event.type), surface, _visible(_displayed(session_id, event)))
    console.print(table)


@cli.command()
@click.argument("session_id")
@click.option("--at", "boundary", type=int, default=None, metavar="SEQ",
              help="Last seq of the shared prefix (default: the last event); must not be inside a turn.")
@click.option("--child", "child_id", default=None, metavar="ID", help="The child's id (default: generated).")
@click.pass_obj
@_handled
def fork(state: _State, session_id: str, boundary: int | None, child_id: str | None) -> None:
    """Start a child session from a stable prefix of SESSION_ID (the parent is not changed)."""
    with state.store() as store, store.fork(session_id, boundary, child_id) as child:
        header = child.session.header
        where = store.locate(header)
    console.print(f"forked {_visible(header.id)} from {_visible(session_id)}: "
                  f"{header.seed_length} events shared (up to seq {(header.seed_length or 0) - 1})")
    if where is not None:
        console.print(f"file: {_visible(str(where))}")


@cli.command()
@click.argument("session_id")
@click.pass_obj
@_handled
def materialize(state: _State, session_id: str) -> None:
    """Give a fork its own full copy of its parent's prefix (a no-op for any other session)."""
    with state.store() as store:
        store.materialize(session_id)
    console.print(f"{_visible(session_id)} holds its whole log")


@cli.command()
@click.argument("session_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
@_handled
def delete(state: _State, session_id: str, yes: bool) -> None:
    """Remove a stored session for good (refused while forks share its prefix or it is open)."""
    if not yes:
        click.confirm(f"delete session {session_id!r} and its whole log?", abort=True)
    with state.store() as store:
        store.delete(session_id)
    console.print(f"deleted {_visible(session_id)}")


_INVISIBLE = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0),
                 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
}
"""Terminal controls (C0 but tab and newline, DEL, C1) and bidirectional controls, shown escaped."""


def _visible(text: str) -> str:
    """``text`` with every control a terminal or a bidi algorithm would act on shown as an escape."""
    return text.translate(_INVISIBLE)


def _safe(text: str) -> str:
    """``_visible`` text, escaped for rich markup."""
    return escape(_visible(text))


def _iso(ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _text_of(blocks: Any) -> str:
    """The readable text of content blocks, nested tool results included (iterative: any depth)."""
    parts: list[str] = []
    pending: list[Iterator[Any]] = [iter(blocks or ())]
    while pending:
        block: Any = next(pending[-1], _DONE)
        if block is _DONE:
            pending.pop()
            continue
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("text", "reasoning"):
            parts.append(str(block.get("text", "")))
        elif kind == "tool-call":
            parts.append(f"→ {block.get('name')}({_compact(block.get('arguments'))})")
        elif kind == "tool-result":
            parts.append(f"← result{' (error)' if block.get('isError') else ''}:")
            content = block.get("content")
            pending.append(iter(content if isinstance(content, list) else ()))
    return " ".join(part for part in parts if part)


_DONE = object()


def _indented(value: Any) -> str:
    """Indented JSON; past orjson's depth limit, compact JSON from the iterative encoder."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONEncodeError:
        return dumps(value).decode()


def _compact(value: Any) -> str:
    """A string as is, any other JSON value as compact JSON (iterative encoder past orjson's depth)."""
    return value if isinstance(value, str) else dumps(value).decode()


def _clip(text: str, width: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _summary(event: Any) -> str:
    data = event.data
    if not isinstance(data, dict):
        return ""
    if event.type in ("turn/start", "step/start", "step/end"):
        return " ".join(f"{key} {data[key]}" for key in ("turn", "step") if key in data)
    if event.type == "turn/end":
        reason = data.get("reason") or {}
        return f"turn {data.get('turn')} {reason.get('kind') if isinstance(reason, dict) else reason}"
    if event.type == "assistant/chunk":
        chunk = data.get("chunk") or {}
        return _clip(repr(chunk.get("text", chunk.get("argumentsDelta", ""))), 60)
    if event.type == "user/message":
        return _clip(_text_of(data.get("content")))
    if event.type in ("assistant/message", "tool/result"):
        message = data.get("message") or {}
        return _clip(_text_of(message.get("content")))
    if event.type == "tool/call":
        return _clip(f"{data.get('name')} {_compact(data.get('arguments'))}")
    return _clip(_compact(data), 80)


def _displayed(session_id: str, event: Any) -> str:
    """``_summary`` for a table row; a failure names the session, type, seq and payload path."""
    try:
        return _summary(event)
    except Exception as exc:  # a renderer bug must still be one located line, not a traceback
        raise AgentlogError(f"cannot display the event: {type(exc).__name__}: {exc}", session_id=session_id,
                            seq=event.seq, event_type=event.type, path="data") from exc


def _print_message(message: Any) -> None:
    role = message.get("role")
    source = message.get("source") or {}
    label = {"user": "user", "assistant": "assistant"}.get(role, role)
    if source.get("kind") == "tool":
        label = "tool"
    colour = {"user": "cyan", "assistant": "green", "tool": "yellow"}.get(label, "white")
    text = _safe(_clip(_text_of(message.get("content")), 400))
    console.print(f"[bold {colour}]{_safe(str(label))}[/bold {colour}] {text}", markup=True)


def main() -> None:
    """Run the command line."""
    cli()
