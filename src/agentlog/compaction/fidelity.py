"""Compaction fidelity: which facts of a shadowed range survive in its summary (seed 000, spec §9).

The seed asks evaluations to check that key **constraints**, **unfinished tasks**, **file paths**
and **tool results** can still be recovered after compaction. ``extract_facts`` finds those facts
in the shadowed messages; ``compaction_fidelity`` looks each one up in the summary text and scores
every category. Both are pure functions over messages and text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson

from agentlog.messages import derive_event_message

if TYPE_CHECKING:
    from agentlog.session import Session

__all__ = [
    "CATEGORIES",
    "CategoryScore",
    "FidelityItem",
    "FidelityReport",
    "ShadowedFacts",
    "ToolCall",
    "command_text",
    "compaction_fidelity",
    "constraint_sentences",
    "extract_facts",
    "fidelity_of_facts",
    "find_checkpoint_summary",
    "is_checkpoint",
    "is_tool_result",
    "is_user_request",
    "match_text",
    "message_texts",
    "normalize",
    "result_lines",
    "tool_calls",
    "tool_result_call_id",
    "tool_result_is_error",
]

CATEGORIES: tuple[str, ...] = ("constraints", "tasks", "paths", "tool_results")
"""The four fact categories of the seed's evaluation guidance, in report order."""

MatchKind = Literal["exact", "normalized", "partial"]

CHECKPOINT_OPEN = "<compacted-summary>"
CHECKPOINT_CLOSE = "</compacted-summary>"

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
    r"[Cc]ould not|[Cc]annot|undefined (?:function|variable|method))\b"
)
_NOT_AN_ERROR = re.compile(r"\b0 (?:failures?|errors?|failed)\b|\bno errors?\b", re.IGNORECASE)
_OUTCOME_LINE = re.compile(
    r"(?<![\w.])\d+ (?:tests?|examples?|doctests?|properties|passed|failed|failures?|errors?|skipped)"
    r"(?![\w/.-])|\bexit (?:code|status)\s*:?\s*\d+|\bexited with\b",
    re.IGNORECASE,
)
_PATH = re.compile(
    r"(?<![\w@:/.-])(?:~?/(?:[\w.@+-]+/)*[\w.@+-]+|(?:\.{1,2}/)?(?:[\w.@+-]+/)+[\w@+-]+\.[A-Za-z0-9]{1,8})"
    r"(?![\w/-])"
)
_FILE_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}$")
_TRACKER_ID = re.compile(r"^[A-Za-z][\w]*-[\w]+(?:\.\d+)*$")
_CHECKBOX = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[([ xX~-])\]\s+(.+?)\s*$")
_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/@#-]*[A-Za-z0-9_]|[A-Za-z0-9]")
_WS = re.compile(r"\s+")
_MARKUP = re.compile("[`*\"'\u201c\u201d\u2018\u2019]|(?<!\\w)_|_(?!\\w)")

_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file", "filepath", "target_file")
_COMMAND_KEYS = ("command", "cmd", "script")
_TODO_TOOLS = frozenset({"todowrite", "todo_write", "update_plan", "todo", "todos", "write_todos"})
_DELEGATION_TOOLS = frozenset({"task", "agent", "subagent", "delegate", "spawn_agent", "explore"})
_DONE_STATES = frozenset({"completed", "complete", "done", "cancelled", "canceled", "closed"})
_NOTICE_PREFIXES = ("<task-notification>", "<command-", "<local-command", "<system-reminder>",
                    "[Request interrupted", "Caveat:")
_STOPWORDS = frozenset({
    "the", "and", "for", "with", "that", "this", "from", "into", "onto", "must", "never", "not",
    "don't", "do", "does", "always", "keep", "avoid", "only", "without", "instead", "should",
    "shouldn't", "ensure", "make", "sure", "when", "then", "than", "are", "was", "were", "will",
    "can", "all", "any", "each", "via", "use", "uses", "used", "using", "its", "it's", "has",
    "have", "had", "been", "being", "also", "just", "per", "but", "out", "new", "one", "two",
    "there", "their", "them", "they", "you", "your", "our", "what", "which", "who", "how", "why",
    "where", "while", "still", "both", "either", "after", "before", "once", "same", "other", "more",
    "most", "such", "very", "may", "might", "would", "could", "let", "lets", "yes", "no", "none",
})
_PARTIAL_COVERAGE = 0.75
_PARTIAL_MIN_TOKENS = 3


