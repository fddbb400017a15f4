"""The JSONL seek index: where each durable batch of a transcript starts, so a suffix read seeks.

A sidecar ``<transcript>.seek`` beside the transcript holds one fixed-size record per appended
batch: (first seq, byte offset of its line or zstd frame) and the transcript's identity right
after that append (device, inode, size, mtime and ctime in ns), each record with its own
blake2b digest. It is a hint, never a source of truth: a reader uses it only when its last
record's identity is the transcript's current one (the file is exactly as that append left it,
the same test that reuses a cached scan), and only for a clean suffix scan; anything else (no
sidecar, a stale or damaged one, a writer that did not keep it, such as DSH) means a full scan.
The sidecar is written without fsync and outside ``FileSystem``: losing it costs speed only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from agentlog.core.header import SessionHeader
from agentlog.errors import AgentlogError
from agentlog.store.jsonl.format import read_header_prefix

__all__ = [
    "SEEK_SUFFIX", "Identity", "IndexedRead", "SeekIndex", "identity_of", "read_indexed", "revision_of",
]

SEEK_SUFFIX: Final = ".seek"
_MAGIC: Final = b"agentlog-seek-1\n"
_BODY: Final = struct.Struct("<QQQQQqq")  # seq, offset, size, dev, ino, mtime_ns, ctime_ns
_DIGEST: Final = 8
_RECORD: Final = _BODY.size + _DIGEST
_NO_FOLLOW: Final = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

Identity = tuple[int, int, int, int, int]
"""(device, inode, size, mtime_ns, ctime_ns): a transcript unchanged since it was seen."""


def identity_of(info: os.stat_result) -> Identity:
    """The identity of a file from its ``stat``."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def revision_of(identity: Identity) -> str:
    """The revision token of a transcript (``Snapshot.revision``, cache keys) from its identity."""
    return ":".join(str(part) for part in identity)


def _record(seq: int, offset: int, after: Identity) -> bytes:
    dev, ino, size, mtime, ctime = after
    body = _BODY.pack(seq, offset, size, dev, ino, mtime, ctime)
    return body + hashlib.blake2b(body, digest_size=_DIGEST).digest()


def _unpack(data: bytes, index: int) -> tuple[int, int, Identity] | None:
    """Record ``index`` of a sidecar's bytes: (seq, offset, identity after), None if damaged."""
    start = len(_MAGIC) + index * _RECORD
    body = data[start:start + _BODY.size]
    if hashlib.blake2b(body, digest_size=_DIGEST).digest() != data[start + _BODY.size:start + _RECORD]:
        return None
    seq, offset, size, dev, ino, mtime, ctime = _BODY.unpack(body)
    return seq, offset, (dev, ino, size, mtime, ctime)


