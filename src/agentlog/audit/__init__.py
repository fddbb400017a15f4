"""Is this session reviewable? The seed's checklist (seed 003) over a stored session.

``audit_session(store, id)`` reads the session (``inspect``: never writes) and its fork parent,
probes the environment it would be restored into, and runs the pure checks of ``checks.py``
over the log as loading would present it (a pending crash repair included).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentlog.audit import checks
from agentlog.audit.environment import Environment, probe_environment
from agentlog.audit.report import AuditCheck, AuditItem, AuditReport, TimelineEntry
from agentlog.audit.timeline import timeline
from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.errors import SessionNotFoundError
from agentlog.store.base import Store
from agentlog.store.records import Recovery

__all__ = [
    "AuditCheck", "AuditItem", "AuditReport", "Environment", "TimelineEntry", "audit_log", "audit_session",
]


def audit_log(header: SessionHeader, events: Sequence[Event], *, recovery: Recovery | None = None,
              parent: Sequence[Event] | None = None, environment: Environment | None = None) -> AuditReport:
    """The checklist over a stored log as ``inspect`` presents it (a pending repair's closers included).

    ``recovery`` says which of those events a crash repair would commit; ``parent`` is the fork
    parent's log (None when it is not in the store); ``environment`` the current facts (default:
    none known, so nothing can have drifted).
    """
    pending = len(recovery.closers) if recovery is not None else 0
    log = list(events)
    env = environment if environment is not None else Environment()
    report = (
        checks.order(log),
        checks.tool_results(log, pending),
        checks.turns(log, recovery),
        checks.restore_drift(header, log, env),
        checks.fork_lineage(header, log, parent),
        checks.compaction(log),
        checks.secrets(header, log),
    )
    return AuditReport(header.id, report, tuple(timeline(log)))


def audit_session(store: Store, session_id: str, *, tools: Sequence[Any] | None = None,
                  model: str | None = None, preset: str | None = None) -> AuditReport:
    """Audit a stored session against the environment now; ``tools``/``model``/``preset`` are the caller's."""
    inspection = store.inspect(session_id, trust_checkpoint=False)  # reviewable: every event read
    header = inspection.header
    parent: Sequence[Event] | None = None
    if header.parent_session is not None:
        try:
            parent = store.inspect(header.parent_session).events
        except SessionNotFoundError:
            parent = None
    environment = probe_environment(header, tools=tools, model=model, preset=preset)
    return audit_log(header, inspection.events, recovery=inspection.recovery, parent=parent,
                     environment=environment)
