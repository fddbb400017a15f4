"""The JSONL store's forks by reference: fork markers, the reference guard, deletion and materialize.

A fork by reference publishes a header flagged ``agentlogSharedPrefix`` that reads its first
``seedLength`` events from its parent; a marker in the parent's ``forks/`` directory (made
durable first) keeps the parent from being deleted while the child needs it, and
``materialize`` rewrites the child as a full DSH-readable copy. ``JsonlForks`` is the part of
``JsonlStore`` that does this; the file layout and I/O it calls are ``JsonlStore``'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import frozen_dict
from agentlog.core.packed import LogEntry
from agentlog.errors import (
    AgentlogError,
    SessionCorruptionError,
    SessionNotFoundError,
    StoreError,
    UsageError,
)
from agentlog.store.filelock import discard_lock_file, flock_holder
from agentlog.store.fs import FileSystem, io_error
from agentlog.store.hooks import _State
from agentlog.store.jsonl.format import (
    SHARED_PREFIX_KEY,
    TornTail,
    decode_session_id,
    encode_session_id,
    first_stored_seq,
    scan_zstd_frames,
)
from agentlog.store.jsonl.leftovers import JsonlLeftovers
from agentlog.store.jsonl.links import refuse_links
from agentlog.store.jsonl.seek import SeekIndex

__all__ = ["FORKS_DIR", "JsonlForks", "Transcript", "is_shared", "public_header"]

FORKS_DIR = "forks"
"""Inside a session directory: one empty marker per shared-prefix fork child (named by its id)."""


@dataclass(frozen=True, slots=True)
class Transcript:
    """One transcript as stored: its own header and events (a shared-prefix fork holds a suffix)."""

    path: Path
    revision: str
    size: int
    """Bytes of the file as read (a torn tail included)."""
    stored_header: SessionHeader
    """The header line as written (may carry ``agentlogSharedPrefix``)."""
    events: tuple[LogEntry, ...]
    """Events physically in this file: seqs from ``first_stored_seq(stored_header)`` (packed rows kept
    packed: see ``agentlog.core.packed``)."""
    torn: TornTail | None
    partial: bool = False
    """Scanned only up to some seq (a fork's prefix): nothing after ``events`` was examined."""
    marks: tuple[tuple[int, int], ...] = ()
    """``LogScan.marks``: what rebuilds a stale seek index."""

    @property
    def complete(self) -> list[LogEntry]:
        """Stored events plus the complete records of a torn zstd frame (they survive repair)."""
        return [*self.events, *self.torn.recovered] if self.torn is not None else list(self.events)

    def serves(self, until_seq: int | None) -> bool:
        """Whether this scan answers a read up to ``until_seq`` (None: the whole transcript)."""
        if not self.partial:
            return True
        return until_seq is not None and first_stored_seq(self.stored_header) + len(self.events) >= until_seq


class JsonlForks(JsonlLeftovers):
    """Forks by reference, fork-aware deletion and ``materialize`` of the JSONL store."""

    _fs: FileSystem
    _paths: dict[str, Path]
    _seek: SeekIndex
    compressed: bool
    root: Path

    # -- provided by JsonlStore (the file layout and its I/O) ----------------------------------------

    def _find(self, session_id: str) -> Path | None:
        raise NotImplementedError

    def _scan_dir(self, directory: Path) -> list[os.DirEntry[str]]:
        raise NotImplementedError

    def _read_file(self, path: Path) -> tuple[bytes, str] | None:
        raise NotImplementedError

    def _read_transcript(self, session_id: str, until_seq: int | None = None) -> Transcript | None:
        raise NotImplementedError

    def _read_listing_header(self, path: Path) -> SessionHeader | None:
        raise NotImplementedError

    def _forget(self, session_id: str) -> None:
        raise NotImplementedError

    def _saw_end(self, session_id: str, next_seq: int, size: int | None) -> None:
        raise NotImplementedError

    def _encode(self, events: Sequence[Event]) -> bytes:
        raise NotImplementedError

    def _encode_header(self, header: SessionHeader) -> bytes:
        raise NotImplementedError

    def _materialize(self, header: SessionHeader, content: bytes, batch: tuple[int, int]) -> None:
        raise NotImplementedError

    def _lock_path(self, session_id: str) -> Path:
        raise NotImplementedError

    # -- reading a shared prefix ---------------------------------------------------------------

    def _shared_prefix(self, child: Transcript) -> tuple[list[LogEntry], list[tuple[int, str]]]:
        """The events a shared-prefix fork reads from its ancestors (iterative over a fork chain).

        Walking up, each ancestor supplies the seqs it holds itself below what its descendants
        still need, and is scanned only that far. Also returns ``(first seq, ancestor id)`` of
        each piece, oldest first (legacy upgrades name pre-identity messages after their writer).
        """
        pieces: list[list[LogEntry]] = []
        writers: list[tuple[int, str]] = []
        header = child.stored_header
        limit = header.seed_length  # seqs below it still come from ancestors
        seen = {header.id}
        while True:
            parent_id, where = header.parent_session, str(self._paths.get(header.id, ""))
            if parent_id is None or header.seed_length is None or limit is None:
                raise SessionCorruptionError("shared-prefix fork lacks parentSession or seedLength",
                                             session_id=header.id, file=where or None)
            if parent_id in seen:
                raise SessionCorruptionError(f"shared-prefix fork chain loops back to {parent_id!r}",
                                             session_id=header.id, file=where or None)
            seen.add(parent_id)
            parent = self._read_transcript(parent_id, until_seq=limit)
            if parent is None:
                raise SessionCorruptionError(
                    f"fork parent {parent_id!r} is missing: this fork shares its first "
                    f"{header.seed_length} events (materialize forks before removing their parents)",
                    session_id=header.id, file=where or None,
                )
            shared = is_shared(parent.stored_header)
            first = (parent.stored_header.seed_length or 0) if shared else 0  # its first own seq
            if first < limit:
                own = parent.complete
                if first + len(own) < limit:
                    raise SessionCorruptionError(
                        f"fork parent {parent_id!r} holds {first + len(own)} events, fewer than the "
                        f"{limit} its forks share", session_id=child.stored_header.id, file=str(parent.path),
                    )
                pieces.append(own[: limit - first])
                writers.append((first, parent_id))
                limit = first
            if not shared or limit == 0:
                break
            header = parent.stored_header
        writers.reverse()
        return [event for piece in reversed(pieces) for event in piece], writers

    # -- forks by reference ------------------------------------------------------------------------

    def _write_fork_prefix(self, header: SessionHeader, prefix: Sequence[Event], state: _State,
                           suffix: Sequence[Event] = ()) -> None:
        """Publish the child as a header that references its parent's prefix, followed by its own
        first events (``suffix``, the end-seed marker): O(1) bytes and time, one file publish.

        A marker in the parent's ``forks/`` directory is made durable first, so a parent can
        never be deleted while a child that needs it exists.
        """
        if not prefix:
            return
        parent_id = header.parent_session
        if parent_id is None:
            raise UsageError("a fork by reference needs a parent session", session_id=header.id)
        shared = _with_extra(header, {SHARED_PREFIX_KEY: True})
        head = self._encode_header(shared)
        content = head + (self._encode(suffix) if suffix else b"")
        with self._reference_guard(parent_id, exclusive=False):
            parent_path = self._find(parent_id)
            if parent_path is None:
                raise SessionNotFoundError(f"fork parent {parent_id!r} has no transcript (deleted?)",
                                           session_id=header.id)
            marker = parent_path.parent / FORKS_DIR / encode_session_id(header.id)
            self._write_marker(marker, header.id)
            try:
                self._materialize(shared, content, (len(prefix), len(head)))
            except BaseException:
                self._remove_marker(marker)
                raise
        self._saw_end(header.id, len(prefix) + len(suffix), len(content))
        state.materialized = True
        state.cursor = len(prefix) + len(suffix)

    def _refs_path(self, session_id: str) -> Path:
        return self._lock_path(session_id).with_suffix(".refs")

    @contextlib.contextmanager
    def _reference_guard(self, session_id: str, *, exclusive: bool) -> Iterator[None]:
        """Serialize, across processes, publishing a fork of ``session_id`` with deleting it.

        Forks hold it shared while they record their marker and publish; ``delete`` holds it
        exclusively while it re-checks for children and unlinks, so no child can slip in between.
        """
        path = self._refs_path(session_id)
        refuse_links(self.root, path, session_id=session_id)
        try:
            os.makedirs(path.parent, mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            io_error(f"cannot create lock file: {exc}", exc, session_id=session_id, file=str(path))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # closing the last descriptor releases the flock

    def _write_marker(self, marker: Path, session_id: str) -> None:
        fs = self._fs
        refuse_links(self.root, marker, session_id=session_id)
        try:
            fs.makedirs(str(marker.parent))
            fd = fs.open(str(marker), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            fs.close(fd)
            fs.fsync_dir(str(marker.parent))
        except OSError as exc:
            io_error(f"cannot record the fork reference {marker}: {exc}", exc, session_id=session_id,
                      file=str(marker))

    def _remove_marker(self, marker: Path) -> None:
        """Drop a fork marker (best effort: a stale marker only names a child that no longer needs it)."""
        try:
            refuse_links(self.root, marker)
        except StoreError:
            return  # never unlink through a planted symlink
        try:
            self._fs.unlink(str(marker))
            self._fs.fsync_dir(str(marker.parent))
        except OSError:
            pass

    def _children_of(self, session_id: str) -> list[str]:
        """Stored forks whose transcript still reads its prefix from this session."""
        path = self._find(session_id)
        if path is None:
            return []
        children: list[str] = []
        for entry in self._scan_dir(path.parent / FORKS_DIR):
            try:
                child = decode_session_id(entry.name)
            except (UnicodeDecodeError, ValueError, OverflowError):
                continue  # not a marker this store wrote
            try:
                child_path = self._find(child)
                header = self._read_listing_header(child_path) if child_path is not None else None
            except AgentlogError:
                children.append(child)  # unreadable: assume it still needs its parent
                continue
            if child_path is None:
                continue  # a stale marker: the child was deleted or never published
            if header is not None and is_shared(header) and header.parent_session == session_id:
                children.append(child)
        return children

    def _delete_stored(self, session_id: str) -> None:
        """Unlink the transcript (the point of no return), then the rest of its directory.

        Children are checked again under the reference guard: a fork published by another
        process after ``Store.delete``'s first check still keeps its parent.
        """
        with self._reference_guard(session_id, exclusive=True):
            children = self._children_of(session_id)
            if children:
                raise UsageError(
                    f"cannot delete: fork children reference this session ({', '.join(sorted(children))})",
                    session_id=session_id,
                )
            self._delete_unguarded(session_id)
            # Both are held here: a waiting writer re-checks the lock's inode, a waiting fork
            # finds no parent; neither file may outlive the session.
            lock = self._lock_path(session_id)
            for path in (lock, self._refs_path(session_id)):
                with contextlib.suppress(OSError):
                    os.unlink(path)

    def _discard_lock_file(self, session_id: str) -> None:
        path = self._lock_path(session_id)
        refuse_links(self.root, path, session_id=session_id)
        discard_lock_file(path, session_id)

    def _writer_pid(self, session_id: str) -> int | None:
        return flock_holder(self._lock_path(session_id))

    def _delete_unguarded(self, session_id: str) -> None:
        path = self._find(session_id)
        if path is None:
            return
        try:
            header = self._read_listing_header(path)
        except AgentlogError:
            header = None  # a damaged session can still be deleted
        session_dir = path.parent
        try:
            self._fs.unlink(str(path))
            self._fs.fsync_dir(str(session_dir))
            shutil.rmtree(session_dir)
            self._fs.fsync_dir(str(session_dir.parent))
        except OSError as exc:
            io_error(f"could not delete {session_dir}: {exc}", exc, session_id=session_id,
                      file=str(session_dir))
        finally:
            self._paths.pop(session_id, None)
            self._forget(session_id)
            self._saw_end(session_id, 0, None)
        if header is not None and header.parent_session is not None:
            parent = self._find(header.parent_session)
            if parent is not None:
                self._remove_marker(parent.parent / FORKS_DIR / encode_session_id(session_id))

    def materialize(self, session_id: str) -> None:
        """Rewrite a shared-prefix fork as a full, DSH-readable copy of its log (no-op otherwise).

        The result is byte-identical to what a copying fork would have written: the header,
        the prefix as one batch, then the child's own batches unchanged. An interrupted turn
        is repaired first, as by ``load``. Afterwards the parent no longer counts the child.
        """
        self._check_open()
        with self._serialized(session_id):
            if session_id in self._live:
                raise UsageError("cannot materialize a live session; close it first", session_id=session_id)
            if self._find(session_id) is None:
                raise SessionNotFoundError("session not found", session_id=session_id)
            lock = self._acquire_writer_lock(session_id)
            try:
                self._materialize_locked(session_id)
            finally:
                lock.release()

    def _materialize_locked(self, session_id: str) -> None:
        transcript = self._read_transcript(session_id)
        if transcript is None:
            raise SessionNotFoundError("session not found", session_id=session_id)
        stored = transcript.stored_header
        if not is_shared(stored):
            return
        session = self._load_committed(session_id)  # validates the whole log, commits any repair
        path = transcript.path
        read = self._read_file(path)
        if read is None:
            raise SessionNotFoundError("session not found", session_id=session_id)
        data = read[0]
        if self.compressed:
            own_start = scan_zstd_frames(data, max_frames=1, path=str(path)).frames[0][1]
        else:
            own_start = data.index(b"\n") + 1
        plain = public_header(stored)
        prefix = session.events[: stored.seed_length or 0]
        head = self._encode_header(plain)
        content = head + (self._encode(prefix) if prefix else b"") + data[own_start:]
        fs = self._fs
        temp = f"{path}.{uuid.uuid4().hex[:12]}.tmp"
        try:
            fs.write_new(temp, content)
            fs.replace(temp, str(path))
            fs.fsync_dir(str(path.parent))
        except OSError as exc:
            with contextlib.suppress(OSError):
                fs.unlink(temp)
            io_error(f"could not rewrite {path} as a full copy: {exc}", exc, session_id=session_id,
                      file=str(path))
        finally:
            self._forget(session_id)
            self._saw_end(session_id, 0, None)  # rewritten: known again at the next read
        self._seek.published(path, 0, len(head), content)  # the old digests name the old bytes
        parent = self._find(stored.parent_session) if stored.parent_session is not None else None
        if parent is not None:
            self._remove_marker(parent.parent / FORKS_DIR / encode_session_id(session_id))


# -- headers ---------------------------------------------------------------------------------------


def is_shared(header: SessionHeader) -> bool:
    """Whether a stored header is a fork by reference (it reads a prefix from its parent)."""
    return header.extra.get(SHARED_PREFIX_KEY) is True


def _with_extra(header: SessionHeader, extra: dict[str, Any]) -> SessionHeader:
    pairs = [(key, value) for key, value in header.extra.items() if key not in extra]
    return SessionHeader(
        id=header.id, created_at=header.created_at, cwd=header.cwd, parent_session=header.parent_session,
        seed_length=header.seed_length, origin=header.origin, delegation_depth=header.delegation_depth,
        agent_preset=header.agent_preset, version=header.version,
        extra=frozen_dict([*pairs, *extra.items()]),
    )


def public_header(header: SessionHeader) -> SessionHeader:
    """The header callers see: the storage-only shared-prefix flag removed."""
    if SHARED_PREFIX_KEY not in header.extra:
        return header
    kept = [(key, value) for key, value in header.extra.items() if key != SHARED_PREFIX_KEY]
    return SessionHeader(
        id=header.id, created_at=header.created_at, cwd=header.cwd, parent_session=header.parent_session,
        seed_length=header.seed_length, origin=header.origin, delegation_depth=header.delegation_depth,
        agent_preset=header.agent_preset, version=header.version, extra=frozen_dict(kept),
    )
