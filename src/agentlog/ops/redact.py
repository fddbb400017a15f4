"""Secrets in session content: find them by kind and location, or replace them with placeholders.

Pure functions over text and JSON values. A secret is replaced by ``[REDACTED:<kind>]``; for
``KEY=value``, URL passwords, bearer tokens and AWS secret keys only the value is replaced, so
the shared transcript still says what was there. Compaction is not a privacy tool (the log is
append-only): exporting with redaction is the supported way to share a transcript.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from agentlog.core.jsonvalue import dumps, thaw

__all__ = [
    "KINDS", "SecretFinding", "find_secrets", "may_hold", "placeholder", "redact_text", "redact_value",
    "scan", "secret_paths",
]


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """One secret in a text: its kind and the span ``[start, end)`` that a placeholder replaces."""

    kind: str
    start: int
    end: int


_B = r"(?<![A-Za-z0-9_\-])"  # a token starts here: no word character or dash before it
_E = r"(?![A-Za-z0-9_\-])"  # and ends here
_SECRET_WORD = r"(?:secret|token|password|passwd|passphrase|pwd|api[_\-]?key|apikey|private[_\-]?key|" \
    r"access[_\-]?key|secret[_\-]?key|auth[_\-]?token|credentials?|client[_\-]?secret)"
_SECRET_KEY = re.compile(rf"[A-Za-z0-9_.\-]*{_SECRET_WORD}", re.IGNORECASE)
"""A key whose name says it holds a secret (``DB_PASSWORD``, ``api_key``; not ``password_hint``)."""
_KEY = r"(?<![A-Za-z0-9_.\-])(?P<key>[A-Za-z0-9_.\-]+)"  # any key: ``_SECRET_KEY`` checks it after
_NOT_PLACED = r"(?!\[REDACTED:)"  # a value already replaced is not found again

_KEY_WORDS = ("secret", "token", "passw", "passphrase", "pwd", "api", "private", "access", "credential")
"""Lowercased, one of these is in every key ``_SECRET_KEY`` accepts."""

# (kind, pattern, group replaced (0: the whole match), needs). Order is priority: a span that
# overlaps one found by an earlier pattern is not reported again. ``needs`` are substrings of the
# lowercased text, one of each tuple, without which the pattern cannot match: most text is never
# scanned, and a long text only by the patterns it could hold. A pattern with a ``key`` group
# counts only where that key names a secret (checked apart: an alternation tried at every
# character of every word made the key patterns the slowest of all).
_TABLE: Final[tuple[tuple[str, str, int, tuple[tuple[str, ...], ...]], ...]] = (
    ("private-key", r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----"
                    r"(?:[\s\S]*?-----END \1PRIVATE KEY\2-----|[A-Za-z0-9+/=:\-,\s\\n]*)", 0,
     (("-----begin",),)),
    ("anthropic-key", rf"{_B}sk-ant-[A-Za-z0-9_\-]{{20,}}{_E}", 0, (("sk-ant-",),)),
    ("openai-key", rf"{_B}sk-(?!ant-)(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d)"
                   rf"(?=[A-Za-z0-9_\-]*[A-Za-z])[A-Za-z0-9_\-]{{20,}}{_E}", 0, (("sk-",),)),
    ("github-token", rf"{_B}(?:gh[pousr]_[A-Za-z0-9]{{36,}}|github_pat_[A-Za-z0-9_]{{22,}}){_E}", 0,
     (("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),)),
    ("slack-token", rf"{_B}xox[abposre]-(?=[A-Za-z0-9\-]*\d)[A-Za-z0-9\-]{{10,}}{_E}", 0, (("xox",),)),
    ("slack-webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}", 0, (("hooks.slack",),)),
    ("google-api-key", rf"{_B}AIza[0-9A-Za-z_\-]{{35}}{_E}", 0, (("aiza",),)),
    ("stripe-key", rf"{_B}(?:(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{{16,}}|whsec_[0-9A-Za-z]{{24,}}){_E}", 0,
     (("sk_", "rk_", "whsec_"),)),
    ("aws-access-key", r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![A-Z0-9])", 0,
     (("akia", "asia", "abia", "acca"),)),
    ("aws-secret-key", r"(?i:aws.{0,20}?(?:secret|private).{0,20}?)[\"']?\s*[:=]\s*[\"']?"
                       r"(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", 1,
     (("aws",), ("secret", "private"))),
    ("jwt", rf"{_B}eyJ[A-Za-z0-9_\-]{{8,}}\.eyJ[A-Za-z0-9_\-]{{8,}}\.[A-Za-z0-9_\-]*{_E}", 0, (("eyj",),)),
    ("bearer-token", rf"(?i:\bbearer)\s+{_NOT_PLACED}(?=[A-Za-z0-9\-._~+/]*\d)"
                     rf"([A-Za-z0-9\-._~+/]{{16,}}=*)", 1, (("bearer",),)),
    ("basic-auth", rf"(?i:\bauthorization\s*:\s*basic)\s+{_NOT_PLACED}([A-Za-z0-9+/]{{8,}}=*)", 1,
     (("authorization",),)),
    ("url-password", rf"\b[A-Za-z][A-Za-z0-9+.\-]{{0,30}}://[^\s:/@\"'<>]{{1,256}}:{_NOT_PLACED}"
                     rf"([^\s@/\"'<>]{{1,256}})@", 1, (("://",), ("@",))),
    # KEY=value as in .env files and shells: no space around "=", a literal value (not $VAR, not code)
    ("env-secret", rf"{_KEY}={_NOT_PLACED}(?![$%*<{{(\[])([^\s\"'`#;&|(){{}}]+)", 2, (_KEY_WORDS, ("=",))),
    # key = "value", key: 'value', "key": "value" (code, YAML, JSON): a quoted literal
    ("env-secret", rf"{_KEY}[\"']?\s*[:=]\s*([\"']){_NOT_PLACED}(?![$%])((?:(?!\2)[^\\\n]|\\.)+)\2", 3,
     (_KEY_WORDS, (":", "="), ('"', "'"))),
    # YAML key: value at the start of a line (not a type annotation such as "token: string")
    ("env-secret", rf"(?m:^[ \t]*(?:-[ \t]+)?{_KEY}):[ \t]+{_NOT_PLACED}(?![$%*<{{\[(&])"
                   rf"(?!(?i:string|number|boolean|str|int|bool|any|null|none|true|false|undefined)\b)"
                   rf"([^\s\"'#,;]+)", 2, (_KEY_WORDS, (":",))),
)
_PATTERNS: Final = tuple((kind, re.compile(pattern), group, needs) for kind, pattern, group, needs in _TABLE)

_ANCHORS: Final = tuple(dict.fromkeys(anchor for *_, needs in _TABLE for anchor in needs[0]))
"""Every pattern's first needs: text with none of them needs no scan."""


