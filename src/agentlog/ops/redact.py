"""Secrets in session content: find them by kind and location, or replace them with placeholders.

Pure functions over text and JSON values. A secret is replaced by ``[REDACTED:<kind>]``; for
``KEY=value``, URL passwords, HTTP auth headers, ``mysql -p`` and AWS secret keys only the value
is replaced, so the shared transcript still says what was there. A base64 blob whose decoded
text holds a secret (an encoded ``.env``) is replaced whole; JSON object keys are redacted too.
Compaction is not a privacy tool (the log is
append-only): exporting with redaction is the supported way to share a transcript.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import dumps, freeze, thaw

__all__ = [
    "KINDS", "SecretFinding", "find_secrets", "may_hold", "placeholder", "redact_header", "redact_text",
    "redact_value", "scan", "secret_paths",
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
_TYPE_WORDS = r"(?!(?i:string|number|boolean|str|int|bool|any|null|none|true|false|undefined)\b)"
"""Not a value but a type annotation (``token: string``)."""
_HEADER_WORDS = ("key", "token", "secret", "pass", "pwd", "auth", "api", "cred", "private", "access")
_HEADER_WORD = rf"(?i:{'|'.join(_HEADER_WORDS)})"
"""The last segment of a dashed header name that may name a secret starts with one of these."""
_MYSQL = r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlsh|mariadb(?:-dump|-admin)?)\b" \
    r"[^\n|;&]{0,200}?\s-p"
"""A MySQL client's command line up to its ``-p`` (the password glued to it; a bare ``-p`` prompts)."""

# (kind, pattern, group replaced (0: the whole match; a tuple: the first that took part), needs).
# Order is priority: a span that
# overlaps one found by an earlier pattern is not reported again. ``needs`` are substrings of the
# lowercased text, one of each tuple, without which the pattern cannot match: most text is never
# scanned, and a long text only by the patterns it could hold. A pattern with a ``key`` group
# counts only where that key names a secret (checked apart: an alternation tried at every
# character of every word made the key patterns the slowest of all).
_TABLE: Final[tuple[tuple[str, str, int | tuple[int, ...], tuple[tuple[str, ...], ...]], ...]] = (
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
    ("gitlab-token", rf"{_B}(?:gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941)"
                     rf"[A-Za-z0-9_\-]{{20,}}{_E}", 0,
     (("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-",
       "gr1348941"),)),
    ("huggingface-token", rf"{_B}hf_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{{30,}}{_E}", 0, (("hf_",),)),
    ("npm-token", rf"{_B}npm_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{{36}}{_E}", 0, (("npm_",),)),
    # user (maybe empty) and password (maybe holding "/", not a port and path) before "@host"
    ("url-password", rf"\b[A-Za-z][A-Za-z0-9+.\-]{{0,30}}://[^\s:/@\"'<>\[\]]{{0,256}}:{_NOT_PLACED}"
                     rf"(?!\d+(?:[/@]|$))([^\s@\"'<>]{{1,256}})@(?=[A-Za-z0-9\[])", 1, (("://",), ("@",))),
    # Authorization: <scheme> <credentials> that the bearer and basic kinds left (token, bot, key...);
    # a credential has a digit (not "authorization: required")
    ("auth-header", rf"(?i:\b(?:proxy-)?authorization\s*:\s*(?:(?:bearer|basic|token|bot|apikey|api-key|key|"
                    rf"sso-key|digest|negotiate|ntlm)\s+)?){_NOT_PLACED}(?![$<{{%])"
                    rf"(?=[A-Za-z0-9\-._~+/=]{{0,256}}\d)([A-Za-z0-9\-._~+/=]{{8,}})", 1,
     (("authorization",),)),
    # an HTTP header whose dashed name ends in a secret word: X-Api-Key, PRIVATE-TOKEN, X-Auth-Token
    ("auth-header", rf"(?<![A-Za-z0-9_.\-])(?P<key>[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*-(?={_HEADER_WORD})"
                    rf"[A-Za-z0-9]+)[ \t]*:[ \t]*{_NOT_PLACED}(?![$%<{{\[(])(?=[^\s\"'`,;]{{0,256}}\d)"
                    rf"([^\s\"'`,;]{{6,}})", 2,
     (_KEY_WORDS, tuple(f"-{word}" for word in _HEADER_WORDS), (":",))),
    ("mysql-password", rf"{_MYSQL}(['\"]){_NOT_PLACED}(?![$%])((?:(?!\1)[^\n\\])+)\1", 2,
     (("mysql", "mariadb"), ("-p",))),
    ("mysql-password", rf"{_MYSQL}{_NOT_PLACED}(?![\s'\"$])([^\s'\"]+)", 1, (("mysql", "mariadb"), ("-p",))),
    # KEY=value as in .env files and shells: no space around "=", a literal value (not $VAR, not code)
    ("env-secret", rf"{_KEY}={_NOT_PLACED}(?![$%*<{{(\[])([^\s\"'`#;&|(){{}}]+)", 2, (_KEY_WORDS, ("=",))),
    # key = "value", key: 'value', "key": "value" (code, YAML, JSON): a quoted literal; "key": 83749201
    ("env-secret", rf"{_KEY}(?:[\"']?\s*[:=]\s*([\"']){_NOT_PLACED}(?![$%])((?:(?!\2)[^\\\n]|\\.)+)\2"
                   rf"|[\"']\s*:\s*{_NOT_PLACED}(-?\d[\d.]*)(?![\w.]))", (3, 4),
     (_KEY_WORDS, (":", "="), ('"', "'"))),
    # YAML key: value at the start of a line (not a type annotation such as "token: string")
    ("env-secret", rf"(?m:^[ \t]*(?:-[ \t]+)?{_KEY}):[ \t]+{_NOT_PLACED}(?![$%*<{{\[(&]){_TYPE_WORDS}"
                   rf"([^\s\"'#,;]+)", 2, (_KEY_WORDS, (":",))),
)
_PATTERNS: Final = tuple((kind, re.compile(pattern), group, needs) for kind, pattern, group, needs in _TABLE)

