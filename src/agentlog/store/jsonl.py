"""JsonlStore: one transcript file per session, byte-compatible with DSH format v0.

Layout: ``<root>/--<project-key>--/<encoded-id>/session.jsonl.zstd`` (or ``session.jsonl``
raw). The first materialization publishes a fully written temp file with a hard link (never
overwriting); later batches are appended and fsynced, and a failed append is truncated
back. Beyond DSH: a ``flock`` per session keeps writers exclusive across processes, forks
can reference their parent's prefix instead of copying it, and sessions can be deleted.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from agentlog.errors import (
    PersistenceIOError,
    SessionCorruptionError,
    SessionExistsError,
    SessionLockedError,
    StoreError,
    UsageError,
)
from agentlog.events import Event
from agentlog.header import SessionHeader
from agentlog.jsonvalue import frozen_dict
from agentlog.store.base import (
    DEFAULT_WRITE_DELAY_MS,
    RawArtifact,
    Snapshot,
    Store,
    StoredLog,
    WriterLock,
    _State,
)
from agentlog.store.fs import FileSystem
from agentlog.store.jsonl_format import (
    SHARED_PREFIX_KEY,
    TRANSCRIPT_RAW,
    TRANSCRIPT_ZSTD,
    LogScan,
    compress_frame,
    encode_batch,
    encode_header_line,
    encode_session_id,
    project_key,
    read_header_prefix,
    scan_log,
)

__all__ = ["JsonlStore"]

_META_DIR = ".agentlog"
_FORKS_DIR = "forks"
_CACHE_SIZE = 5


class _FileLock(WriterLock):
    """An ``flock`` held on a per-session lock file; the OS drops it if the holder dies."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


