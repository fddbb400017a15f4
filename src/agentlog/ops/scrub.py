"""``agentlog scrub``: remove secrets from every byte a store holds of some sessions and their forks.

Compaction is no privacy tool (the log is append-only); this is the storage-level disposal. The
scope is the named sessions, their descendants whole (they share or copy their bytes), and, for a
fork, its ancestors up to the fork point (the prefix it inherits) with their other forks that far.
Every session in scope is validated scrubbed before a byte is written; then each is rewritten
under its writer lock, all locks held together (refused while another process writes one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentlog.core.header import SessionHeader, now_ms
from agentlog.core.session import Session
from agentlog.errors import ConcurrentWriterError, SessionNotFoundError
from agentlog.ops.scrub_text import Matcher, ScrubbedLog, Secrets, found_secrets, scrub_log, scrub_text
from agentlog.store.base import Store
from agentlog.store.scrubbing import ScrubBackend, keyed_hash
from agentlog.version import __version__

__all__ = [
    "ScrubReport", "SessionScrub", "backend_for", "scrub", "scrub_journal", "scrub_scope", "secret_locations",
    "shown",
]


@dataclass(slots=True)
class SessionScrub:
    """What the scrub changed (or would change) in one session."""

    session_id: str
    until: int | None
    """Events below this seq were scrubbed (None: all); the header always is."""
    why: str
    seqs: list[int] = field(default_factory=list)
    header: bool = False
    removed: dict[str, int] = field(default_factory=dict)
    """Label -> occurrences removed."""
    kept: list[str] = field(default_factory=list)
    """Header fields that still hold a secret (identity and cwd are never rewritten)."""
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.seqs or self.header)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.session_id, "until": self.until, "why": self.why, "seqs": self.seqs,
                "header": self.header, "removed": self.removed, "headerKept": self.kept, "notes": self.notes}


@dataclass(slots=True)
class ScrubReport:
    """Every session in scope, what the backend did after, and what it cannot guarantee."""

    dry_run: bool
    sessions: list[SessionScrub] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    caveats: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"dryRun": self.dry_run, "sessions": [entry.to_json() for entry in self.sessions],
                "events": sum(len(entry.seqs) for entry in self.sessions),
                "notes": self.notes, "caveats": list(self.caveats)}


def backend_for(store: Store) -> ScrubBackend:
    """The scrub side of a JSONL, SQLite or PostgreSQL store."""
    from agentlog.errors import UsageError

    if store.name == "jsonl":
        from agentlog.store.jsonl.scrub import JsonlScrub

        return JsonlScrub(store)
    if store.name == "sqlite":
        from agentlog.store.sqlite.scrub import SqliteScrub

        return SqliteScrub(store)
    if store.name == "postgres":
        from agentlog.store.postgres.scrub import PostgresScrub

        return PostgresScrub(store)
    raise UsageError(f"scrub rewrites stored sessions; the {store.name} store keeps none it could rewrite")


def scrub_scope(headers: Sequence[SessionHeader],
                session_ids: Sequence[str]) -> dict[str, tuple[int | None, str]]:
    """Session id -> (scrub events below this seq, None: all; why it is in scope)."""
    by_id = {header.id: header for header in headers}
    children: dict[str, list[SessionHeader]] = {}
    for header in headers:
        if header.parent_session is not None:
            children.setdefault(header.parent_session, []).append(header)
    scope: dict[str, tuple[int | None, str]] = {}
    pending: list[tuple[str, int | None, str]] = []
    for sid in session_ids:
        if sid not in by_id:
            raise SessionNotFoundError("session not found", session_id=sid)
        pending.append((sid, None, "named"))
        header = by_id[sid]
        while header.parent_session in by_id and header.seed_length is not None:  # the prefix it inherits
            parent = by_id[header.parent_session]
            inherited = f"the prefix {sid} inherits (seq 0..{header.seed_length - 1})"
            pending.append((parent.id, header.seed_length, inherited))
            header = parent
    while pending:
        sid, until, why = pending.pop()
        known = scope.get(sid)
        if known is not None and (known[0] is None or (until is not None and until <= known[0])):
            continue
        scope[sid] = (until, why if known is None or known[1] != "named" else "named")
        for child in children.get(sid, []):
            shared = None if until is None else min(until, child.seed_length or 0)
            pending.append((child.id, shared,
                            f"a fork of {sid}" if shared is None else f"shares seq 0..{shared - 1} of {sid}"))
    return scope


def scrub(store: Store, session_ids: Sequence[str], secrets: Secrets, *, from_audit: bool = False,
          dry_run: bool = False) -> ScrubReport:
    """Scrub ``secrets`` (plus what the audit finds, with ``from_audit``) from the sessions and
    their scope; ``dry_run`` reports what would change and writes nothing."""
    backend = backend_for(store)
    scope = scrub_scope(store.list(), session_ids)
    order = sorted(scope)
    if not dry_run:
        for sid in order:
            store.load(sid)  # commit a pending crash repair first (it keeps a torn tail's bytes aside)
    if from_audit:
        found: dict[str, str] = {}
        for sid in session_ids:
            stored = store.inspect(sid)
            finds = found_secrets(stored.header, list(stored.events))
            found.update({value: kind for value, (kind, _) in finds.items()})
        secrets = Secrets((*secrets.literals, *sorted(found.items())), secrets.patterns)
    matcher = Matcher(secrets)
    report = ScrubReport(dry_run, caveats=backend.caveats)
    if not secrets:
        report.sessions = [SessionScrub(sid, *scope[sid]) for sid in order]
        return report
    if dry_run:
        report.sessions = [_entry(sid, scope[sid], _plan(store, sid, scope[sid][0], matcher)[1])
                           for sid in order]
        return report
    key = backend.key()
    with backend.locked(order):
        plans = []
        for sid in order:
            stored, log = _plan(store, sid, scope[sid][0], matcher)
            if stored.recovery is not None:
                raise ConcurrentWriterError("the session changed since it was repaired (another writer?): "
                                            "run the scrub again", session_id=sid)
            Session.restore(sid, log.events, log.header)  # a valid log, or nothing is written
            plans.append((sid, log))
        backend.text_scrubber = lambda text: scrub_text(matcher, text)
        for sid, log in plans:
            entry = _entry(sid, scope[sid], log)
            report.sessions.append(entry)
            if not entry.changed:
                entry.notes += backend.tidy(sid)
            else:
                record = {"at": now_ms(), "by": f"agentlog {__version__}", "why": entry.why,
                          "until": entry.until, "seqs": entry.seqs, "header": entry.header,
                          "removed": [{"label": label, "count": count, "hmacSha256": keyed_hash(key, value)}
                                      for value, (label, count) in sorted(log.removed.items(),
                                                                          key=lambda item: item[1])]}
                entry.notes += backend.rewrite(sid, log.header, log.events, record)
        report.notes = backend.dispose()
    for entry in report.sessions:
        if entry.changed:
            store.load(entry.session_id)  # validates it again and rebuilds what a load writes (checkpoints)
    return report


def scrub_journal(store: Store, session_id: str) -> list[dict[str, Any]]:
    """The session's scrub records, oldest first; [] for a store that cannot scrub."""
    if store.name not in ("jsonl", "sqlite", "postgres"):
        return []
    return backend_for(store).journal(session_id)


