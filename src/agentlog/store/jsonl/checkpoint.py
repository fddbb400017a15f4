"""The JSONL store's validated-state checkpoints: resume a transcript without parsing its prefix.

A sidecar ``<transcript>.ckpt`` (beside the seek index, same conventions: written to a temp
file and renamed, never fsynced, never followed through a symlink, outside ``FileSystem``)
holds a ``SessionState`` (``agentlog.core.checkpoint``) at byte offset N of the transcript: the
sha256 of the transcript's bytes 0..N as stored (zstd or raw), the event count there, where
its batches start (the spans a resumed log parses lazily), the surface, the derived messages.
Opening verifies the sidecar's own digests and the transcript hash, then validates only the
events after N, continuing the restored state. Anything else (no sidecar, a torn, flipped,
foreign or stale one, a transcript that does not hash the same, a suffix that does not read
back cleanly, legacy shapes) means the full read and validation, never a wrong result and never
an error (a debug log). Written when a load or open validated the whole log (or a suffix of at
least ``checkpoint_bytes``), and when a live session closes with that much written since.
``inspect(trust_checkpoint=False)`` (``verify``, ``check-upgrade``) never resumes: the hash proves
the bytes unchanged since a validation, not that they are valid to this reader.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import operator
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, Final

import zstandard

from agentlog.core.bulk import gc_paused
from agentlog.core.checkpoint import (
    SessionState,
    capture_state,
    resume_prefix,
    resume_session,
    trusted_messages,
)
from agentlog.core.events import Event, is_safe_int
from agentlog.core.jsonvalue import dumps, loads
from agentlog.core.messages import Message
from agentlog.core.packed import ChunkRun, LazySpan
from agentlog.core.repair import interrupted_turn_closers
from agentlog.core.session import Session
from agentlog.core.storable import PLAIN_STORED_TYPES, first_legacy, refuse_retired, refuse_unknown
from agentlog.errors import AgentlogError, SessionCorruptionError
from agentlog.store.hooks import LiveHandle
from agentlog.store.jsonl.forks import Transcript, is_shared, public_header
from agentlog.store.jsonl.format import read_header_prefix, scan_suffix
from agentlog.store.jsonl.integrity import JsonlIntegrity
from agentlog.store.jsonl.seek import Identity, SeekIndex, identity_of
from agentlog.store.records import StoredLog
from agentlog.store.writer import LiveSession

__all__ = ["CHECKPOINT_SUFFIX", "DEFAULT_CHECKPOINT_BYTES", "JsonlCheckpoints"]

logger = logging.getLogger("agentlog")

CHECKPOINT_SUFFIX: Final = ".ckpt"
DEFAULT_CHECKPOINT_BYTES: Final = 1 << 18
"""A new checkpoint once this many transcript bytes lie after the last one (or there is none)."""

_MAGIC: Final = b"agentlog-ckpt\n"
_VERSION: Final = 2
"""2: the messages are one JSON line each (1: one JSON array, whose parse peaked at 12x its size),
and the core holds digests of prefixes (a cold fork verifies only what it forks)."""
_PREFIX_STEP: Final = 1 << 18
"""Bytes between the transcript prefixes whose sha256 the core holds (at batch starts)."""
_READ_SIZE: Final = 1 << 16
"""How much of the checkpoint's messages is decompressed at a time while they are parsed."""
_HEAD: Final = struct.Struct("<IQQ32s32s")  # version, core bytes, message bytes, their sha256
_HEAD_DIGEST: Final = 16
_NO_FOLLOW: Final = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_FAILURES: Final = (AgentlogError, OSError, ValueError, TypeError, KeyError, IndexError, zstandard.ZstdError)
"""What a damaged or foreign checkpoint can raise while it is read: it is then ignored."""

Prepared = tuple[StoredLog, Session, list[Event]]


@dataclass(frozen=True, slots=True)
class _Core:
    """A checkpoint's verified core, and where its messages are in the sidecar."""

    offset: int
    digest: bytes
    spans: list[tuple[int, int]]
    prefixes: list[tuple[int, bytes]]
    """(N, sha256 of the transcript's bytes 0..N) at some batch starts, increasing, N < offset."""
    state: SessionState
    messages_at: int
    messages_size: int
    messages_digest: bytes


