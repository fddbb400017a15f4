"""Path encodings of the JSONL store: project keys and session-id segments (DSH format v0).

Both walk the UTF-16 code units of a string, as DSH does in JavaScript, so that the same
session lands in the same directory whichever runtime wrote it. A Python ``str`` that spells
a surrogate pair as two code points denotes the same JavaScript string as the astral
character, and encodes the same.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from agentlog.errors import InvalidHeaderError

__all__ = [
    "ID_SEGMENT_LIMIT",
    "NO_CWD_PROJECT",
    "TRANSCRIPT_RAW",
    "TRANSCRIPT_ZSTD",
    "decode_session_id",
    "check_id_length",
    "encode_session_id",
    "is_dir_entry",
    "listed_id",
    "project_key",
]

TRANSCRIPT_RAW: Final = "session.jsonl"
"""File name of a plain-text transcript inside its session directory."""

TRANSCRIPT_ZSTD: Final = "session.jsonl.zstd"
"""File name of a Zstandard transcript inside its session directory."""

NO_CWD_PROJECT: Final = "_no-cwd"
"""Project directory of sessions that have no working directory."""

_PROJECT_KEY_LIMIT: Final = 251
"""Slug characters kept, so that ``--<slug>--`` fits a 255-byte path component."""

ID_SEGMENT_LIMIT: Final = 244
"""Longest encoded session id: DSH's flat layout looks for ``<segment>.jsonl.zstd``, and a file
name is 255 bytes at most."""

_SAFE: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS: Final = frozenset(b"/\\:")
_ESCAPE = re.compile(r"~([0-9A-F]{4})")


def _code_units(text: str) -> list[int]:
    """The UTF-16 code units of ``text`` (lone surrogates kept as they are)."""
    raw = text.encode("utf-16-le", "surrogatepass")
    return [raw[i] | raw[i + 1] << 8 for i in range(0, len(raw), 2)]


def _escape(unit: int) -> str:
    return f"~{unit:04X}"


def encode_session_id(session_id: str) -> str:
    """One safe path segment for a session id; injective, so ids never share a directory.

    ``[A-Za-z0-9._-]`` stay literal and every other UTF-16 code unit (``~`` included) becomes
    ``~XXXX``; ``.`` and ``..`` are escaped whole so that no id can climb out of its project.
    """
    if type(session_id) is not str:
        raise TypeError(f"session id must be a string, got {type(session_id).__name__}")
    if not session_id:
        raise InvalidHeaderError("cannot encode an empty session id as a path segment")
    if session_id == ".":
        return "~002E"
    if session_id == "..":
        return "~002E~002E"
    if session_id.isascii():
        return "".join(ch if ord(ch) in _SAFE else _escape(ord(ch)) for ch in session_id)
    return "".join(chr(unit) if unit in _SAFE else _escape(unit) for unit in _code_units(session_id))


def check_id_length(session_id: str) -> None:
    """Refuse an id whose path segment no file system takes (before anything is written)."""
    length = len(encode_session_id(session_id))
    if length > ID_SEGMENT_LIMIT:
        raise InvalidHeaderError(
            f"session id too long for the JSONL store: its file name is {length} bytes, at most "
            f"{ID_SEGMENT_LIMIT} ([A-Za-z0-9._-] take one byte each, any other character five); use a "
            "shorter id, or the SQLite or PostgreSQL store", session_id=session_id)


def decode_session_id(segment: str) -> str:
    """Invert ``encode_session_id`` (for diagnostics; discovery compares encoded names)."""
    units: list[int] = []
    pos = 0
    for match in _ESCAPE.finditer(segment):
        units.extend(ord(ch) for ch in segment[pos:match.start()])
        units.append(int(match.group(1), 16))
        pos = match.end()
    units.extend(ord(ch) for ch in segment[pos:])
    raw = b"".join(unit.to_bytes(2, "little") for unit in units)
    return raw.decode("utf-16-le", "surrogatepass")


def project_key(cwd: str | None) -> str:
    """The project directory name for a working directory: ``--<slug>--`` or ``_no-cwd``.

    Readable and lossy on purpose (``/a/b-c`` and ``/a-b/c`` share a directory): runs of
    ``/``, ``\\`` and ``:`` become one ``-``, other unsafe code units ``~XXXX``; leading ``-``
    are stripped, an empty slug becomes ``root``, and the slug keeps 251 characters.
    """
    if cwd is None:
        return NO_CWD_PROJECT
    if type(cwd) is not str:
        raise TypeError(f"cwd must be a string, got {type(cwd).__name__}")
    if not cwd:
        raise InvalidHeaderError("cannot encode an empty project path")
    parts: list[str] = []
    in_separator_run = False
    for unit in _code_units(cwd):
        if unit in _SEPARATORS:
            if not in_separator_run:
                parts.append("-")
            in_separator_run = True
            continue
        parts.append(chr(unit) if unit in _SAFE else _escape(unit))
        in_separator_run = False
    slug = "".join(parts).lstrip("-") or "root"
    return f"--{slug[:_PROJECT_KEY_LIMIT]}--"


def listed_id(session_dir: Path) -> str | None:
    """The session id a session directory's name encodes, if it encodes one."""
    try:
        return decode_session_id(session_dir.name)
    except (UnicodeDecodeError, ValueError, OverflowError):
        return None


def is_dir_entry(entry: os.DirEntry[str]) -> bool:
    """Whether a directory entry is a directory (False when it cannot be told)."""
    try:
        return entry.is_dir()
    except OSError:
        return False
