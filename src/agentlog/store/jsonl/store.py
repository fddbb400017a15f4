"""JsonlStore: one transcript file per session, byte-compatible with DSH format v0.

Layout: ``<root>/--<project-key>--/<encoded-id>/session.jsonl.zstd`` (or ``session.jsonl``
raw). The first materialization publishes a fully written temp file with a hard link (never
overwriting); later batches are appended and fsynced, and a failed append is truncated
back. Beyond DSH: a ``flock`` per session keeps writers exclusive across processes, forks
reference their parent's prefix instead of copying it (``materialize`` rewrites a full
DSH-readable copy), and sessions can be deleted unless a fork still references them (those parts in
``jsonl_forks.py``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat as stat_mode
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NoReturn

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.packed import LogEntry
from agentlog.errors import (
    AgentlogError,
    ConcurrentWriterError,
    PersistenceIOError,
    SessionCorruptionError,
    SessionExistsError,
    StoreError,
)
from agentlog.legacy.upgrade import chain_writers
from agentlog.store.base import DEFAULT_WRITE_DELAY_MS
from agentlog.store.fs import FileSystem, io_error
from agentlog.store.jsonl.checkpoint import DEFAULT_CHECKPOINT_BYTES, JsonlCheckpoints
from agentlog.store.jsonl.ends import TranscriptEnds
from agentlog.store.jsonl.forks import Transcript, is_shared, public_header
from agentlog.store.jsonl.format import (
    TRANSCRIPT_RAW,
    TRANSCRIPT_ZSTD,
    check_record_lengths,
    compress_frame,
    decode_complete_frames,
    encode_batch,
    encode_header_line,
    encode_session_id,
    first_stored_seq,
    parse_header_line,
    project_key,
    read_header_prefix,
    scan_log,
    scan_suffix,
)
from agentlog.store.jsonl.links import refuse_irregular, refuse_links
from agentlog.store.jsonl.paths import check_id_length, is_dir_entry, listed_id
from agentlog.store.jsonl.seek import SeekIndex, identity_of, read_indexed, revision_of
from agentlog.store.records import Listing, RawArtifact, Snapshot, StoredLog, Unreadable

__all__ = ["JsonlStore"]

_META_DIR = ".agentlog"
"""Per-root bookkeeping (writer locks); its leading dot keeps it out of project discovery."""

_CACHE_SIZE = 5
_FLAT_SUFFIXES = (".jsonl", ".jsonl.zstd")
_ABSENT = (errno.ENOENT, errno.ENOTDIR)


class JsonlStore(JsonlCheckpoints):
    """Sessions as JSONL transcripts under ``root`` (zstd frames by default, or raw).

    ``create=False`` (readers): ``root`` must exist; reads never create a file in it.
    ``checkpoint_bytes``: a validated-state checkpoint once that many bytes follow the last one
    (``jsonl_checkpoint``); None: never written nor read.
    """

    name = "jsonl"

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        compression: Literal["zstd", "none"] = "zstd",
        pack_chunks: bool = True,
        write_delay_ms: int = DEFAULT_WRITE_DELAY_MS,
        fs: FileSystem | None = None,
        create: bool = True,
        checkpoint_bytes: int | None = DEFAULT_CHECKPOINT_BYTES,
    ) -> None:
        super().__init__(write_delay_ms=write_delay_ms)
        self._init_checkpoints(checkpoint_bytes)
        if compression not in ("zstd", "none"):
            raise ValueError(f'compression must be "zstd" or "none", got {compression!r}')
        self.root = Path(os.path.abspath(os.fspath(root)))
        self._fs = fs or FileSystem()
        try:
            mode = self._fs.stat(str(self.root)).st_mode
        except FileNotFoundError:
            if not create:
                raise StoreError(f"no store at {self.root} (nothing to read: a writer creates it)",
                                 file=str(self.root)) from None
            # created on the first materialization
        except OSError as exc:
            io_error(f"cannot use {self.root} as the JSONL store root: {exc}", exc, file=str(self.root))
        else:
            if not stat_mode.S_ISDIR(mode):
                error = PersistenceIOError(f"JSONL store root is not a directory: {self.root}",
                                           file=str(self.root))
                error.errno = errno.ENOTDIR
                raise error
        self.compressed = compression == "zstd"
        self.pack_chunks = pack_chunks
        self._transcript = TRANSCRIPT_ZSTD if self.compressed else TRANSCRIPT_RAW
        self._opposite = TRANSCRIPT_RAW if self.compressed else TRANSCRIPT_ZSTD
        self._paths: dict[str, Path] = {}
        self._cache: OrderedDict[str, Transcript] = OrderedDict()
        self._cache_guard = threading.Lock()
        self._ends = TranscriptEnds()
        self._seek = SeekIndex()
        self._preflight_done = False
        self._preflight_error: StoreError | None = None

    # -- paths and discovery -----------------------------------------------------------------

    def _session_dir(self, header: SessionHeader) -> Path:
        return self.root / project_key(header.cwd) / encode_session_id(header.id)

    def locate(self, header: SessionHeader) -> str:
        """The absolute transcript path (pure: it may not exist yet)."""
        return str(self._session_dir(header) / self._transcript)

    def _project_dirs(self) -> list[Path]:
        """Every project directory under root (none if root does not exist yet)."""
        return [Path(entry.path) for entry in self._scan_dir(self.root)
                if not entry.name.startswith(".") and is_dir_entry(entry)]

    def _scan_dir(self, directory: Path) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as iterator:
                return list(iterator)
        except FileNotFoundError:
            return []
        except OSError as exc:
            io_error(f"cannot read the directory: {exc.strerror or exc}", exc, file=str(directory))

    def _stat(self, path: Path) -> os.stat_result | None:
        """``stat`` of a path, None when it (or a parent) is absent; other errors surface."""
        try:
            return self._fs.stat(str(path))
        except OSError as exc:
            if exc.errno in _ABSENT:
                return None
            io_error(f"cannot stat: {exc.strerror or exc}", exc, file=str(path))

    def _refuse_flat(self, path: Path) -> NoReturn:
        raise StoreError(
            f"obsolete flat-file layout: {path} is a transcript directly in a project directory; "
            "this build reads <project>/<id>/" + self._transcript + " (use a separate root)",
            file=str(path),
        )

    def _refuse_opposite(self, session_dir: Path, session_id: str | None = None) -> None:
        opposite = session_dir / self._opposite
        if self._stat(opposite) is not None:
            raise StoreError(
                f"{opposite} uses the other encoding; this store writes {self._transcript}: "
                + ("to read raw transcripts, open the root with ?compression=none (jsonl:///root?compression=none)"
                   if self.compressed else "to read zstd ones, open the root without ?compression=none")
                + ", or use a separate root",
                session_id=session_id, file=str(opposite),
            )

    def _preflight(self) -> None:
        """Once per instance: refuse a root holding flat files or the other encoding (§4.2).

        The outcome is memoized, failure included: a root found mixed stays refused.
        """
        if self._preflight_error is not None:
            raise self._preflight_error
        if self._preflight_done:
            return
        try:
            for project in self._project_dirs():
                for entry in self._scan_dir(project):
                    if is_dir_entry(entry):
                        self._refuse_opposite(Path(entry.path))
                    elif entry.name.endswith(_FLAT_SUFFIXES):
                        self._refuse_flat(Path(entry.path))
        except StoreError as exc:
            if not isinstance(exc, PersistenceIOError):
                self._preflight_error = exc
            raise
        self._preflight_done = True

    def _find(self, session_id: str) -> Path | None:
        """The transcript of ``session_id`` in any project directory, or None (§4.9 lookup)."""
        self._preflight()
        name = encode_session_id(session_id)
        found: list[Path] = []
        identities: set[tuple[int, int]] = set()
        for project in self._project_dirs():
            for suffix in _FLAT_SUFFIXES:
                flat = project / f"{name}{suffix}"
                if self._stat(flat) is not None:
                    self._refuse_flat(flat)
            session_dir = project / name
            if not os.path.lexists(session_dir):
                continue
            refuse_links(self.root, session_dir, session_id=session_id)
            self._refuse_opposite(session_dir, session_id)
            path = session_dir / self._transcript
            info = self._stat(path)
            if info is None:
                continue
            refuse_irregular(path, info, session_id=session_id)
            identity = (info.st_dev, info.st_ino)
            if identity not in identities:  # the same file reached twice (e.g. through a bind mount)
                identities.add(identity)
                found.append(path)
        if len(found) > 1:
            raise SessionCorruptionError(
                f"session appears in multiple project directories: {', '.join(map(str, found))}",
                session_id=session_id,
            )
        if not found:
            self._paths.pop(session_id, None)
            return None
        self._paths[session_id] = found[0]
        return found[0]

    def _write_path(self, session_id: str) -> Path | None:
        """The transcript to append to: the one this instance published or adopted, else a lookup."""
        path = self._paths.get(session_id)
        return path if path is not None else self._find(session_id)

    def _check_identity(self, session_id: str, header: SessionHeader, path: Path) -> None:
        """Spec §4.9: the header names this id and its (id, cwd) lead to the file actually read."""
        if header.id != session_id:
            raise SessionCorruptionError(
                f"transcript header names session {header.id!r}", session_id=session_id, file=str(path)
            )
        expected = self._session_dir(header) / self._transcript
        if expected != path and os.path.realpath(expected) != os.path.realpath(path):
            raise SessionCorruptionError(
                f"transcript is not where its header places it (expected {expected})",
                session_id=session_id, file=str(path),
            )

    # -- reading -------------------------------------------------------------------------------

    def _read_file(self, path: Path) -> tuple[bytes, str] | None:
        """The file's bytes and revision, re-read until its identity is stable across the read."""
        fs = self._fs
        while True:
            try:
                before = fs.stat(str(path))
                data = fs.read_bytes(str(path))
                after = fs.stat(str(path))
            except OSError as exc:
                if exc.errno in _ABSENT:
                    return None
                io_error(f"cannot read the transcript: {exc.strerror or exc}", exc, file=str(path))
            if identity_of(before) == identity_of(after):
                return data, _revision(after)

    def _read_transcript(self, session_id: str, until_seq: int | None = None) -> Transcript | None:
        """Read and scan one transcript (no fork resolution); reuses the scan while unchanged.

        With ``until_seq`` the scan may stop once the events below it are read (a fork's prefix);
        a partial scan serves later reads of no more than it holds.
        """
        path = self._find(session_id)
        if path is None:
            return None
        with self._cache_guard:
            cached = self._cache.get(session_id)
        if cached is not None and cached.path == path and cached.serves(until_seq):
            info = self._stat(path)
            if info is None:
                return None
            if _revision(info) == cached.revision:
                with self._cache_guard:
                    if session_id in self._cache:
                        self._cache.move_to_end(session_id)
                return cached
        read = self._read_file(path)
        if read is None:
            return None
        data, revision = read
        scan = scan_log(data, compressed=self.compressed, path=str(path), until_seq=until_seq)
        self._check_identity(session_id, scan.header, path)
        transcript = Transcript(path, revision, len(data), scan.header, tuple(scan.events), scan.torn,
                                scan.partial, scan.marks)
        with self._cache_guard:
            self._cache[session_id] = transcript
            self._cache.move_to_end(session_id)
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return transcript

    def _forget(self, session_id: str) -> None:
        with self._cache_guard:
            self._cache.pop(session_id, None)

    def _saw_end(self, session_id: str, next_seq: int, size: int | None, *, read: bool = False) -> None:
        self._ends.saw(session_id, next_seq, size, read=read)

    def _check_new_id(self, session_id: str) -> None:
        check_id_length(session_id)

    def _stored_exists(self, session_id: str) -> bool:
        return self._find(session_id) is not None

    def _load_stored(self, session_id: str) -> StoredLog | None:
        return self._load_stored_until(session_id, None)

    def _load_stored_until(self, session_id: str, until_seq: int | None) -> StoredLog | None:
        transcript = self._read_transcript(session_id, until_seq)
        if transcript is None:
            return None
        events: Sequence[LogEntry] = transcript.events  # immutable: shared, not copied
        writers: list[tuple[int, str]] = []
        if is_shared(transcript.stored_header):
            prefix, shared = self._shared_prefix(transcript)
            writers = chain_writers(shared, first_stored_seq(transcript.stored_header), session_id)
            events = [*prefix, *events]
        if not transcript.partial:
            self._saw_end(session_id, len(events), transcript.size, read=True)
        torn = transcript.torn
        return StoredLog(public_header(transcript.stored_header), events, transcript.revision, torn,
                         list(torn.recovered) if torn is not None else [], writers,
                         None if torn is None else (torn.truncate_to, torn.size))

    def _load_stored_from(self, session_id: str, from_seq: int) -> StoredLog | None:
        """A suffix read that seeks through the sidecar index when it is current (``jsonl_seek``)."""
        path = self._find(session_id)
        read = read_indexed(self._seek, path, from_seq, compressed=self.compressed) if path else None
        events = None if read is None or from_seq < first_stored_seq(read.header) else scan_suffix(
            read.data, compressed=self.compressed, path=str(path), offset=read.offset, first_seq=read.seq)
        if path is None or read is None or events is None:
            return super()._load_stored_from(session_id, from_seq)
        self._check_identity(session_id, read.header, path)
        self._saw_end(session_id, read.seq + len(events), read.identity[2], read=True)
        return StoredLog(public_header(read.header), events[from_seq - read.seq:], revision_of(read.identity))

    def _read_raw(self, session_id: str) -> RawArtifact | None:
        """The transcript's text as written (complete zstd frames decoded); only its header is parsed."""
        path = self._find(session_id)
        if path is None:
            return None
        read = self._read_file(path)
        if read is None:
            return None
        data = read[0]
        if self.compressed:
            try:
                data = decode_complete_frames(data, path=str(path))
            except AgentlogError as exc:
                raise exc.locate(session_id=session_id) from None
        newline = data.find(b"\n")
        if newline < 0:
            raise SessionCorruptionError("empty or header-less session log", session_id=session_id,
                                         file=str(path), offset=0)
        header = parse_header_line(data[: newline + 1], path=str(path))
        self._check_identity(session_id, header, path)
        return RawArtifact(public_header(header), TRANSCRIPT_RAW, data.decode("utf-8", "replace"))

    def _listing(self) -> Listing:
        self._preflight()  # a mixed or obsolete root is the store's failure, not one session's
        listing = Listing([])
        seen: dict[str, tuple[Path, tuple[int, int], Snapshot]] = {}
        for project in self._project_dirs():
            for entry in self._scan_dir(project):
                if not is_dir_entry(entry):
                    if entry.name.endswith(_FLAT_SUFFIXES):
                        self._refuse_flat(Path(entry.path))
                    continue
                session_dir = Path(entry.path)
                try:
                    found = self._listed(session_dir)
                except AgentlogError as exc:
                    sid = listed_id(session_dir)
                    listing.unreadable.append(Unreadable(sid, str(session_dir), exc.locate(session_id=sid)))
                    continue
                if isinstance(found, Unreadable):
                    listing.unreadable.append(found)
                    continue
                if found is None:
                    continue
                snapshot, path, identity = found
                sid = snapshot.header.id
                prior = seen.get(sid)
                if prior is None:
                    seen[sid] = (path, identity, snapshot)
                    listing.snapshots.append(snapshot)
                elif prior[1] != identity:  # else the same file reached through an aliased directory
                    error = SessionCorruptionError(
                        f"session appears in multiple project directories: {prior[0]}, {path}",
                        session_id=sid)
                    listing.unreadable.append(Unreadable(sid, str(path), error))
                    if prior[2] in listing.snapshots:
                        listing.snapshots.remove(prior[2])
        return listing

    def _listed(self, session_dir: Path) -> tuple[Snapshot, Path, tuple[int, int]] | Unreadable | None:
        """The snapshot of one session directory from its header alone (None: no transcript in it;
        ``Unreadable``: a transcript that does not start with a complete header)."""
        refuse_links(self.root, session_dir)
        self._refuse_opposite(session_dir)
        path = session_dir / self._transcript
        info = self._stat(path)
        if info is None:
            return None  # an empty session dir is no session
        refuse_irregular(path, info, session_id=listed_id(session_dir))
        header = self._read_listing_header(path)
        if header is None:
            error = SessionCorruptionError("not a session transcript: it is empty, or its first "
                                           + ("frame" if self.compressed else "line")
                                           + " is not a complete session header",
                                           session_id=listed_id(session_dir), file=str(path), offset=0)
            return Unreadable(listed_id(session_dir), str(path), error, skipped_by_list=True)
        self._check_identity(header.id, header, path)
        return (Snapshot(public_header(header), _revision(info), info.st_ctime_ns // 1_000_000), path,
                (info.st_dev, info.st_ino))

    def _read_listing_header(self, path: Path) -> SessionHeader | None:
        """The stored header line of a transcript (8 KiB reads, no event parsed); None if not one."""
        try:
            with open(path, "rb") as handle:
                return read_header_prefix(iter(lambda: handle.read(8192), b""),
                                          compressed=self.compressed, path=str(path))
        except OSError as exc:
            if exc.errno in _ABSENT:
                return None
            io_error(f"cannot read the transcript: {exc.strerror or exc}", exc, file=str(path))

    # -- writing -------------------------------------------------------------------------------

    def _encode(self, events: Sequence[Event]) -> bytes:
        plain = encode_batch(events, pack=self.pack_chunks)
        return compress_frame(check_record_lengths(plain, events[0].seq)) if self.compressed else plain

    def _encode_header(self, header: SessionHeader) -> bytes:
        line = encode_header_line(header)
        return compress_frame(check_record_lengths(line, None)) if self.compressed else line

    def _append_batch(self, header: SessionHeader, events: Sequence[Event], *, materialize: bool) -> None:
        data = self._encode(events) if events else b""
        if materialize:
            plain = public_header(header)  # only a fork by reference may claim a shared prefix
            head = self._encode_header(plain)
            content = head + data
            self._materialize(plain, content, (events[0].seq if events else 0, len(head)))
            self._saw_end(header.id, events[-1].seq + 1 if events else 0, len(content))
        else:
            self._append_bytes(header.id, data, (events[0].seq, events[-1].seq + 1) if events else None)
        self._forget(header.id)

    def _materialize(self, header: SessionHeader, content: bytes, batch: tuple[int, int]) -> None:
        """Publish a complete new transcript: temp file, fsync, hard link (no overwrite), dir fsync.

        ``batch``: (seq, byte offset) where its first batch starts, for the seek index."""
        self._preflight()
        directory = self._session_dir(header)
        final = directory / self._transcript
        fs = self._fs
        refuse_links(self.root, directory, session_id=header.id)
        try:
            fs.makedirs(str(directory))
        except OSError as exc:
            io_error(f"cannot create the session directory {directory} (is a path component a file?): "
                      f"{exc}", exc, session_id=header.id, file=str(directory))
        self._refuse_opposite(directory, header.id)
        if self._stat(final) is not None:
            raise SessionExistsError("session already has a persisted log", session_id=header.id,
                                     file=str(final))
        temp = f"{final}.{uuid.uuid4().hex[:12]}.tmp"
        try:
            fs.write_new(temp, content)
            try:
                fs.link(temp, str(final))
            except FileExistsError:
                raise SessionExistsError("session already has a persisted log", session_id=header.id,
                                         file=str(final)) from None
            fs.fsync_dir(str(directory))
        except OSError as exc:
            io_error(f"could not create {final}: {exc}", exc, session_id=header.id, file=str(final))
        finally:
            with contextlib.suppress(OSError):
                fs.unlink(temp)
        self._paths[header.id] = final
        self._seek.published(final, *batch, content)  # after the unlink, which changed the ctime

    def _append_bytes(self, session_id: str, data: bytes, seqs: tuple[int, int] | None) -> None:
        """Append and fsync; on failure truncate back to the previous size and re-raise.

        ``seqs`` = (first, next) seq of the batch. The file must end where this store last saw it
        end, at ``first``: otherwise another writer appended since (this store's cursor is stale)
        and the batch is refused before a byte is written.
        """
        path = self._write_path(session_id)
        if path is None:
            raise SessionCorruptionError("transcript vanished while the session was open",
                                         session_id=session_id)
        fs = self._fs
        try:
            fd = fs.open(str(path), os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            io_error(f"cannot open for append: {exc}", exc, session_id=session_id, file=str(path))
        try:
            before = identity_of(os.fstat(fd))
            size = before[2]
        except OSError as exc:
            with contextlib.suppress(OSError):
                fs.close(fd)
            io_error(f"cannot stat for append: {exc}", exc, session_id=session_id, file=str(path))
        if seqs is not None:
            try:
                self._ends.check(session_id, seqs[0], size, str(path))
            except ConcurrentWriterError:
                with contextlib.suppress(OSError):
                    fs.close(fd)
                raise
        try:
            fs.write(fd, data)
            fs.fsync(fd)
            after = identity_of(os.fstat(fd))
        except OSError as exc:
            with contextlib.suppress(OSError):
                fs.close(fd)
            try:
                self._fs.truncate_file(str(path), size)
            except OSError as rollback:
                raise PersistenceIOError(
                    f"append failed ({exc}) and failed to roll back append to {path}: {rollback}",
                    session_id=session_id, file=str(path), offset=size,
                ) from ExceptionGroup("append and rollback failed", [exc, rollback])
            io_error(f"append failed and was rolled back: {exc}", exc, session_id=session_id,
                      file=str(path), offset=size)
        try:
            fs.close(fd)
        except OSError as exc:
            io_error(f"close after append failed: {exc}", exc, session_id=session_id, file=str(path))
        if seqs is not None:
            self._saw_end(session_id, seqs[1], size + len(data))
            marks = self._seek_marks(session_id, revision_of(before))
            self._seek.noted(path, seqs[0], size, before, after, marks, data)

    def _commit_repair(self, header: SessionHeader, torn: Any, events: Sequence[Event]) -> None:
        path = self._write_path(header.id)
        if path is None:
            raise SessionCorruptionError("transcript vanished during repair", session_id=header.id)
        marks = self._seek_marks(header.id)  # the prefix a repair keeps still has them
        self._forget(header.id)
        if torn is not None:
            self._keep_cut_tail(header.id, path, torn.truncate_to)
            try:
                self._fs.truncate_file(str(path), torn.truncate_to)
            except OSError as exc:
                io_error(f"could not truncate torn tail: {exc}", exc, session_id=header.id,
                          file=str(path), offset=torn.truncate_to)
            known = self._ends.seq_at(header.id)
            self._saw_end(header.id, known or 0, torn.truncate_to if known is not None else None)
            self._seek.truncated(path, marks)
        if events:
            self._append_bytes(header.id, self._encode(events), (events[0].seq, events[-1].seq + 1))

    # -- locks -----------------------------------------------------------------------------------

    def _lock_path(self, session_id: str) -> Path:
        return self.root / _META_DIR / "locks" / f"{encode_session_id(session_id)}.lock"


# -- helpers -----------------------------------------------------------------------------------------


def _revision(stat: os.stat_result) -> str:
    return revision_of(identity_of(stat))


