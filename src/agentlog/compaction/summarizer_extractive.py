"""``ExtractiveSummarizer``: the offline checkpoint, built from the shadowed messages (no model)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from agentlog.compaction.checkpoint_draft import KEEP, Draft, clip, prior_sections, quote
from agentlog.compaction.checkpoint_facts import Issue, is_prohibition, spec_lines
from agentlog.compaction.checkpoint_walk import Walk, is_file_path, outcome_history, relative
from agentlog.compaction.fidelity import ShadowedFacts, extract_facts
from agentlog.compaction.reading import message_texts, normalize, tool_calls
from agentlog.compaction.summary import SummaryRequest, SummaryResult
from agentlog.core.jsonvalue import freeze

__all__ = ["ExtractiveSummarizer"]

_MIN_BUDGET = 400  # the empty skeleton takes 222 characters
_PRIMARY, _CONCEPTS, _FILES, _ERRORS, _PENDING, _CURRENT, _NEXT, _CRITICAL = range(8)


class ExtractiveSummarizer:
    """The offline default: a deterministic checkpoint built from the shadowed messages, no model.

    The eight sections of spec compaction S3: every user message verbatim; the modules the edits
    introduced; each file with what its edits added; errors paired with their fix (the next
    remark, edit and passing run); open tracker items and todos (in progress first, finished
    ones demoted); the current work and the next step; commits, the latest test runs with their
    command, the requirements of the open tasks and the decisions taken. A prior checkpoint in
    the range is merged. It fits ``budget_chars`` section by section, then by priority.
    ``max_ratio`` also caps the text at that share of the input's size (never below 1,000
    characters), so a checkpoint stays smaller than what it replaces; None turns that cap off.
    """

    def __init__(
        self,
        budget_chars: int = 16_000,
        *,
        max_ratio: float | None = 0.5,
        provider: str = "agentlog",
        model: str = "extractive",
    ) -> None:
        if budget_chars < _MIN_BUDGET:
            raise ValueError(f"budget_chars must be at least {_MIN_BUDGET}, got {budget_chars}")
        if max_ratio is not None and not 0 < max_ratio <= 1:
            raise ValueError(f"max_ratio must lie in (0, 1], got {max_ratio}")
        self.budget_chars = budget_chars
        self.max_ratio = max_ratio
        self.provider = provider
        self.model = model

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(budget_chars={self.budget_chars}, max_ratio={self.max_ratio})"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize without a model; never fails for lack of content (empty sections say so)."""
        text = self.summarize_text(request.messages)
        return SummaryResult(
            summary=(freeze({"type": "text", "text": text}, root="summary"),),
            provider=self.provider,
            model=self.model,
            max_tokens=request.max_tokens,
        )

    def summarize_text(self, messages: Sequence[Any]) -> str:
        """The checkpoint text for the messages (pure and deterministic)."""
        budget = self.budget_chars
        if self.max_ratio is not None:
            budget = min(budget, max(1_000, int(_input_chars(messages) * self.max_ratio)))
        draft = Draft()
        _collect(draft, list(messages))
        return draft.fit(budget)


def _merged_paths(tools: dict[str, list[str]], root: str | None) -> dict[str, str]:
    """Each touched path's display spelling: relative to the project root when under it."""
    return {p: relative(p, root) for p in tools}


def _add_prior(draft: Draft, prior: dict[int, list[str]]) -> None:
    """A prior checkpoint's bullets: requests and quoted constraints stay kept, the others rank
    a little below fresh ones; its Current Work is stale and left out."""
    for bullet in prior.get(_PRIMARY, []):
        draft.add(_PRIMARY, KEEP, bullet)
    for section, priority in ((_CONCEPTS, 15), (_FILES, 30), (_ERRORS, 35), (_PENDING, 75)):
        for bullet in prior.get(section, []):
            draft.add(section, priority, bullet)
    for bullet in prior.get(_CRITICAL, []):
        draft.add(_CRITICAL, KEEP if bullet.startswith('"') else 55, bullet)


