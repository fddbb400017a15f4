"""The JSONL store's side of a scrub: the transcript rewritten whole and swapped in atomically.

Under the writer lock the scrubbed transcript is written to ``<transcript>.<12 hex>.tmp`` in the
same directory, fsynced and renamed over the old one (until the rename the old transcript is the
valid one; a temp a SIGKILL leaves is removed by the next holder of the writer lock); then the
seek sidecar is written for the new bytes (both sidecars are removed before the rename: the
checkpoint holds the old surface, hence the text; the next load writes it again), and the side
files of cut torn tails rewritten scrubbed. The journal is
``<transcript>.scrubs`` (JSON lines, fsynced); the key is ``<root>/.agentlog/scrub.key`` (0600).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import zstandard

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import dumps, freeze, loads
from agentlog.errors import SessionCorruptionError, SessionNotFoundError
from agentlog.store.fs import FileSystem, io_error
from agentlog.store.jsonl.checkpoint import checkpoint_path
from agentlog.store.jsonl.forks import is_shared
from agentlog.store.jsonl.format import SHARED_PREFIX_KEY, first_stored_seq
from agentlog.store.jsonl.leftovers import TORN_COPY_INFIX
from agentlog.store.jsonl.seek import SeekIndex
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.scrubbing import ScrubBackend

__all__ = ["JOURNAL_SUFFIX", "JsonlScrub", "scrub_side_file"]

JOURNAL_SUFFIX = ".scrubs"
KEY_FILE = "scrub.key"


class JsonlScrub(ScrubBackend):
    """Scrub rewrites for a ``JsonlStore``."""

    store: JsonlStore

    def key(self) -> bytes:
        path = self.store.root / ".agentlog" / KEY_FILE
        try:
            return path.read_bytes()
        except FileNotFoundError:
            pass
        os.makedirs(path.parent, mode=0o700, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            return path.read_bytes()
        try:
            os.write(fd, os.urandom(32))
            os.fsync(fd)
        finally:
            os.close(fd)
        return path.read_bytes()

    def _path(self, session_id: str) -> Path:
        path = self.store._find(session_id)
        if path is None:
            raise SessionNotFoundError("session not found", session_id=session_id)
        return path

    def journal(self, session_id: str) -> list[dict[str, Any]]:
        path = self._path(session_id)
        try:
            data = Path(f"{path}{JOURNAL_SUFFIX}").read_bytes()
        except FileNotFoundError:
            return []
        return [loads(line) for line in data.splitlines() if line.strip()]

    def own_start(self, session_id: str) -> int:
        transcript = self.store._read_transcript(session_id)
        if transcript is None:
            raise SessionNotFoundError("session not found", session_id=session_id)
        return first_stored_seq(transcript.stored_header)

    def rewrite(self, session_id: str, header: SessionHeader, events: Sequence[Event],
                record: dict[str, Any]) -> list[str]:
        store, fs = self.store, self.store._fs
        transcript = store._read_transcript(session_id)
        if transcript is None:
            raise SessionNotFoundError("session not found", session_id=session_id)
        if transcript.torn is not None:
            raise SessionCorruptionError("the transcript has a torn tail: run agentlog repair first",
                                         session_id=session_id, file=str(transcript.path))
        path, first = transcript.path, first_stored_seq(transcript.stored_header)
        stored = _shared(header) if is_shared(transcript.stored_header) else header
        head = store._encode_header(stored)
        own = list(events[first:])
        content = head + (store._encode(own) if own else b"")
        temp = f"{path}.{uuid.uuid4().hex[:12]}.tmp"
        for sidecar in (checkpoint_path(path), SeekIndex.path_of(path)):
            # Both name the old bytes (the checkpoint holds their surface, hence the text): gone
            # before the rename, a kill after it leaves a transcript with no digests, never wrong ones.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sidecar)
        try:
            fs.write_new(temp, content)
            fs.replace(temp, str(path))  # the point of no return: before it the old transcript stands
            fs.fsync_dir(str(path.parent))
        except OSError as exc:
            with contextlib.suppress(OSError):
                fs.unlink(temp)
            io_error(f"could not rewrite {path} scrubbed: {exc}", exc, session_id=session_id, file=str(path))
        finally:
            store._forget(session_id)
            store._saw_end(session_id, 0, None)
        store._seek.published(path, first, len(head), content)  # digests of the new bytes
        notes = self._scrub_side_files(path)
        _append_line(fs, Path(f"{path}{JOURNAL_SUFFIX}"), dumps(record) + b"\n")
        return notes

    def tidy(self, session_id: str) -> list[str]:
        return self._scrub_side_files(self._path(session_id))

    def _scrub_side_files(self, path: Path) -> list[str]:
        scrubber, fs = self.text_scrubber, self.store._fs
        return [f"{side.name}: rewritten scrubbed" for side in self._side_files(path)
                if scrubber is not None and scrub_side_file(side, scrubber, fs)]

    def _side_files(self, path: Path) -> list[Path]:
        prefix = path.name + TORN_COPY_INFIX
        return sorted(entry for entry in path.parent.iterdir() if entry.name.startswith(prefix))


def _shared(header: SessionHeader) -> SessionHeader:
    """The header of a fork by reference as stored: with its shared-prefix flag."""
    wire = header.to_wire()
    wire[SHARED_PREFIX_KEY] = True
    return SessionHeader.from_wire(freeze(wire), session_id=header.id)


def scrub_side_file(path: Path, scrub: Callable[[str], str], fs: FileSystem | None = None) -> bool:
    """Rewrite a cut torn tail's copy with ``scrub`` applied to its text; True when it changed.

    Zstd frames are decoded as far as they go and written back as one frame; bytes past what
    decodes (a cut frame) are scrubbed as they are, as text. Atomic and durable like the
    transcript, through the same ``FileSystem`` calls."""
    fs = fs or FileSystem()
    data = path.read_bytes()
    compressed = data[:4] == b"\x28\xb5\x2f\xfd"
    text, rest = _decoded(data) if compressed else (data, b"")
    plain, raw = (part.decode("utf-8", "surrogateescape") for part in (text, rest))
    scrubbed, scrubbed_raw = scrub(plain), scrub(raw)
    if scrubbed == plain and scrubbed_raw == raw:
        return False
    out = scrubbed.encode("utf-8", "surrogateescape")
    if compressed:
        out = zstandard.ZstdCompressor().compress(out) + scrubbed_raw.encode("utf-8", "surrogateescape")
    # Named as a transcript temp, so the next holder of the writer lock removes one a kill leaves.
    temp = f"{path.parent / path.name.split(TORN_COPY_INFIX)[0]}.{uuid.uuid4().hex[:12]}.tmp"
    fs.write_new(temp, out)
    fs.replace(temp, str(path))
    fs.fsync_dir(str(path.parent))
    return True


def _decoded(data: bytes) -> tuple[bytes, bytes]:
    """What the complete zstd frames at the start of ``data`` decode to, and the bytes after them."""
    out: list[bytes] = []
    rest = data
    while rest:
        decoder = zstandard.ZstdDecompressor().decompressobj()
        try:
            plain = decoder.decompress(rest)
        except zstandard.ZstdError:
            break
        if not decoder.eof:
            break
        out.append(plain)
        rest = decoder.unused_data
    return b"".join(out), rest


def _append_line(fs: FileSystem, path: Path, line: bytes) -> None:
    """Append one journal line, fsynced (``FileSystem.write`` loops over short writes)."""
    fd = fs.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        fs.write(fd, line)
        fs.fsync(fd)
    finally:
        fs.close(fd)
