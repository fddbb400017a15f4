"""Zstandard frames of the JSONL store: one checksummed frame per durable batch (DSH format v0).

``compress_frame`` writes standard frames at compression level 3 (zstd's and Node's default)
with the content checksum on and no content-size field, as Node's streaming ``zstdCompress``
does; this reproduces the frames of DSH's fixture files byte for byte. ``scan_zstd_frames``
finds frame boundaries from the frame and block headers alone, so that a torn final frame is
told apart from damage without decoding anything. Decoding is bounded: ``frame_pieces`` feeds a
frame to the decoder a few blocks at a time (each block's output size is known from its header),
so a frame that expands to gigabytes is read in pieces of about ``PIECE_BYTES``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import zstandard

from agentlog.errors import SessionCorruptionError

__all__ = [
    "COMPRESSION_LEVEL",
    "MAX_RECORD_BYTES",
    "MAX_WINDOW_BYTES",
    "PIECE_BYTES",
    "ZSTD_MAGIC",
    "FrameScan",
    "FrameWalker",
    "compress_frame",
    "decode_frame",
    "decode_torn_frame",
    "bounded_decompressor",
    "frame_pieces",
    "next_good_frame",
    "scan_zstd_frames",
    "too_long",
]

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
"""A standard frame's magic number (0xFD2FB528, little-endian); skippable frames are refused."""

COMPRESSION_LEVEL: Final = 3
"""zstd's default level, which Node uses; it reproduces DSH's frames exactly."""

MAX_RECORD_BYTES: Final = 96 << 20
"""The longest record (one JSONL line, newline included) a zstd transcript may hold: a longer one
is refused on write and on read, so a decompression bomb is an error, not gigabytes of memory.
Twice a 50 MB line's room, for JSON escapes."""

MAX_WINDOW_BYTES: Final = 1 << 24
"""The largest window a frame may ask the decoder for (level 3, which agentlog and DSH write,
uses 2 MiB at most); a larger one is refused instead of allocated."""

PIECE_BYTES: Final = 1 << 20
"""About how much plaintext one step of ``frame_pieces`` produces (at most this plus one block)."""

_BLOCK_MAX: Final = 128 << 10
"""A compressed block never regenerates more than this (the format's Block_Maximum_Size)."""

_CORRUPT: Final = "corrupt Zstandard session log"


@dataclass(frozen=True, slots=True)
class FrameScan:
    """Where the complete frames are, and where an incomplete final frame starts (if any)."""

    frames: list[tuple[int, int]]
    torn_start: int | None = None


_compressors = threading.local()
"""One ``ZstdCompressor`` per thread (not thread-safe; a fresh one costs ~30 us of set-up a batch)."""


def compress_frame(plaintext: bytes) -> bytes:
    """One independent standard frame holding ``plaintext``, with a content checksum. Each
    ``compressobj`` starts a new frame on the thread's reused context: the same bytes as a fresh
    compressor's."""
    compressor: zstandard.ZstdCompressor | None = getattr(_compressors, "zstd", None)
    if compressor is None:
        compressor = _compressors.zstd = zstandard.ZstdCompressor(
            level=COMPRESSION_LEVEL, write_checksum=True, write_content_size=False)
    frame = compressor.compressobj()
    return frame.compress(plaintext) + frame.flush()


def _corrupt(detail: str, offset: int, path: str | None) -> SessionCorruptionError:
    return SessionCorruptionError(f"{_CORRUPT}: {detail} at byte {offset}", file=path, offset=offset)


def scan_zstd_frames(
    data: bytes, *, max_frames: int | None = None, path: str | None = None, tolerate_tail: bool = False
) -> FrameScan:
    """Locate complete frames structurally (magic, frame header, block headers, checksum).

    Stops after ``max_frames`` complete frames when given. End of input inside a frame makes
    that frame's first byte ``torn_start``; wrong magic, reserved descriptor bits or a reserved
    block type raise ``SessionCorruptionError`` naming the byte offset. With ``tolerate_tail``
    such damage after the first frame starts a torn tail when no good frame follows it.
    """
    frames: list[tuple[int, int]] = []
    size = len(data)
    offset = 0
    while offset < size:
        start = offset
        try:
            end = FrameWalker(start, path).end(data)
        except SessionCorruptionError:
            if not (tolerate_tail and frames) or next_good_frame(data, start + 1) is not None:
                raise
            return FrameScan(frames, start)  # zeros or garbage after the last good frame
        if end is None:
            return FrameScan(frames, start)
        frames.append((start, end))
        if max_frames is not None and len(frames) >= max_frames:
            break
        offset = end
    return FrameScan(frames)


def next_good_frame(data: bytes, offset: int) -> int | None:
    """Where the first complete frame that decodes cleanly starts at or after ``offset`` (None:
    nowhere); damage before such a frame is in the middle of the log, not a torn tail."""
    dctx = bounded_decompressor()
    while (offset := data.find(ZSTD_MAGIC, offset)) >= 0:
        try:
            end = FrameWalker(offset).end(data)
            if end is not None:
                for _ in frame_pieces(data, (offset, end), decompressor=dctx):
                    pass
                return offset
        except SessionCorruptionError:
            pass
        offset += 1
    return None


