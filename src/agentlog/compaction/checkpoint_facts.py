"""What a successor needs that plain quoting loses: commits, tracker state, test runs, change notes.

Pure parsers over tool-call arguments and tool-result text, used by the extractive summarizer:
``commits`` reads ``git commit`` output, ``Tracker`` follows an issue tracker's listings and
commands (beads ``bd``: ``show``/``ready``/``list``/``update``/``close``), ``change_notes`` names
what an edit introduced (modules, functions, classes, routes, events), ``spec_lines`` keeps the
requirement bullets of an issue body.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Commit", "Issue", "Tracker", "added_lines", "change_notes", "commits", "file_purpose", "issue_bodies",
    "is_prohibition", "removed_notes", "spec_lines",
]

_COMMIT = re.compile(r"^\[([\w./@+-]+)(?: \(root-commit\))? ([0-9a-f]{7,40})\] (.+?)\s*$", re.MULTILINE)
_ID = r"([A-Za-z][\w]*-[\w]+(?:\.\d+)*)"
_SHOW = re.compile(r"^([○◐●✓❄]) " + _ID + r"(?: \[\w+\])? · (.+?)\s+\[● P\d · ([A-Z_ ]+)\]\s*$")
_LIST = re.compile(r"^([○◐●✓❄]) " + _ID + r" \[● P\d\] \[\w+\] - (.+?)(?: \((?:blocked by|blocks):.*\))?\s*$")
_READY = re.compile(r"^\d+\. \[● P\d\] \[\w+\] " + _ID + r": (.+?)\s*$")
_RELATED = re.compile(r"^\s*[↳→←↑] ([○◐●✓❄]) " + _ID + r": (.+?)(?: ● P\d)?\s*$")
_CLOSED = re.compile(r"^✓ Closed " + _ID + r"\b")
_CLOSE_REASON = re.compile(
    r"\b(?:bd|beads) close\s+" + _ID + r"[^\n]*?--reason[= ](?:\"([^\"]*)\"|'([^']*)')")
_TITLED = re.compile(r"^\W{0,4}" + _ID + r"(?![\w.])\W{0,4}[·:\u2013-]\s*([^\n\[]{4,120}?)\s*(?:\[|$)")
_GLYPH_STATE = {"○": "open", "●": "open", "❄": "open", "◐": "in_progress", "✓": "closed"}
_SPEC_HEADING = re.compile(
    r"^#*\s*(architecture constraints|constraints|edge cases|technical specs?|definition of done|scope|"
    r"code structure|component usage|no-gos?|non-goals?|out of scope|guardrails)\s*:?\s*$", re.IGNORECASE)
_ANY_HEADING = re.compile(r"^(?:#+\s*\S.*|[A-Z][A-Za-z /-]{2,40}:|[A-Z][A-Z ]{3,40})\s*$")
_INTRODUCED = re.compile(
    r"^\s*(?:defmodule|defprotocol|defimpl)\s+([\w.]+)"
    r"|^\s*(?:def|defp|defmacro)\s+(?!handle_event\b)([a-z_][\w?!]*)"
    r"|^\s*(?:async\s+)?def\s+(?!handle_event\b)(\w+)|^\s*class\s+(\w+)"
    r"|^\s*(?:export\s+)?(?:async\s+)?function\s*\*?\s*(\w+)|^\s*(?:export\s+)?(?:const|let)\s+(\w+)\s*=\s*(?:\(|async|function)"
    r"|^\s*(Hooks\.\w+)\s*="
    r"|\b(?:live|get|post|put|patch|delete|scope|forward)\(?\s*\"(/[^\"]*)\""
    r"|handle_event\(\s*\"([\w:-]+)\""
    r"|^\s*(?:attribute|has_many|belongs_to|has_one|update|create|read|destroy)\s+:(\w+)"
    r"|^\s*(?:describe|test)\s+\"([^\"]{3,60})\""
    r"|^\s*(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?(?:fn|struct|enum|trait|mod)\s+(?!tests?\b|test_)(\w+)"
    r"|^\s{0,8}(\w+)\s*:\s*(?:async\s+)?(?:\([^()]*\)|\w+)\s*=>"
    r"|^\s*(?:export\s+)?(?:interface|type|enum)\s+(\w+)\b(?:<[^>]*>)?\s*[={]"
    r"|^func\s+(?:\([^)]*\)\s*)?(\w+)",
    re.MULTILINE,
)
_COMMENT = ("#", "//", "--", "*", "/*")
_SMALL_EDIT = 600
"""An edit this short that introduces no name is noted by the lines it adds (settings, recipes)."""


@dataclass(frozen=True, slots=True)
class Commit:
    """One ``git commit`` result line: ``[branch sha] message``."""

    branch: str
    sha: str
    message: str


def commits(text: str) -> list[Commit]:
    """The commits a tool result reports (``[main 1a2b3c4] feat: ...``)."""
    return [Commit(m.group(1), m.group(2), m.group(3)) for m in _COMMIT.finditer(text)]


@dataclass(slots=True)
class Issue:
    """One tracker issue as last seen: its title and state (``open``, ``in_progress``, ``closed``)."""

    id: str
    title: str = ""
    state: str = "open"
    order: int = 0
    body: str = ""
    reason: str = ""
    """Why it was closed (``bd close ID --reason "..."``)."""


@dataclass(slots=True)
class Tracker:
    """Issue state from tracker commands and their output, in the order they ran."""

    issues: dict[str, Issue] = field(default_factory=dict)
    roots: set[str] = field(default_factory=set)
    """Issue families the agent worked on (``bd show/update/close`` of an id or its parent)."""
    claimed: list[str] = field(default_factory=list)
    """Issues the agent set in progress, latest last."""

    def _issue(self, issue_id: str) -> Issue:
        issue = self.issues.get(issue_id)
        if issue is None:
            issue = self.issues[issue_id] = Issue(issue_id, order=len(self.issues))
        return issue

    def _see(self, issue_id: str, title: str | None, state: str | None) -> None:
        issue = self._issue(issue_id)
        if title:
            issue.title = title.strip()
        reopened = issue.state == "closed" and state not in ("closed", "in_progress")
        if state is not None and not reopened:  # a stale listing does not reopen a closed issue
            issue.state = state

    def command(self, command: str) -> None:
        """A tracker command the agent ran (``bd update ID --status in_progress``, ``bd close ID ...``)."""
        for match in _CLOSE_REASON.finditer(command):
            self._issue(match.group(1)).reason = (match.group(2) or match.group(3) or "").strip()
        for segment in re.split(r"&&|\|\||;|\|", command):
            tokens = segment.split()
            if len(tokens) < 3 or tokens[0] not in ("bd", "beads"):
                continue
            verb = tokens[1]
            ids = [t for t in tokens[2:] if re.fullmatch(_ID, t)]
            for issue_id in ids if verb in ("show", "update", "close") else ():
                self.roots.add(issue_id.split(".", 1)[0])
                self._issue(issue_id)
                if verb == "close":
                    self._see(issue_id, None, "closed")
                elif verb == "update" and "in_progress" in segment:
                    self._see(issue_id, None, "in_progress")
                    self.claimed.append(issue_id)

    def output(self, text: str) -> None:
        """A tracker command's output: ``show`` headers and relations, ``list``/``ready`` rows."""
        for issue_id, body in issue_bodies(text):
            self._issue(issue_id).body = body
        for line in text.splitlines():
            if (match := _SHOW.match(line)) is not None:
                state = "closed" if "CLOSED" in match.group(4) else _GLYPH_STATE[match.group(1)]
                self._see(match.group(2), match.group(3), state)
            elif (match := _LIST.match(line)) is not None or (match := _RELATED.match(line)) is not None:
                self._see(match.group(2), match.group(3), _GLYPH_STATE[match.group(1)])
            elif (match := _READY.match(line)) is not None:
                self._see(match.group(1), match.group(2), None)
            elif (match := _CLOSED.match(line)) is not None:
                self._see(match.group(1), None, "closed")
            elif (match := _TITLED.match(line)) is not None and match.group(1) in self.issues:
                issue = self.issues[match.group(1)]
                issue.title = issue.title or match.group(2).strip()

    def current(self) -> Issue | None:
        """The issue being worked on: the latest one claimed that is still in progress."""
        for issue_id in reversed(self.claimed):
            if self.issues[issue_id].state == "in_progress":
                return self.issues[issue_id]
        return None

    def in_scope(self) -> list[Issue]:
        """Issues of the families the agent worked on, in first-seen order."""
        return [i for i in self.issues.values() if i.id.split(".", 1)[0] in self.roots]


