"""Zstandard frames of the JSONL store: one checksummed frame per durable batch (DSH format v0).

``compress_frame`` writes standard frames at compression level 3 (zstd's and Node's default)
with the content checksum on and no content-size field, as Node's streaming ``zstdCompress``
does; this reproduces the frames of DSH's fixture files byte for byte. ``scan_zstd_frames``
finds frame boundaries from the frame and block headers alone, so that a torn final frame is
told apart from damage without decoding anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import zstandard

from agentlog.errors import SessionCorruptionError

__all__ = [
    "COMPRESSION_LEVEL",
    "ZSTD_MAGIC",
    "FrameScan",
    "FrameWalker",
    "compress_frame",
    "decode_frame",
    "decode_torn_frame",
    "scan_zstd_frames",
]

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
"""A standard frame's magic number (0xFD2FB528, little-endian); skippable frames are refused."""

COMPRESSION_LEVEL: Final = 3
"""zstd's default level, which Node uses; it reproduces DSH's frames exactly."""

_CORRUPT: Final = "corrupt Zstandard session log"


@dataclass(frozen=True, slots=True)
class FrameScan:
    """Where the complete frames are, and where an incomplete final frame starts (if any)."""

    frames: list[tuple[int, int]]
    torn_start: int | None = None


def compress_frame(plaintext: bytes) -> bytes:
    """One independent standard frame holding ``plaintext``, with a content checksum."""
    compressor = zstandard.ZstdCompressor(
        level=COMPRESSION_LEVEL, write_checksum=True, write_content_size=False
    ).compressobj()
    return compressor.compress(plaintext) + compressor.flush()


def _corrupt(detail: str, offset: int, path: str | None) -> SessionCorruptionError:
    return SessionCorruptionError(f"{_CORRUPT}: {detail} at byte {offset}", file=path, offset=offset)


def scan_zstd_frames(
    data: bytes, *, max_frames: int | None = None, path: str | None = None
) -> FrameScan:
    """Locate complete frames structurally (magic, frame header, block headers, checksum).

    Stops after ``max_frames`` complete frames when given. End of input inside a frame makes
    that frame's first byte ``torn_start``; wrong magic, reserved descriptor bits or a reserved
    block type raise ``SessionCorruptionError`` naming the byte offset.
    """
    frames: list[tuple[int, int]] = []
    size = len(data)
    offset = 0
    while offset < size:
        start = offset
        end = FrameWalker(start, path).end(data)
        if end is None:
            return FrameScan(frames, start)
        frames.append((start, end))
        if max_frames is not None and len(frames) >= max_frames:
            break
        offset = end
    return FrameScan(frames)


class FrameWalker:
    """Finds the end of the frame at ``start`` of a buffer that may still grow.

    ``end`` resumes at the block where the previous call ran out of data, so feeding a buffer
    chunk by chunk costs time linear in its length, not in the number of calls times its length.
    """

    __slots__ = ("_block", "_checksum", "_last", "_path", "_start")

    def __init__(self, start: int = 0, path: str | None = None) -> None:
        self._start = start
        self._path = path
        self._block: int | None = None  # offset of the next block header, once the frame header is read
        self._checksum = False
        self._last = False  # whether the block at ``_block`` ends the frame's blocks

    def end(self, data: bytes | bytearray) -> int | None:
        """The frame's end offset, or None while ``data`` ends inside it; raises for damage."""
        size = len(data)
        if self._block is None and not self._read_frame_header(data):
            return None
        offset = self._block
        assert offset is not None
        while not self._last:
            if size - offset < 3:
                return None
            block_header = data[offset] | data[offset + 1] << 8 | data[offset + 2] << 16
            block_type = (block_header >> 1) & 0x03
            if block_type == 3:
                raise _corrupt("reserved block type", offset, self._path)
            block_end = offset + 3 + (1 if block_type == 1 else block_header >> 3)
            if block_end > size:
                return None
            offset = self._block = block_end
            self._last = bool(block_header & 1)
        end = offset + 4 if self._checksum else offset
        return end if end <= size else None

    def _read_frame_header(self, data: bytes | bytearray) -> bool:
        """Check magic and descriptor and find the first block; False while the header is incomplete."""
        start, size = self._start, len(data)
        if size - start < 4:
            return False
        if data[start:start + 4] != ZSTD_MAGIC:
            raise _corrupt("invalid frame magic", start, self._path)
        offset = start + 4
        if offset == size:
            return False
        descriptor = data[offset]
        if descriptor & 0x18:
            raise _corrupt("reserved frame-header bit set", offset, self._path)
        offset += 1
        single_segment = bool(descriptor & 0x20)
        content_size_flag = descriptor >> 6
        dictionary_flag = descriptor & 0x03
        content_size_bytes = int(single_segment) if content_size_flag == 0 else 1 << content_size_flag
        dictionary_bytes = 4 if dictionary_flag == 3 else dictionary_flag
        offset += (0 if single_segment else 1) + dictionary_bytes + content_size_bytes
        if offset > size:
            return False
        self._block = offset
        self._checksum = bool(descriptor & 0x04)
        return True


def decode_frame(
    data: bytes,
    span: tuple[int, int],
    *,
    path: str | None = None,
    decompressor: zstandard.ZstdDecompressor | None = None,
) -> bytes:
    """Decompress one complete frame, verifying its checksum; any failure is corruption.

    Pass one ``decompressor`` to reuse its context across the frames of a file.
    """
    start, end = span
    decoder = (decompressor or zstandard.ZstdDecompressor()).decompressobj()
    try:
        plaintext = decoder.decompress(data[start:end])
    except zstandard.ZstdError as exc:
        raise _corrupt(f"frame failed to decode ({exc})", start, path) from None
    if not decoder.eof or decoder.unused_data:
        raise _corrupt("frame does not decode to exactly its own bytes", start, path)
    return plaintext


def decode_torn_frame(partial: bytes) -> bytes:
    """The plaintext a non-finishing decompression of an incomplete frame yields ('' if none).

    Only whole blocks decode, and nothing of the frame can be checked, so a decoding error
    means no usable plaintext (as in DSH, where the flush-mode decoder rejects as a whole).
    """
    decoder = zstandard.ZstdDecompressor().decompressobj()
    try:
        return decoder.decompress(partial)
    except zstandard.ZstdError:
        return b""