class JsonlStore(Store):
    """Sessions as JSONL transcripts under ``root`` (zstd frames by default, or raw)."""

    name = "jsonl"

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        compression: Literal["zstd", "none"] = "zstd",
        pack_chunks: bool = True,
        write_delay_ms: int = DEFAULT_WRITE_DELAY_MS,
        fs: FileSystem | None = None,
    ) -> None:
        super().__init__(write_delay_ms=write_delay_ms)
        if compression not in ("zstd", "none"):
            raise ValueError(f'compression must be "zstd" or "none", got {compression!r}')
        self.root = Path(os.path.abspath(os.fspath(root)))
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"JSONL store root is not a directory: {self.root}")
        self.compressed = compression == "zstd"
        self.pack_chunks = pack_chunks
        self._fs = fs or FileSystem()
        self._transcript = TRANSCRIPT_ZSTD if self.compressed else TRANSCRIPT_RAW
        self._opposite = TRANSCRIPT_RAW if self.compressed else TRANSCRIPT_ZSTD
        self._paths: dict[str, Path] = {}
        self._cache: OrderedDict[str, tuple[str, StoredLog]] = OrderedDict()
        self._preflight_done = False

    # -- paths -------------------------------------------------------------------------------

    def _session_dir(self, header: SessionHeader) -> Path:
        return self.root / project_key(header.cwd) / encode_session_id(header.id)

    def locate(self, header: SessionHeader) -> str:
        """The absolute transcript path (it may not exist yet)."""
        return str(self._session_dir(header) / self._transcript)

    def _project_dirs(self) -> Iterator[Path]:
        try:
            with os.scandir(self.root) as iterator:
                entries = list(iterator)
        except FileNotFoundError:
            return
        for entry in entries:
            if entry.is_dir() and not entry.name.startswith("."):
                yield Path(entry.path)

    def _preflight(self) -> None:
        """Refuse a root holding the other encoding's transcripts or DSH's obsolete flat files."""
        if self._preflight_done:
            return
        for project in self._project_dirs():
            for entry in _entries(project):
                if entry.is_file() and entry.name.endswith((".jsonl", ".jsonl.zstd")):
                    raise StoreError(f"obsolete flat-file layout: {entry.path}; use a separate root")
                if entry.is_dir() and os.path.exists(os.path.join(entry.path, self._opposite)):
                    raise StoreError(
                        f"{os.path.join(entry.path, self._opposite)} uses the other encoding; "
                        f"this store writes {self._transcript}: use a separate root or the matching mode"
                    )
        self._preflight_done = True

    def _find(self, session_id: str) -> Path | None:
        """The transcript of ``session_id`` anywhere under root, or None."""
        self._preflight()
        cached = self._paths.get(session_id)
        if cached is not None and cached.exists():
            return cached
        name = encode_session_id(session_id)
        found = [project / name for project in self._project_dirs()
                 if (project / name / self._transcript).exists()]
        opposite = [project / name / self._opposite for project in self._project_dirs()
                    if (project / name / self._opposite).exists()]
        if opposite:
            raise StoreError(
                f"{opposite[0]} uses the other encoding; use a separate root or the matching mode",
                session_id=session_id,
            )
        if len(found) > 1:
            raise SessionCorruptionError(
                f"session appears in multiple project directories: {', '.join(map(str, found))}",
                session_id=session_id,
            )
        if not found:
            return None
        path = found[0] / self._transcript
        self._paths[session_id] = path
        return path

    # -- reading -------------------------------------------------------------------------------

    def _read_file(self, path: Path) -> tuple[bytes, str] | None:
        """The file's bytes and revision, re-read until its identity is stable across the read."""
        while True:
            try:
                before = os.stat(path)
                data = path.read_bytes()
                after = os.stat(path)
            except FileNotFoundError:
                return None
            if _identity(before) == _identity(after):
                return data, _revision(after)

    def _stored_exists(self, session_id: str) -> bool:
        return self._find(session_id) is not None

    def _load_stored(self, session_id: str) -> StoredLog | None:
        path = self._find(session_id)
        if path is None:
            return None
        read = self._read_file(path)
        if read is None:
            return None
        data, revision = read
        cached = self._cache.get(session_id)
        if cached is not None and cached[0] == revision:
            self._cache.move_to_end(session_id)
            stored = cached[1]
            return StoredLog(stored.header, list(stored.events), revision, stored.torn,
                             list(stored.recovered))
        scan = scan_log(data, compressed=self.compressed, path=str(path))
        self._check_identity(session_id, scan, path)
        events = scan.events
        header = scan.header
        if header.extra.get(SHARED_PREFIX_KEY) is True:
            events = self._shared_prefix(header, path) + events
        torn = scan.torn
        stored = StoredLog(header, events, revision, torn, list(torn.recovered) if torn else [])
        self._cache[session_id] = (revision, stored)
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return StoredLog(header, list(events), revision, torn, list(stored.recovered))

    def _check_identity(self, session_id: str, scan: LogScan, path: Path) -> None:
        """Spec §4.9: the header names this id and its (id, cwd) lead to the file actually read."""
        header = scan.header
        if header.id != session_id:
            raise SessionCorruptionError(
                f"transcript header names session {header.id!r}", session_id=session_id, file=str(path)
            )
        expected = self._session_dir(header) / self._transcript
        if expected != path and os.path.realpath(expected) != os.path.realpath(path):
            raise SessionCorruptionError(
                f"transcript is not where its header places it ({expected})",
                session_id=session_id, file=str(path),
            )

    def _shared_prefix(self, header: SessionHeader, path: Path) -> list[Event]:
        parent_id, length = header.parent_session, header.seed_length
        if parent_id is None or length is None:
            raise SessionCorruptionError("shared-prefix fork lacks parentSession/seedLength",
                                         session_id=header.id, file=str(path))
        parent = self._load_stored(parent_id)
        if parent is None or len(parent.events) < length:
            raise SessionCorruptionError(
                f"fork parent {parent_id!r} no longer holds the {length} events this fork shares",
                session_id=header.id, file=str(path),
            )
        return parent.events[:length]

    def _read_raw(self, session_id: str) -> RawArtifact | None:
        path = self._find(session_id)
        if path is None:
            return None
        read = self._read_file(path)
        if read is None:
            return None
        scan = scan_log(read[0], compressed=self.compressed, path=str(path))
        self._check_identity(session_id, scan, path)
        if self.compressed:
            from agentlog.store.jsonl_format import decode_complete_frames

            content = decode_complete_frames(read[0], path=str(path))
        else:
            content = read[0]
        return RawArtifact(scan.header, TRANSCRIPT_RAW, content.decode("utf-8"))

    def _list_snapshots(self) -> list[Snapshot]:
        self._preflight()
        snapshots: list[Snapshot] = []
        seen: dict[str, Path] = {}
        for project in self._project_dirs():
            for entry in _entries(project):
                if not entry.is_dir():
                    continue
                path = Path(entry.path) / self._transcript
                try:
                    stat = os.stat(path)
                except FileNotFoundError:
                    continue
                header = self._read_listing_header(path)
                if header is None:
                    continue
                if header.id in seen:
                    raise SessionCorruptionError(
                        f"session appears in multiple project directories: {seen[header.id]}, {path}",
                        session_id=header.id,
                    )
                expected = self._session_dir(header) / self._transcript
                if expected != path and os.path.realpath(expected) != os.path.realpath(path):
                    raise SessionCorruptionError("transcript is not where its header places it",
                                                 session_id=header.id, file=str(path))
                seen[header.id] = path
                snapshots.append(Snapshot(header, _revision(stat)))
        return snapshots

    def _read_listing_header(self, path: Path) -> SessionHeader | None:
        try:
            with open(path, "rb") as handle:
                return read_header_prefix(iter(lambda: handle.read(8192), b""),
                                          compressed=self.compressed, path=str(path))
        except FileNotFoundError:
            return None

    # -- writing -------------------------------------------------------------------------------

    def _encode(self, events: Sequence[Event]) -> bytes:
        plain = encode_batch(events, pack=self.pack_chunks)
        return compress_frame(plain) if self.compressed else plain

    def _encode_header(self, header: SessionHeader) -> bytes:
        line = encode_header_line(header)
        return compress_frame(line) if self.compressed else line

    def _append_batch(self, header: SessionHeader, events: Sequence[Event], *, materialize: bool) -> None:
        data = self._encode(events) if events else b""
        if materialize:
            self._materialize(header, self._encode_header(header) + data)
        else:
            self._append_bytes(header.id, data)
        self._cache.pop(header.id, None)

    def _materialize(self, header: SessionHeader, content: bytes) -> None:
        """Publish a complete new transcript: temp file, fsync, hard link (no overwrite), dir fsync."""
        self._preflight()
        directory = self._session_dir(header)
        final = directory / self._transcript
        fs = self._fs
        try:
            fs.makedirs(str(directory))
            if (directory / self._opposite).exists():
                raise StoreError(f"{directory / self._opposite} uses the other encoding",
                                 session_id=header.id)
            if final.exists():
                raise SessionExistsError("session already has a persisted log", session_id=header.id,
                                         file=str(final))
            temp = f"{final}.{uuid.uuid4().hex[:12]}.tmp"
            fd = fs.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                fs.write(fd, content)
                fs.fsync(fd)
            finally:
                fs.close(fd)
            try:
                fs.link(temp, str(final))
            except FileExistsError:
                raise SessionExistsError("session already has a persisted log", session_id=header.id,
                                         file=str(final)) from None
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
            fs.fsync_dir(str(directory))
        except OSError as exc:
            raise PersistenceIOError(f"could not create {final}: {exc}", session_id=header.id,
                                     file=str(final)) from exc
        self._paths[header.id] = final

    def _append_bytes(self, session_id: str, data: bytes) -> None:
        """Append and fsync; on failure truncate back to the previous size and re-raise."""
        path = self._find(session_id)
        if path is None:
            raise SessionCorruptionError("transcript vanished while the session was open",
                                         session_id=session_id)
        fs = self._fs
        try:
            fd = fs.open(str(path), os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise PersistenceIOError(f"cannot open for append: {exc}", session_id=session_id,
                                     file=str(path)) from exc
        size = os.fstat(fd).st_size
        try:
            fs.write(fd, data)
            fs.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                fs.close(fd)
            try:
                self._truncate(path, size)
            except OSError as rollback:
                raise PersistenceIOError(
                    f"append failed ({exc}) and failed to roll back append to {path}: {rollback}",
                    session_id=session_id, file=str(path), offset=size,
                ) from exc
            raise PersistenceIOError(f"append failed and was rolled back: {exc}", session_id=session_id,
                                     file=str(path), offset=size) from exc
        fs.close(fd)

    def _truncate(self, path: Path, size: int) -> None:
        fs = self._fs
        fd = fs.open(str(path), os.O_RDWR)
        try:
            fs.truncate(fd, size)
            fs.fsync(fd)
        finally:
            fs.close(fd)

    def _commit_repair(self, header: SessionHeader, torn: Any, events: Sequence[Event]) -> None:
        path = self._find(header.id)
        if path is None:
            raise SessionCorruptionError("transcript vanished during repair", session_id=header.id)
        if torn is not None:
            try:
                self._truncate(path, torn.truncate_to)
            except OSError as exc:
                raise PersistenceIOError(f"could not truncate torn tail: {exc}", session_id=header.id,
                                         file=str(path), offset=torn.truncate_to) from exc
        if events:
            self._append_bytes(header.id, self._encode(events))
        self._cache.pop(header.id, None)

    # -- locks, forks, deletion ---------------------------------------------------------------------

    def _lock_path(self, session_id: str) -> Path:
        return self.root / _META_DIR / "locks" / f"{encode_session_id(session_id)}.lock"

    def _acquire_writer_lock(self, session_id: str) -> WriterLock:
        path = self._lock_path(session_id)
        try:
            os.makedirs(path.parent, mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            raise PersistenceIOError(f"cannot create lock file: {exc}", session_id=session_id,
                                     file=str(path)) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                who = f"process {holder}" if holder else "another writer"
                raise SessionLockedError(f"session is open for writing by {who}",
                                         session_id=session_id, pid=holder, file=str(path)) from None
            raise PersistenceIOError(f"cannot lock: {exc}", session_id=session_id, file=str(path)) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return _FileLock(fd)

    def _write_fork_prefix(self, header: SessionHeader, prefix: Sequence[Event], state: _State) -> None:
        """Materialize the child with a header that references the parent's prefix: O(1) bytes."""
        if not prefix:
            return
        shared = SessionHeader(
            id=header.id, created_at=header.created_at, cwd=header.cwd,
            parent_session=header.parent_session, seed_length=header.seed_length,
            extra=frozen_dict([*header.extra.items(), (SHARED_PREFIX_KEY, True)]),
        )
        parent_path = self._find(header.parent_session or "")
        if parent_path is None:
            raise SessionCorruptionError("fork parent has no transcript", session_id=header.id)
        marker_dir = parent_path.parent / _FORKS_DIR
        try:
            self._fs.makedirs(str(marker_dir))
            fd = self._fs.open(str(marker_dir / encode_session_id(header.id)), os.O_WRONLY | os.O_CREAT)
            try:
                self._fs.write(fd, header.id.encode("utf-8", "surrogatepass"))
                self._fs.fsync(fd)
            finally:
                self._fs.close(fd)
            self._fs.fsync_dir(str(marker_dir))
        except OSError as exc:
            raise PersistenceIOError(f"cannot record fork reference: {exc}", session_id=header.id) from exc
        self._materialize(shared, self._encode_header(shared))
        state.header = shared
        state.materialized = True
        state.cursor = len(prefix)

    def _children_of(self, session_id: str) -> list[str]:
        path = self._find(session_id)
        if path is None:
            return []
        marker_dir = path.parent / _FORKS_DIR
        children: list[str] = []
        with contextlib.suppress(FileNotFoundError):
            for entry in _entries(marker_dir):
                child = Path(entry.path).read_bytes().decode("utf-8", "surrogatepass")
                stored = self._find(child)
                if stored is not None:
                    header = self._read_listing_header(stored)
                    if header is not None and header.extra.get(SHARED_PREFIX_KEY) is True:
                        children.append(child)
        return children

    def _delete_stored(self, session_id: str) -> None:
        path = self._find(session_id)
        if path is None:
            return
        header = self._read_listing_header(path)
        shutil.rmtree(path.parent)
        self._fs.fsync_dir(str(path.parent.parent))
        self._paths.pop(session_id, None)
        self._cache.pop(session_id, None)
        if header is not None and header.parent_session is not None:
            parent = self._find(header.parent_session)
            if parent is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(parent.parent / _FORKS_DIR / encode_session_id(session_id))

    def materialize(self, session_id: str) -> None:
        """Rewrite a shared-prefix fork as a full, DSH-readable copy of its log."""
        with self._serialized(session_id):
            if session_id in self._live:
                raise UsageError("cannot materialize a live session; close it first", session_id=session_id)
            path = self._find(session_id)
            stored = self._load_stored(session_id)
            if path is None or stored is None:
                from agentlog.errors import SessionNotFoundError

                raise SessionNotFoundError("session not found", session_id=session_id)
            if stored.header.extra.get(SHARED_PREFIX_KEY) is not True:
                return
            header = SessionHeader(
                id=stored.header.id, created_at=stored.header.created_at, cwd=stored.header.cwd,
                parent_session=stored.header.parent_session, seed_length=stored.header.seed_length,
                extra=frozen_dict((k, v) for k, v in stored.header.extra.items() if k != SHARED_PREFIX_KEY),
            )
            content = self._encode_header(header)
            if stored.events:
                content += self._encode(stored.events)
            temp = f"{path}.{uuid.uuid4().hex[:12]}.tmp"
            fs = self._fs
            fd = fs.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                fs.write(fd, content)
                fs.fsync(fd)
            finally:
                fs.close(fd)
            os.replace(temp, path)
            fs.fsync_dir(str(path.parent))
            self._cache.pop(session_id, None)
            parent = self._find(header.parent_session or "")
            if parent is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(parent.parent / _FORKS_DIR / encode_session_id(session_id))


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    with os.scandir(directory) as iterator:
        return list(iterator)


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _revision(stat: os.stat_result) -> str:
    return ":".join(str(part) for part in _identity(stat))


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
