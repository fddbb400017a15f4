"""Compaction fidelity facts: what a shadowed range holds that its summary should keep (seed 000).

The seed asks evaluations to check that key **constraints**, **unfinished tasks**, **file paths**
and **tool results** can still be recovered after compaction. ``extract_facts`` finds those facts
in the shadowed messages (pure); ``fidelity_score`` looks them up in a summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agentlog.compaction.noise import Noise, typed_request
from agentlog.compaction.reading import (
    ToolCall,
    command_text,
    find_checkpoint_summary,
    is_tool_result,
    is_user_request,
    message_texts,
    normalize,
    tool_calls,
    tool_result_call_id,
    tool_result_is_error,
)

__all__ = [
    "ShadowedFacts",
    "constraint_sentences",
    "dedupe",
    "extract_facts",
    "result_lines",
]

# Directive words that make a sentence a constraint. In text the user typed, every marker counts;
# in tool output (task specs the user points the agent at) only the strong, imperative ones do.
_STRONG_MARKERS = re.compile(
    r"\b(?:must|mustn't|never|do not|don't|does not need|always|avoid|ensure|make sure|should not|"
    r"shouldn't|cannot|can't|required?|no-gos?|prefer)\b|^(?:keep|use|do|only)\b",
    re.IGNORECASE,
)
_WEAK_MARKERS = re.compile(r"\b(?:keep|only|without|instead of|should|no longer|stop)\b", re.IGNORECASE)
_BULLET = re.compile(r"^(?:[-*+•]|\d{1,3}[.)])\s+")
_LINE_NUMBERED = re.compile(r"^\s*\d+(?:→|\t|:\s)")
_GREP_PREFIX = re.compile(r"^(?:[\w./-]+:)?\d+[:-]")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z`\"'(*])")
_CODE_LINE = re.compile(
    r"^\s*(?:[{}\[\]<]|def |class |import |from \S+ import|#include|//|/\*|\$ )|=>|::|;\s*$"
)
_DIAGNOSTIC = re.compile(r"^\s*(?:warning|error|note|hint|info|debug)\b[:\[]", re.IGNORECASE)
_ERROR_LINE = re.compile(
    r"^(?i:error|fatal|panic|exception|failed|failure)\b[:\s(\[]|^\*\* \(|^(?:E {2,}|FAILED\b|npm ERR!)"
    r"|^Traceback \(most recent call last\)|\b[A-Z]\w*(?:Error|Exception)\b(?:[:)]|$)|<tool_use_error>"
    r"|\b(?:command not found|No such file or directory|[Pp]ermission denied|not found in file|"
    r"[Cc]ould not|[Cc]annot|undefined (?:function|variable|method)|rejected by (?:the )?user)\b"
)
_FAILED_EXIT = re.compile(r"^(?i:error|fatal|failed|failure)\b.*\bexit (?:code|status)\s*:?\s*[1-9]")
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_NOT_AN_ERROR = re.compile(r"\b0 (?:failures?|errors?|failed)\b|\bno errors?\b", re.IGNORECASE)
_OUTCOME_LINE = re.compile(
    r"(?<![\w.])\d+ (?:tests?|examples?|doctests?|properties|passed|failed|failures?|errors?|skipped)"
    r"(?![\w/.-])|\bexit (?:code|status)\s*:?\s*\d+|\bexited with\b",
    re.IGNORECASE,
)
_SEGMENT = r"(?:[\w.@+-]+|\([\w.@+-]+\)|\[[\w.@+-]+\])"
"""A directory of a path: a name, or a route group ``(protected)`` or segment ``[id]`` (Next.js)."""
_PATH = re.compile(
    rf"(?<![\w@:/.-])(?:~?/(?:{_SEGMENT}/)*[\w.@+-]+|(?:\.{{1,2}}/)?(?:{_SEGMENT}/)+[\w@+-]+\.[A-Za-z0-9]{{1,8}})"
    r"(?![\w/-])"
)
_FILE_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}$")
_TRACKER_ID = re.compile(r"^[A-Za-z][\w]*-[\w]+(?:\.\d+)*$")
_CHECKBOX = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[([ xX~-])\]\s+(.+?)\s*$")
_WS = re.compile(r"\s+")
_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file", "filepath", "target_file")
_TODO_TOOLS = frozenset({"todowrite", "todo_write", "update_plan", "todo", "todos", "write_todos"})
_DELEGATION_TOOLS = frozenset({"task", "agent", "subagent", "delegate", "spawn_agent", "explore"})
_DONE_STATES = frozenset({"completed", "complete", "done", "cancelled", "canceled", "closed"})


def _prose_lines(text: str, *, strict: bool) -> Iterator[str]:
    """Lines of prose: fenced code, line-numbered file listings, code and diagnostics skipped.

    ``strict`` (tool output) also keeps only top-level lines and list items, so indented
    compiler explanations and code do not pass as prose.
    """
    fenced = False
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or not stripped or _LINE_NUMBERED.match(raw) or stripped.startswith(("|", ">>>")):
            continue
        if strict:
            indent = len(raw) - len(raw.lstrip())
            if indent > 4 or (indent > 0 and not _BULLET.match(stripped)):
                continue
            if _CODE_LINE.search(stripped) or _DIAGNOSTIC.match(stripped) or _GREP_PREFIX.match(stripped):
                continue
        yield stripped


def constraint_sentences(text: str, *, typed_by_user: bool) -> list[str]:
    """Directive sentences of a text ("must", "never", "don't", "always", "keep", "avoid", ...).

    Text the user typed accepts every marker; tool output (task specs, issue bodies) only the
    strong, imperative ones, and only on prose lines. Sentences keep their wording verbatim,
    without a leading list bullet.
    """
    found: list[str] = []
    for line in _prose_lines(text, strict=not typed_by_user):
        body = _BULLET.sub("", line, count=1)
        for sentence in _SENTENCE_END.split(body):
            candidate = sentence.strip()
            words = len(candidate.split())
            if not 3 <= words <= 80:
                continue
            if _STRONG_MARKERS.search(candidate) or (typed_by_user and _WEAK_MARKERS.search(candidate)):
                found.append(candidate)
    return found


def _paths_in(text: str, *, files_only: bool) -> list[str]:
    paths: list[str] = []
    for match in _PATH.finditer(text):
        path = match.group(0).rstrip(".,:;)")
        if "//" in path or path.count("/") == 0 or len(path) < 4:
            continue
        if files_only and not _FILE_EXTENSION.search(path):
            continue
        paths.append(path)
    return paths


def _is_file(path: str) -> bool:
    """A path that names a file (an extension or a dot file), not a bare directory."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return bool(_FILE_EXTENSION.search(name)) or (name.startswith(".") and len(name) > 1)