class FrameWalker:
    """Finds the end of the frame at ``start`` of a buffer that may still grow.

    ``end`` resumes at the block where the previous call ran out of data, so feeding a buffer
    chunk by chunk costs time linear in its length, not in the number of calls times its length.
    """

    __slots__ = ("_block", "_checksum", "_last", "_path", "_start", "blocks")

    def __init__(self, start: int = 0, path: str | None = None) -> None:
        self._start = start
        self._path = path
        self._block: int | None = None  # offset of the next block header, once the frame header is read
        self._checksum = False
        self._last = False  # whether the block at ``_block`` ends the frame's blocks
        self.blocks: list[tuple[int, int]] = []
        """(end offset, most plaintext it regenerates) of each complete block walked so far."""

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
            self.blocks.append((block_end, _BLOCK_MAX if block_type == 2 else block_header >> 3))
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


def bounded_decompressor() -> zstandard.ZstdDecompressor:
    """A decoding context that refuses windows over ``MAX_WINDOW_BYTES`` (reuse it across frames)."""
    return zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW_BYTES)


def _feeds(walker: FrameWalker, start: int, end: int, budget: int) -> Iterator[tuple[int, int]]:
    """Input slices of ``start..end`` that each regenerate about ``budget`` bytes at most."""
    begin, bound = start, 0
    for block_end, output in walker.blocks:
        bound += output
        if bound >= budget:
            yield begin, block_end
            begin, bound = block_end, 0
    if begin < end:
        yield begin, end


def frame_pieces(
    data: bytes,
    span: tuple[int, int],
    *,
    path: str | None = None,
    decompressor: zstandard.ZstdDecompressor | None = None,
    budget: int = PIECE_BYTES,
) -> Iterator[bytes]:
    """Decompress one complete frame in pieces of about ``budget`` bytes, verifying its checksum
    at the end; any failure is corruption (raised when reached, after earlier pieces)."""
    start, end = span
    walker = FrameWalker(start, path)
    walker.end(data)
    decoder = (decompressor or bounded_decompressor()).decompressobj()
    view = memoryview(data)
    for begin, stop in _feeds(walker, start, end, budget):
        try:
            piece = decoder.decompress(view[begin:stop])
        except zstandard.ZstdError as exc:
            raise _corrupt(f"frame failed to decode ({exc})", start, path) from None
        if piece:
            yield piece
    if not decoder.eof or decoder.unused_data:
        raise _corrupt("frame does not decode to exactly its own bytes", start, path)


def decode_frame(
    data: bytes,
    span: tuple[int, int],
    *,
    path: str | None = None,
    decompressor: zstandard.ZstdDecompressor | None = None,
    limit: int | None = None,
) -> bytes:
    """Decompress one complete frame, verifying its checksum; any failure is corruption.

    Pass one ``decompressor`` to reuse its context across the frames of a file. With ``limit``,
    plaintext longer than that is refused (``SessionCorruptionError``) before more is decoded.
    """
    pieces: list[bytes] = []
    total = 0
    for piece in frame_pieces(data, span, path=path, decompressor=decompressor):
        total += len(piece)
        if limit is not None and total > limit:
            raise too_long(limit, span[0], path)
        pieces.append(piece)
    return b"".join(pieces)


def too_long(limit: int, offset: int, path: str | None) -> SessionCorruptionError:
    """The refusal of a record longer than ``limit`` bytes (a decompression bomb, or not agentlog's)."""
    return _corrupt(f"a record decodes to more than {limit} bytes (the cap of a zstd transcript's "
                    "records; a decompression bomb or a foreign file)", offset, path)


def decode_torn_frame(partial: bytes, *, limit: int = MAX_RECORD_BYTES) -> bytes:
    """The plaintext a non-finishing decompression of an incomplete frame yields ('' if none).

    Only whole blocks decode, and nothing of the frame can be checked, so a decoding error
    means no usable plaintext (as in DSH, where the flush-mode decoder rejects as a whole); so
    does plaintext beyond ``limit``, decoded no further (the tail's bytes are kept by repair).
    """
    walker = FrameWalker(0)
    with contextlib.suppress(SessionCorruptionError):  # the decoder then fails at the damage too
        walker.end(partial)
    decoder = bounded_decompressor().decompressobj()
    view = memoryview(partial)
    pieces: list[bytes] = []
    total = 0
    try:
        for begin, stop in _feeds(walker, 0, len(partial), PIECE_BYTES):
            piece = decoder.decompress(view[begin:stop])
            total += len(piece)
            if total > limit:
                return b""
            pieces.append(piece)
    except zstandard.ZstdError:
        return b""
    return b"".join(pieces)