# -- reading messages ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an assistant message, with its parsed arguments (``{}`` when not JSON)."""

    id: str
    name: str
    arguments: str
    args: dict[str, Any]


def _blocks(message: Any) -> Sequence[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return ({"type": "text", "text": content},)
    return content if isinstance(content, (list, tuple)) else ()


def message_texts(message: Any) -> list[str]:
    """The text of a message's text blocks, including text nested in a tool-result block."""
    texts: list[str] = []
    for block in _blocks(message):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool-result":
            inner = block.get("content")
            if isinstance(inner, str):
                texts.append(inner)
            elif isinstance(inner, (list, tuple)):
                texts.extend(
                    b["text"] for b in inner
                    if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
                )
    return texts


def _source_kind(message: Any) -> str | None:
    source = message.get("source") if isinstance(message, dict) else None
    kind = source.get("kind") if isinstance(source, dict) else None
    return kind if isinstance(kind, str) else None


def is_tool_result(message: Any) -> bool:
    return _source_kind(message) == "tool" or any(
        isinstance(b, dict) and b.get("type") == "tool-result" for b in _blocks(message)
    )


def is_checkpoint(message: Any) -> bool:
    source = message.get("source") if isinstance(message, dict) else None
    if isinstance(source, dict) and source.get("kind") == "plugin" and source.get("plugin") == "compact":
        return True
    return any(CHECKPOINT_OPEN in text for text in message_texts(message))


def is_user_request(message: Any) -> bool:
    """A message the user typed: role user, not a tool result, notice, plugin text or checkpoint."""
    if not isinstance(message, dict) or message.get("role") != "user" or is_tool_result(message):
        return False
    kind = _source_kind(message)
    if kind not in (None, "user") or is_checkpoint(message):
        return False
    text = "\n".join(message_texts(message)).lstrip()
    return bool(text) and not text.startswith(_NOTICE_PREFIXES)


def tool_calls(message: Any) -> list[ToolCall]:
    """The tool calls of an assistant message, arguments parsed when they are a JSON object."""
    calls: list[ToolCall] = []
    for block in _blocks(message):
        if not isinstance(block, dict) or block.get("type") != "tool-call":
            continue
        raw = block.get("arguments")
        if isinstance(raw, str):
            arguments = raw
            try:
                parsed = orjson.loads(raw) if raw else {}
            except orjson.JSONDecodeError:
                parsed = {}
        else:
            parsed = raw if raw is not None else {}
            arguments = orjson.dumps(parsed).decode() if raw is not None else ""
        calls.append(ToolCall(
            id=str(block.get("id", "")),
            name=str(block.get("name", "")),
            arguments=arguments,
            args=dict(parsed) if isinstance(parsed, dict) else {},
        ))
    return calls


def tool_result_call_id(message: Any) -> str | None:
    source = message.get("source") if isinstance(message, dict) else None
    if isinstance(source, dict) and isinstance(source.get("callId"), str):
        return str(source["callId"])
    for block in _blocks(message):
        if isinstance(block, dict) and block.get("type") == "tool-result":
            call_id = block.get("toolCallId")
            return call_id if isinstance(call_id, str) else None
    return None


def tool_result_is_error(message: Any) -> bool:
    return any(
        isinstance(b, dict) and b.get("type") == "tool-result" and b.get("isError") is True
        for b in _blocks(message)
    )


def find_checkpoint_summary(messages: Iterable[Any]) -> str | None:
    """The text inside the last ``<compacted-summary>`` block of the messages (a prior checkpoint)."""
    found: str | None = None
    for message in messages:
        if not isinstance(message, dict) or not is_checkpoint(message):
            continue
        text = "\n".join(message_texts(message))
        start = text.find(CHECKPOINT_OPEN)
        if start < 0:
            continue
        end = text.find(CHECKPOINT_CLOSE, start)
        found = text[start + len(CHECKPOINT_OPEN): end if end >= 0 else len(text)].strip()
    return found


# -- finding facts -------------------------------------------------------------------------------


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
            if _CODE_LINE.search(stripped) or _DIAGNOSTIC.match(stripped):
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


def command_text(args: dict[str, Any]) -> str | None:
    for key in _COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
            parts = list(value)
            if len(parts) >= 3 and parts[0] in ("bash", "sh", "zsh") and parts[1] in ("-lc", "-c"):
                return " ".join(parts[2:])
            return " ".join(parts)
    return None


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


def _dedupe(items: Iterable[str]) -> tuple[str, ...]:
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

    def __init__(self) -> None:
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
        text = "\n".join(message_texts(message)).strip()
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
        for text in message_texts(message):
            if not is_error and not delegated:
                self.constraints.extend(constraint_sentences(text, typed_by_user=False))
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
        return _dedupe(items)


def extract_facts(messages: Iterable[Any], *, project_root: str | None = None) -> ShadowedFacts:
    """Collect the facts of the shadowed messages that a faithful summary keeps (pure).

    ``project_root`` (the session's working directory) lets project-relative paths in a summary
    count as normalized matches; without it the root is guessed from the touched paths.
    """
    listed = list(messages)
    collector = _FactCollector()
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
    paths = _dedupe(collector.paths)
    return ShadowedFacts(
        requests=tuple(collector.requests),
        constraints=_dedupe(collector.constraints),
        open_todos=collector.open_todos(),
        pending_request=substantive[-1] if substantive else None,
        paths=paths,
        path_actions=tuple((p, tuple(a)) for p, a in collector.actions.items()),
        commands=_dedupe(collector.commands),
        errors=_dedupe(collector.errors),
        outcomes=_dedupe(collector.outcomes),
        prior_summary=prior,
        project_root=project_root.rstrip("/") if project_root else _project_root(paths),
    )


# -- matching ------------------------------------------------------------------------------------


def normalize(text: str) -> str:
    """Case-folded text with markdown emphasis and quotes removed and whitespace collapsed."""
    return _WS.sub(" ", _MARKUP.sub("", text.casefold())).strip().rstrip(".;:,")


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.casefold()) if len(t) >= 3 and t not in _STOPWORDS]