def _tracker_updates(command: str) -> Iterator[tuple[str, bool]]:
    """``(id, open?)`` for issue-tracker commands: ``X update ID --status in_progress``, ``X close ID``."""
    for segment in re.split(r"&&|\|\||;|\|", command):
        tokens = segment.split()
        if len(tokens) < 3:
            continue
        verb = tokens[1].lower()
        rest = [t.strip("'\"") for t in tokens[2:]]
        closing = verb in ("close", "done", "complete") or (
            verb == "update" and any(t.split("=")[-1] in ("closed", "done") for t in rest)
        )
        if verb == "update" and any("in_progress" in t or "in-progress" in t for t in rest):
            opened = True
        elif closing:
            opened = False
        else:
            continue
        for token in rest:
            if token.startswith("-") or token.startswith("2>"):
                break
            if _TRACKER_ID.match(token):
                yield token, opened


def _todo_items(call: ToolCall) -> list[tuple[str, str]] | None:
    """``(content, status)`` pairs of a todo-list tool call, or None when it is not one."""
    if call.name.lower() not in _TODO_TOOLS:
        return None
    items = call.args.get("todos", call.args.get("plan", call.args.get("items")))
    if not isinstance(items, (list, tuple)):
        return None
    result: list[tuple[str, str]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        content = item.get("content", item.get("step", item.get("title", item.get("text"))))
        status = item.get("status", item.get("state", "pending"))
        if isinstance(content, str) and content.strip():
            result.append((content.strip(), str(status).lower()))
    return result


def _checklist(text: str) -> list[tuple[str, bool]] | None:
    items = [(m.group(2), m.group(1) in " ~-") for m in map(_CHECKBOX.match, text.splitlines()) if m]
    return items or None


def result_lines(text: str, *, is_error: bool) -> tuple[list[str], list[str]]:
    """``(error lines, outcome lines)`` of one tool result's text, whitespace collapsed.

    Error lines are diagnostics (``error:``, ``** (RuntimeError)``, ``FooError:``, "No such
    file", ...), at most three per result, or the first line of a result flagged ``isError``.
    Outcome lines report counts and exit codes ("43 tests, 0 failures", "Exit code 1").
    """
    errors: list[str] = []
    outcomes: list[str] = []
    first_line: str | None = None
    for raw in text.splitlines():
        line = _WS.sub(" ", raw).strip()
        if not line or len(line) > 240 or _LINE_NUMBERED.match(raw) or _GREP_PREFIX.match(line):
            continue
        if first_line is None:
            first_line = line
        if _OUTCOME_LINE.search(line):
            outcomes.append(line)
            if len(errors) < 3 and _FAILED_EXIT.search(line):
                errors.append(line)  # "failed in sandbox ... exit code: 2": an outcome and an error
        elif len(errors) < 3 and _ERROR_LINE.search(line) and not _NOT_AN_ERROR.search(line) \
                and not _BULLET.match(line):
            errors.append(line)
    if is_error and not errors and first_line is not None:
        errors.append(first_line)
    return errors, outcomes


@dataclass(frozen=True, slots=True)
class ShadowedFacts:
    """The facts of a shadowed range that a summary should keep, each in first-seen order."""

    requests: tuple[str, ...] = ()
    """The user's requests, verbatim."""
    constraints: tuple[str, ...] = ()
    """Directive sentences from the user's requests and the task specs tool output showed."""
    open_todos: tuple[str, ...] = ()
    """Unfinished items of the latest todo list, checklist or issue tracker state."""
    done_todos: tuple[str, ...] = ()
    """Finished items of the latest todo list (what was already done)."""
    pending_request: str | None = None
    """The latest substantive user request (three words or more), which the work continues."""
    paths: tuple[str, ...] = ()
    """Files the tool calls touched or the user named."""
    path_actions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(path, tool names)`` for each touched path."""
    commands: tuple[str, ...] = ()
    """Shell commands run, verbatim."""
    errors: tuple[str, ...] = ()
    """Distinct error lines from tool results."""
    outcomes: tuple[str, ...] = ()
    """Distinct outcome lines (test counts, exit codes) from tool results."""
    prior_summary: str | None = None
    """The text of an earlier checkpoint inside the range, if any."""
    project_root: str | None = None
    """The directory most touched absolute paths lie under (for project-relative matching)."""


def dedupe(items: Iterable[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = normalize(item)
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return tuple(out)


def _project_root(paths: Sequence[str]) -> str | None:
    """The directory the session works in, guessed from the absolute paths it touched.

    Among directories of depth ≥ 2 that hold at least half of the absolute paths, the deepest
    one that still holds 85% as many as the best-covered one (so ``<root>/lib`` does not win
    over ``<root>`` just because most files live in ``lib``).
    """
    absolute = [p for p in paths if p.startswith("/")]
    if len(absolute) < 2:
        return None
    counts: dict[str, int] = {}
    for path in absolute:
        parts = path.split("/")[1:-1]
        for depth in range(2, len(parts) + 1):
            prefix = "/" + "/".join(parts[:depth])
            counts[prefix] = counts.get(prefix, 0) + 1
    if not counts:
        return None
    top = max(counts.values())
    if top * 2 < len(absolute):
        return None
    best: str | None = None
    for prefix, count in counts.items():
        if count >= 0.85 * top and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


class _FactCollector:
    """One pass over the messages, collecting every category (see ``extract_facts``)."""

    def __init__(self, noise: Noise | None = None) -> None:
        self.noise = noise
        self.requests: list[str] = []
        self.constraints: list[str] = []
        self.paths: list[str] = []
        self.actions: dict[str, list[str]] = {}
        self.commands: list[str] = []
        self.errors: list[str] = []
        self.outcomes: list[str] = []
        self.todos: list[tuple[str, str]] | None = None
        self.checklist: list[tuple[str, bool]] | None = None
        self.tracker: dict[str, bool] = {}
        self.call_names: dict[str, str] = {}

    def request(self, message: Any) -> None:
        text = typed_request("\n".join(message_texts(message)).strip())
        self.requests.append(text)
        self.constraints.extend(constraint_sentences(text, typed_by_user=True))
        self.paths.extend(_paths_in(text, files_only=False))
        self._checklist(text)

    def assistant(self, message: Any) -> None:
        for call in tool_calls(message):
            self.call_names[call.id] = call.name
            self._call(call)
        for text in message_texts(message):
            self._checklist(text)

    def _call(self, call: ToolCall) -> None:
        for key in _PATH_KEYS:
            value = call.args.get(key)
            if isinstance(value, str) and "/" in value and "\n" not in value and _is_file(value):
                self._touch(value, call.name)
        command = command_text(call.args)
        if command is not None:
            self.commands.append(command)
            for path in _paths_in(command, files_only=True):
                self._touch(path, call.name)
            for issue, opened in _tracker_updates(command):
                self.tracker.pop(issue, None)
                self.tracker[issue] = opened
        todos = _todo_items(call)
        if todos is not None:
            self.todos = todos

    def _touch(self, path: str, tool: str) -> None:
        self.paths.append(path)
        actions = self.actions.setdefault(path, [])
        if tool not in actions:
            actions.append(tool)

    def _checklist(self, text: str) -> None:
        items = _checklist(text)
        if items is not None:
            self.checklist = items

    def tool_result(self, message: Any) -> None:
        call_id = tool_result_call_id(message)
        delegated = self.call_names.get(call_id or "", "").lower() in _DELEGATION_TOOLS
        is_error = tool_result_is_error(message)
        for raw in message_texts(message):
            text = self.noise.strip(raw) if self.noise else raw
            if not is_error and not delegated:
                prose = _REMINDER.sub("", text)  # the harness's reminders are not the task's spec
                self.constraints.extend(constraint_sentences(prose, typed_by_user=False))
            self._errors_and_outcomes(text, is_error)

    def _errors_and_outcomes(self, text: str, is_error: bool) -> None:
        errors, outcomes = result_lines(text, is_error=is_error)
        self.errors.extend(errors)
        self.outcomes.extend(outcomes)

    def open_todos(self) -> tuple[str, ...]:
        items: list[str] = []
        if self.todos is not None:
            items.extend(content for content, status in self.todos if status not in _DONE_STATES)
        if self.checklist is not None:
            items.extend(text for text, unchecked in self.checklist if unchecked)
        items.extend(issue for issue, opened in self.tracker.items() if opened)
        return dedupe(items)

    def done_todos(self) -> tuple[str, ...]:
        return dedupe(content for content, status in self.todos or () if status in _DONE_STATES)


def extract_facts(messages: Iterable[Any], *, project_root: str | None = None) -> ShadowedFacts:
    """Collect the facts of the shadowed messages that a faithful summary keeps (pure).

    ``project_root`` (the session's working directory) lets project-relative paths in a summary
    count as normalized matches; without it the root is guessed from the touched paths.
    """
    listed = list(messages)
    collector = _FactCollector(Noise(listed))
    prior = find_checkpoint_summary(listed)
    for message in listed:
        if not isinstance(message, dict):
            continue
        if is_user_request(message):
            collector.request(message)
        elif message.get("role") == "assistant":
            collector.assistant(message)
        elif is_tool_result(message):
            collector.tool_result(message)
    if prior is not None:
        collector.constraints[:0] = constraint_sentences(prior, typed_by_user=True)
    substantive = [r for r in collector.requests if len(r.split()) >= 3]
    paths = dedupe(collector.paths)
    return ShadowedFacts(
        requests=tuple(collector.requests),
        constraints=dedupe(collector.constraints),
        open_todos=collector.open_todos(),
        done_todos=collector.done_todos(),
        pending_request=substantive[-1] if substantive else None,
        paths=paths,
        path_actions=tuple((p, tuple(a)) for p, a in collector.actions.items()),
        commands=dedupe(collector.commands),
        errors=dedupe(collector.errors),
        outcomes=dedupe(collector.outcomes),
        prior_summary=prior,
        project_root=project_root.rstrip("/") if project_root else _project_root(paths),
    )
