"""``agentlog scrub``: remove secrets from every byte the store holds of sessions and their forks."""

from __future__ import annotations

from pathlib import Path

import click

from agentlog.cli.app import State, handled, json_option
from agentlog.cli.render import console, plural, print_json, visible
from agentlog.errors import UsageError


def _literals(path: Path | None) -> list[tuple[str, str]]:
    """One literal a line (trailing newline and carriage return removed; blank lines skipped)."""
    if path is None:
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--text-file {path}: cannot read it as UTF-8 text ({exc})") from None
    return [(line, "text") for line in text.splitlines() if line.strip()]


@click.command()
@click.argument("session_ids", nargs=-1, required=True, metavar="SESSION_ID...")
@click.option("--secret-from-audit", is_flag=True, help="Scrub every secret audit finds in the sessions.")
@click.option("--pattern", "patterns", multiple=True, metavar="REGEX",
              help="Scrub every match of this Python regular expression (repeatable).")
@click.option("--text-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Scrub every occurrence of each line of this file (one literal a line).")
@click.option("--dry-run", is_flag=True,
              help="List what would change (sessions, seqs, counts); write nothing.")
@json_option
@click.pass_obj
@handled
def scrub(state: State, session_ids: tuple[str, ...], secret_from_audit: bool, patterns: tuple[str, ...],
          text_file: Path | None, dry_run: bool, as_json: bool) -> None:
    """Replace secrets with [SCRUBBED:<label>] in the stored bytes of sessions (storage-level disposal).

    Also scrubbed: every fork of a named session, and for a fork the prefix it shares with its
    ancestors (they are scrubbed up to the fork point). Seqs, event count and types are kept;
    the session still loads, verifies and forks, and a JSONL transcript stays DSH-readable. Each
    session gets a scrub record (when, which seqs, an HMAC of each removed value, never the value)
    that verify --json shows. Refused while another process writes one of the sessions.

    What the store cannot reach is printed (PostgreSQL dead tuples and WAL, replicas, backups,
    file-system snapshots, copies exported before): see docs/scrub.md.
    """
    from agentlog.ops.scrub import scrub as run
    from agentlog.ops.scrub_text import Secrets

    secrets = Secrets.of(_literals(text_file), patterns)
    if not secrets and not secret_from_audit:
        raise UsageError("name what to scrub: --secret-from-audit, --pattern REGEX or --text-file FILE")
    with state.store(create=not dry_run) as store:
        report = run(store, list(session_ids), secrets, from_audit=secret_from_audit, dry_run=dry_run)
    if as_json:
        print_json(report.to_json())
        return
    verb = "would scrub" if dry_run else "scrubbed"
    for entry in report.sessions:
        if not entry.changed:
            console.print(f"{visible(entry.session_id)}: nothing to scrub in its log ({visible(entry.why)})")
            for note in entry.notes:
                console.print(f"  {visible(note)}")
            continue
        removed = ", ".join(f"{count} {visible(label)}" for label, count in sorted(entry.removed.items()))
        where = "" if not entry.seqs else (f" in {plural(len(entry.seqs), 'event')} "
                                           f"(seq {_ranges(entry.seqs)})")
        header = " and the header" if entry.header else ""
        console.print(f"{visible(entry.session_id)}: {verb} {removed}{where}{header}"
                      + ("" if entry.why == "named" else f" ({visible(entry.why)})"))
        for name in entry.kept:
            console.print(f"  not removable: the header's {name} holds a secret "
                          "(it names the session's place)")
        for note in entry.notes:
            console.print(f"  {visible(note)}")
    for note in report.notes:
        console.print(visible(note))
    for caveat in report.caveats:
        console.print(f"caveat: {visible(caveat)}")
    console.print("not reached by any scrub: backups, file-system snapshots, replicas and copies made "
                  "before (exports, check-upgrade copies): see docs/scrub.md")
    if dry_run:
        console.print("nothing written")
    else:
        state.name_the_store()


def _ranges(seqs: list[int]) -> str:
    """``2-5, 9`` for ``[2, 3, 4, 5, 9]``."""
    parts: list[str] = []
    start = prev = seqs[0]
    for seq in [*seqs[1:], None]:
        if seq is not None and seq == prev + 1:
            prev = seq
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if seq is not None:
            start = prev = seq
    return ", ".join(parts)
