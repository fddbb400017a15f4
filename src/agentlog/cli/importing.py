"""``agentlog import``: other tools' session files into the store, with a summary per session."""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import click
from rich.console import Console

from agentlog.cli.app import State, handled, interrupted, stop_after_the_current_item
from agentlog.cli.progress import Meter, meter
from agentlog.cli.render import columns, console, errors, json_text, plural, visible
from agentlog.errors import AgentlogError, UsageError
from agentlog.io.importers import IMPORTERS, Imported, read_source, save_imported
from agentlog.io.importers.claude_code import companions
from agentlog.io.importers.source import MAX_SOURCE_BYTES
from agentlog.store.base import Store

SUFFIXES: Final = {
    "claude-code": (".jsonl",),
    "dsh": (".jsonl", ".zstd", ".db", ".sqlite", ".sqlite3"),
    "openai-chat": (".json",),
    "openai-responses": (".json",),
    "codex": (".jsonl",),
    "swe-agent": (".traj",),
    "mini-swe-agent": (".json",),
}
"""What a directory given as PATH contributes, per format (every file for other formats)."""


def expand(fmt: str, paths: Sequence[Path]) -> list[Path]:
    """The files to import: each file, a directory's files of the format (recursively), and a
    Claude Code transcript's subagent files after it; each file once."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            suffixes = SUFFIXES.get(fmt)
            found.extend(sorted(p for p in path.rglob("*") if p.is_file()
                                and (suffixes is None or p.name.endswith(suffixes))))
        else:
            found.append(path)
    ordered: dict[Path, None] = {}
    for path in found:
        if fmt == "claude-code" and path.parent.name == "subagents" and path.resolve() in ordered:
            continue
        ordered[path.resolve()] = None
        if fmt == "claude-code":
            ordered.update(dict.fromkeys(p.resolve() for p in companions(path)))
    return list(ordered)


_SIZE: Final = re.compile(r"(\d+)([KMG]?)(?:i?B)?", re.IGNORECASE)
_SHIFTS: Final = {"": 0, "K": 10, "M": 20, "G": 30}


def parse_size(text: str) -> int:
    """Bytes from ``N`` or ``N`` with a binary suffix ``K``, ``M`` or ``G`` (``--max-size``)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise click.BadParameter(f"{text!r} is not a size: bytes, or a number with K, M or G (binary)")
    return int(match.group(1)) << _SHIFTS[match.group(2).upper()]


def relinked(sessions: list[Imported], new_id: str, renames: dict[str, str]) -> list[Imported]:
    """``--id``: the one top-level session takes ``new_id``; subagent sessions follow their parent."""
    result = []
    for imported in sessions:
        header = imported.header
        if header.origin != "subagent":
            if renames:
                raise UsageError("--id names one session, but the import holds more than one")
            renames[header.id] = new_id
            header = dataclasses.replace(header, id=new_id)
        elif header.parent_session in renames:
            header = dataclasses.replace(header, parent_session=renames[header.parent_session])
        result.append(dataclasses.replace(imported, header=header))
    return result


_UNEXPECTED: Final = (TypeError, KeyError, IndexError, AttributeError, ValueError, RecursionError)
"""What an importer raises on a shape its checks missed: that file's error, never the run's end."""


BIG_FILE: Final = 8 << 20
"""A file at least this large shows its own progress, in bytes (smaller ones take no time)."""


class _Abandoned(Exception):  # noqa: N818 - not an error: how a Ctrl-C leaves a file it has not stored yet
    """Ctrl-C came while a large file was being parsed: it is left before any of it is stored."""


def _rows(fmt: str, files: list[Path], store: Store, session_id: str | None, replace: bool,
          max_bytes: int, shown: Meter, stopped: Callable[[], bool]) -> Iterator[dict[str, Any]]:
    importer = IMPORTERS[fmt]
    renames: dict[str, str] = {}
    for path in files:
        try:
            source = read_source(path, max_bytes=max_bytes)
            size = len(source.data)
            tally = shown.bytes(path.name) if size >= BIG_FILE else None
            if tally is not None:
                def parsed(done: int, _size: int, tally: Any = tally, size: int = size) -> None:
                    if stopped():
                        raise _Abandoned
                    tally(done, size)

                source = dataclasses.replace(source, progress=parsed)
            try:
                sessions = importer(source)
            except _Abandoned:
                yield {"file": str(path), "abandoned": True}
                return
            finally:
                del source  # the bytes can go once parsed: a second large file is not held beside them
            if session_id is not None:
                sessions = relinked(sessions, session_id, renames)
            try:
                for imported in sessions:
                    if tally is not None:
                        tally(size, size)
                        tally.phase(f"storing {len(imported.events):,} events")
                    outcome = save_imported(store, imported, replace=replace)
                    yield {"file": str(path), "session": imported.header.id, "outcome": outcome,
                           "events": len(imported.events), "turns": imported.turns,
                           "unmapped": dict(imported.unmapped), "warnings": list(imported.warnings)}
            finally:
                if tally is not None:
                    shown.finish(tally)
        except (AgentlogError, OSError, *_UNEXPECTED) as exc:
            detail = str(exc) if isinstance(exc, AgentlogError) else f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, AgentlogError | OSError):
                detail = f"not readable as {fmt} ({detail})"
            yield {"file": str(path), "error": detail if str(path) in detail else f"{path}: {detail}"}


