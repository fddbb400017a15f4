"""The JSONL seek index: where each durable batch of a transcript starts, so a suffix read seeks.

A sidecar ``<transcript>.seek`` beside the transcript holds one fixed-size record per appended
batch: (first seq, byte offset of its line or zstd frame) and the transcript's identity right
after that append (device, inode, size, mtime and ctime in ns), each record with its own
blake2b digest. It is a hint, never a source of truth: a reader uses it only when its last
record's identity is the transcript's current one (the file is exactly as that append left it,
the same test that reuses a cached scan), and only for a clean suffix scan; anything else (no
sidecar, a stale or damaged one, a writer that did not keep it, such as DSH) means a full scan.
The sidecar is written without fsync and outside ``FileSystem``: losing it costs speed, and the
integrity data of the bytes it covered.

Format 2 (``agentlog-seek-2``) adds the integrity data: each record also holds the digest of the
transcript bytes its append wrote (``hashed_from`` up to its size; ``store.jsonl.integrity``
checks them). Format 1 sidecars are still read for seeking; a writer replaces one with format 2.
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
from agentlog.store.integrity import DIGEST_BYTES, digest_of
from agentlog.store.jsonl.format import read_header_prefix

__all__ = [
    "SEEK_SUFFIX", "Batch", "Identity", "IndexedRead", "SeekIndex", "identity_of", "read_indexed",
    "revision_of",
]

SEEK_SUFFIX: Final = ".seek"
_MAGIC_V1: Final = b"agentlog-seek-1\n"
_BODY_V1: Final = struct.Struct("<QQQQQqq")  # seq, offset, size, dev, ino, mtime_ns, ctime_ns
_MAGIC: Final = b"agentlog-seek-2\n"
_BODY: Final = struct.Struct(f"<QQQQQqqQ{DIGEST_BYTES}s")  # format 1's, hashed_from, digest_of(span)
_DIGEST: Final = 8
_RECORD: Final = _BODY.size + _DIGEST
_NO_SPAN: Final = bytes(DIGEST_BYTES)
_NO_FOLLOW: Final = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

Identity = tuple[int, int, int, int, int]
"""(device, inode, size, mtime_ns, ctime_ns): a transcript unchanged since it was seen."""


def identity_of(info: os.stat_result) -> Identity:
    """The identity of a file from its ``stat``."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def revision_of(identity: Identity) -> str:
    """The revision token of a transcript (``Snapshot.revision``, cache keys) from its identity."""
    return ":".join(str(part) for part in identity)


@dataclass(frozen=True, slots=True)
class Batch:
    """One sidecar record: a batch start, the transcript's identity after its append, and the
    digest of the bytes ``hashed_from..after[2]`` that append wrote (format 1, or a record that
    only marks a start: ``hashed_from == after[2]``, nothing hashed)."""

    seq: int
    offset: int
    after: Identity
    hashed_from: int
    digest: bytes


def _record(seq: int, offset: int, after: Identity, span: tuple[int, bytes] | None = None) -> bytes:
    """A format-2 record; ``span``: (first byte, digest) of the bytes its append wrote."""
    dev, ino, size, mtime, ctime = after
    hashed_from, digest = span if span is not None else (size, _NO_SPAN)
    body = _BODY.pack(seq, offset, size, dev, ino, mtime, ctime, hashed_from, digest)
    return body + hashlib.blake2b(body, digest_size=_DIGEST).digest()


def _layout(data: bytes) -> tuple[int, struct.Struct] | None:
    """(records' start, body layout) of a sidecar's bytes by its magic; None if not a sidecar."""
    if data.startswith(_MAGIC):
        return len(_MAGIC), _BODY
    if data.startswith(_MAGIC_V1):
        return len(_MAGIC_V1), _BODY_V1
    return None


def _unpack_at(data: bytes, start: int, body_format: struct.Struct) -> Batch | None:
    """The record at byte ``start`` of a sidecar's bytes, None if damaged."""
    body = data[start:start + body_format.size]
    if len(body) != body_format.size or hashlib.blake2b(body, digest_size=_DIGEST).digest() != (
            data[start + body_format.size:start + body_format.size + _DIGEST]):
        return None
    if body_format is _BODY:
        seq, offset, size, dev, ino, mtime, ctime, hashed_from, digest = _BODY.unpack(body)
    else:
        seq, offset, size, dev, ino, mtime, ctime = _BODY_V1.unpack(body)
        hashed_from, digest = size, _NO_SPAN
    return Batch(seq, offset, (dev, ino, size, mtime, ctime), hashed_from, digest)


