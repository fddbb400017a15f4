"""The ``agentlog`` command group and what every command shares: the store option and error handling.

Errors from the library become a one-line message and exit status 1 (2 for usage errors);
a raw traceback is shown only with ``--debug``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sqlite3
import sys
from collections.abc import Callable, Iterator
from typing import Any, Final, NoReturn, TypeVar
from urllib.parse import urlsplit

import click

from agentlog.cli.render import console, errors, safe, visible
from agentlog.errors import AgentlogError, UsageError
from agentlog.store.base import Store
from agentlog.store.urls import default_store_url, open_store
from agentlog.version import __version__

F = TypeVar("F", bound=Callable[..., Any])


class State:
    """Options shared by every command."""

    def __init__(self, store_url: str, debug: bool) -> None:
        self.store_url = store_url
        self.debug = debug

    def store(self, *, create: bool = True) -> Store:
        """The store; read-only commands pass ``create=False`` so that they never create or change it."""
        return open_store(self.store_url, create=create)

    @property
    def store_label(self) -> str:
        """The store URL to print: a password in it is shown as ``***``."""
        parts = urlsplit(self.store_url)
        if parts.password is None:
            return self.store_url
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return parts._replace(netloc=netloc).geturl()

    def name_the_store(self) -> None:
        """The last line of a command that wrote: which store it wrote to."""
        console.print(f"store: {visible(self.store_label)}", soft_wrap=True)


json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print the outcome as one JSON object (shapes in the README).")
"""The ``--json`` flag of commands whose output is one object."""


INTERRUPTED: Final = 130
"""The exit status of a command stopped by Ctrl-C (128 + SIGINT, as shells report it)."""


def interrupted(summary: str) -> NoReturn:
    """End a command that Ctrl-C stopped: ``summary`` (one line: what was done, how to go on) on
    stderr, and status 130."""
    errors.print(summary, soft_wrap=True, highlight=False)
    sys.exit(INTERRUPTED)


class _CtrlCAtTheQuestion(Exception):  # noqa: N818 - not an error: the user's answer
    """Ctrl-C at a yes/no question, which click.confirm would report as "Aborted!" (status 1)."""


def confirm(question: str, *, err: bool, stopped: str) -> None:
    """``click.confirm`` (a no aborts); a Ctrl-C at the question ends the command with the one
    line ``stopped`` and status 130, as a Ctrl-C anywhere else does."""
    def at_the_question(_signal: int, _frame: object) -> None:
        raise _CtrlCAtTheQuestion

    try:
        previous = signal.signal(signal.SIGINT, at_the_question)
    except ValueError:  # not the main thread: leave Ctrl-C alone
        previous = None
    try:
        click.confirm(question, abort=True, err=err)
    except _CtrlCAtTheQuestion:
        interrupted(stopped)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def handled(command: F) -> F:
    """Turn library errors into one clear line and a non-zero exit status."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        state = click.get_current_context().find_object(State)
        try:
            return command(*args, **kwargs)
        except (click.ClickException, click.Abort):
            raise  # click reports these itself (usage errors, a declined confirmation)
        except KeyboardInterrupt:  # Ctrl-C: one line and the shell's status for it, never "Aborted!"
            errors.print("interrupted (Ctrl-C)")
            sys.exit(INTERRUPTED)
        except BrokenPipeError:  # the reader went away (`agentlog list | head -1`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(1)
        except AgentlogError as exc:
            if state is not None and state.debug:
                raise
            errors.print(f"[red]error:[/red] {safe(str(exc))}", markup=True, soft_wrap=True)
            sys.exit(1)
        except (OSError, RuntimeError, ValueError, sqlite3.Error) as exc:  # a safety net: stores map them
            if state is not None and state.debug:
                raise
            errors.print(f"[red]error:[/red] {type(exc).__name__}: {safe(str(exc))}", markup=True,
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
    ctx.obj = State(_store_url(store_url), debug)


def _store_url(option: str | None) -> str:
    """``--store`` (or ``$AGENTLOG_STORE``), else the default store; an empty one is a usage error,
    never the default: ``--store "$UNSET" gc`` must not clean the user's real sessions."""
    if option is not None and not option.strip():
        raise click.BadParameter("the store URL (--store or $AGENTLOG_STORE) is empty (an unset variable?): "
                                 "name a store, or leave both out for the default one",
                                 param_hint="'--store'")
    if option is not None:
        return option
    try:
        return default_store_url()
    except UsageError as exc:  # $AGENTLOG_STORE set to an empty string (click passes that on as unset)
        raise click.BadParameter(str(exc), param_hint="'--store'") from None


STOPPING_AFTER_THE_FILE: Final = "stopping after the current file (Ctrl-C again to stop at once)"


@contextlib.contextmanager
def stop_after_the_current_item(notice: str | None = STOPPING_AFTER_THE_FILE) -> Iterator[Callable[[], bool]]:
    """Within it, a first Ctrl-C only asks to stop (the returned callable turns true), so a
    command finishes the item it is on and reports what was done; a second one interrupts.

    ``notice`` is printed at the first Ctrl-C (None: nothing, for an item that takes no time).
    """
    asked: list[bool] = []

    def ask(_signal: int, _frame: object) -> None:
        asked.append(True)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the next Ctrl-C stops at once
        if notice is not None:
            errors.print(notice, soft_wrap=True)

    try:
        previous = signal.signal(signal.SIGINT, ask)
    except ValueError:  # not the main thread (an embedding caller): leave Ctrl-C alone
        yield lambda: False
        return
    try:
        yield lambda: bool(asked)
    finally:
        signal.signal(signal.SIGINT, previous)
