"""Remove sessions idle for longer than a cutoff, respecting forks and live writers.

A session is old when its last stored event (its creation, if it has none) is older than the
cutoff. It is kept when a fork that stays references it, when a writer holds it (an open
session), or when it cannot be read. Children go before their parents, so a family that is old
as a whole is removed in one run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentlog.core.header import SessionHeader, now_ms
from agentlog.errors import AgentlogError, SessionLockedError, UsageError
from agentlog.store.base import Store
from agentlog.store.records import Unreadable

__all__ = ["Collected", "collect_garbage", "parse_age"]

_UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_age(text: str) -> int:
    """``30d``, ``12h``, ``90m``, ``45s`` or ``2w`` as milliseconds."""
    unit = text[-1:].lower()
    number = text[:-1].strip()
    if unit not in _UNITS or not number.isdigit():
        raise UsageError(f"age must be a whole number and a unit (s, m, h, d, w), like 30d: got {text!r}")
    return int(number) * _UNITS[unit]


@dataclass(slots=True)
class Collected:
    """What a collection removed (or, in a dry run, would remove) and what it kept, with why."""

    cutoff_ms: int
    dry_run: bool
    deleted: list[str] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)
    """Old sessions that stay: ``(id, reason)``."""
    unreadable: list[Unreadable] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"cutoff": self.cutoff_ms, "dryRun": self.dry_run, "deleted": self.deleted,
                "kept": [{"id": sid, "reason": reason} for sid, reason in self.kept],
                "unreadable": [{"id": bad.session_id, "where": bad.where, "error": str(bad.error)}
                               for bad in self.unreadable]}


def collect_garbage(store: Store, older_than_ms: int, *, dry_run: bool = False, now: int | None = None,
                    progress: Callable[[int, int], None] | None = None) -> Collected:
    """Delete (or with ``dry_run`` only list) every session idle for more than ``older_than_ms``."""
    if older_than_ms <= 0:
        raise UsageError(f"the age must be positive, got {older_than_ms} ms")
    cutoff = (now_ms() if now is None else now) - older_than_ms
    listing = store.listing()
    result = Collected(cutoff, dry_run, unreadable=list(listing.unreadable))
    headers = {snapshot.header.id: snapshot.header for snapshot in listing.snapshots}
    children: dict[str, list[str]] = {}
    for header in headers.values():
        if header.parent_session is not None:
            children.setdefault(header.parent_session, []).append(header.id)
    old = _old_sessions(store, headers, cutoff, result, progress)
    kept = _referenced(old, children)
    for sid in sorted(kept):
        result.kept.append((sid, f"fork {', '.join(sorted(set(children[sid]) - old))} references it"))
    gone: set[str] = set()
    for sid in _children_first(old, children):
        if any(child not in gone for child in children.get(sid, ())):
            if sid not in kept:
                result.kept.append((sid, "a fork of it could not be removed"))
            continue
        reason = _remove(store, sid, dry_run)
        if reason is None:
            gone.add(sid)
            result.deleted.append(sid)
        else:
            result.kept.append((sid, reason))
    return result


def _old_sessions(store: Store, headers: dict[str, SessionHeader], cutoff: int, result: Collected,
                  progress: Callable[[int, int], None] | None) -> set[str]:
    """Sessions whose last event is older than ``cutoff`` (unreadable ones go to ``result``)."""
    old: set[str] = set()
    for done, (sid, header) in enumerate(sorted(headers.items()), 1):
        try:
            events = store.read_from(sid, 0).events
        except AgentlogError as exc:
            result.unreadable.append(Unreadable(sid, sid, exc))
        else:
            if (events[-1].time if events else header.created_at) < cutoff:
                old.add(sid)
        if progress is not None:
            progress(done, len(headers))
    return old


def _referenced(old: set[str], children: dict[str, list[str]]) -> set[str]:
    """Old sessions a remaining fork references (directly or through kept descendants); ``old`` shrinks."""
    kept: set[str] = set()
    changed = True
    while changed:
        changed = False
        for sid in sorted(old):
            if any(child not in old for child in children.get(sid, ())):
                old.discard(sid)
                kept.add(sid)
                changed = True
    return kept


def _children_first(old: set[str], children: dict[str, list[str]]) -> list[str]:
    """``old`` ordered so every fork comes before its parent."""
    ordered: list[str] = []
    placed: set[str] = set()
    pending = sorted(old)
    while pending:
        later = [sid for sid in pending if any(c in old and c not in placed for c in children.get(sid, ()))]
        ready = [sid for sid in pending if sid not in later]
        if not ready:  # a cycle cannot be stored; keep the rest as they are
            break
        ordered.extend(ready)
        placed.update(ready)
        pending = later
    return ordered


def _remove(store: Store, sid: str, dry_run: bool) -> str | None:
    """Delete ``sid`` (or check that it could be); None on success, else why it stays."""
    try:
        if dry_run:
            with store._writer_locked(sid, "delete"):  # an open session holds its writer lock
                pass
        else:
            store.delete(sid)
    except SessionLockedError:
        return "open: a writer holds it"
    except AgentlogError as exc:
        return str(exc)
    return None