def issue_bodies(text: str) -> Iterator[tuple[str, str]]:
    """``(id, body)`` for each issue a ``show`` output prints (several when commands were chained)."""
    current: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        match = _SHOW.match(line)
        if match is not None:
            if current is not None:
                yield current, "\n".join(lines)
            current, lines = match.group(2), []
        elif current is not None:
            lines.append(line)
    if current is not None:
        yield current, "\n".join(lines)


_PROHIBITION = re.compile(
    r"\b(?:do not|don't|never|must not|mustn't|should not|shouldn't|cannot|avoid|no new|no extra"
    r"|unchanged|as is|as-is|untouched|instead of)\b|^\W*no\b", re.IGNORECASE)


def is_prohibition(sentence: str) -> bool:
    """A constraint stated negatively ("do not edit X", "keep Y unchanged", "never Z", "No new
    route"): a rule that outlives the task whose spec stated it."""
    return bool(_PROHIBITION.search(sentence))


def spec_lines(body: str, limit: int = 24) -> list[str]:
    """The bullets under an issue body's requirement headings (constraints, edge cases, specs, done)."""
    found: list[str] = []
    keep = False
    for raw in body.splitlines():
        line = raw.strip()
        if not line:
            continue
        if _SPEC_HEADING.match(line):
            keep = True
            continue
        if _ANY_HEADING.match(line) and not line.startswith(("-", "*")):
            keep = False
            continue
        if keep and line.startswith(("-", "*")) and len(line) > 6:
            found.append(line.lstrip("-* ").strip())
            if len(found) >= limit:
                break
    return found