def _plan(store: Store, sid: str, until: int | None, matcher: Matcher) -> tuple[Any, ScrubbedLog]:
    stored = store.inspect(sid)
    return stored, scrub_log(stored.header, list(stored.events), matcher, until=until)


def _entry(sid: str, scope: tuple[int | None, str], log: ScrubbedLog) -> SessionScrub:
    removed: dict[str, int] = {}
    for label, count in log.removed.values():
        removed[label] = removed.get(label, 0) + count
    return SessionScrub(sid, scope[0], scope[1], log.changed, log.header_changed, removed, log.kept)


def shown(value: str, kind: str) -> str:
    """A secret as a report may show it: its kind and length, and its first 4 characters when it is
    long enough (16 or more) that they give nothing away, as key dashboards show keys."""
    head = f"{value[:4]}…" if len(value) >= 16 else ""
    return f"{head}[REDACTED:{kind}] ({len(value)} chars)"


def secret_locations(store: Store, session_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Per secret the audit finds in the sessions and their forks (the scrub's scope): where it occurs,
    so the user knows what to rotate. The secret is shown redacted, never in clear."""
    scope = scrub_scope(store.list(), session_ids)
    where: dict[str, tuple[str, dict[str, set[int | None]]]] = {}
    for sid in sorted(scope):
        stored = store.inspect(sid)
        for value, (kind, seqs) in found_secrets(stored.header, list(stored.events)).items():
            where.setdefault(value, (kind, {}))[1].setdefault(sid, set()).update(seqs)
    return [{"secret": shown(value, kind), "kind": kind,
             "sessions": [{"id": sid, "header": None in seqs,
                           "seqs": sorted(seq for seq in seqs if seq is not None)}
                          for sid, seqs in sorted(sessions.items())]}
            for value, (kind, sessions) in sorted(where.items(), key=lambda item: (item[1][0], item[0]))]
