"""A test-only reader of DSH session files: raw JSONL and concatenated zstd frames.

It splits a file into its header, its durable batches (zstd: one frame each) and any torn
tail, and decodes records with agentlog's storage codec. No repair: that is the store's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import zstandard

from agentlog.core.events import Event
from agentlog.store.codec import decode_line


@dataclass(frozen=True)
class ZstdFrame:
    """One complete zstd frame: its compressed bytes and its plaintext."""

    compressed: bytes
    plaintext: bytes


@dataclass(frozen=True)
class DshFile:
    """A DSH session file split into parts.

    ``body`` is the plaintext after the header line, complete records only; ``torn`` the
    plaintext of a torn tail (a partial last line, or what a torn zstd frame still yields).
    ``frames`` is empty for raw files.
    """

    header: dict[str, Any]
    body: bytes
    torn: bytes
    frames: tuple[ZstdFrame, ...]

    def lines(self) -> list[bytes]:
        """The complete record lines after the header (without their newlines)."""
        return self.body.split(b"\n")[:-1] if self.body else []

    def events(self) -> list[Event]:
        """Decode every complete record line into events."""
        return [event for line in self.lines() for event in decode_line(line)]

    def batches(self) -> list[bytes]:
        """The plaintext of each durable batch (zstd files: every frame after the header's)."""
        return [frame.plaintext for frame in self.frames[1:]]


def split_zstd_frames(data: bytes) -> tuple[list[ZstdFrame], bytes | None]:
    """The complete frames of a concatenation, and the partial plaintext of a torn last frame.

    The second value is None when the data ends on a frame boundary. Checksums are verified.
    """
    frames: list[ZstdFrame] = []
    rest = data
    while rest:
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        plaintext = decompressor.decompress(rest)
        if not decompressor.eof:
            return frames, plaintext
        used = len(rest) - len(decompressor.unused_data)
        frames.append(ZstdFrame(rest[:used], plaintext))
        rest = decompressor.unused_data
    return frames, None


def read_dsh_file(path: Path) -> DshFile:
    """Read a raw (``.jsonl``) or zstd (``.jsonl.zstd``) DSH session file."""
    data = path.read_bytes()
    frames: list[ZstdFrame] = []
    torn = b""
    if path.name.endswith(".zstd"):
        frames, partial = split_zstd_frames(data)
        plaintext = b"".join(frame.plaintext for frame in frames)
        if partial is not None:
            torn = partial
    else:
        plaintext = data
    header_end = plaintext.index(b"\n") + 1
    header = orjson.loads(plaintext[:header_end])
    body = plaintext[header_end:]
    cut = body.rfind(b"\n") + 1
    if cut < len(body):  # a raw file cut inside its last line
        torn, body = body[cut:] + torn, body[:cut]
    return DshFile(header=header, body=body, torn=torn, frames=tuple(frames))
