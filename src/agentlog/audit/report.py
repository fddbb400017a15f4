"""What an audit found: one check per question of the reviewability checklist, and the timeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["AuditCheck", "AuditItem", "AuditReport", "Status", "TimelineEntry"]

Status = Literal["ok", "problem", "skipped"]


@dataclass(frozen=True, slots=True)
class AuditItem:
    """One fact behind a check, located by seq and JSON path when it has a place in the log."""

    text: str
    problem: bool = False
    seq: int | None = None
    path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "problem": self.problem, "seq": self.seq, "path": self.path}


@dataclass(frozen=True, slots=True)
class AuditCheck:
    """One question of the checklist: ``problem`` when any of its items is one."""

    name: str
    question: str
    status: Status
    summary: str
    items: tuple[AuditItem, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "question": self.question, "status": self.status, "summary": self.summary,
                "items": [item.to_json() for item in self.items]}


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """An input, a result or a tool call, in log order (its text clipped and redacted)."""

    seq: int
    kind: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "text": self.text}


@dataclass(frozen=True, slots=True)
class AuditReport:
    """The checklist for one session: clean when no check found a problem."""

    session_id: str
    checks: tuple[AuditCheck, ...]
    timeline: tuple[TimelineEntry, ...] = field(default=())

    @property
    def clean(self) -> bool:
        """True when no check found a problem (exit status 0 of ``agentlog audit``)."""
        return all(check.status != "problem" for check in self.checks)

    def check(self, name: str) -> AuditCheck:
        """The check called ``name``."""
        return next(check for check in self.checks if check.name == name)

    def to_json(self) -> dict[str, Any]:
        """A stable JSON shape: ``{session, clean, checks: [...], timeline: [...]}``."""
        return {"session": self.session_id, "clean": self.clean,
                "checks": [check.to_json() for check in self.checks],
                "timeline": [entry.to_json() for entry in self.timeline]}


def check_of(name: str, question: str, items: list[AuditItem], ok: str, *,
             skipped: str | None = None) -> AuditCheck:
    """A check from its items: ``skipped`` when given, else ``problem`` if any item is one."""
    if skipped is not None:
        return AuditCheck(name, question, "skipped", skipped, tuple(items))
    problems = [item for item in items if item.problem]
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return AuditCheck(name, question, "problem", problems[0].text + more, tuple(items))
    return AuditCheck(name, question, "ok", ok, tuple(items))
