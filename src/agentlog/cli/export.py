"""``agentlog export``: a stored session in a provider's request format, Markdown, HTML or DSH JSONL."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from pathlib import Path

import click

from agentlog.cli.app import State, handled
from agentlog.cli.render import console, json_safe, print_json, safe
from agentlog.core.header import SessionHeader
from agentlog.errors import PersistenceIOError, UsageError
from agentlog.io.exporters import EXPORTERS, View, export
from agentlog.store.base import Store
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.sqlite.store import SqliteStore


def write_output(data: bytes, output: Path | None) -> None:
    """``data`` to ``output`` (whole or not at all: a temp file renamed over it) or to stdout.

    On a terminal, controls that survived the format are written as JSON ``\\u`` escapes
    (``json_safe``): the JSON formats parse the same, and the human formats have none left.
    """
    if output is None:
        if sys.stdout.isatty():
            data = json_safe(data.decode()).encode()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    temp = output.with_name(f".{output.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(temp, "xb") as file:
            file.write(data)
        os.replace(temp, output)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink()
        # named by the path asked for, not by the temp file beside it, in words rather than a repr
        missing = isinstance(exc, FileNotFoundError) and not output.parent.is_dir()
        reason = f"the directory {output.parent} does not exist" if missing else exc.strerror or str(exc)
        raise PersistenceIOError(f"cannot write the export to {output}: {reason}") from exc


def refuse_store_paths(store: Store, header: SessionHeader, output: Path) -> None:
    """An export never lands in the store: not inside a JSONL root, not over a database or its side files."""
    target = output.resolve()
    if isinstance(store, JsonlStore):
        guarded, inside = store.root, target.is_relative_to(store.root)
    elif isinstance(store, SqliteStore) and not store.memory:  # the database, -wal, -shm, .locks/
        guarded = Path(store.path).resolve()
        inside = str(target).startswith(str(guarded))
    else:
        return
    if inside:
        raise UsageError(f"refusing to write the export to {output}: it is inside the store ({guarded})",
                         session_id=header.id)


@click.command(name="export")
@click.argument("session_id")
@click.option("--format", "fmt", required=True, type=click.Choice(list(EXPORTERS)),
              help="openai-chat, openai-responses or anthropic: a request body; markdown or html: a "
                   "transcript; jsonl: the whole log as a DSH transcript.")
@click.option("--surface", "view", flag_value="surface", default=None,
              help="What the model sees now (default for the request formats).")
@click.option("--log", "view", flag_value="log",
              help="The whole human transcript (default for markdown and html).")
@click.option("--redact", is_flag=True,
              help="Replace secrets (API keys, tokens, private keys, passwords) with [REDACTED:kind], "
                   "in the content and in the session header.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to this file (replaced whole) instead of stdout.")
@click.option("--json", "as_json", is_flag=True,
              help='With -o: say what was written as {"id", "format", "view", "redacted", "bytes", "file"}.')
@click.pass_obj
@handled
def export_session(state: State, session_id: str, fmt: str, view: View | None, redact: bool,
                   output: Path | None, as_json: bool) -> None:
    """Export a session; the stored log is read, never changed.

    \b
    openai-chat  {"messages", "tools"}: chat.completions.create(model=..., **body)
    openai-responses  {"input", "instructions", "tools"}: responses.create(model=..., **body)
    anthropic    {"system", "messages", "tools"}: messages.create(model=..., max_tokens=..., **body)
    markdown     a readable transcript
    html         one self-contained page (no script, no external asset, strict CSP)
    jsonl        the whole log as a DSH-readable transcript (views do not apply)

    A surface export is the next request; a log export is every message the user saw, with
    compaction summaries left out. --redact is the supported way to share a transcript:
    compaction shortens what the model sees but deletes nothing from the log.
    """
    if as_json and output is None:
        raise click.UsageError("--json describes the file an export wrote: use it with -o FILE")
    with state.store(create=False) as store:
        inspection = store.inspect(session_id)
        if output is not None:
            refuse_store_paths(store, inspection.header, output)
    data = export(inspection.header, inspection.events, fmt, view=view, redact=redact)
    write_output(data, output)
    if output is not None and as_json:
        print_json({"id": session_id, "format": fmt, "view": view, "redacted": redact, "bytes": len(data),
                    "file": str(output)})
    elif output is not None:
        console.print(f"wrote {len(data)} bytes ({fmt}) to {safe(str(output))}")