def _add_files(draft: Draft, walk: Walk, facts: ShadowedFacts) -> None:
    root = facts.project_root or walk.workdir
    shown = _merged_paths(walk.file_tools, root)
    for path, tools in walk.file_tools.items():
        notes = walk.file_notes.get(path)
        defines = walk.file_defines.get(path)
        if path in walk.file_notes:
            added = f": adds {', '.join(f'`{n}`' for n in notes)}" if notes else ""
            gone = walk.file_removed.get(path)
            if gone:
                added += ("; " if added else ": ") + "removes " + ", ".join(f"`{n}`" for n in gone)
            draft.add(_FILES, 60, f"`{shown[path]}` ({', '.join(tools)}){added}")
        elif defines:
            draft.add(_FILES, 32, f"`{shown[path]}` ({', '.join(tools)}): defines "
                                  + ", ".join(f"`{n}`" for n in defines))
        elif is_file_path(path):
            draft.add(_FILES, 30, f"`{shown[path]}` ({', '.join(tools)})")
        purpose = walk.file_purposes.get(path)
        if purpose is not None:
            draft.add(_FILES, 19, f"`{shown[path]}` says: {quote(purpose)}")
    listed = set(shown.values()) | set(shown)
    for path in facts.paths:
        if path not in listed and relative(path, root) not in listed and is_file_path(path):
            draft.add(_FILES, 22, f"`{relative(path, root)}`")
    for index, (command, hits) in enumerate(reversed(walk.searches)):
        draft.add(_FILES, 16 if index < 10 else 8,
                  f"`{command}` found: " + ", ".join(f"`{relative(h, root)}`" for h in hits))
    for index, module in enumerate(reversed(walk.modules)):
        draft.add(_CONCEPTS, 25 if index < 12 else 12, f"`{module}`")


def _add_errors(draft: Draft, walk: Walk, root: str | None) -> None:
    """Each distinct error once, at its latest occurrence (a retried failure repeats its first
    line; several commands may fail the same way), so a long retry loop does not push the
    session's other errors out."""
    latest = {fix.error: index for index, fix in enumerate(walk.fixes)}
    repeats = Counter(fix.error for fix in walk.fixes)
    commands = {error: len({f.command for f in walk.fixes if f.error == error}) for error in latest}
    distinct = [walk.fixes[i] for i in sorted(latest.values())]
    recent = len(distinct) - 12
    for index, fix in enumerate(distinct):
        priority = 20 if fix.exploring else 58 if index >= recent else 40
        times, others = repeats[fix.error], commands[fix.error] - 1
        seen = f" (seen {times} times" + (f", from {others + 1} commands" if others else "") + ")"
        draft.add(_ERRORS, priority, fix.describe(root) + (seen if times > 1 else ""))


def _issue_line(issue: Issue) -> str:
    return f"{issue.id}: {issue.title}" if issue.title else issue.id


def _prohibitions(issue: Issue) -> list[str]:
    """The negatively stated requirements of a finished task's spec: rules that still hold."""
    return [line for line in spec_lines(issue.body) if is_prohibition(line)]


def _add_tracker(draft: Draft, walk: Walk) -> list[Issue]:
    """Open and in-progress issues as pending jobs, finished ones demoted; returns the open ones."""
    issues = walk.tracker.in_scope()
    active = [i for i in issues if i.state == "in_progress"] + [i for i in issues if i.state == "open"]
    for issue in active:
        state = "in progress" if issue.state == "in_progress" else "open"
        draft.add(_PENDING, 96 if issue.state == "in_progress" else 90, f"[{state}] {_issue_line(issue)}")
        for index, line in enumerate(spec_lines(issue.body)):
            priority = (95 if issue.state == "in_progress" else 80) - (10 if index >= 12 else 0)
            draft.add(_CRITICAL, priority, f"{issue.id} requires: {line}")
    for issue in issues:
        if issue.state == "closed":
            reason = f" — {clip(issue.reason, 300)}" if issue.reason else ""
            draft.add(_PENDING, 45, f"[done] {_issue_line(issue)}{reason}")
            for line in _prohibitions(issue):
                draft.add(_CRITICAL, 64, f"{issue.id} (done) required: {line}")
    tasks = sorted(walk.tasks.values(),
                   key=lambda t: (t.state != "in_progress", t.state == "closed", t.order))
    for task in tasks:
        state = {"in_progress": "in progress", "closed": "done"}.get(task.state, "open")
        priority = {"in progress": 96, "open": 90}.get(state, 45)
        draft.add(_PENDING, priority, f"[{state}] task #{task.id}: {task.title}")
    return active


