"""Two read-only tools for a coding agent, confined to one root directory: read a file, list a directory.

A tool never raises for what the model asked: a path outside the root (``..``, an absolute
path, a symlink leading out), a symlink loop, a missing file, a FIFO or device, or malformed arguments come
back as an error result the model can read. Output is capped, and always valid text.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from agentlog.errors import UsageError

__all__ = ["MAX_ENTRIES", "MAX_READ_BYTES", "TOOLS", "FileTools", "ToolOutput"]

MAX_READ_BYTES: Final = 64 * 1024
"""How much of a file ``read_file`` returns; the rest is announced, not sent."""
MAX_ENTRIES: Final = 500
"""How many directory entries ``list_dir`` returns."""

_PATH: Final = {"type": "object", "properties": {"path": {
    "type": "string", "description": "A path relative to the project root."}}, "required": ["path"]}
TOOLS: Final[tuple[dict[str, Any], ...]] = (
    {"type": "function", "function": {"name": "read_file", "parameters": _PATH,
                                      "description": "Read a text file under the project root."}},
    {"type": "function", "function": {"name": "list_dir", "parameters": _PATH,
                                      "description": "List a directory under the project root."}},
)
"""The tools in Chat Completions form, for ``chat_header(..., tools=TOOLS)``."""


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool gives the model: text, and whether it is an error."""

    text: str
    is_error: bool = False


class _RefusedError(Exception):
    """A request the tool answers with an error result."""


def _text(raw: bytes | str) -> str:
    """Valid text from bytes or an OS string (undecodable bytes become U+FFFD, never lone surrogates)."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")
    return data.decode("utf-8", "replace")


class FileTools:
    """``read_file`` and ``list_dir`` under ``root``; ``run(name, arguments)`` answers a tool call."""

    def __init__(self, root: str | os.PathLike[str], *, max_bytes: int = MAX_READ_BYTES,
                 max_entries: int = MAX_ENTRIES) -> None:
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise UsageError(f"the tools' root {_text(str(root))!r} is not a directory")
        self.root = resolved
        self.max_bytes = max_bytes
        self.max_entries = max_entries

    def run(self, name: str, arguments: str) -> ToolOutput:
        """The result of tool ``name`` called with the JSON ``arguments`` the model sent."""
        path = ""
        try:
            if name not in ("read_file", "list_dir"):
                raise _RefusedError(f"unknown tool {name!r}; the tools are read_file and list_dir")
            path = self._path_argument(name, arguments)
            return ToolOutput(self.read_file(path) if name == "read_file" else self.list_dir(path))
        except _RefusedError as exc:
            return ToolOutput(f"error: {exc}", is_error=True)
        except OSError as exc:  # named by the model's path: the root's location is not the model's business
            return ToolOutput(f"error: {name}: {path!r}: {exc.strerror or type(exc).__name__}", is_error=True)

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the root) resolved, symlinks followed; refused if it leaves the root."""
        if "\x00" in path:
            raise _RefusedError("the path contains a NUL character")
        if os.path.isabs(path):
            raise _RefusedError(f"{path!r} is absolute; give a path relative to the project root")
        try:
            resolved = (self.root / path).resolve()
        except RuntimeError:  # Python < 3.13 raises this for a symlink loop (3.13 leaves it to open: ELOOP)
            raise _RefusedError(f"{path!r}: too many levels of symbolic links") from None
        if not resolved.is_relative_to(self.root):
            raise _RefusedError(f"{path!r} is outside the project root")
        return resolved

    def read_file(self, path: str) -> str:
        """The file's text, at most ``max_bytes`` of it; only regular files (a FIFO would block)."""
        target = self.resolve(path)
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _RefusedError(f"{path!r} is not a regular file")
            data = file.read(self.max_bytes + 1)
        if len(data) <= self.max_bytes:
            return _text(data)
        return (_text(data[: self.max_bytes]) +
                f"\n[... truncated: {path} has {info.st_size} bytes; the first {self.max_bytes} are shown]")

    def list_dir(self, path: str) -> str:
        """The directory's entries sorted by name, directories with a trailing ``/``, capped."""
        target = self.resolve(path)
        with os.scandir(target) as entries:
            names = sorted(_text(e.name) + ("/" if e.is_dir(follow_symlinks=False) else "") for e in entries)
        shown = names[: self.max_entries]
        if len(names) > len(shown):
            shown.append(f"[... {len(names) - len(shown)} more entries not shown]")
        return "\n".join(shown) if shown else "(empty directory)"

    def _path_argument(self, name: str, arguments: str) -> str:
        try:
            parsed: Any = orjson.loads(arguments or "{}")
        except orjson.JSONDecodeError as exc:
            raise _RefusedError(f"{name}: the arguments are not JSON ({exc})") from None
        path = parsed.get("path") if isinstance(parsed, dict) else None
        if type(path) is not str:
            raise _RefusedError(f'{name}: the arguments need a string "path", got {_text(arguments)[:200]!r}')
        return path
