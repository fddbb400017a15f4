"""Remove sessions idle for longer than a cutoff, respecting forks and live writers.

A session's age counts, by default (``by="stored"``), from the later of its last event and when
this store stored it (``Snapshot.stored_at``): an import keeps its source's event times, which
may be years old or missing (1970), yet it was stored a minute ago. ``by="last-event"`` counts
from the last event's own time (its creation, if it has none). An imported session whose store
cannot tell when it was stored (a SQL row an older agentlog wrote) is kept unless by last event.
A session is also kept when a fork that stays references it, when a writer holds it (an open
session), or when it cannot be read. Children go before their parents, so a family that is old as
a whole is removed in one run. A dry run only reads: it asks the kernel (or the database) who
holds a writer lock, never takes one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from agentlog.core.header import now_ms
from agentlog.errors import AgentlogError, SessionLockedError, UsageError
from agentlog.store.base import Store
from agentlog.store.records import Snapshot, Unreadable
from agentlog.store.writer_probe import writer_pid

__all__ = ["AGE_BASES", "AgeBasis", "Collected", "collect_garbage", "parse_age"]

AgeBasis = Literal["stored", "last-event"]
AGE_BASES: Final[tuple[AgeBasis, ...]] = get_args(AgeBasis)
"""What a session's age counts from: when the store stored it (or its last event, if later), or
its last event's own time."""

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
    by: AgeBasis = "stored"
    deleted: list[str] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)
    """Old sessions that stay: ``(id, reason)``."""
    unreadable: list[Unreadable] = field(default_factory=list)
    since: dict[str, int] = field(default_factory=dict)
    """Each old session's age reference (Unix ms): what ``by`` counts from."""
    stopped: bool = False
    """True when ``stop`` ended the run early: ``deleted`` is what was removed (each session whole)
    before it; nothing is removed when it stopped while the sessions were still being read."""

    def to_json(self) -> dict[str, Any]:
        return {"cutoff": self.cutoff_ms, "dryRun": self.dry_run, "by": self.by, "deleted": self.deleted,
                "since": self.since,
                "kept": [{"id": sid, "reason": reason} for sid, reason in self.kept],
                "unreadable": [{"id": bad.session_id, "where": bad.where, "error": str(bad.error)}
                               for bad in self.unreadable]}


def collect_garbage(store: Store, older_than_ms: int, *, dry_run: bool = False, now: int | None = None,
                    by: AgeBasis = "stored", only: Collection[str] | None = None,
                    progress: Callable[[int, int], None] | None = None,
                    stop: Callable[[], bool] | None = None) -> Collected:
    """Delete (or with ``dry_run`` only list) every session idle for more than ``older_than_ms``.

    ``only``: delete none but these (the list a user confirmed); any other old session stays,
    and so does a parent it references. ``stop`` is asked before each session is read and
    before each is deleted (a Ctrl-C in the CLI): once true, the run ends ``stopped``, never in
    the middle of a session's removal, and a run stopped while reading removes nothing.
    """
    if older_than_ms <= 0:
        raise UsageError(f"the age must be positive, got {older_than_ms} ms")
    if by not in AGE_BASES:
        raise UsageError(f"the age counts from one of {', '.join(AGE_BASES)}, not {by!r}")
    cutoff = (now_ms() if now is None else now) - older_than_ms
    listing = store.listing()
    result = Collected(cutoff, dry_run, by, unreadable=list(listing.unreadable))
    snapshots = {snapshot.header.id: snapshot for snapshot in listing.snapshots}
    children: dict[str, list[str]] = {}
    for snapshot in snapshots.values():
        if snapshot.header.parent_session is not None:
            children.setdefault(snapshot.header.parent_session, []).append(snapshot.header.id)
    old = _old_sessions(store, snapshots, cutoff, result, progress, stop)
    if result.stopped:
        return result
    kept = _referenced(old, children)
    for sid in sorted(kept):
        result.kept.append((sid, f"fork {', '.join(sorted(set(children[sid]) - old))} references it"))
    gone: set[str] = set()
    for sid in _children_first(old, children):
        if stop is not None and stop():
            result.stopped = True
            break
        if any(child not in gone for child in children.get(sid, ())):
            if sid not in kept:
                result.kept.append((sid, "a fork of it could not be removed"))
            continue
        unconfirmed = only is not None and sid not in only
        reason = "not on the list that was confirmed" if unconfirmed else _remove(store, sid, dry_run)
        if reason is None:
            gone.add(sid)
            result.deleted.append(sid)
        else:
            result.kept.append((sid, reason))
    return result


def _old_sessions(store: Store, snapshots: dict[str, Snapshot], cutoff: int, result: Collected,
                  progress: Callable[[int, int], None] | None, stop: Callable[[], bool] | None) -> set[str]:
    """Sessions whose age reference is older than ``cutoff`` (unreadable ones go to ``result``)."""
    old: set[str] = set()
    for done, (sid, snapshot) in enumerate(sorted(snapshots.items()), 1):
        if stop is not None and stop():
            result.stopped = True
            return old
        try:
            events = store.read_from(sid, 0).events
        except AgentlogError as exc:
            result.unreadable.append(Unreadable(sid, sid, exc))
        else:
            since = events[-1].time if events else snapshot.header.created_at
            if result.by == "stored" and snapshot.stored_at is not None:
                since = max(since, snapshot.stored_at)
            unknown = result.by == "stored" and snapshot.stored_at is None and _imported(snapshot)
            if since < cutoff and unknown:
                result.kept.append((sid, _UNKNOWN_AGE))  # its events' times are its source's
            elif since < cutoff:
                old.add(sid)
                result.since[sid] = since
        if progress is not None:
            progress(done, len(snapshots))
    return old


_UNKNOWN_AGE: Final = ("imported before agentlog recorded when it stored a session: its age is unknown "
                       "(--by last-event judges it by its events)")


def _imported(snapshot: Snapshot) -> bool:
    """Whether an importer wrote the session: its events carry the source's times, not the store's."""
    return "importedFrom" in snapshot.header.extra


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
        if not dry_run:
            store.delete(sid)
        elif writer_pid(store, sid) is not None:  # reads the lock's holder, takes no lock
            return "open: a writer holds it"
    except SessionLockedError:
        return "open: a writer holds it"
    except AgentlogError as exc:
        return str(exc)
    except OSError:  # who holds the lock cannot be told here: the real run will find out
        return None
    return None
