"""The few file-system calls the JSONL store makes, in one replaceable object.

Durability code is only as good as its failure handling; routing every write, fsync and
whole-file read through ``FileSystem`` lets tests inject real ``OSError``s (ENOSPC at the Nth
write) and real races (a file growing during a read) into real files.
"""

from __future__ import annotations

import os
import stat
from typing import Any, Final, NoReturn

from agentlog.errors import PersistenceIOError

__all__ = ["FileSystem", "file_kind", "io_error"]

_KINDS: Final = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                 (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                 (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink"), (stat.S_ISREG, "a regular file"))


def file_kind(mode: int) -> str:
    """What an ``st_mode`` is, for errors: "a directory", "a FIFO", "a regular file", ..."""
    return next((kind for test, kind in _KINDS if test(mode)), "a special file")


class FileSystem:
    """Thin wrappers over ``os``; subclass to inject faults."""

    def open(self, path: str, flags: int, mode: int = 0o600) -> int:
        return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), mode)

    def write(self, fd: int, data: bytes) -> None:
        """Write all of ``data`` (loops over short writes)."""
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def truncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def truncate_file(self, path: str, length: int) -> None:
        """Cut ``path`` back to ``length`` bytes, fsynced (through ``open``/``truncate``/``fsync``)."""
        fd = self.open(path, os.O_RDWR)
        try:
            self.truncate(fd, length)
            self.fsync(fd)
        finally:
            self.close(fd)

    def link(self, source: str, target: str) -> None:
        """Publish ``source`` under ``target``; fails if ``target`` exists (never overwrites)."""
        os.link(source, target)

    def replace(self, source: str, target: str) -> None:
        """Atomically swap ``target`` for ``source`` (only to rewrite a file that already exists)."""
        os.replace(source, target)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def stat(self, path: str) -> os.stat_result:
        return os.stat(path)

    def read_bytes(self, path: str) -> bytes:
        """The whole content of a file."""
        with open(path, "rb") as handle:
            return handle.read()

    def write_new(self, path: str, data: bytes) -> None:
        """Create ``path`` (it must not exist, mode 0600) holding ``data``, fsynced: a file to publish."""
        fd = self.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            self.write(fd, data)
            self.fsync(fd)
        finally:
            self.close(fd)

    def fsync_dir(self, path: str) -> None:
        """fsync a directory so a new entry in it survives a crash."""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def makedirs(self, path: str) -> None:
        """Create missing directories (0700), fsyncing each parent of a created one."""
        missing: list[str] = []
        current = path
        while not os.path.isdir(current):
            missing.append(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        for directory in reversed(missing):
            try:
                os.mkdir(directory, 0o700)
            except FileExistsError:
                if not os.path.isdir(directory):
                    raise
            self.fsync_dir(os.path.dirname(directory) or ".")


def io_error(detail: str, cause: OSError, **fields: Any) -> NoReturn:
    """Raise ``PersistenceIOError`` carrying the cause's errno, chained to it."""
    error = PersistenceIOError(detail, **fields)
    error.errno = cause.errno
    error.strerror = cause.strerror
    raise error from cause