def _add_work(draft: Draft, facts: ShadowedFacts, walk: Walk, active: list[Issue],
              prior: dict[int, list[str]]) -> None:
    for todo in facts.open_todos:
        if not any(todo == issue.id for issue in active):
            draft.add(_PENDING, 85, f"[ ] {todo}")
    for todo in facts.done_todos:
        draft.add(_PENDING, 44, f"[done] {todo}")
    if facts.pending_request is not None:
        draft.add(_PENDING, 88, f"Latest request: {quote(clip(facts.pending_request, 200))}")
    if walk.last_text is not None:
        draft.add(_CURRENT, 70, f"Last assistant note: {quote(clip(walk.last_text, 600))}")
    root = facts.project_root or walk.workdir
    for label in walk.recent_calls[-5:]:
        shown = label.replace(root.rstrip("/") + "/", "") if root else label
        draft.add(_CURRENT, 65, f"Recent action: `{shown}`")
    for index, command in enumerate(reversed(walk.ran)):
        draft.add(_CURRENT, 14 if index < 20 else 6, f"Ran `{command}`")
    current = walk.tracker.current() or next((i for i in active if i.state == "in_progress"), None)
    if current is not None:
        draft.add(_NEXT, 90, f"Finish {_issue_line(current)} (its requirements are under Critical "
                             "Context), then continue with the open items of Pending Jobs.")
    elif active:
        draft.add(_NEXT, 90, f"Start {_issue_line(active[0])}.")
    elif facts.open_todos:
        draft.add(_NEXT, 90, f"Continue with: {facts.open_todos[0]}")
    elif any(t.state == "in_progress" for t in walk.tasks.values()):
        task = next(t for t in walk.tasks.values() if t.state == "in_progress")
        draft.add(_NEXT, 90, f"Finish task #{task.id}: {task.title}, then the open tasks of Pending Jobs.")
    elif facts.pending_request is not None:
        draft.add(_NEXT, 90, "Continue the latest request (see Pending Jobs).")
    else:
        for bullet in prior.get(_NEXT, []):
            draft.add(_NEXT, 80, bullet)


def _add_repository(draft: Draft, walk: Walk) -> None:
    """The branch, then the commits, newest first."""
    if walk.branch is not None:
        draft.add(_CRITICAL, 91, f"On branch `{walk.branch}`")
    for commit in reversed(walk.commits):
        draft.add(_CRITICAL, 92, f"Commit `{commit.sha}` on {commit.branch}: {clip(commit.message, 160)}")


def _add_outcomes(draft: Draft, walk: Walk) -> None:
    """The branch and commits, the two latest distinct test runs, every outcome before them, and
    the latest linter and type-checker verdicts."""
    _add_repository(draft, walk)
    latest: dict[str, None] = {}
    for run in reversed(walk.test_runs):
        latest.setdefault(run.describe(), None)
    for index, line in enumerate(latest):
        label = "Latest test run: " if index == 0 else "Test run: "
        draft.add(_CRITICAL, 93 if index < 2 else 50, label + line)
    history = outcome_history(walk.test_runs)
    if history is not None:
        draft.add(_CRITICAL, 89, history)
    for index, check in enumerate(reversed(walk.checks)):
        draft.add(_CRITICAL, 63 if index < 4 else 16, f"Check: {check.describe()}")