def checkpoint_path(transcript: Path) -> Path:
    """The checkpoint sidecar of a transcript."""
    return transcript.with_name(transcript.name + CHECKPOINT_SUFFIX)


def encode_checkpoint(session_id: str, offset: int, digests: tuple[bytes, Sequence[tuple[int, bytes]]],
                      spans: Sequence[tuple[int, int]], state: SessionState,
                      messages: Sequence[Message]) -> bytes:
    """The sidecar bytes: magic, a digested head, the core JSON, the messages (one JSON line each,
    so a resume parses and freezes one at a time; one zstd frame: a quarter of the size for a few
    percent of a resume's time)."""
    digest, prefixes = digests
    core = dumps({"sessionId": session_id, "agentlog": _rules(), "offset": offset, "sha256": digest.hex(),
                  "prefixes": [[end, hashed.hex()] for end, hashed in prefixes],
                  "spans": [list(span) for span in spans], "state": state.to_wire()})
    lines = b"".join(dumps(message) + b"\n" for message in messages)
    body = zstandard.ZstdCompressor(level=1).compress(lines)
    head = _HEAD.pack(_VERSION, len(core), len(body), hashlib.sha256(core).digest(),
                      hashlib.sha256(body).digest())
    return _MAGIC + head + hashlib.blake2b(head, digest_size=_HEAD_DIGEST).digest() + core + body


def prefix_digests(data: bytes, spans: Sequence[tuple[int, int]]) -> tuple[bytes, list[tuple[int, bytes]]]:
    """The sha256 of ``data``, and of its prefixes ending at batch starts ``_PREFIX_STEP`` apart
    or more (one pass over the bytes)."""
    view, hasher = memoryview(data), hashlib.sha256()
    hashed, prefixes = 0, []
    for _seq, start in spans[1:]:
        if start - hashed >= _PREFIX_STEP:
            hasher.update(view[hashed:start])
            hashed = start
            prefixes.append((start, hasher.digest()))
    hasher.update(view[hashed:])
    return hasher.digest(), prefixes


def _read_core(path: Path, session_id: str) -> _Core | None:
    """The checkpoint's core when its head and core digests hold and it names this session."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | _NO_FOLLOW), "rb") as handle:
            lead = handle.read(len(_MAGIC) + _HEAD.size + _HEAD_DIGEST)
            head = lead[len(_MAGIC):len(_MAGIC) + _HEAD.size]
            if len(lead) != len(_MAGIC) + _HEAD.size + _HEAD_DIGEST or not lead.startswith(_MAGIC) or (
                hashlib.blake2b(head, digest_size=_HEAD_DIGEST).digest() != lead[-_HEAD_DIGEST:]
            ):
                return None
            version, core_size, body_size, core_digest, body_digest = _HEAD.unpack(head)
            core = handle.read(core_size) if version == _VERSION else b""
    except OSError:
        return None
    if version != _VERSION or len(core) != core_size or hashlib.sha256(core).digest() != core_digest:
        return None
    wire = loads(core)
    if type(wire) is not dict or wire.get("sessionId") != session_id or wire.get("agentlog") != _rules():
        return None  # another session's, or validated by another version's rules
    offset, digest, spans = wire.get("offset"), wire.get("sha256"), wire.get("spans")
    prefixes = wire.get("prefixes")
    state = SessionState.from_wire(wire.get("state"))
    if (state is None or type(offset) is not int or type(digest) is not str or type(spans) is not list
            or type(prefixes) is not list):
        return None
    table = [(span[0], span[1]) for span in spans if type(span) is list and len(span) == 2
             and type(span[0]) is int and type(span[1]) is int]
    hashed = [(end, bytes.fromhex(hexed)) for end, hexed in (
        pair for pair in prefixes if type(pair) is list and len(pair) == 2)
        if type(end) is int and type(hexed) is str and len(hexed) == 64]
    if len(table) != len(spans) or len(hashed) != len(prefixes):
        return None
    return _Core(offset, bytes.fromhex(digest), table, hashed, state, len(lead) + core_size, body_size,
                 body_digest)


def _rules() -> str:
    """The version whose validation a checkpoint vouches for (another version validates afresh)."""
    from agentlog.version import __version__

    return __version__


def _read_messages(path: Path, core: _Core) -> list[Message] | None:
    """The checkpoint's derived messages, trusted once their digest holds (None: unusable)."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | _NO_FOLLOW), "rb") as handle:
            handle.seek(core.messages_at)
            body = handle.read(core.messages_size)
    except OSError:
        return None
    if len(body) != core.messages_size or hashlib.sha256(body).digest() != core.messages_digest:
        return None
    return trusted_messages(_lines(body))


