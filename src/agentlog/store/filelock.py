"""Per-session writer locks of the JSONL and SQLite stores: ``flock``s on lock files (and an
in-process set for a SQLite ``:memory:`` database, which no other process can open).

The kernel drops an ``flock`` when its holder dies, even by SIGKILL, so a crashed writer
never wedges a session and there is no pid reuse to misjudge; the holder's pid is written
into the file only for the error message. ``flock`` locks belong to an open file
description, so a second ``LiveSession`` in the same process is refused as well.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from pathlib import Path

from agentlog.errors import PersistenceIOError, SessionLockedError
from agentlog.store.fs import FileSystem
from agentlog.store.records import WriterLock

__all__ = ["FileLock", "InProcessLock", "discard_lock_file", "flock_holder", "lock_in_process",
           "lock_session_file"]


class FileLock(WriterLock):
    """An ``flock`` held on an open lock file."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def lock_session_file(path: Path, session_id: str) -> FileLock:
    """Take the exclusive lock on ``path`` (created 0600 in a 0700 directory) or raise.

    ``SessionLockedError`` names the holder's pid; other failures are ``PersistenceIOError``.
    A lock file unlinked by a concurrent delete is detected (inode check) and re-created.
    """
    try:
        FileSystem().makedirs(str(path.parent))  # every level it creates 0700, the root included
    except OSError as exc:
        raise PersistenceIOError(f"cannot create the lock directory: {exc}", session_id=session_id,
                                 file=str(path)) from exc
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise PersistenceIOError(f"cannot open the lock file: {exc}", session_id=session_id,
                                     file=str(path)) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                who = f"process {holder}" if holder else "another writer"
                raise SessionLockedError(f"session is open for writing by {who}", session_id=session_id,
                                         pid=holder, file=str(path)) from None
            raise PersistenceIOError(f"cannot lock: {exc}", session_id=session_id, file=str(path)) from exc
        try:
            current: int | None = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current != os.fstat(fd).st_ino:  # a delete unlinked it meanwhile: lock the new file
            os.close(fd)
            continue
        with contextlib.suppress(OSError):  # the pid is a courtesy for error messages
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        return FileLock(fd)


def discard_lock_file(path: Path, session_id: str) -> None:
    """Unlink the lock file of a session that was never stored, holding it meanwhile (a waiting
    opener re-checks the inode); a lock file another writer holds is left alone."""
    if not path.exists():
        return
    try:
        lock = lock_session_file(path, session_id)
    except SessionLockedError:
        return
    try:
        with contextlib.suppress(OSError):
            os.unlink(path)
    finally:
        lock.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def flock_holder(path: Path, locks: str = "/proc/locks") -> int | None:
    """The pid holding an ``flock`` on ``path`` per the kernel's lock table, None when none does.

    Only reads: taking even a shared lock would make a writer's ``LOCK_EX|LOCK_NB`` fail.
    Raises ``OSError`` where the table cannot be read (not Linux): the answer is unknown.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    wanted = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    with open(locks, encoding="ascii", errors="replace") as table:
        for line in table:
            fields = line.split()
            if "->" in fields:  # a waiter, not a holder
                continue
            if len(fields) < 6 or fields[1] != "FLOCK":
                continue
            where = fields[5].split(":")
            try:
                key = (int(where[0], 16), int(where[1], 16), int(where[2]))
                pid = int(fields[4])
            except (IndexError, ValueError):
                continue
            if key == wanted and pid > 0:
                return pid
    return None


class InProcessLock(WriterLock):
    """A lock of a ``:memory:`` store: a member of the store's in-process set."""

    def __init__(self, held: set[str], guard: threading.Lock, session_id: str) -> None:
        self._held, self._guard, self._session_id = held, guard, session_id
        self._active = True

    def release(self) -> None:
        with self._guard:
            if self._active:
                self._active = False
                self._held.discard(self._session_id)


def lock_in_process(held: set[str], guard: threading.Lock, session_id: str) -> InProcessLock:
    """Add ``session_id`` to ``held`` or raise ``SessionLockedError`` (this process holds it)."""
    with guard:
        if session_id in held:
            raise SessionLockedError(f"session is open for writing by process {os.getpid()}",
                                     session_id=session_id, pid=os.getpid())
        held.add(session_id)
    return InProcessLock(held, guard, session_id)