_ANCHOR: Final = re.compile("|".join(map(re.escape, _ANCHORS)))


def _may_hold(text: str) -> bool:
    return _ANCHOR.search(text.lower()) is not None


def may_hold(value: Any) -> bool:
    """Whether any string of a JSON value (or a key: a superset) holds an anchor of some pattern."""
    return _may_hold(value if isinstance(value, str) else dumps(value).decode())


KINDS: Final = tuple(dict.fromkeys(kind for kind, *_ in _TABLE))
"""Every kind of secret found, in priority order."""


def placeholder(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


def find_secrets(text: str) -> list[SecretFinding]:
    """The secrets in ``text``, ordered by position, never overlapping."""
    return scan(text) if _may_hold(text) else []


def scan(text: str, *, every: bool = False) -> list[SecretFinding]:
    """The patterns whose needs ``text`` meets (``every``: all of them, the reference for the needs)."""
    taken: list[SecretFinding] = []  # sorted by start, never overlapping
    lowered = text.lower()
    for kind, pattern, group, needs in _PATTERNS:
        if not every and not all(any(part in lowered for part in need) for need in needs):
            continue
        keyed = "key" in pattern.groupindex
        for match in pattern.finditer(text):
            if keyed and not _SECRET_KEY.fullmatch(match.group("key")):
                continue
            start, end = match.span(group)
            at = bisect.bisect_left(taken, start, key=lambda finding: finding.start)
            clear_before = at == 0 or taken[at - 1].end <= start
            clear_after = at == len(taken) or end <= taken[at].start
            if start < end and clear_before and clear_after:
                taken.insert(at, SecretFinding(kind, start, end))
    return taken


def redact_text(text: str) -> str:
    """``text`` with every secret replaced by its typed placeholder."""
    findings = find_secrets(text)
    if not findings:
        return text
    parts: list[str] = []
    at = 0
    for finding in findings:
        parts += [text[at:finding.start], placeholder(finding.kind)]
        at = finding.end
    parts.append(text[at:])
    return "".join(parts)


def _named_secret(key: Any, member: Any) -> bool:
    """A string member whose key names a secret (``"password": "..."`` parsed, as the text pattern
    finds it unparsed); a reference (``$VAR``, ``%VAR%``), an empty or a replaced value is not."""
    return (isinstance(member, str) and isinstance(key, str) and member != "" and member[0] not in "$%"
            and not member.startswith("[REDACTED:") and _SECRET_KEY.fullmatch(key) is not None)


def redact_value(value: Any) -> Any:
    """A plain copy of a JSON value (frozen or not) with every string redacted; keys are kept.

    A string whose key names a secret (``password``, ``DB_PASSWORD``, ``client_secret``) is
    replaced whole, as the ``env-secret`` pattern replaces it in text.

    Iterative, so a deeply nested value cannot exhaust the stack; a value whose JSON holds no
    anchor of any pattern (most events) is copied without a scan.
    """
    if not may_hold(value):
        return thaw(value)
    root: list[Any] = [value]
    pending: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while pending:
        parent, key, item = pending.pop()
        if isinstance(item, str):
            parent[key] = redact_text(item)
        elif isinstance(item, dict):
            parent[key] = copy = dict(item)
            for name, member in item.items():
                if _named_secret(name, member):
                    copy[name] = placeholder("env-secret")
                else:
                    pending.append((copy, name, member))
        elif isinstance(item, (list, tuple)):
            parent[key] = items = list(item)
            pending.extend((items, index, member) for index, member in enumerate(item))
    return root[0]


def secret_paths(value: Any, path: str = "data") -> Iterator[tuple[str, str]]:
    """``(JSON path, kind)`` of every secret in a JSON value's strings (iterative: any depth)."""
    if not may_hold(value):
        return
    pending: list[tuple[str, Any]] = [(path, value)]
    while pending:
        where, item = pending.pop()
        if isinstance(item, str):
            yield from ((where, finding.kind) for finding in find_secrets(item))
        elif isinstance(item, dict):
            for key, member in reversed(item.items()):
                if _named_secret(key, member):
                    yield f"{where}.{key}", "env-secret"
                else:
                    pending.append((f"{where}.{key}", member))
        elif isinstance(item, (list, tuple)):
            pending.extend((f"{where}[{index}]", member) for index, member in reversed(list(enumerate(item))))