def change_notes(args: dict[str, Any], limit: int = 8) -> list[str]:
    """What an edit or write introduced: modules, functions, classes, routes, events, attributes."""
    texts: list[str] = []
    for key in ("new_string", "content", "new_str", "file_text", "patch", "insert_text"):
        value = args.get(key)
        if isinstance(value, str):
            texts.append(value)
    edits = args.get("edits")
    if isinstance(edits, (list, tuple)):
        texts.extend(e["new_string"] for e in edits
                     if isinstance(e, dict) and isinstance(e.get("new_string"), str))
    names: dict[str, None] = {}
    for text in texts:
        for match in _INTRODUCED.finditer(text):
            groups = match.groups()
            name = next(g for g in groups if g)
            if groups[7]:
                name = f"route {name}"
            elif groups[8]:
                name = f"event {name}"
            elif groups[10]:
                name = f'test "{name}"'
            names.setdefault(name, None)
            if len(names) >= limit:
                return list(names)
    return list(names)


def added_lines(args: dict[str, Any], limit: int = 4) -> list[str]:
    """The lines a short edit adds when it introduces no name (``missing_docs = "warn"``): its
    non-comment lines that are not bare labels, for config files and recipes."""
    old = args.get("old_string", args.get("old_str"))
    before = set(old.splitlines()) if isinstance(old, str) else set()
    for key in ("new_string", "content", "new_str", "file_text"):
        value = args.get(key)
        if isinstance(value, str) and value.strip() and len(value) <= _SMALL_EDIT:
            lines = [line.strip() for line in value.splitlines() if line not in before]
            kept = [line for line in lines if line and len(line) <= 100 and not line.startswith(_COMMENT)
                    and not re.fullmatch(r"[\w.\[\]-]+:", line)]
            return kept[:limit]
    return []


_DOC_LINE = re.compile(
    r'^\s*(?:/\*\*?|\*(?!/)|///?!?|#(?![!\w\[{])|"""|\'\'\'|@moduledoc\s+""")\s?(.*?)\s*(?:\*/|"""|\'\'\')?\s*$')


_BANNER = re.compile(r"[=*#~_-]{3,}")


def file_purpose(text: str, limit: int = 220) -> str | None:
    """The first comment block of a file's first 60 lines (a module docstring, a JSDoc before its
    main export): what the file says it is for, in one line; None when it has none."""
    block: list[str] = []
    for line in text.splitlines()[:60]:
        match = _DOC_LINE.match(line)
        if match is None:
            if block:
                break
            continue
        words = match.group(1).strip()
        if len(_BANNER.sub(" ", words).split()) < 2:
            continue  # a banner (``==== TYPES ====``) marks a section, it says nothing of the file
        if not words.startswith(("@", "eslint", "prettier", "type:", "noqa", "-*-")):
            block.append(words)
    purpose = " ".join(block).strip()
    if len(purpose) < 20:
        return None
    return purpose if len(purpose) <= limit else purpose[: limit - 1].rstrip() + "…"



_IMPORT_LINE = re.compile(
    r"^\s*(?:import\s+[\w.]+(?:\s+as\s+\w+)?|from\s+[\w.]+\s+import\s+[\w., ]+|alias\s+[\w.{}, ]+"
    r"|use\s+[\w:]+"
    r"|(?:const|let|var)\s+\w+\s*=\s*require\([^)]*\))\s*;?\s*$")


def removed_notes(args: dict[str, Any], limit: int = 3) -> list[str]:
    """What an edit removed that a successor may look for: the names its deleted lines defined
    (``type_color``) and the imports it dropped (``import pytest``); [] for additions only."""
    old, new = args.get("old_string", args.get("old_str")), args.get("new_string", args.get("new_str"))
    if not isinstance(old, str) or not isinstance(new, str) or not old.strip():
        return []
    kept = {line.strip() for line in new.splitlines()}
    gone = [line for line in old.splitlines() if line.strip() and line.strip() not in kept]
    removed = "\n".join(gone)
    names = [name for name in change_notes({"content": removed}, limit=limit)
             if not re.search(rf"\b{re.escape(name)}\b", new)]  # still defined: moved, not removed
    imports = [line.strip().rstrip(";") for line in gone if _IMPORT_LINE.match(line)]
    return list(dict.fromkeys(names + imports))[:limit]