def _print_table(rows: list[dict[str, Any]], to: Console) -> None:
    """The summary as plain aligned columns (``render.columns``): session ids are never wrapped."""
    cells = []
    for row in rows:
        if "error" in row:
            cells.append((Path(row["file"]).name, "", "", "", "", "error (below)"))
            continue
        unmapped = "; ".join(f"{kind}: {count}" for kind, count in row["unmapped"].items())
        cells.append((Path(row["file"]).name, row["session"], str(row["events"]), str(row["turns"]),
                      unmapped or "-", row["outcome"]))
    columns(("file", "session", "events", "turns", "not mapped", "outcome"), cells, to=to)


@click.command(name="import", epilog=f"FORMAT: {', '.join(IMPORTERS)}.")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(list(IMPORTERS)))
@click.argument("paths", metavar="PATH...", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
@click.option("--id", "session_id", default=None, metavar="ID",
              help="Store the file's session under ID (one PATH holding one session; its subagents follow).")
@click.option("--replace", is_flag=True,
              help="Replace a session the store already holds under the same id (the old one stays until "
                   "the new one is stored whole).")
@click.option("--json", "as_json", is_flag=True,
              help='One JSON object per session: file, session, outcome, events, turns, unmapped, '
                   'warnings (or file, error).')
@click.option("--max-size", "max_size", default=f"{MAX_SOURCE_BYTES >> 30}G", show_default=True,
              metavar="SIZE",
              help="Refuse a file larger than SIZE (bytes, or with a K, M or G suffix): each file is read "
                   "into memory whole.")
@click.pass_obj
@handled
def import_sessions(state: State, fmt: str, paths: tuple[Path, ...], session_id: str | None,
                    replace: bool, as_json: bool, max_size: str) -> None:
    """Import other tools' session files (FORMAT, listed below) into the store.

    A directory imports every file of the format under it; a Claude Code transcript brings its
    subagent files along as child sessions. Progress goes to stderr (a large file's in bytes).
    Ctrl-C stops after the file being stored (status 130; re-running the same import resumes).
    Ids come from the source, so importing a file again skips its sessions (--replace overwrites
    them). Each session's row counts what could not be mapped, per kind. Only regular files are
    read (a FIFO or a device is refused). Exit status 1 when a file could not be imported;
    the other files are imported all the same.
    """
    max_bytes = parse_size(max_size)
    files = expand(fmt, paths)
    if session_id is not None and len([f for f in files if f.parent.name != "subagents"]) != 1:
        raise click.UsageError("--id needs exactly one file to import")
    rows: list[dict[str, Any]] = []
    with state.store() as store, meter("import") as shown, stop_after_the_current_item() as stopped:
        counted = shown.tally("importing", "files") if len(files) > 1 else None
        abandoned: str | None = None
        for row in _rows(fmt, files, store, session_id, replace, max_bytes, shown, stopped):
            if "abandoned" in row:
                abandoned = row["file"]
                break
            rows.append(row)
            if counted is not None:
                counted(len({r["file"] for r in rows}), len(files))
            if stopped():
                break
    if as_json:
        for row in rows:
            sys.stdout.write(json_text(row, indent=False) + "\n")
    else:
        _print_table(rows, console)
        skipped = sum(1 for row in rows if row.get("outcome") == "skipped")
        if skipped:
            console.print(f"{plural(skipped, 'session')} already in the store, "
                          "left unchanged (--replace overwrites)")
        state.name_the_store()
    for row in rows if not as_json else ():
        for warning in row.get("warnings", ()):
            errors.print(f"warning: {visible(row['file'])}: {visible(warning)}", soft_wrap=True)
    failed = [row for row in rows if "error" in row]
    for row in failed if not as_json else ():
        errors.print(f"error: {visible(row['error'])}", soft_wrap=True)
    if stopped():
        done = len({row["file"] for row in rows})
        stored = sum(1 for row in rows if row.get("outcome") not in (None, "skipped"))
        left = "" if abandoned is None else \
            f" ({visible(Path(abandoned).name)} was being parsed: none of it was stored)"
        interrupted(f"import: interrupted after {done} of {len(files)} files{left}: {stored} "
                    f"session{'' if stored == 1 else 's'} stored; re-running the same import resumes "
                    "(sessions already stored are skipped)")
    if failed:
        errors.print(f"error: {len(failed)} file{'s' if len(failed) > 1 else ''} could not be imported")
        sys.exit(1)
