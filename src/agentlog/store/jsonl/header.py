"""The header line of a JSONL transcript: encode, and parse in DSH's refusal order (§4.3, §4.7, §4.10).

A foreign format version is refused from the raw parsed line before any shape check, so a
structurally alien future header still says "upgrade", never "corrupt".
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

import orjson

from agentlog.core.header import FORMAT_VERSION, SessionHeader
from agentlog.core.jsonvalue import MAX_SAFE_INTEGER, dumps, loads
from agentlog.errors import InvalidHeaderError, SessionCorruptionError, SessionFormatUnsupportedError

__all__ = ["SHARED_PREFIX_KEY", "encode_header_line", "js_text", "parse_header_line", "try_parse_header_line"]

SHARED_PREFIX_KEY: Final = "agentlogSharedPrefix"
"""Header key of a fork whose first ``seedLength`` events are read from its parent's transcript."""

_HEADER_KEYS: Final = (
    ("version", "version"),
    ("id", "id"),
    ("createdAt", "created_at"),
    ("cwd", "cwd"),
    ("parentSession", "parent_session"),
    ("seedLength", "seed_length"),
    ("origin", "origin"),
    ("delegationDepth", "delegation_depth"),
    ("agentPreset", "agent_preset"),
)
"""Wire keys of the header line after ``type``, in DSH's write order."""

_RETIRED_HEADER_KEYS: Final = ("sandboxMode", "approvalPolicy")
_RESERVED_EXTRA_KEYS: Final = frozenset({"type", *_RETIRED_HEADER_KEYS, *(key for key, _ in _HEADER_KEYS)})
_INTEGRAL_HEADER_KEYS: Final = ("version", "createdAt", "seedLength", "delegationDepth")

_CORRUPT: Final = "corrupt session log"
_NOT_A_HEADER: Final = f"{_CORRUPT}: first line is not a session header"


def encode_header_line(header: SessionHeader) -> bytes:
    """The header line: ``{"type":"session",...}`` in DSH key order plus ``\\n``.

    ``delegationDepth`` is always written (0 when absent); unknown ``extra`` keys follow the
    known ones (DSH tolerates and ignores them on read).
    """
    wire: dict[str, Any] = {"type": "session"}
    for key, attr in _HEADER_KEYS:
        value = getattr(header, attr)
        if key == "delegationDepth" and value is None:
            value = 0
        if value is not None:
            wire[key] = value
    for key, value in header.extra.items():
        if key in _RESERVED_EXTRA_KEYS:
            raise InvalidHeaderError(f"header extra key {key!r} is reserved", session_id=header.id)
        wire[key] = value
    return dumps(wire) + b"\n"


def parse_header_line(line: bytes, *, path: str) -> SessionHeader:
    """Parse the header line (with or without its ``\\n``) in the refusal order of §4.10.

    Invalid JSON or a non-header value is ``SessionCorruptionError``; a numeric ``version``
    other than 0 is ``SessionFormatUnsupportedError`` before any shape check.
    """
    header, problem = try_parse_header_line(line, path=path)
    if header is None:
        raise SessionCorruptionError(problem, file=path, offset=0)
    return header


def try_parse_header_line(line: bytes, *, path: str) -> tuple[SessionHeader | None, str]:
    """The header, or None and why the line is not one (what listing skips).

    Raises what listing must surface too: format refusals, retired fields, an empty id.
    """
    body = line[:-1] if line.endswith(b"\n") else line
    try:
        value = loads(body)
    except ValueError:  # orjson.JSONDecodeError included
        return None, f"{_NOT_A_HEADER} (header line is not valid JSON)"
    if type(value) is not dict:
        return None, _NOT_A_HEADER
    version: Any = value.get("version")
    if _is_number(version) and version != FORMAT_VERSION:
        raise _version_refusal(value, version, path)
    for key in _RETIRED_HEADER_KEYS:
        if key in value:
            raise SessionCorruptionError(
                f"{_CORRUPT}: session header uses retired policy baseline fields ({key})",
                file=path, offset=0,
            )
    if value.get("id") == "":
        raise SessionCorruptionError(f"{_CORRUPT}: session header has an empty id, which cannot name a path",
                                     file=path, offset=0)
    problem = _header_shape_problem(value, body)
    if problem is not None:
        return None, f"{_NOT_A_HEADER} ({problem})"
    wire = {key: member for key, member in value.items() if key != "type"}
    for key in _INTEGRAL_HEADER_KEYS:
        member = wire.get(key)
        if type(member) is float and member.is_integer():
            wire[key] = int(member)  # JSON ``1.0`` is the integer 1 in JavaScript
    try:
        return SessionHeader.from_wire(wire), ""
    except InvalidHeaderError as exc:
        return None, f"{_NOT_A_HEADER} ({exc.detail})"


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and type(value) is not bool and math.isfinite(value)


def _is_js_safe_integer(value: object) -> bool:
    """``Number.isSafeInteger``: ints and integral floats within ±(2**53 - 1)."""
    if type(value) is float:
        return value.is_integer() and abs(value) <= MAX_SAFE_INTEGER
    return type(value) is int and abs(value) <= MAX_SAFE_INTEGER


def _header_shape_problem(value: dict[str, Any], body: bytes) -> str | None:
    """DSH's header shape rule (§4.7), or None when the shape is right."""
    if value.get("type") != "session":
        return 'type is not "session"'
    if type(value.get("id")) is not str:
        return "id is not a string"
    for key in ("createdAt", "delegationDepth"):
        member: Any = value.get(key)
        if not _is_js_safe_integer(member) or member < 0 or _is_negative_zero(key, member, body):
            return f"{key} is not a non-negative safe integer"
    if "origin" in value and value["origin"] != "subagent":
        return 'origin is not "subagent"'
    if "agentPreset" in value and type(value["agentPreset"]) is not str:
        return "agentPreset is not a string"
    return None


def _is_negative_zero(key: str, member: Any, body: bytes) -> bool:
    """Whether a zero member was written ``-0`` (orjson reads it as 0; JavaScript keeps -0)."""
    if member != 0 or b"-0" not in body:
        return False
    if type(member) is float:
        return math.copysign(1.0, member) < 0

    class NegativeZero(int):
        """Marks an integer literal spelled ``-0``."""

    def parse_int(text: str) -> int:
        return NegativeZero(0) if text == "-0" else int(text)

    try:
        exact = json.loads(body, parse_int=parse_int)
    except ValueError:
        return False
    return isinstance(exact, dict) and type(exact.get(key)) is NegativeZero


def js_text(value: Any) -> str:
    """``String(value)`` as JavaScript renders a parsed JSON value (for refusal messages)."""
    if type(value) is str:
        return value
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if type(value) in (int, float):
        return repr(value)
    return orjson.dumps(value).decode()


def _version_refusal(value: dict[str, Any], version: float, path: str) -> SessionFormatUnsupportedError:
    session = js_text(value["id"]) if "id" in value else "undefined"
    shown = js_text(version)
    if version > FORMAT_VERSION:
        reason = (
            f'session "{session}" uses log format v{shown}, but this build reads only '
            f"v{FORMAT_VERSION}: the log was written by a newer agentlog/DSH — upgrade agentlog to open it"
        )
    else:
        reason = (
            f'session "{session}" uses log format v{shown}, older than the supported '
            f"v{FORMAT_VERSION}, and this build ships no upgrade path for it"
        )
    return SessionFormatUnsupportedError(f"{reason} (raw log: {path})", file=path)