_ENCODED_WORDS: Final = tuple(dict.fromkeys(
    form for word in ("secret", "token", "passw", "private", "access", "credential", "api_key", "apikey",
                      "api-key") for form in (word, word.upper(), word.capitalize())))
"""A decoded base64 blob is scanned only when it holds one of these (so its base64 holds an anchor)."""


def _encoded_anchors(words: tuple[str, ...]) -> tuple[str, ...]:
    """Lowercased base64 of every word at each of the three byte alignments (its whole groups only):
    base64 of any text holding a word holds one of them."""
    out: dict[str, None] = {}
    for word in words:
        data = word.encode()
        for skip in range(3):
            body = data[skip:len(data) - (len(data) - skip) % 3]
            if body:
                out[base64.b64encode(body).decode().lower()] = None
    return tuple(out)


_ENCODED: Final = re.compile("|".join(map(re.escape, _encoded_anchors(_ENCODED_WORDS))))
_BASE64: Final = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{16,65536}={0,2}(?![A-Za-z0-9+/=])")
"""A base64 run (up to 64 KiB: larger ones are attachments, not settings)."""


def _encoded_runs(text: str, every: bool) -> Iterator[re.Match[str]]:
    """The base64 runs of ``text`` that hold an encoded key word (``every``: all of them)."""
    for match in _BASE64.finditer(text):
        if every or _ENCODED.search(match.group().lower()):
            yield match


_ANCHORS: Final = tuple(dict.fromkeys(anchor for *_, needs in _TABLE for anchor in needs[0]))
"""Every pattern's first needs: text with none of them (and no encoded key word) needs no scan."""


def _trie(words: tuple[str, ...]) -> str:
    """An alternation of literal ``words`` with their common prefixes factored (``sk-(?:ant-|)``):
    one branch per first character, so the regex engine tries few branches at each position."""
    heads: dict[str, list[str]] = {}
    for word in words:
        heads.setdefault(word[:1], []).append(word[1:])
    branches = []
    for head, tails in heads.items():
        if not head:
            continue
        rest = tuple(tail for tail in tails if tail)
        if not rest or "" in tails:  # a word ends here: any longer one after it is found by it
            branches.append(re.escape(head))
        elif len(rest) == 1:
            branches.append(re.escape(head + rest[0]))
        else:
            branches.append(f"{re.escape(head)}(?:{_trie(rest)})")
    return "|".join(branches)


_ANCHOR: Final = re.compile(_trie(_ANCHORS))


def _may_hold(text: str) -> bool:
    return _ANCHOR.search(text.lower()) is not None or next(_encoded_runs(text, False), None) is not None


def may_hold(value: Any) -> bool:
    """Whether any string of a JSON value (or a key: a superset) holds an anchor of some pattern."""
    return _may_hold(value if isinstance(value, str) else dumps(value).decode())


KINDS: Final = (*dict.fromkeys(kind for kind, *_ in _TABLE), "base64-secret")
"""Every kind of secret found, in priority order."""


