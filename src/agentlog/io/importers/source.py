"""A file to import, read once at the edge, and the pure parsing every importer shares.

Importers take a ``SourceFile`` (its name and bytes) and never touch the file system, so the
same function serves the CLI, the API and tests; ``read_source`` is that edge (regular files
only, read in chunks up to a size cap). Errors name the file, the line and its byte offset, and
the shape the format expects.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

import orjson

from agentlog.core.jsonvalue import as_text
from agentlog.errors import SourceFormatError
from agentlog.store.fs import file_kind

__all__ = ["MAX_SOURCE_BYTES", "Line", "SourceFile", "iso_ms", "json_document", "jsonl_records",
           "read_source", "without_torn_tail"]

MAX_SOURCE_BYTES: Final = 1 << 30
"""The largest file ``read_source`` takes by default (1 GiB): an import holds the whole file in memory."""

_CHUNK: Final = 1 << 20
_PROGRESS_STEP: Final = 1 << 20
"""``jsonl_records`` tells ``SourceFile.progress`` its position about once per this many bytes."""

@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file to import: ``path`` names it in errors and ids, ``data`` is its content."""

    path: str
    data: bytes
    progress: Callable[[int, int], None] | None = field(default=None, compare=False, repr=False)
    """Told ``(bytes parsed, size)`` as a JSONL importer goes through the file (the CLI's byte
    progress on a large file); never told anything by a single-document format."""

    @property
    def name(self) -> str:
        """The file's base name as valid text (a name that is not UTF-8 gets U+FFFD), for the
        session's ``importedFrom``: a lone surrogate from ``os.fsdecode`` is no JSON string."""
        return as_text(os.path.basename(self.path))

    def error(self, detail: str, *, line: int | None = None, offset: int | None = None) -> SourceFormatError:
        """A ``SourceFormatError`` naming this file (and the line, when known)."""
        where = f"line {line}: " if line is not None else ""
        return SourceFormatError(f"{where}{detail}", file=self.path, offset=offset)


def read_source(path: str | os.PathLike[str], *, max_bytes: int = MAX_SOURCE_BYTES) -> SourceFile:
    """The content of a regular file to import, read in chunks; anything else (a FIFO, a device,
    a directory) and a file over ``max_bytes`` are refused before they are read whole.

    Opened non-blocking, so a FIFO without a writer cannot hang the open; ``OSError`` propagates.
    """
    name = os.fspath(path)
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SourceFormatError(f"not a regular file ({file_kind(info.st_mode)}): import reads regular "
                                    "files only",
                                    file=name)
        if info.st_size > max_bytes:
            raise _too_big(name, info.st_size, max_bytes)
    except BaseException:
        os.close(fd)
        raise
    chunks: list[bytes] = []
    read = 0
    with open(fd, "rb", buffering=0, closefd=True) as handle:
        while chunk := handle.read(_CHUNK):
            read += len(chunk)
            if read > max_bytes:  # it grew past the cap while being read
                raise _too_big(name, read, max_bytes)
            chunks.append(chunk)
    return SourceFile(name, b"".join(chunks))


def _too_big(name: str, size: int, max_bytes: int) -> SourceFormatError:
    return SourceFormatError(f"{size} bytes is larger than the import size cap of {max_bytes} bytes; "
                             "raise the cap to import it (agentlog import --max-size, or "
                             "read_source(max_bytes=...))",
                             file=name)


class Line(NamedTuple):
    """One JSON record of a JSONL file: its 1-based line number, byte offset and value."""

    number: int
    offset: int
    value: Any


def jsonl_records(source: SourceFile, expected: str) -> Iterator[Line]:
    """The JSON object on each non-blank line; a malformed line names file, line and ``expected``."""
    offset, told, size = 0, 0, len(source.data)
    for number, raw in enumerate(source.data.split(b"\n"), 1):
        start, offset = offset, offset + len(raw) + 1
        if source.progress is not None and start - told >= _PROGRESS_STEP:
            told = start
            source.progress(start, size)
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


def without_torn_tail(source: SourceFile) -> tuple[SourceFile, str | None]:
    """The file without a last line its writer was killed inside (no final newline, not JSON),
    and a warning naming what was left out; a file that ends whole is returned as it is."""
    cut = source.data.rfind(b"\n") + 1
    tail = source.data[cut:]
    if not tail.strip():
        return source, None
    try:
        orjson.loads(tail)
    except orjson.JSONDecodeError:
        number = source.data.count(b"\n", 0, cut) + 1
        return dataclasses.replace(source, data=source.data[:cut]), (
            f"line {number} is torn (a write cut off: {len(tail)} bytes at byte {cut} with no final "
            "newline, not JSON): left out, the lines before it imported")
    return source, None


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