class SeekIndex:
    """Keeps the sidecars of one store's transcripts (writer side) and looks them up (reader side)."""

    def __init__(self) -> None:
        self._last: dict[Path, Identity] = {}
        """Per transcript, the identity its sidecar's last record names (as this object wrote it)."""
        self._guard = threading.Lock()

    @staticmethod
    def path_of(transcript: Path) -> Path:
        """The sidecar of a transcript."""
        return transcript.with_name(transcript.name + SEEK_SUFFIX)

    def noted(self, transcript: Path, seq: int, offset: int, before: Identity | None,
              after: Identity, marks: Sequence[tuple[int, int]] = ()) -> None:
        """Record a durable batch starting at ``seq``, byte ``offset``: appended to the sidecar when
        its last record names ``before`` (the transcript as this batch found it), else the sidecar
        is rebuilt from ``marks`` ((seq, offset) of earlier line or frame starts, from a scan of
        the transcript as this batch found it) and this record. Failures are swallowed: the index
        is only a hint."""
        sidecar = self.path_of(transcript)
        record = _record(seq, offset, after)
        with self._guard:
            last = self._last.pop(transcript, None)
            if not (before is not None and (last == before or _last_of(sidecar) == before)
                    and _append(sidecar, record)):
                temp = sidecar.with_name(f"{sidecar.name}.{os.getpid()}.{threading.get_ident()}.tmp")
                try:
                    earlier = b"".join(_record(*mark, after) for mark in marks if mark[0] < seq)
                    _write_whole(temp, _MAGIC + earlier + record)
                    os.replace(temp, sidecar)  # replaces a planted symlink itself, not its target
                except OSError:
                    return  # stays unknown: the next append starts the sidecar afresh
                finally:
                    with contextlib.suppress(OSError):
                        os.unlink(temp)
            self._last[transcript] = after

    def published(self, transcript: Path, seq: int, offset: int) -> None:
        """Start the sidecar of a newly published transcript whose first batch (``seq``) is at
        ``offset``: the transcript's identity is read now (failures are swallowed)."""
        with contextlib.suppress(OSError):
            self.noted(transcript, seq, offset, None, identity_of(os.stat(transcript)))

    def truncated(self, transcript: Path, marks: Sequence[tuple[int, int]]) -> None:
        """Rebuild the sidecar after a repair cut the transcript's torn tail, from ``marks`` of
        the scan before the cut (the prefix kept still has them); none known: left stale."""
        if marks:
            with contextlib.suppress(OSError):
                self.noted(transcript, *marks[-1], None, identity_of(os.stat(transcript)), marks)

    def batches(self, transcript: Path, current: Identity) -> list[tuple[int, int]]:
        """(seq, offset) of every indexed batch start, when the sidecar is intact and describes the
        transcript exactly as ``current``; else [] (a checkpoint's span table: ``jsonl_checkpoint``)."""
        try:
            with _open_read(self.path_of(transcript)) as handle:
                data = handle.read()
        except OSError:
            return []
        count = (len(data) - len(_MAGIC)) // _RECORD
        if count <= 0 or not data.startswith(_MAGIC) or (len(data) - len(_MAGIC)) % _RECORD:
            return []
        records = [_unpack(data, index) for index in range(count)]
        if any(record is None for record in records) or records[-1][2] != current:  # type: ignore[index]
            return []
        return [(record[0], record[1]) for record in records if record is not None]

    def find(self, transcript: Path, from_seq: int, current: Identity) -> tuple[int, int] | None:
        """(seq, offset) of the last indexed batch starting at or before ``from_seq``, when the
        sidecar is intact and describes the transcript exactly as ``current``; else None."""
        try:
            with _open_read(self.path_of(transcript)) as handle:
                data = handle.read()
        except OSError:
            return None
        count = (len(data) - len(_MAGIC)) // _RECORD
        if count <= 0 or not data.startswith(_MAGIC) or (len(data) - len(_MAGIC)) % _RECORD:
            return None
        last = _unpack(data, count - 1)
        if last is None or last[2] != current:
            return None
        low, high = 0, count  # records are in seq order: the first whose seq exceeds from_seq
        while low < high:
            middle = (low + high) // 2
            seq = _BODY.unpack_from(data, len(_MAGIC) + middle * _RECORD)[0]
            if seq <= from_seq:
                low = middle + 1
            else:
                high = middle
        if low == 0:
            return None
        found = _unpack(data, low - 1)
        if found is None or found[0] > from_seq or found[1] > current[2]:
            return None
        return found[0], found[1]


def _last_of(sidecar: Path) -> Identity | None:
    """The identity a sidecar's last record names (None: absent, damaged or empty)."""
    try:
        with _open_read(sidecar) as handle:
            head = handle.read(len(_MAGIC))
            size = os.fstat(handle.fileno()).st_size
            count = (size - len(_MAGIC)) // _RECORD
            if head != _MAGIC or count <= 0 or (size - len(_MAGIC)) % _RECORD:
                return None
            handle.seek(len(_MAGIC) + (count - 1) * _RECORD)
            record = _unpack(_MAGIC + handle.read(_RECORD), 0)
    except OSError:
        return None
    return None if record is None else record[2]


def _append(sidecar: Path, record: bytes) -> bool:
    """Append one record (False when the sidecar cannot be appended to: absent, not a file...)."""
    try:
        fd = os.open(sidecar, os.O_WRONLY | os.O_APPEND | _NO_FOLLOW)
    except OSError:
        return False
    try:
        return os.write(fd, record) == len(record)
    except OSError:
        return False
    finally:
        os.close(fd)


def _open_read(sidecar: Path) -> BinaryIO:
    """A sidecar opened for reading; a symlink planted in its place is never followed."""
    return os.fdopen(os.open(sidecar, os.O_RDONLY | _NO_FOLLOW), "rb")


def _write_whole(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o600)
    try:
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def read_indexed(index: SeekIndex, transcript: Path, from_seq: int, *,
                 compressed: bool) -> IndexedRead | None:
    """The stored header and the bytes from the indexed batch a read of ``from_seq`` starts at,
    read through one handle while the transcript stays exactly as its sidecar describes it;
    None when the index cannot serve the read (the caller scans the whole transcript)."""
    try:
        with open(transcript, "rb") as handle:
            current = identity_of(os.fstat(handle.fileno()))
            found = index.find(transcript, from_seq, current)
            if found is None:
                return None
            header = read_header_prefix(iter(lambda: handle.read(8192), b""), compressed=compressed,
                                        path=str(transcript))
            handle.seek(found[1])
            data = handle.read()
            if header is None or identity_of(os.fstat(handle.fileno())) != current:
                return None
    except (OSError, AgentlogError):
        return None
    if found[1] + len(data) != current[2]:
        return None
    return IndexedRead(header, found[0], found[1], data, current)


@dataclass(frozen=True, slots=True)
class IndexedRead:
    """A transcript's header and its bytes from ``offset``, where the batch of ``seq`` starts."""

    header: SessionHeader
    seq: int
    offset: int
    data: bytes
    identity: Identity