def _records(data: bytes) -> tuple[list[Batch | None], bool] | None:
    """Every whole record of a sidecar's bytes (None: a damaged one) and whether it is format 2;
    None when the bytes are not a sidecar. Trailing bytes short of a record are left out."""
    layout = _layout(data)
    if layout is None:
        return None
    start, body_format = layout
    size = body_format.size + _DIGEST
    return ([_unpack_at(data, at, body_format) for at in range(start, len(data) - size + 1, size)],
            body_format is _BODY)


def _shape(data: bytes) -> tuple[int, int, struct.Struct] | None:
    """(records' start, record count, body layout) of whole sidecar bytes; None unless a sidecar
    of whole records."""
    layout = _layout(data)
    if layout is None:
        return None
    start, body_format = layout
    count, rest = divmod(len(data) - start, body_format.size + _DIGEST)
    return None if count <= 0 or rest else (start, count, body_format)


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
              after: Identity, marks: Sequence[tuple[int, int]] = (), data: bytes | None = None) -> None:
        """Record a durable batch starting at ``seq``, byte ``offset``, whose append wrote ``data``
        (hashed when it is exactly the bytes from ``offset`` to ``after``'s size): appended to the
        sidecar when its last record names ``before`` (the transcript as this batch found it), else
        the sidecar is rebuilt: the format-2 records of the bytes before ``before``'s size are kept
        (their digests still hold for a prefix nothing rewrote), then ``marks`` ((seq, offset) of
        later line or frame starts, from a scan of the transcript as this batch found it), then this
        record. Failures are swallowed: the seek index is a hint, the digests a best effort."""
        sidecar = self.path_of(transcript)
        span = (offset, digest_of(data)) if data is not None and offset + len(data) == after[2] else None
        record = _record(seq, offset, after, span)
        with self._guard:
            last = self._last.pop(transcript, None)
            if not (before is not None and (last == before or _last_of(sidecar) == before)
                    and _append(sidecar, record)):
                kept = _kept(sidecar, before[2], seq) if before is not None else []
                if not self._rewrite(sidecar, kept, marks, after, seq, record):
                    return  # stays unknown: the next append starts the sidecar afresh
            self._last[transcript] = after

    @staticmethod
    def _rewrite(sidecar: Path, kept: list[bytes], marks: Sequence[tuple[int, int]], after: Identity,
                 seq: int, last: bytes | None) -> bool:
        """Replace the sidecar by ``kept`` records, the ``marks`` past them (before ``seq``) and
        ``last``; with no record at all it is removed. False when that failed."""
        start = _BODY.unpack_from(kept[-1])[:2] if kept else (-1, -1)
        earlier = b"".join(_record(*mark, after) for mark in marks
                           if start[0] < mark[0] < seq and mark[1] > start[1])
        content = b"".join(kept) + earlier + (last or b"")
        temp = sidecar.with_name(f"{sidecar.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            if not content:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(sidecar)
                return True
            _write_whole(temp, _MAGIC + content)
            os.replace(temp, sidecar)  # replaces a planted symlink itself, not its target
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        return True

    def published(self, transcript: Path, seq: int, offset: int, content: bytes | None = None) -> None:
        """Start the sidecar of a newly published (or rewritten) transcript whose first batch
        (``seq``) is at ``offset``, its bytes ``content`` hashed whole: the transcript's identity is
        read now (failures are swallowed)."""
        with contextlib.suppress(OSError):
            after = identity_of(os.stat(transcript))
            data = content if content is not None and len(content) == after[2] else None
            record = _record(seq, offset, after, None if data is None else (0, digest_of(data)))
            with self._guard:
                self._last.pop(transcript, None)
                if self._rewrite(self.path_of(transcript), [], (), after, seq, record):
                    self._last[transcript] = after

    def truncated(self, transcript: Path, marks: Sequence[tuple[int, int]]) -> None:
        """Rebuild the sidecar after a repair cut the transcript's torn tail: the records of the
        prefix kept (their digests hold) and ``marks`` of the scan before the cut past them."""
        with contextlib.suppress(OSError):
            after = identity_of(os.stat(transcript))
            sidecar = self.path_of(transcript)
            with self._guard:
                self._last.pop(transcript, None)
                kept = _kept(sidecar, after[2])
                inside = [mark for mark in marks if mark[1] < after[2]]
                if kept:  # the last record must name the transcript as it is now
                    first = _BODY.unpack_from(kept[-1])[:2]
                    inside = [mark for mark in inside if mark[1] > first[1]] or [first]
                if inside:
                    *earlier, last = inside
                    if self._rewrite(sidecar, kept, earlier, after, last[0], _record(*last, after)):
                        self._last[transcript] = after
                else:
                    self._rewrite(sidecar, kept, (), after, 0, None)

    def records(self, transcript: Path) -> tuple[list[Batch | None], bool] | None:
        """Every whole record of the transcript's sidecar (None: damaged) and whether the sidecar is
        format 2 (holds digests); None without a readable sidecar."""
        try:
            with _open_read(self.path_of(transcript)) as handle:
                return _records(handle.read())
        except OSError:
            return None

    def batches(self, transcript: Path, current: Identity) -> list[tuple[int, int]]:
        """(seq, offset) of every indexed batch start, when the sidecar is intact and describes the
        transcript exactly as ``current``; else [] (a checkpoint's span table: ``jsonl_checkpoint``)."""
        found = self.records(transcript)
        if found is None or not found[0] or any(record is None for record in found[0]):
            return []
        records = [record for record in found[0] if record is not None]
        if records[-1].after != current:
            return []
        return [(record.seq, record.offset) for record in records]

    def find(self, transcript: Path, from_seq: int, current: Identity) -> tuple[int, int] | None:
        """(seq, offset) of the last indexed batch starting at or before ``from_seq``, when the
        sidecar is intact and describes the transcript exactly as ``current``; else None."""
        try:
            with _open_read(self.path_of(transcript)) as handle:
                data = handle.read()
        except OSError:
            return None
        shape = _shape(data)
        if shape is None:
            return None
        start, count, body_format = shape
        size = body_format.size + _DIGEST
        last = _unpack_at(data, start + (count - 1) * size, body_format)
        if last is None or last.after != current:
            return None
        low, high = 0, count  # records are in seq order: the first whose seq exceeds from_seq
        while low < high:
            middle = (low + high) // 2
            seq = body_format.unpack_from(data, start + middle * size)[0]
            if seq <= from_seq:
                low = middle + 1
            else:
                high = middle
        if low == 0:
            return None
        found = _unpack_at(data, start + (low - 1) * size, body_format)
        if found is None or found.seq > from_seq or found.offset > current[2]:
            return None
        return found.seq, found.offset


def _kept(sidecar: Path, size: int, below_seq: int | None = None) -> list[bytes]:
    """The format-2 records of a sidecar, as bytes, up to the first damaged one or the first whose
    append ended past byte ``size`` or started at ``below_seq`` or later (what a rebuild keeps of a
    transcript's first ``size`` bytes)."""
    try:
        with _open_read(sidecar) as handle:
            data = handle.read()
    except OSError:
        return []
    if not data.startswith(_MAGIC):
        return []
    kept = []
    for at in range(len(_MAGIC), len(data) - _RECORD + 1, _RECORD):
        record = _unpack_at(data, at, _BODY)
        if record is None or record.after[2] > size or (below_seq is not None and record.seq >= below_seq):
            break
        kept.append(data[at:at + _RECORD])
    return kept


def _last_of(sidecar: Path) -> Identity | None:
    """The identity a format-2 sidecar's last record names (None: absent, damaged, empty or of
    format 1, which the next append replaces)."""
    try:
        with _open_read(sidecar) as handle:
            head = handle.read(len(_MAGIC))
            size = os.fstat(handle.fileno()).st_size
            count = (size - len(_MAGIC)) // _RECORD
            if head != _MAGIC or count <= 0 or (size - len(_MAGIC)) % _RECORD:
                return None
            handle.seek(len(_MAGIC) + (count - 1) * _RECORD)
            record = _unpack_at(handle.read(_RECORD), 0, _BODY)
    except OSError:
        return None
    return None if record is None else record.after


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
