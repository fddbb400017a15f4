"""A file to import, read once at the edge, and the pure parsing every importer shares.

Importers take a ``SourceFile`` (its name and bytes) and never touch the file system, so the
same function serves the CLI, the API and tests. Errors name the file, the line and its
byte offset, and the shape the format expects.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from agentlog.core.jsonvalue import as_text
from agentlog.errors import SourceFormatError

__all__ = ["Line", "SourceFile", "iso_ms", "json_document", "jsonl_records"]


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file to import: ``path`` names it in errors and ids, ``data`` is its content."""

    path: str
    data: bytes

    @property
    def name(self) -> str:
        """The file's base name as valid text (a name that is not UTF-8 gets U+FFFD), for the
        session's ``importedFrom``: a lone surrogate from ``os.fsdecode`` is no JSON string."""
        return as_text(os.path.basename(self.path))

    def error(self, detail: str, *, line: int | None = None, offset: int | None = None) -> SourceFormatError:
        """A ``SourceFormatError`` naming this file (and the line, when known)."""
        where = f"line {line}: " if line is not None else ""
        return SourceFormatError(f"{where}{detail}", file=self.path, offset=offset)


class Line(NamedTuple):
    """One JSON record of a JSONL file: its 1-based line number, byte offset and value."""

    number: int
    offset: int
    value: Any


def jsonl_records(source: SourceFile, expected: str) -> Iterator[Line]:
    """The JSON object on each non-blank line; a malformed line names file, line and ``expected``."""
    offset = 0
    for number, raw in enumerate(source.data.split(b"\n"), 1):
        start, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise source.error(f"not a JSON line ({exc}); expected {expected}",
                               line=number, offset=start) from None
        if not isinstance(value, dict):
            raise source.error(f"a JSON {type(value).__name__}, not an object; expected {expected}",
                               line=number, offset=start)
        yield Line(number, start, value)


def json_document(source: SourceFile, expected: str) -> Any:
    """The file's one JSON value; a parse failure names the file and ``expected``."""
    try:
        return orjson.loads(source.data)
    except orjson.JSONDecodeError as exc:
        raise source.error(f"not a JSON document ({exc}); expected {expected}") from None


def iso_ms(value: Any) -> int | None:
    """Epoch milliseconds of an ISO-8601 timestamp (``...Z`` or with an offset), else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return int(parsed.timestamp() * 1000)