class _Summary:
    """A summary prepared for lookups: raw text, normalized text and token windows of 3 lines."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.normalized = normalize(text)
        lines = [line for line in text.splitlines() if line.strip()]
        line_tokens = [set(_tokens(line)) for line in lines]
        self.windows = [
            set().union(*line_tokens[i: i + 3]) for i in range(max(1, len(line_tokens) - 2))
        ] if line_tokens else []


def _partial(item: str, summary: _Summary) -> bool:
    wanted = set(_tokens(item))
    if len(wanted) < _PARTIAL_MIN_TOKENS:
        return False
    need = math.ceil(len(wanted) * _PARTIAL_COVERAGE)
    return any(len(wanted & window) >= need for window in summary.windows)


def _boundary_find(haystack: str, needle: str, *, after_slash: bool = True) -> bool:
    """Whether ``needle`` occurs where a path component starts (and, unless ``after_slash``, a path)."""
    barred = "_-." if after_slash else "_-./"
    start = haystack.find(needle)
    while start >= 0:
        if start == 0 or not (haystack[start - 1].isalnum() or haystack[start - 1] in barred):
            return True
        start = haystack.find(needle, start + 1)
    return False


def _match_path(path: str, summary: _Summary, root: str | None) -> MatchKind | None:
    if _boundary_find(summary.text, path, after_slash=False):
        return "exact"
    if root is not None and path.startswith(root + "/"):
        relative = path[len(root) + 1:]
        if _boundary_find(summary.text, relative, after_slash=False):
            return "normalized"
    parts = [p for p in path.split("/") if p not in ("", ".", "..", "~")]
    for keep in range(len(parts) - 1, 1, -1):
        if _boundary_find(summary.text, "/".join(parts[-keep:])):
            return "partial"
    return None


def match_text(item: str, summary: str) -> MatchKind | None:
    """How ``item`` appears in ``summary``: verbatim, after normalization, by its key words, or not."""
    return _match(item, _Summary(summary))


def _match(item: str, summary: _Summary) -> MatchKind | None:
    if item in summary.text:
        return "exact"
    key = normalize(item)
    if key and key in summary.normalized:
        return "normalized"
    return "partial" if _partial(item, summary) else None


# -- the report ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FidelityItem:
    """One fact of the shadowed range and how the summary kept it (None: not found)."""

    category: str
    text: str
    match: MatchKind | None


@dataclass(frozen=True, slots=True)
class CategoryScore:
    """Counts and scores of one category; scores are None when the range had no such fact."""

    category: str
    total: int
    exact: int
    normalized: int
    partial: int

    @property
    def strict_score(self) -> float | None:
        """Share of facts found verbatim or after whitespace/case/markup normalization."""
        return (self.exact + self.normalized) / self.total if self.total else None

    @property
    def score(self) -> float | None:
        """Share of facts found at all (including partial: ≥75% of their key words nearby)."""
        return (self.exact + self.normalized + self.partial) / self.total if self.total else None


@dataclass(frozen=True, slots=True)
class FidelityReport:
    """Which facts of a shadowed range survive in a summary, per category and overall."""

    items: tuple[FidelityItem, ...]
    categories: tuple[CategoryScore, ...]

    def category(self, name: str) -> CategoryScore:
        """The score of one category (``constraints``, ``tasks``, ``paths``, ``tool_results``)."""
        for score in self.categories:
            if score.category == name:
                return score
        raise KeyError(name)

    def missing(self, category: str | None = None) -> list[str]:
        """Facts the summary lost, optionally of one category."""
        return [i.text for i in self.items if i.match is None and category in (None, i.category)]

    @property
    def score(self) -> float | None:
        """Mean of the category scores (categories without facts are left out)."""
        values = [s.score for s in self.categories if s.score is not None]
        return sum(values) / len(values) if values else None

    @property
    def strict_score(self) -> float | None:
        """Mean of the strict category scores."""
        values = [s.strict_score for s in self.categories if s.strict_score is not None]
        return sum(values) / len(values) if values else None


def fidelity_of_facts(facts: ShadowedFacts, summary_text: str) -> FidelityReport:
    """Look every fact up in the summary and score the four categories."""
    summary = _Summary(summary_text)
    items: list[FidelityItem] = []
    items.extend(FidelityItem("constraints", c, _match(c, summary)) for c in facts.constraints)
    tasks = list(facts.open_todos)
    if facts.pending_request is not None:
        tasks.append(facts.pending_request)
    items.extend(FidelityItem("tasks", t, _match(t, summary)) for t in _dedupe(tasks))
    items.extend(
        FidelityItem("paths", p, _match_path(p, summary, facts.project_root)) for p in facts.paths
    )
    results = _dedupe([*facts.errors, *facts.outcomes])
    items.extend(FidelityItem("tool_results", r, _match(r, summary)) for r in results)
    scores = []
    for category in CATEGORIES:
        matches = [i.match for i in items if i.category == category]
        scores.append(CategoryScore(
            category=category,
            total=len(matches),
            exact=matches.count("exact"),
            normalized=matches.count("normalized"),
            partial=matches.count("partial"),
        ))
    return FidelityReport(items=tuple(items), categories=tuple(scores))


def compaction_fidelity(shadowed: Any, summary: Any, *, project_root: str | None = None) -> FidelityReport:
    """Score a summary against its shadowed range.

    ``compaction_fidelity(messages, summary_text)`` is the pure core. The convenience form
    ``compaction_fidelity(session, result)`` takes a Session and a compaction result (anything
    with ``shadowed_seqs`` and ``summary``, or the ``compaction/summary`` event data); the
    session header's ``cwd`` then serves as the project root.
    """
    if isinstance(summary, str):
        return fidelity_of_facts(extract_facts(shadowed, project_root=project_root), summary)
    session: Session = shadowed
    seqs = _field(summary, "shadowed_seqs", "shadowedSeqs")
    blocks = _field(summary, "summary", "summary")
    if isinstance(blocks, str):
        text = blocks
    else:
        text = "\n".join(
            b["text"] for b in blocks or () if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    messages = [m for m in (derive_event_message(session.events[s]) for s in seqs or ()) if m is not None]
    if project_root is None:
        cwd = getattr(session.header, "cwd", None)
        project_root = cwd if isinstance(cwd, str) and cwd.startswith("/") else None
    return fidelity_of_facts(extract_facts(messages, project_root=project_root), text)


def _field(value: Any, attribute: str, key: str) -> Any:
    """``value[key]`` for event data, else ``value.attribute``, else ``value.data[key]`` (an Event)."""
    for candidate in (value, getattr(value, "data", None)):
        if isinstance(candidate, dict):
            found = candidate.get(key, candidate.get(attribute))
        else:
            found = getattr(candidate, attribute, None)
        if found is not None:
            return found
    return None