def _lines(body: bytes) -> Iterator[Any]:
    """Each newline-terminated JSON line of the zstd frame ``body`` parsed, in order, decompressed
    as it is read: the whole text never sits in memory beside the messages (a torn line raises)."""
    reader = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(body), _READ_SIZE)
    for line in reader:
        if not line.endswith(b"\n"):
            raise ValueError("the checkpoint's messages end in a torn line")
        yield loads(line)


def _write_sidecar(path: Path, data: bytes) -> None:
    """Publish ``data`` at ``path`` atomically (temp file, rename); a planted symlink is replaced."""
    temp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(temp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _header_end(data: bytes, compressed: bool) -> int:
    """Where the first batch starts: after the header line (raw) or the header frame (zstd)."""
    if not compressed:
        return data.index(b"\n") + 1
    from agentlog.store.jsonl.zstd_frames import scan_zstd_frames

    frames = scan_zstd_frames(data, max_frames=1, path="").frames
    if not frames:
        raise ValueError("no header frame")
    return frames[0][1]


def _span_table(spans: Sequence[tuple[int, int]], count: int, offset: int, data: bytes,
                compressed: bool) -> list[tuple[int, int, int, int]] | None:
    """``(seq0, count, start, end)`` of each span, when the table is increasing, covers seqs
    0..count-1 and bytes header end..offset, and each start begins a line (raw) or frame (zstd)."""
    if not spans or spans[0] != (0, _header_end(data, compressed)):
        return None
    table: list[tuple[int, int, int, int]] = []
    bounds = [*spans, (count, offset)]
    for (seq, start), (next_seq, end) in pairwise(bounds):
        if not (seq < next_seq and start < end):
            return None
        if compressed and data[start:start + 4] != _ZSTD_MAGIC:
            return None
        if not compressed and data[start - 1] != 0x0A:
            return None
        table.append((seq, next_seq - seq, start, end))
    if not compressed and data[offset - 1] != 0x0A:
        return None
    return table


class JsonlCheckpoints(JsonlIntegrity):
    """Checkpoint reads (``_prepare``, cold forks) and writes (load, open, close) of ``JsonlStore``."""

    _seek: SeekIndex
    checkpoint_bytes: int | None
    _unmirrored: set[str]
    """Sessions whose loaded log differs from its bytes (legacy shapes upgraded): never checkpointed."""
    _resumed: OrderedDict[str, tuple[str, tuple[int, int], list[tuple[int, int]]]]
    """Per session resumed from a checkpoint (LRU): (revision, its (count, offset), its batch starts)."""
    _resumed_forks: OrderedDict[str, tuple[str, Session]]
    """Whole logs a cold fork resumed from a checkpoint (without messages), per revision (LRU)."""
    _cache: OrderedDict[str, Transcript]
    _cache_guard: threading.Lock

    def _check_identity(self, session_id: str, header: Any, path: Path) -> None:
        raise NotImplementedError

    def _seek_marks(self, session_id: str, revision: str | None = None) -> tuple[tuple[int, int], ...]:
        """(seq, offset) of line or frame starts of a transcript (of ``revision`` if given), what
        rebuilds a stale seek index: ``LogScan.marks`` of this store's full scan of it, or the
        batch starts of the checkpoint it resumed from and where that checkpoint ends."""
        with self._cache_guard:
            cached = self._cache.get(session_id)
            resumed = self._resumed.get(session_id)
        if cached is not None and not cached.partial and revision in (None, cached.revision):
            return cached.marks
        if resumed is not None and revision in (None, resumed[0]):
            return (*resumed[2], resumed[1])
        return ()

    def _stat(self, path: Path) -> os.stat_result | None:
        raise NotImplementedError

    def _saw_end(self, session_id: str, next_seq: int, size: int | None, *, read: bool = False) -> None:
        raise NotImplementedError

    # -- reading -----------------------------------------------------------------------------

    def _init_checkpoints(self, checkpoint_bytes: int | None) -> None:
        if checkpoint_bytes is not None and (type(checkpoint_bytes) is not int or checkpoint_bytes < 0):
            raise ValueError("checkpoint_bytes must be a non-negative integer or None, "
                             f"got {checkpoint_bytes!r}")
        self.checkpoint_bytes = checkpoint_bytes
        self._unmirrored = set()
        self._resumed = OrderedDict()
        self._resumed_forks = OrderedDict()

    def _prepare(self, session_id: str, *, trust_checkpoint: bool = True) -> Prepared:
        """A resume from the checkpoint when there is a good one; with ``trust_checkpoint=False``
        always the full read and validation (a cached resume is dropped first, not reused)."""
        if not trust_checkpoint:
            with self._guard:
                cached = self._prepared.get(session_id)
                if cached is not None and _resumed_log(cached[1]):
                    del self._prepared[session_id]
            return super()._prepare(session_id)
        path = self._find(session_id)
        info = self._stat(path) if path is not None else None
        with self._guard:
            cached = self._prepared.get(session_id)
            if cached is not None and info is not None and cached[0].revision == _revision(identity_of(info)):
                self._prepared.move_to_end(session_id)
                return cached
        resumed = self._resume(session_id, with_messages=True)
        if resumed is not None:
            self._remember(self._prepared, session_id, resumed)
            return resumed
        return super()._prepare(session_id)

    def _fork_source(self, session_id: str, boundary: int | None) -> tuple[Session, int]:
        with self._guard:
            whole_known = session_id in self._prepared
        if not whole_known:
            if boundary is not None and is_safe_int(boundary) and boundary >= 0:
                prefix = self._resume_prefix(session_id, boundary + 1)
                if prefix is not None:
                    return prefix
            resumed = self._resume(session_id, with_messages=False)
            if resumed is not None:
                stored, source, _closers = resumed
                self._remember(self._resumed_forks, session_id, (stored.revision, source))
                return source, source.seq
        return super()._fork_source(session_id, boundary)

    def _resume_prefix(self, session_id: str, end: int) -> tuple[Session, int] | None:
        """A fork's source holding at least the first ``end`` events, from a checkpoint whose
        digest of a prefix holding them holds (only those bytes are read), or a cached one of the
        transcript's current revision; None: the caller takes the whole log's way."""
        path = self._find(session_id) if self.checkpoint_bytes is not None else None
        if path is None:
            return None
        try:
            revision = _revision(identity_of(os.stat(path)))
        except OSError:
            return None
        with self._guard:
            known = self._fork_sources.get(session_id)
        if known is not None and known[0] == revision and known[2] >= end:
            return known[1], known[2]
        core = _read_core(checkpoint_path(path), session_id)
        if core is None:
            return None
        try:
            return self._prefix_from(session_id, path, core, end, revision)
        except _FAILURES as exc:
            logger.debug('session "%s": checkpoint of %s not used for a fork (%s)', session_id, path, exc)
            return None

    def _prefix_from(self, session_id: str, path: Path, core: _Core, end: int,
                     revision: str) -> tuple[Session, int] | None:
        starts = dict((start, seq) for seq, start in core.spans)
        chosen = next(((size, digest) for size, digest in core.prefixes
                       if starts.get(size, -1) >= end and size < core.offset), None)
        if chosen is None:
            return None  # the boundary lies in the last part: the whole transcript is hashed anyway
        size, digest = chosen
        with os.fdopen(os.open(path, os.O_RDONLY | _NO_FOLLOW), "rb") as handle:
            data = handle.read(size)
        if len(data) != size or hashlib.sha256(data).digest() != digest:
            return None
        stored_header = self._stored_header(session_id, data, path)
        count = starts[size]
        spans = _span_table([span for span in core.spans if span[0] < count], count, size, data,
                            self.compressed)
        if stored_header is None or spans is None:
            return None
        source = resume_prefix(public_header(stored_header), core.state, spans, self._span_reader(data, path))
        self._remember(self._fork_sources, session_id, (revision, source, count))
        return source, count

    def _stored_header(self, session_id: str, data: bytes, path: Path) -> Any:
        """The transcript's header (its own, not shared by reference; None: unusable here)."""
        head = data[:_header_end(data, self.compressed)]
        stored_header = read_header_prefix(iter((head,)), compressed=self.compressed, path=str(path))
        if stored_header is None or is_shared(stored_header):
            return None
        self._check_identity(session_id, stored_header, path)
        return stored_header

    def _resume(self, session_id: str, *, with_messages: bool) -> Prepared | None:
        """The prepared session from a verified checkpoint, a cached one of the transcript's current
        revision, or None (the caller reads and validates the whole log)."""
        if self.checkpoint_bytes is None:
            return None
        path = self._find(session_id)
        if path is None:
            return None
        try:
            current = identity_of(os.stat(path))
        except OSError:
            return None
        with self._guard:
            known = self._resumed_forks.get(session_id)
        if not with_messages and known is not None and known[0] == _revision(current):
            return StoredLog(known[1].header, known[1].events, known[0]), known[1], []
        core = _read_core(checkpoint_path(path), session_id)
        if core is None:
            return None
        try:
            if not with_messages:  # a few thousand objects: no collection to spare
                return self._resume_from(session_id, path, core, with_messages)
            with gc_paused():
                return self._resume_from(session_id, path, core, with_messages)
        except _FAILURES as exc:
            logger.debug('session "%s": checkpoint of %s not used (%s)', session_id, path, exc)
            return None

    def _resume_from(self, session_id: str, path: Path, core: _Core, with_messages: bool) -> Prepared | None:
        read = self._read_file(path)
        if read is None or len(read[0]) < core.offset:
            return None
        data, revision = read
        if hashlib.sha256(memoryview(data)[:core.offset]).digest() != core.digest:
            return None
        stored_header = self._stored_header(session_id, data, path)
        if stored_header is None:
            return None
        spans = _span_table(core.spans, core.state.count, core.offset, data, self.compressed)
        if spans is None:
            return None
        suffix = [] if len(data) == core.offset else scan_suffix(
            data[core.offset:], compressed=self.compressed, path=str(path), offset=core.offset,
            first_seq=core.state.count)
        if suffix is None:
            return None  # a torn tail or a damaged suffix: the full read names and repairs it
        for entry in suffix:
            if entry.type not in PLAIN_STORED_TYPES:
                refuse_retired(entry, session_id)  # type: ignore[arg-type]
                refuse_unknown(entry, session_id)  # type: ignore[arg-type]
        if first_legacy(suffix) is not None:
            return None  # a legacy suffix: the full read upgrades it
        messages = _read_messages(checkpoint_path(path), core) if with_messages else None
        header = public_header(stored_header)
        session = resume_session(header, core.state, spans, self._span_reader(data, path), messages)
        session._load_seed(suffix)
        closers = interrupted_turn_closers(session.events)
        self._saw_end(session_id, session.seq, len(data), read=True)
        self._remember(self._resumed, session_id, (revision, (core.state.count, core.offset), core.spans))
        return StoredLog(header, session.events, revision), session, closers

    def _span_reader(self, data: bytes, path: Path) -> Any:
        compressed = self.compressed

        def read(seq0: int, count: int, start: int, end: int) -> list[Event | ChunkRun]:
            entries = scan_suffix(data[start:end], compressed=compressed, path=str(path), offset=start,
                                  first_seq=seq0)
            if entries is None or len(entries) != count:
                raise SessionCorruptionError(
                    f"checkpointed events {seq0}..{seq0 + count - 1} do not read back from their bytes",
                    file=str(path), offset=start, seq=seq0)
            return entries

        return read

    # -- writing -----------------------------------------------------------------------------

    def _load_committed(self, session_id: str, ready: Prepared | None = None) -> Session:
        prepared = ready or self._prepare(session_id)  # kept: a repair drops it from the cache
        session = super()._load_committed(session_id, prepared)
        if self.checkpoint_bytes is not None:
            self._checkpoint_prepared(session_id, *prepared)
        return session

    def _checkpoint_prepared(self, session_id: str, stored: StoredLog, source: Session,
                             _closers: list[Event]) -> None:
        """After a load: checkpoint the validated log unless a recent checkpoint already covers it.
        A log whose load upgraded legacy shapes in memory is marked never to be checkpointed (its
        live session's close included), even when a repair changed the file meanwhile."""
        resumed = self._resumed.get(session_id)
        fresh = resumed is not None and resumed[0] == stored.revision
        spanned = _resumed_log(source)  # resumed: mirrors its bytes
        if not spanned and not all(map(operator.is_, source._log, stored.events)):  # legacy upgraded
            self._unmirrored.add(session_id)
        if stored.torn is not None or stored.writers or session_id in self._unmirrored:
            return
        if spanned and not fresh:
            return  # resumed, but what it resumed from is no longer remembered
        prior: Sequence[tuple[int, int]] = ()
        if resumed is not None and fresh:
            size = _size_of(stored.revision)
            if size - resumed[1][1] < (self.checkpoint_bytes or 0) or size == resumed[1][1]:
                return
            prior = resumed[2]
        elif _size_of(stored.revision) < (self.checkpoint_bytes or 0):
            return  # small: a full read costs little
        path = self._find(session_id)
        read = self._read_file(path) if path is not None else None
        if path is None or read is None or read[1] != stored.revision:
            return
        self._write_checkpoint(session_id, path, read[0], source, prior)

    def _detach_live(self, live: LiveHandle) -> None:
        super()._detach_live(live)
        if not isinstance(live, LiveSession):
            return
        session, state = live.session, live._state
        if (self.checkpoint_bytes is None or live._failure is not None or not state.materialized
                or state.cursor != session.seq or session.header.parent_session is not None
                or session.id in self._unmirrored):
            return
        path = self._paths.get(session.id)
        ours = self._seek._last.get(path) if path is not None else None
        if path is None or ours is None:
            return
        try:
            if identity_of(os.stat(path)) != ours:
                return  # another writer (or a repair) changed it since our last append
            if ours[2] - _covered(path, session.id) < self.checkpoint_bytes:
                return
        except OSError:
            return
        read = self._read_file(path)
        if read is None or _identity(read[1]) != ours:
            return
        self._write_checkpoint(session.id, path, read[0], session, ())

    def _write_checkpoint(self, session_id: str, path: Path, data: bytes, session: Session,
                          prior: Sequence[tuple[int, int]]) -> None:
        """Checkpoint ``session`` (every event durable, exactly ``data``'s) beside ``path``."""
        try:
            count = session.seq
            identity = identity_of(os.stat(path))
            marks = [*prior, *self._seek.batches(path, identity), *self._seek_marks(session_id)]
            spans = _spans(marks, _header_end(data, self.compressed), count, len(data))
            if count == 0 or spans is None:
                return
            state, messages = capture_state(session, count)
            content = encode_checkpoint(session_id, len(data), prefix_digests(data, spans), spans,
                                        state, messages)
            _write_sidecar(checkpoint_path(path), content)
        except _FAILURES as exc:
            logger.debug('session "%s": checkpoint of %s not written (%s)', session_id, path, exc)


def _spans(marks: Sequence[tuple[int, int]], header_end: int, count: int,
           size: int) -> list[tuple[int, int]] | None:
    """The span table from batch and scan marks: sorted, inside the log, consistent (else None)."""
    spans = sorted({(0, header_end), *((seq, offset) for seq, offset in marks
                                       if 0 < seq < count and header_end < offset < size)})
    for (seq, offset), (next_seq, next_offset) in pairwise(spans):
        if not (seq < next_seq and offset < next_offset):
            return None
    return spans


def _resumed_log(session: Session) -> bool:
    """True when ``session`` was resumed from a checkpoint (its prefix is in ``LazySpan`` slots)."""
    return bool(session._log) and isinstance(session._log[0], LazySpan)


def _covered(path: Path, session_id: str) -> int:
    """The transcript offset the current checkpoint covers (0: none)."""
    core = _read_core(checkpoint_path(path), session_id)
    return 0 if core is None else core.offset


def _identity(revision: str) -> Identity:
    dev, ino, size, mtime, ctime = (int(part) for part in revision.split(":"))
    return dev, ino, size, mtime, ctime


def _size_of(revision: str) -> int:
    return _identity(revision)[2]


def _revision(identity: Identity) -> str:
    return ":".join(str(part) for part in identity)
