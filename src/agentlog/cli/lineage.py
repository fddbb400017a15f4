"""Commands that change a session's lineage: ``fork``, ``materialize``, ``delete``."""

from __future__ import annotations

import click

from agentlog.cli.app import State, handled, json_option
from agentlog.cli.render import console, plural, print_json, visible
from agentlog.core.fork import OPEN_TURN, turn_end_after
from agentlog.errors import ForkError


@click.command()
@click.argument("session_id")
@click.option("--at", "boundary", type=int, default=None, metavar="SEQ",
              help="Last seq of the shared prefix (default: the last event); must not be inside a turn.")
@click.option("--child", "child_id", default=None, metavar="ID", help="The child's id (default: generated).")
@json_option
@click.pass_obj
@handled
def fork(state: State, session_id: str, boundary: int | None, child_id: str | None, as_json: bool) -> None:
    """Start a child session from a stable prefix of SESSION_ID (the parent is not changed)."""
    with state.store() as store:
        try:
            live = store.fork(session_id, boundary, child_id)
        except ForkError as exc:
            if exc.code == OPEN_TURN and boundary is not None:  # the store read only the prefix
                end = turn_end_after(store.read_from(session_id, 0).events, boundary)
                if end is not None:
                    exc.detail += f"; seq {end} (where that turn ends) is valid too"
                    exc.args = (exc.detail,)
            raise
        with live:
            header = live.session.header
            where = store.locate(header)
    length = header.seed_length or 0
    if as_json:
        print_json({"id": header.id, "parent": session_id, "seedLength": length, "boundary": length - 1,
                    "file": where})
        return
    console.print(f"forked {visible(header.id)} from {visible(session_id)}: "
                  f"{plural(length, 'event')} shared (up to seq {length - 1})")
    if where is not None:
        console.print(f"file: {visible(str(where))}")
    state.name_the_store()


@click.command()
@click.argument("session_id")
@json_option
@click.pass_obj
@handled
def materialize(state: State, session_id: str, as_json: bool) -> None:
    """Give a fork its own full copy of its parent's prefix (a no-op for any other session)."""
    with state.store() as store:
        store.materialize(session_id)
    if as_json:
        print_json({"id": session_id, "materialized": True})
        return
    console.print(f"{visible(session_id)} holds its whole log")
    state.name_the_store()


@click.command()
@click.argument("session_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_obj
@handled
def delete(state: State, session_id: str, yes: bool, as_json: bool) -> None:
    """Remove a stored session for good (refused while forks share its prefix or it is open)."""
    if not yes:
        click.confirm(f"delete session {visible(repr(session_id))} and its whole log?", abort=True)
    with state.store() as store:
        store.delete(session_id)
    if as_json:
        print_json({"id": session_id, "deleted": True})
        return
    console.print(f"deleted {visible(session_id)}")
    state.name_the_store()
