"""No symlink below a JSONL store root is followed, and a transcript is a regular file.

A symlink planted as ``.agentlog``, ``.agentlog/locks``, a session or ``forks`` directory would
make an import truncate lock files, write transcripts or ``delete`` unlink files outside the
root. The root itself may be a symlink (the user names it); below it, each existing component of
a path must be a real directory or file, with one exception DSH keeps (spec persistence §4.9,
checklist 28): a project directory moved elsewhere and linked back (or an alias of one) is
followed when the link and the directory it reaches belong to this user and no one else may
write there, the ownership rule of the SQLite store's path checks. A directory or a FIFO where a
transcript belongs is named as such, not taken for a missing session.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from agentlog.errors import StoreError
from agentlog.store.fs import file_kind, io_error

__all__ = ["refuse_irregular", "refuse_links"]

_ABSENT = (errno.ENOENT, errno.ENOTDIR)


def refuse_links(root: Path, path: Path, *, session_id: str | None = None) -> None:
    """Raise ``StoreError`` naming the first symlink among the components of ``path`` below ``root``.

    The walk stops at the first component that does not exist (nothing beyond it can be a link yet).
    """
    current = root
    for depth, part in enumerate(path.relative_to(root).parts):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except OSError as exc:
            if exc.errno in _ABSENT:
                return
            io_error(f"cannot stat: {exc.strerror or exc}", exc, session_id=session_id, file=str(current))
        if stat.S_ISLNK(mode) and not (depth == 0 and _owned_project_alias(current)):
            raise StoreError(f"{current} is a symlink; refusing to follow it out of the store root {root} "
                             "(replace it with the directory it points to, or open that directory as a "
                             "store of its own)", session_id=session_id, file=str(current))


def _owned_project_alias(link: Path) -> bool:
    """A project directory's symlink that this user made to a directory only this user may write."""
    if link.name.startswith("."):
        return False  # .agentlog and other store files are never aliases
    try:
        own, target = os.lstat(link), os.stat(link)
    except OSError:
        return False
    user = os.geteuid()
    return (stat.S_ISDIR(target.st_mode) and own.st_uid == user and target.st_uid == user
            and not target.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def refuse_irregular(path: Path, info: os.stat_result, *, session_id: str | None = None) -> None:
    """Raise ``StoreError`` unless ``info`` (the ``stat`` of the transcript ``path``) is a regular file's."""
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"the transcript is {file_kind(info.st_mode)}, not a regular file: remove it or put "
                         "the session's file back", session_id=session_id, file=str(path))