def placeholder(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


def find_secrets(text: str) -> list[SecretFinding]:
    """The secrets in ``text``, ordered by position, never overlapping."""
    return scan(text) if _may_hold(text) else []


def _take(taken: list[SecretFinding], kind: str, start: int, end: int) -> None:
    """Add a finding unless it is empty or overlaps one already taken (``taken`` stays sorted)."""
    at = bisect.bisect_left(taken, start, key=lambda finding: finding.start)
    clear_before = at == 0 or taken[at - 1].end <= start
    clear_after = at == len(taken) or end <= taken[at].start
    if start < end and clear_before and clear_after:
        taken.insert(at, SecretFinding(kind, start, end))


def _decoded_secret(run: str, every: bool) -> bool:
    """Whether a base64 run decodes to text that names a secret word and holds a secret (an encoded .env)."""
    if len(run) % 4 == 1:
        return False
    try:
        decoded = base64.b64decode(run + "=" * (-len(run) % 4), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return False
    if not any(word in decoded for word in _ENCODED_WORDS):
        return False
    return bool(_scan(decoded, every=every, nested=False))


def scan(text: str, *, every: bool = False) -> list[SecretFinding]:
    """The patterns whose needs ``text`` meets (``every``: all of them, the reference for the needs)."""
    return _scan(text, every=every, nested=True)


def _scan(text: str, *, every: bool, nested: bool) -> list[SecretFinding]:
    taken: list[SecretFinding] = []  # sorted by start, never overlapping
    lowered = text.lower()
    for kind, pattern, group, needs in _PATTERNS:
        if not every and not all(any(part in lowered for part in need) for need in needs):
            continue
        keyed = "key" in pattern.groupindex
        for match in pattern.finditer(text):
            if not keyed or _SECRET_KEY.fullmatch(match.group("key")):
                took = group if isinstance(group, int) else next(g for g in group if match.start(g) >= 0)
                _take(taken, kind, *match.span(took))
    if nested:  # base64 within base64 is not decoded again
        for match in _encoded_runs(text, every):
            if _decoded_secret(match.group(), every):
                _take(taken, "base64-secret", *match.span())
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
    """A string or number member whose key names a secret (``"password": "..."`` parsed, as the text
    pattern finds it unparsed); a reference (``$VAR``, ``%VAR%``), an empty or a replaced value is not."""
    if not isinstance(key, str) or _SECRET_KEY.fullmatch(key) is None:
        return False
    if isinstance(member, (int, float)) and not isinstance(member, bool):
        return True
    return (isinstance(member, str) and member != "" and member[0] not in "$%"
            and not member.startswith("[REDACTED:"))


def _redacted_key(key: Any, taken: dict[Any, Any]) -> Any:
    """A key with its secrets replaced, made unique among ``taken`` (two redacted keys never merge)."""
    if not isinstance(key, str):
        return key
    out = redact_text(key)
    if out != key:
        number = 1
        while out in taken:
            number += 1
            out = f"{redact_text(key)} ({number})"
    return out


def redact_value(value: Any) -> Any:
    """A plain copy of a JSON value (frozen or not) with every string and every key redacted.

    A string or number whose key names a secret (``password``, ``DB_PASSWORD``, ``client_secret``)
    is replaced whole, as the ``env-secret`` pattern replaces it in text; a key that holds a secret
    (a token used as a map key) gets its placeholder, numbered if two would collide.

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
            copy: dict[Any, Any] = {}
            parent[key] = copy
            for name, member in item.items():
                out = _redacted_key(name, copy)
                if _named_secret(name, member):
                    copy[out] = placeholder("env-secret")
                else:
                    copy[out] = member
                    pending.append((copy, out, member))
        elif isinstance(item, (list, tuple)):
            parent[key] = items = list(item)
            pending.extend((items, index, member) for index, member in enumerate(item))
    return root[0]


def secret_paths(value: Any, path: str = "data") -> Iterator[tuple[str, str]]:
    """``(JSON path, kind)`` of every secret in a JSON value's strings and keys (iterative: any depth).

    A path never holds a secret: a key that is one is named by its placeholder.
    """
    if not may_hold(value):
        return
    pending: list[tuple[str, Any]] = [(path, value)]
    while pending:
        where, item = pending.pop()
        if isinstance(item, str):
            yield from ((where, finding.kind) for finding in find_secrets(item))
        elif isinstance(item, dict):
            named: list[tuple[str, Any]] = []
            for key, member in item.items():
                shown = f"{where}.{redact_text(key) if isinstance(key, str) else key}"
                if isinstance(key, str):
                    yield from ((shown, finding.kind) for finding in find_secrets(key))
                if _named_secret(key, member):
                    yield shown, "env-secret"
                else:
                    named.append((shown, member))
            pending.extend(reversed(named))
        elif isinstance(item, (list, tuple)):
            pending.extend((f"{where}[{index}]", member) for index, member in reversed(list(enumerate(item))))


_IDENTITY: Final = ("version", "id", "createdAt", "parentSession", "seedLength")
"""Header fields a redacted copy keeps as they are: the session's identity and lineage."""


def redact_header(header: SessionHeader) -> SessionHeader:
    """The header with its cwd, preset and extras (importers' foreign metadata) redacted."""
    wire = header.to_wire()
    if not may_hold(wire):
        return header
    redacted = redact_value(wire)
    redacted.update({key: wire[key] for key in _IDENTITY if key in wire})
    return SessionHeader.from_wire(freeze(redacted), session_id=header.id)
