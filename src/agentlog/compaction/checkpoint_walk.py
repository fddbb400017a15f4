"""One pass over the shadowed messages collecting what the checkpoint needs beyond quoted facts.

Tool calls and their results are read in order: tracker commands and listings (``Tracker``),
``git commit`` results, test runs with their command, what each edit introduced, and each error
paired with what fixed it (the assistant's next remark, the next edit, the next passing run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agentlog.compaction.checkpoint_facts import (
    Commit,
    Issue,
    Tracker,
    added_lines,
    change_notes,
    commits,
    file_purpose,
    removed_notes,
)
from agentlog.compaction.checkpoint_shell import (
    branch_of,
    json_fields,
    patched_files,
    read_file_path,
    removed_files,
    resolve,
    search_hits,
)
from agentlog.compaction.fidelity import constraint_sentences, result_lines
from agentlog.compaction.noise import Noise, environment_fields
from agentlog.compaction.reading import (
    NOTICE_PREFIXES,
    command_text,
    is_tool_result,
    is_user_request,
    message_texts,
    slash_command,
    tool_calls,
    tool_result_call_id,
    tool_result_is_error,
)
from agentlog.core.repair import NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT

__all__ = ["ErrorFix", "TestRun", "Walk", "is_file_path", "outcome_history", "relative"]

_FIRST_SENTENCE = re.compile(r"^(.{20,240}?[.!?])(?:\s|$)", re.DOTALL)
_EXPLORING = re.compile(r"^\s*(?:ls|find|cat|head|tail|grep|rg|which|stat|file|wc|tree)\b")
_FAILED_COUNT = re.compile(r"\b[1-9]\d* (?:\w+ )?(?:failures?|failed|errors?)\b|^\W*\w+ failed\b",
                           re.IGNORECASE)
_TEST_COUNT = re.compile(r"\b\d+ (?:tests?|examples?|doctests?|passed|properties)\b", re.IGNORECASE)
_DECISION = re.compile(
    r"\b(?:instead of|rather than|decided|because|so that|the (?:issue|problem|cause) (?:is|was)|root cause|"
    r"needs? to use|I'll use|switch(?:ed)? to|false positive|doesn't support|does not support|can't|"
    r"cannot)\b",
    re.IGNORECASE,
)
_PATH_ARGS = ("file_path", "path", "notebook_path", "filename")
_PLAN_DOC = re.compile(
    r"(?:^|/)(?:\.impl/[^/]+|[^/]*(?:plan|spec|design|requirements|tasks?|todo)[^/]*)\.md$", re.IGNORECASE)
_LISTING_PREFIX = re.compile(r"^\s*\d+(?:→|\t)")
_TASK_CREATED = re.compile(r"Task #(\w+) created")
_ANALYSIS_CHARS = 400
_INTERRUPTED = {OUTCOME_UNKNOWN_TEXT: "outcome unknown (it may have run)", NOT_STARTED_TEXT: "it never ran"}
"""The synthetic results of crash repair (``core.repair``), by text: what each says of the call."""
_VERDICT = re.compile(r"\b(?:fail(?:s|ed|ing|ure)?|broken|regression|passes|passing)\b", re.IGNORECASE)
_COVERAGE = re.compile(r"^TOTAL\b.*\d%.*$", re.MULTILINE)
_ANSWERED = re.compile(r"^User has answered your questions?:\s*(.+?)(?:\.\s*You can now continue\b.*)?$",
                       re.DOTALL | re.IGNORECASE)
_APPROVED = ("User has approved your plan", "User approved")


def clip_line(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


_WRITE_TOOL = re.compile(r"edit|write|patch|replace|create|insert|apply", re.IGNORECASE)


@dataclass(slots=True)
class ErrorFix:
    """An error a tool reported, and what followed it until the next passing run."""

    error: str
    command: str | None
    remark: str | None = None
    edited: list[str] = field(default_factory=list)
    passed: str | None = None
    exploring: bool = False

    def describe(self, root: str | None = None) -> str:
        """``error`` (from ``cmd``) -> remark; edited paths; then the passing run."""
        text = f"`{self.error}`"
        if self.command:
            text += f" (from `{_short(self.command)}`)"
        fixes = []
        if self.remark:
            fixes.append(self.remark)
        if self.edited:
            fixes.append("edited " + ", ".join(f"`{relative(p, root)}`" for p in self.edited[:3]))
        if self.passed:
            fixes.append(f"then {self.passed}")
        return text + (" → fix: " + "; ".join(fixes) if fixes else " → not yet fixed")


@dataclass(frozen=True, slots=True)
class TestRun:
    """An outcome line (test counts) with the command that produced it."""

    command: str | None
    outcome: str
    failed: bool

    def describe(self) -> str:
        where = f"`{_short(self.command)}` → " if self.command else ""
        return f"{where}`{self.outcome}`"


_CHECK_VERDICT = re.compile(
    r"\bfound (?:no|\d+)\b[\w ,]{0,60}\b(?:issues?|errors?|warnings?|problems?)\b|\bno issues found\b"
    r"|^all checks passed\b|\b\d+ problems? \(", re.IGNORECASE)
_CLEAN_CHECK = re.compile(r"\b(?:found no|no issues|all checks passed)\b", re.IGNORECASE)


def _check_verdicts(text: str) -> list[str]:
    """A linter's or type checker's summary lines (``71 mods/funs, found no issues.``)."""
    lines = (re.sub(r"\s+", " ", raw).strip() for raw in text.splitlines())
    return [line for line in lines if len(line) <= 160 and _CHECK_VERDICT.search(line)][-2:]


_HISTORY_RUNS = 16
"""The test history keeps the outcomes of this many latest runs."""
_HISTORY_OUTCOME_CHARS = 100


def outcome_history(runs: list[TestRun]) -> str | None:
    """Every test outcome, oldest first, one bullet (a repeated outcome once): the failing runs
    before a fix and the suite's size after each task, which the latest run alone does not say."""
    outcomes: list[str] = []
    for run in runs:
        if run.command is None or len(run.outcome) > _HISTORY_OUTCOME_CHARS:
            continue  # a count quoted in prose or a report, not a run's summary line
        if not outcomes or outcomes[-1] != run.outcome:
            outcomes.append(run.outcome)
    if len(outcomes) < 2:
        return None
    shown = outcomes[-_HISTORY_RUNS:]
    more = f"{len(outcomes) - len(shown)} earlier, then " if len(outcomes) > len(shown) else ""
    return "Test runs, oldest first: " + more + " → ".join(f"`{o}`" for o in shown)


