"""Commands that change a session's lineage: ``fork``, ``materialize``, ``delete``."""

from __future__ import annotations

import click

from agentlog.cli.app import State, handled
from agentlog.cli.render import console, visible


@click.command()
@click.argument("session_id")
@click.option("--at", "boundary", type=int, default=None, metavar="SEQ",
              help="Last seq of the shared prefix (default: the last event); must not be inside a turn.")
@click.option("--child", "child_id", default=None, metavar="ID", help="The child's id (default: generated).")
@click.pass_obj
@handled
def fork(state: State, session_id: str, boundary: int | None, child_id: str | None) -> None:
    """Start a child session from a stable prefix of SESSION_ID (the parent is not changed)."""
    with state.store() as store, store.fork(session_id, boundary, child_id) as child:
        header = child.session.header
        where = store.locate(header)
    console.print(f"forked {visible(header.id)} from {visible(session_id)}: "
                  f"{header.seed_length} events shared (up to seq {(header.seed_length or 0) - 1})")
    if where is not None:
        console.print(f"file: {visible(str(where))}")


@click.command()
@click.argument("session_id")
@click.pass_obj
@handled
def materialize(state: State, session_id: str) -> None:
    """Give a fork its own full copy of its parent's prefix (a no-op for any other session)."""
    with state.store() as store:
        store.materialize(session_id)
    console.print(f"{visible(session_id)} holds its whole log")


@click.command()
@click.argument("session_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
@handled
def delete(state: State, session_id: str, yes: bool) -> None:
    """Remove a stored session for good (refused while forks share its prefix or it is open)."""
    if not yes:
        click.confirm(f"delete session {session_id!r} and its whole log?", abort=True)
    with state.store() as store:
        store.delete(session_id)
    console.print(f"deleted {visible(session_id)}")