def _add_constraints(draft: Draft, facts: ShadowedFacts, walk: Walk, active: list[Issue]) -> None:
    """Quoted constraints, ranked by where they were stated; an open task's are already there."""
    open_bodies = [normalize(i.body) for i in active]
    closed_bodies = [normalize(i.body) for i in walk.tracker.in_scope() if i.state == "closed"]
    required = {normalize(line) for i in active for line in spec_lines(i.body)} | {
        normalize(line) for i in walk.tracker.in_scope() if i.state == "closed" for line in _prohibitions(i)}
    typed = {normalize(c) for r in facts.requests for c in [r]}
    for constraint in facts.constraints:
        key = normalize(constraint)
        if any(key in r for r in typed):
            priority = KEEP
        elif key in required:
            continue  # already under Critical Context as "<issue> requires: ..." (or "required")
        elif any(key in b for b in open_bodies):
            priority = 84
        elif any(key in b for b in closed_bodies):
            priority = 64 if is_prohibition(constraint) else 18  # a finished task's "never" still holds
        else:
            priority = 55
        draft.add(_CRITICAL, priority, quote(constraint))


def _add_critical(draft: Draft, facts: ShadowedFacts, walk: Walk, active: list[Issue]) -> None:
    _add_outcomes(draft, walk)
    if walk.environment:
        draft.add(_CRITICAL, 86, "Environment: " + ", ".join(f"{k} {v}" for k, v in walk.environment.items()))
    for plan in walk.approvals:
        draft.add(_CRITICAL, 87, f"The user approved the plan: {quote(plan)}")
    for line, results in walk.noise.counts.items():
        draft.add(_ERRORS, 50, f"Printed before the output of {results} commands (the environment, "
                               f"not their error): `{clip(line, 200)}`")
    _add_constraints(draft, facts, walk, active)
    for index, decision in enumerate(reversed(walk.decisions)):
        draft.add(_CRITICAL, 48 if index < 10 else 15, f"Decision: {clip(decision, 300)}")
    for index, report in enumerate(reversed(walk.reported)):
        draft.add(_CRITICAL, 62 if index < 8 else 20, report)
    for index, report in enumerate(reversed(walk.delegated)):
        draft.add(_CRITICAL, 57 if index < 8 else 24, f"Delegated agent reported: {report}")
    for sentence in walk.instructions:
        draft.add(_CRITICAL, 60, f"Command instructions: {quote(sentence)}")
    for path, lines in walk.documents.items():
        for index, line in enumerate(lines):
            shown = relative(path, facts.project_root)
            draft.add(_CRITICAL, 66 if index < 20 else 28, f"`{shown}`: {clip(line, 300)}")
    for index, note in enumerate(reversed(walk.analyses)):
        draft.add(_CRITICAL, 36 if index < 3 else 14, f"Assistant notes: {quote(clip(note, 1500))}")


def _collect(draft: Draft, messages: list[Any]) -> None:
    """Fill the draft: prior checkpoint, user messages, files, errors, work state, context."""
    facts = extract_facts(messages)
    prior = prior_sections(facts.prior_summary) if facts.prior_summary else {}
    _add_prior(draft, prior)
    for request in facts.requests:
        draft.add(_PRIMARY, KEEP, f"User: {quote(request)}")
    walk = Walk()
    walk.run(messages)
    for command in walk.commands:
        draft.add(_PRIMARY, KEEP, f"User ran: `{command}`")
    for answer in walk.answers:
        draft.add(_PRIMARY, KEEP, f"User answered: {quote(clip(answer, 600))}")
    for root in sorted(walk.tracker.roots):
        epic = walk.tracker.issues.get(root)
        if epic is not None and epic.title:
            draft.add(_PRIMARY, 95, f"Working on {_issue_line(epic)}")
    _add_files(draft, walk, facts)
    _add_errors(draft, walk, facts.project_root or walk.workdir)
    active = _add_tracker(draft, walk)
    _add_work(draft, facts, walk, active, prior)
    _add_critical(draft, facts, walk, active)


def _input_chars(messages: Sequence[Any]) -> int:
    return sum(len(t) for m in messages for t in message_texts(m)) + sum(
        len(c.arguments) for m in messages for c in tool_calls(m))
