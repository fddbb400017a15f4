"""What a repair or a crash leaves beside a transcript: the cut tail's copy, and stale temp files.

A repair never throws a user's bytes away: the torn tail it cuts is first copied, fsynced, into
``<transcript>.torn-at-<offset>`` (``-2``, ``-3``, ... when that name is taken) in the session's
directory. A writer killed while publishing leaves ``<transcript>.<12 hex>.tmp`` (or a sidecar's
``<sidecar>.<pid>.<thread>.tmp``); the next holder of the session's writer lock removes them.
``JsonlLeftovers`` does both for the store.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from pathlib import Path

from agentlog.core.header import SessionHeader
from agentlog.store.base import DEFAULT_WRITE_DELAY_MS, Store
from agentlog.store.filelock import lock_session_file
from agentlog.store.fs import FileSystem, io_error
from agentlog.store.jsonl.links import refuse_links
from agentlog.store.records import WriterLock

__all__ = ["TORN_COPY_INFIX", "JsonlLeftovers", "keep_cut_tail", "remove_stale_temps"]

logger = logging.getLogger(__name__)

TORN_COPY_INFIX = ".torn-at-"
"""Between the transcript's name and the offset where the cut bytes started."""


def keep_cut_tail(fs: FileSystem, transcript: Path, offset: int) -> Path | None:
    """Copy the transcript's bytes from ``offset`` on into a new side file (fsynced, with its
    directory entry) and return it; None when there is nothing after ``offset``."""
    with open(transcript, "rb") as handle:
        handle.seek(offset)
        cut = handle.read()
    if not cut:
        return None
    base = f"{transcript}{TORN_COPY_INFIX}{offset}"
    for attempt in range(1, 1000):
        copy = base if attempt == 1 else f"{base}-{attempt}"
        try:
            fs.write_new(copy, cut)
        except FileExistsError:
            continue
        fs.fsync_dir(str(transcript.parent))
        return Path(copy)
    raise FileExistsError(f"{base}: 999 copies of cut tails at this offset already exist")


def _temp_pattern(transcript_name: str) -> re.Pattern[str]:
    name = re.escape(transcript_name)
    return re.compile(rf"{name}\.[0-9a-f]{{12}}\.tmp|{name}\.(?:seek|ckpt)\.(\d+)\.\d+\.tmp")


def remove_stale_temps(session_dir: Path, transcript_name: str) -> list[Path]:
    """Remove what a killed writer left in ``session_dir``; call it holding the writer lock.

    A transcript temp is written only under that lock, so any one found is stale. A sidecar
    temp names its writer's pid: it is removed only when that process is gone.
    """
    pattern = _temp_pattern(transcript_name)
    removed: list[Path] = []
    try:
        entries = list(os.scandir(session_dir))
    except OSError:
        return removed
    for entry in entries:
        found = pattern.fullmatch(entry.name)
        if found is None or (found.group(1) is not None and _alive(int(found.group(1)))):
            continue
        with contextlib.suppress(FileNotFoundError):
            try:
                os.unlink(entry.path)
            except OSError as exc:
                logger.warning("could not remove the stale temp file %s: %s", entry.path, exc)
                continue
            removed.append(Path(entry.path))
    return removed


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists (this one included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, owned by someone else
    return True


class JsonlLeftovers(Store):
    """The JSONL store's writer lock, which tidies a killed writer's temp files once taken, and
    the side files its repairs keep."""

    root: Path
    _fs: FileSystem
    _paths: dict[str, Path]
    _transcript: str

    def __init__(self, *, write_delay_ms: int = DEFAULT_WRITE_DELAY_MS) -> None:
        super().__init__(write_delay_ms=write_delay_ms)
        self._torn_copies: dict[str, str | None] = {}

    # -- provided by JsonlStore ------------------------------------------------------------------------

    def _find(self, session_id: str) -> Path | None:
        raise NotImplementedError

    def _session_dir(self, header: SessionHeader) -> Path:
        raise NotImplementedError

    def _lock_path(self, session_id: str) -> Path:
        raise NotImplementedError

    # -- leftovers -------------------------------------------------------------------------------------

    def _acquire_writer_lock(self, session_id: str) -> WriterLock:
        path = self._lock_path(session_id)
        refuse_links(self.root, path, session_id=session_id)
        lock = lock_session_file(path, session_id)
        try:
            state = self._states.get(session_id)
            transcript = self._paths.get(session_id) or (
                self._session_dir(state.header) / self._transcript if state else self._find(session_id))
        except BaseException:
            lock.release()
            raise
        if transcript is not None:
            remove_stale_temps(transcript.parent, self._transcript)
        return lock

    def kept_tail(self, session_id: str) -> str | None:
        """The side file where this store's last repair of the session kept the bytes it cut."""
        return self._torn_copies.get(session_id)

    def _keep_cut_tail(self, session_id: str, path: Path, offset: int) -> None:
        """Copy the bytes a repair is about to cut (``offset`` on) into a new side file."""
        try:
            copy = keep_cut_tail(self._fs, path, offset)
        except OSError as exc:
            io_error(f"could not keep the torn tail before cutting it: {exc}", exc, session_id=session_id,
                     file=str(path), offset=offset)
        self._torn_copies[session_id] = None if copy is None else str(copy)