def _coverage(text: str) -> list[str]:
    """A coverage report's total line (``TOTAL 346 1 99.71% ...``), whitespace collapsed."""
    return [re.sub(r"\s+", " ", m.group(0)).strip() for m in _COVERAGE.finditer(text)][-1:]


def relative(path: str, root: str | None) -> str:
    """``path`` relative to the project root when it lies under it."""
    return path[len(root) + 1:] if root and path.startswith(root + "/") else path


def is_file_path(path: str) -> bool:
    """A path that names a file (an extension or a dot file), not a bare directory."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return bool(re.search(r"\.[A-Za-z0-9]{1,8}$", name)) or (name.startswith(".") and len(name) > 1)


def _completed(error: str, text: str) -> str:
    """An error line that ends at a colon (``... exit code: 1, stdout: , stderr:``) with the line
    that follows it, which says what went wrong (``zsh:1: no matches found: src/app/(x)/page.tsx``)."""
    if not error.endswith(":"):
        return error
    lines = [re.sub(r"\s+", " ", line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    index = next((i for i, line in enumerate(lines) if line == error), None)
    if index is None or index + 1 >= len(lines):
        return error
    return f"{error} {_short(lines[index + 1], 200)}"


def _verb(command: str | None) -> tuple[str, ...]:
    """The first two words of a command (``git push``, ``mix test``): what a retry repeats."""
    return tuple(command.split()[:2]) if command else ()


def _short(command: str, limit: int = 160) -> str:
    first, _newline, more = command.strip().partition("\n")
    first = first if len(first) <= limit else first[: limit - 1] + "…"
    return first + (" …" if more else "")


@dataclass(slots=True)
class _Call:
    name: str
    command: str | None
    args: dict[str, Any]
    read: str | None = None
    """The file a read-only call prints (a ``Read`` tool, ``sed -n``/``cat`` in a shell)."""


class Walk:
    """Reads the messages once; its fields are what the summarizer places in the sections."""

    def __init__(self) -> None:
        self.tracker = Tracker()
        self.commits: list[Commit] = []
        self.test_runs: list[TestRun] = []
        self.fixes: list[ErrorFix] = []
        self.file_notes: dict[str, list[str]] = {}
        self.file_tools: dict[str, list[str]] = {}
        self.decisions: list[str] = []
        self.last_text: str | None = None
        self.recent_calls: list[str] = []
        self.modules: dict[str, None] = {}
        self.tasks: dict[str, Issue] = {}
        """The agent's own task list (``TaskCreate``/``TaskUpdate``), by task id."""
        self.commands: list[str] = []
        """Commands the user ran (``/erk:plan-implement 8107``)."""
        self.instructions: list[str] = []
        """Directive sentences of command and skill bodies the harness expanded for the user."""
        self.documents: dict[str, list[str]] = {}
        """Headings and bullets of the plan or spec documents the agent read, by path."""
        self.delegated: list[str] = []
        """What delegated agents (``Task``) reported: their task, then the first lines of the report."""
        self.analyses: list[str] = []
        """The assistant's longer notes (findings, designs), oldest first."""
        self.file_defines: dict[str, list[str]] = {}
        """What the files the agent read define (functions, types, classes), by path."""
        self.file_purposes: dict[str, str] = {}
        """What the files the agent read say they are for (their first comment block), by path."""
        self.branch: str | None = None
        """The git branch the latest ``git status`` or branch creation named."""
        self.searches: list[tuple[str, list[str]]] = []
        self.checks: list[TestRun] = []
        """Linter and type-checker verdicts ("found no issues", "Found 3 errors"), with their command."""
        """Search commands and the files they found."""
        self.ran: dict[str, None] = {}
        """Commands that were neither searches, reads nor patches (``cargo init --lib``), in order."""
        self.reported: list[str] = []
        """What commands printed as JSON (``erk exec setup-impl`` reported: plan_number=8156)."""
        self.workdirs: dict[str, int] = {}
        """How often each working directory was given to a call (the most frequent is the project's)."""
        self.environment: dict[str, str] = {}
        """The latest ``<environment_context>`` fields a harness gave (cwd, sandbox_mode, ...)."""
        self.answers: list[str] = []
        """The user's answers to the agent's questions (``AskUserQuestion``): the user's own words."""
        self.approvals: list[str] = []
        """Plans the user approved (``ExitPlanMode``), their first line."""
        self.file_removed: dict[str, list[str]] = {}
        """What the edits removed (names their deleted lines defined, imports), by path."""
        self.noise = Noise(())
        self._calls: dict[str, _Call] = {}
        self._open: list[ErrorFix] = []

    def run(self, messages: list[Any]) -> None:
        self.noise = Noise(messages)
        for message in messages:
            if not isinstance(message, dict):
                continue
            if message.get("role") == "assistant":
                self._assistant(message)
            elif is_tool_result(message):
                if not self._interrupted(message):
                    self._result(message)
            elif is_user_request(message):
                self._open = []  # the user spoke: earlier errors are no longer waiting for a fix
            else:
                self._notice(message)

    def _notice(self, message: Any) -> None:
        """A user-role message the harness wrote: a command the user ran, or its expanded body."""
        command = slash_command(message)
        if command is not None:
            self.commands.append(command)
            return
        text = "\n".join(message_texts(message)).strip()
        if text.startswith("<environment_context>"):
            self.environment.update(environment_fields(text))
        elif text.startswith("#") and not text.startswith(NOTICE_PREFIXES):
            self.instructions.extend(constraint_sentences(text, typed_by_user=False))

    def _assistant(self, message: Any) -> None:
        joined = "\n".join(t for t in message_texts(message) if t.strip()).strip()
        if joined:
            self.last_text = joined
            if len(joined) >= _ANALYSIS_CHARS:
                self.analyses.append(joined)
            first = _FIRST_SENTENCE.match(joined)
            for fix in self._open:
                if fix.remark is None and first is not None:
                    fix.remark = first.group(1).replace("\n", " ")
            for sentence in re.split(r"(?<=[.!?])\s+", joined):
                if 30 <= len(sentence) <= 300 and _DECISION.search(sentence):
                    self.decisions.append(sentence.replace("\n", " "))
        for call in tool_calls(message):
            self._call(call.id, call.name, call.args)

    def _call(self, call_id: str, name: str, args: dict[str, Any]) -> None:
        command = command_text(args)
        workdir = args.get("workdir") if isinstance(args.get("workdir"), str) else None
        if workdir is not None:
            self.workdirs[workdir] = self.workdirs.get(workdir, 0) + 1
        call = self._calls[call_id] = _Call(name, command, args)
        reason = args.get("justification")
        if isinstance(reason, str) and 20 <= len(reason.strip()) <= 300:
            self.decisions.append(reason.strip())  # why the agent asked to run it (an escalation)
        if command is not None:
            self._shell(call, command, workdir)
        if name == "TaskUpdate" and isinstance(args.get("taskId"), (str, int)):
            task_id = str(args["taskId"])
            task = self.tasks.setdefault(task_id, Issue(task_id, order=len(self.tasks)))
            status = str(args.get("status", "")).lower()
            if status:
                task.state = "closed" if status in ("completed", "done", "deleted", "cancelled") else status
        if command is not None:
            self.tracker.command(command)
            self.recent_calls.append(f"{name}: {_short(command)}")
        path = next((v for k, v in args.items() if k in _PATH_ARGS and isinstance(v, str)), None)
        if path is None:
            if command is None:
                self.recent_calls.append(name)
            return
        if command is None:
            self.recent_calls.append(f"{name} {path}")
        self._touch(path, name)
        if _WRITE_TOOL.search(name):
            self._edit(path, args)
        elif name.lower() in ("read", "view", "open"):
            call.read = path

    def _shell(self, call: _Call, command: str, workdir: str | None) -> None:
        """A command's patches (edits), the file it prints (a read), or else a command it ran."""
        patches = patched_files(command)
        for patched in patches:
            target = resolve(patched.path, workdir)
            self._touch(target, f"patch {patched.action}")
            self._edit(target, {"content": patched.added})
        viewed = read_file_path(command)
        if viewed is not None:
            call.read = resolve(viewed, workdir)
            self._touch(call.read, "read")
        elif not patches and not _EXPLORING.match(command):
            self.ran.setdefault(_short(command), None)
        for removed in removed_files(command):
            target = resolve(removed, workdir)
            self._touch(target, "deleted")
            self.file_notes.setdefault(target, [])

    @property
    def workdir(self) -> str | None:
        """The working directory most calls gave (the project root of a Codex session)."""
        return max(self.workdirs, key=lambda w: self.workdirs[w]) if self.workdirs else None

    def _touch(self, path: str, tool: str) -> None:
        tools = self.file_tools.setdefault(path, [])
        if tool not in tools:
            tools.append(tool)

    def _delegation(self, call: _Call, text: str) -> None:
        if call.name.lower() not in ("task", "agent", "subagent", "delegate"):
            return
        description = call.args.get("description")
        lines = [line.strip() for line in text.splitlines()
                 if line.strip() and not line.lstrip().startswith(("<", "agentId:"))][:3]
        errors, outcomes = result_lines(text, is_error=False)
        verdicts = [line.strip() for line in text.splitlines() if _VERDICT.search(line)]
        lines += [line for line in dict.fromkeys(outcomes + errors + verdicts) if line not in lines][:6]
        if lines:
            label = f"{description}: " if isinstance(description, str) else ""
            self.delegated.append(label + " / ".join(_short(line, 200) for line in lines))

    def _user_reply(self, call: _Call | None, text: str) -> None:
        """The user's answer to a question tool, or their approval of a plan, given in a result."""
        head = text.strip()
        answered = _ANSWERED.match(head)
        if answered is not None:
            self.answers.append(answered.group(1).strip())
        elif head.startswith(_APPROVED) and call is not None:
            plan = call.args.get("plan")
            first = next((line.strip("# ").strip() for line in plan.splitlines() if line.strip()), "") \
                if isinstance(plan, str) else ""
            self.approvals.append(clip_line(first, 240) or call.name)

    def _task_created(self, call: _Call, text: str) -> None:
        created = _TASK_CREATED.search(text) if call.name == "TaskCreate" else None
        subject = call.args.get("subject")
        if created is not None and isinstance(subject, str):
            task = self.tasks.setdefault(created.group(1), Issue(created.group(1), order=len(self.tasks)))
            task.title = subject.strip()

    def _document(self, call: _Call, text: str) -> None:
        """Keep the headings and bullets of a plan or spec the agent read (``.impl/plan.md``, ...)."""
        path = next((v for k, v in call.args.items() if k in _PATH_ARGS and isinstance(v, str)), None)
        if path is None or not _PLAN_DOC.search(path) or "Edit" in call.name or "Write" in call.name:
            return
        lines: list[str] = []
        fenced = False
        for raw in text.splitlines():
            line = _LISTING_PREFIX.sub("", raw, count=1).rstrip()
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
                continue
            if not fenced and line.lstrip().startswith(("#", "-", "*", "|")) and len(line.strip()) > 3:
                lines.append(line.strip())
        self.documents[path] = lines

    def _edit(self, path: str, args: dict[str, Any]) -> None:
        notes = self.file_notes.setdefault(path, [])
        removed = self.file_removed.setdefault(path, [])
        removed.extend(note for note in removed_notes(args) if note not in removed)
        for note in change_notes(args) or added_lines(args):
            if note not in notes:
                notes.append(note)
            if (note[:1].isupper() and "." in note) or note.startswith("Hooks."):
                self.modules.setdefault(note, None)
        for fix in self._open:
            if path not in fix.edited:
                fix.edited.append(path)

    def _read(self, path: str, text: str) -> None:
        """What a file the agent read defines and says it is for."""
        listing = "\n".join(_LISTING_PREFIX.sub("", line, count=1) for line in text.splitlines())
        self.file_defines[path] = change_notes({"content": listing}, limit=6)
        purpose = file_purpose(listing)
        if purpose is not None:
            self.file_purposes[path] = purpose

    def _interrupted(self, message: Any) -> bool:
        """Crash repair's synthetic result: the interrupted call itself is the error to list."""
        text = "\n".join(message_texts(message))
        if text not in _INTERRUPTED or not tool_result_is_error(message):
            return False
        call = self._calls.get(tool_result_call_id(message) or "")
        name = call.name if call is not None else "a tool call"
        fix = ErrorFix(f"{name} interrupted by a crash: {_INTERRUPTED[text]}",
                       call.command if call is not None else None)
        self.fixes.append(fix)
        self._open.append(fix)
        return True

    def _result(self, message: Any) -> None:
        call = self._calls.get(tool_result_call_id(message) or "")
        command = call.command if call is not None else None
        text = self.noise.strip("\n".join(message_texts(message)))
        self._user_reply(call, text)
        if command is not None and re.search(r"\b(?:bd|beads)\s", command):
            self.tracker.output(text)
        failed = tool_result_is_error(message)
        if call is not None:
            self._task_created(call, text)
            self._document(call, text)
            self._delegation(call, text)
            self.branch = branch_of(command or "", text) or self.branch
        if command is not None:
            self.checks.extend(TestRun(command, v, not _CLEAN_CHECK.search(v)) for v in _check_verdicts(text))
            hits = search_hits(command, text)
            if hits:
                self.searches.append((_short(command), hits))
            fields = json_fields(text)
            if fields:
                self.reported.append(f"`{_short(command, 80)}` reported: " + ", ".join(fields))
        head = text.lstrip().split("\n", 1)[0]
        failed = failed or bool(head and result_lines(head, is_error=False)[0])  # "sed: x: No such file"
        if call is not None and call.read is not None and not failed:
            self._read(call.read, text)
            return  # a file's contents: its "error:" lines are code, not failures
        self.commits.extend(commits(text))
        errors, outcomes = result_lines(text, is_error=failed)
        errors = [_completed(error, text) for error in errors]
        for outcome in outcomes + _coverage(text):
            if _TEST_COUNT.search(outcome) or outcome.startswith("TOTAL"):
                run = TestRun(command, outcome, bool(_FAILED_COUNT.search(outcome)))
                self.test_runs.append(run)
                if not run.failed:
                    for fix in self._open:
                        fix.passed = fix.passed or run.describe()
                    self._open = []
        if not errors and not failed and command is not None:
            for fix in [f for f in self._open if _verb(f.command) == _verb(command)]:
                fix.passed = fix.passed or f"`{_short(command)}` succeeded"
                self._open.remove(fix)
        exploring = bool(command and _EXPLORING.match(command))
        for error in errors:
            fix = ErrorFix(error, command, exploring=exploring)
            self.fixes.append(fix)
            self._open.append(fix)
