"""What a shell command says about files and the repository, for agents that edit through a shell.

Pure parsers used by the checkpoint walk: the files a patch in a command adds, updates or
deletes (the ``*** Update File:`` envelope Codex's ``apply_patch`` uses, or a unified diff's
``+++ b/`` headers) with the lines each adds; the file a read-only viewer prints (``sed -n``,
``cat``, ``head``, ``tail``, ``nl``), resolved against the call's working directory; and the
branch ``git status``/``git checkout -b``/``git switch -c`` names.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass

__all__ = [
    "PatchedFile", "branch_of", "json_fields", "patched_files", "read_file_path", "removed_files", "resolve",
    "search_hits",
]

_ENVELOPE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$")
_DIFF_TARGET = re.compile(r"^\+\+\+ (?:b/)?(\S+)")
_VIEWERS = frozenset({"sed", "cat", "head", "tail", "nl", "bat", "less"})
_STATUS_BRANCH = re.compile(r"^## ([\w./@+-]+?)(?:\.\.\.\S+)?(?: \[.*\])?\s*$|^On branch ([\w./@+-]+)\s*$",
                            re.MULTILINE)
_SEARCH = re.compile(r"^\s*(?:rg|grep|egrep|git grep|ag|ack|find|fd)\b")
_HIT = re.compile(r"^(?:\./)?([\w.@+()\[\]-]+(?:/[\w.@+()\[\]-]+)*\.[A-Za-z0-9]{1,8})(?::|$)")
_SHOW_BRANCH = re.compile(r"\bgit (?:branch --show-current|rev-parse --abbrev-ref HEAD)\b")
_BRANCH_NAME = re.compile(r"^[\w./@+-]{2,120}$")
_FIELD_KEY = re.compile(r"(?:^|_)(?:number|id|branch|url|status|state|path|name|title|count)$")
_NEW_BRANCH = re.compile(r"\bgit (?:checkout -b|switch -c|switch --create|branch)\s+([\w./@+-]+)")


@dataclass(frozen=True, slots=True)
class PatchedFile:
    """One file a patch touches: ``add``, ``update`` or ``delete``, and the lines it adds."""

    action: str
    path: str
    added: str


def patched_files(command: str) -> list[PatchedFile]:
    """The files a patch inside ``command`` touches, in order (none when it holds no patch)."""
    found: list[PatchedFile] = []
    action: str | None = None
    path = ""
    added: list[str] = []
    for line in command.splitlines():
        envelope = _ENVELOPE.match(line)
        target = None if envelope else _DIFF_TARGET.match(line)
        if envelope is not None or (target is not None and target.group(1) != "/dev/null"):
            if action is not None:
                found.append(PatchedFile(action, path, "\n".join(added)))
            action = envelope.group(1).lower() if envelope else "update"
            path = envelope.group(2) if envelope else target.group(1) if target else ""
            added = []
        elif action is not None and line.startswith("+") and not line.startswith("+++"):
            added.append(line[1:])
        elif line.startswith("*** End Patch") and action is not None:
            found.append(PatchedFile(action, path, "\n".join(added)))
            action = None
    if action is not None:
        found.append(PatchedFile(action, path, "\n".join(added)))
    return found


def read_file_path(command: str) -> str | None:
    """The file a single read-only viewer command prints (``sed -n '1,200p' 'a/(b)/c.ts'``)."""
    if any(op in command for op in ("|", "&&", ";", ">", "<", "$(", "`")):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or words[0] not in _VIEWERS:
        return None
    if words[0] == "sed" and "-n" not in words:
        return None  # sed without -n may edit in place
    operands = [w for w in words[1:] if not w.startswith("-") and not re.fullmatch(r"[\d,;$p]+", w)]
    candidates = [w for w in operands if re.search(r"\.[A-Za-z0-9]{1,8}$|/", w)]
    return candidates[-1] if len(candidates) == 1 or (candidates and words[0] == "sed") else None


def resolve(path: str, workdir: str | None) -> str:
    """``path`` made absolute against the call's working directory when it is relative."""
    if workdir and not path.startswith(("/", "~")):
        return posixpath.normpath(posixpath.join(workdir, path))
    return path


def branch_of(command: str, output: str) -> str | None:
    """The branch a command's output or the command itself names (``## main...origin/main``)."""
    first = output.strip().split("\n", 1)[0].strip()
    if _SHOW_BRANCH.search(command) and _BRANCH_NAME.match(first):
        return first
    if re.search(r"\bgit status\b", command):
        match = _STATUS_BRANCH.search(output)
        if match is not None:
            return match.group(1) or match.group(2)
    created = _NEW_BRANCH.search(command)
    return created.group(1) if created is not None and not created.group(1).startswith("-") else None


def search_hits(command: str, output: str, limit: int = 8) -> list[str]:
    """The distinct files a search command's output lists (``path:line: text`` or bare paths)."""
    if not _SEARCH.match(command):
        return []
    hits: dict[str, None] = {}
    for line in output.splitlines():
        match = _HIT.match(line.strip())
        if match is not None:
            hits.setdefault(match.group(1), None)
            if len(hits) >= limit:
                break
    return list(hits)


def removed_files(command: str) -> list[str]:
    """The files a plain ``rm`` / ``git rm`` deletes (options and directories left out)."""
    try:
        words = shlex.split(command) if "\n" not in command else []
    except ValueError:
        return []
    if words[:2] == ["git", "rm"]:
        words = words[1:]
    if not words or words[0] != "rm" or any(w in ("|", "&&", ";") for w in words):
        return []
    return [w for w in words[1:] if not w.startswith("-") and re.search(r"\.[A-Za-z0-9]{1,8}$", w)]


def json_fields(output: str, limit: int = 6) -> list[str]:
    """``key=value`` for the short scalar fields of a JSON object a command printed (its last
    line that is one), whose keys name an identity or a state (``plan_number``, ``branch``)."""
    for line in reversed(output.strip().splitlines()[-40:]):
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        fields = [f"{k}={v}" for k, v in value.items() if isinstance(k, str) and _FIELD_KEY.search(k)
                  and isinstance(v, (str, int)) and not isinstance(v, bool) and 0 < len(str(v)) <= 80]
        return fields[:limit]
    return []
