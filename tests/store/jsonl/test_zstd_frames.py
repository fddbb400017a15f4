"""Zstandard frames of the JSONL store (persistence §4.5; zstd.spec.ts 1, 2, 10, 11)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from agentlog.errors import SessionCorruptionError
from agentlog.store.jsonl.zstd_frames import (
    ZSTD_MAGIC,
    compress_frame,
    decode_frame,
    decode_torn_frame,
    scan_zstd_frames,
)


def raw_block(payload: bytes, *, last: bool) -> bytes:
    """A raw (stored) block: 3-byte little-endian header, then the payload."""
    header = len(payload) << 3 | int(last)
    return header.to_bytes(3, "little") + payload


def frame_with(descriptor: int, header_tail: bytes, blocks: bytes, checksum: bytes = b"") -> bytes:
    return ZSTD_MAGIC + bytes([descriptor]) + header_tail + blocks + checksum


def test_compress_frame_reproduces_every_dsh_fixture_frame(dsh_fixtures: Path) -> None:
    files = sorted(dsh_fixtures.glob("*.zstd"))
    assert files
    compared = 0
    for path in files:
        data = path.read_bytes()
        for start, end in scan_zstd_frames(data).frames:
            frame = data[start:end]
            assert compress_frame(decode_frame(data, (start, end))) == frame, (path.name, start)
            compared += 1
    assert compared > 100


def test_compressed_frame_is_standard_checksummed_and_sizeless() -> None:
    frame = compress_frame(b'{"type":"session"}\n')
    assert frame[:4] == ZSTD_MAGIC
    descriptor = frame[4]
    assert descriptor & 0x04  # content checksum
    assert descriptor >> 6 == 0 and not descriptor & 0x20  # no content size, windowed (streaming)
    assert zstandard.ZstdDecompressor().decompressobj().decompress(frame) == b'{"type":"session"}\n'


def test_scanner_finds_concatenated_frames_and_honours_a_frame_limit() -> None:
    parts = [compress_frame(b"header\n"), compress_frame(b"a\nb\n"), compress_frame(b"")]
    data = b"".join(parts)
    spans = []
    offset = 0
    for part in parts:
        spans.append((offset, offset + len(part)))
        offset += len(part)
    scan = scan_zstd_frames(data)
    assert scan.frames == spans and scan.torn_start is None
    limited = scan_zstd_frames(data, max_frames=1)
    assert limited.frames == spans[:1] and limited.torn_start is None
    assert scan_zstd_frames(b"").frames == []


def test_end_of_data_anywhere_inside_a_frame_is_a_torn_start() -> None:
    first = compress_frame(b"header\n")
    second = compress_frame(b"x" * 300 + b"\n")
    data = first + second
    for cut in range(len(data) + 1):
        scan = scan_zstd_frames(data[:cut])
        if cut < len(first):
            assert scan.frames == [] and scan.torn_start == (0 if cut else None), cut
        elif cut == len(first):
            assert scan.frames == [(0, len(first))] and scan.torn_start is None
        elif cut < len(data):
            assert scan.frames == [(0, len(first))] and scan.torn_start == len(first), cut
        else:
            assert scan.torn_start is None and len(scan.frames) == 2


def test_bad_magic_is_corruption_naming_its_offset() -> None:
    first = compress_frame(b"header\n")
    data = first + b"\x00\x01\x02\x03\x04\x05"
    with pytest.raises(SessionCorruptionError, match="invalid frame magic") as info:
        scan_zstd_frames(data, path="/logs/s.jsonl.zstd")
    assert info.value.offset == len(first)
    assert info.value.file == "/logs/s.jsonl.zstd"


def test_skippable_frames_are_refused() -> None:
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    with pytest.raises(SessionCorruptionError, match="magic"):
        scan_zstd_frames(skippable)


def test_reserved_descriptor_bit_is_corruption_naming_its_offset() -> None:
    first = compress_frame(b"header\n")
    second = bytearray(compress_frame(b"body\n"))
    second[4] |= 0x08
    with pytest.raises(SessionCorruptionError, match="reserved frame-header bit") as info:
        scan_zstd_frames(first + bytes(second))
    assert info.value.offset == len(first) + 4


def test_reserved_block_type_is_corruption_naming_its_offset() -> None:
    block_header = (10 << 3 | 3 << 1 | 1).to_bytes(3, "little")
    data = frame_with(0x00, b"\x58", block_header + b"\x00" * 10)
    with pytest.raises(SessionCorruptionError, match="reserved block type") as info:
        scan_zstd_frames(data)
    assert info.value.offset == 6


@pytest.mark.parametrize(
    ("descriptor", "header_tail"),
    [
        (0x00, b"\x58"),  # window byte only
        (0x20, b"\x05"),  # single segment: 1-byte content size, no window byte
        (0x60, b"\x05\x00"),  # single segment, 2-byte content size
        (0xA0, b"\x05\x00\x00\x00"),  # single segment, 4-byte content size
        (0xE0, b"\x05" + b"\x00" * 7),  # single segment, 8-byte content size
        (0x01, b"\x58\x07"),  # 1-byte dictionary id
        (0x02, b"\x58\x07\x00"),  # 2-byte dictionary id
        (0x03, b"\x58\x07\x00\x00\x00"),  # 4-byte dictionary id
        (0x43, b"\x58\x07\x00\x00\x00\x05\x01"),  # dictionary id and 2-byte content size, windowed
    ],
)
def test_frame_header_variants_are_measured_exactly(descriptor: int, header_tail: bytes) -> None:
    frame = frame_with(descriptor, header_tail, raw_block(b"hello", last=True))
    follower = compress_frame(b"next\n")
    scan = scan_zstd_frames(frame + follower)
    assert scan.frames == [(0, len(frame)), (len(frame), len(frame) + len(follower))]
    for cut in range(1, len(frame)):
        assert scan_zstd_frames(frame[:cut]).torn_start == 0


def test_rle_block_payload_is_one_byte() -> None:
    rle = (100 << 3 | 1 << 1 | 1).to_bytes(3, "little") + b"a"
    frame = frame_with(0x20, bytes([100]), rle)
    assert scan_zstd_frames(frame).frames == [(0, len(frame))]
    assert decode_frame(frame, (0, len(frame))) == b"a" * 100


def test_multi_block_frames_are_measured_block_by_block() -> None:
    plaintext = os.urandom(150_000) + b"tail\n" * 40_000  # incompressible first block, then RLE-ish
    frame = compress_frame(plaintext)
    assert scan_zstd_frames(frame).frames == [(0, len(frame))]
    assert decode_frame(frame, (0, len(frame))) == plaintext


def test_checksum_cut_short_is_torn() -> None:
    frame = compress_frame(b"payload\n")
    for missing in range(1, 5):
        assert scan_zstd_frames(frame[:-missing]).torn_start == 0


def test_frame_without_checksum_flag_ends_after_its_last_block() -> None:
    frame = frame_with(0x00, b"\x58", raw_block(b"ab", last=False) + raw_block(b"cd\n", last=True))
    assert scan_zstd_frames(frame).frames == [(0, len(frame))]
    assert decode_frame(frame, (0, len(frame))) == b"abcd\n"


def test_decode_frame_rejects_a_checksum_mismatch_at_the_frame_offset() -> None:
    first = compress_frame(b"header\n")
    second = bytearray(compress_frame(b"body\n"))
    second[-1] ^= 0xFF
    data = first + bytes(second)
    span = scan_zstd_frames(data).frames[1]
    with pytest.raises(SessionCorruptionError) as info:
        decode_frame(data, span, path="p")
    assert info.value.offset == len(first)
    assert info.value.file == "p"


def test_decode_torn_frame_yields_whole_blocks_only() -> None:
    first_block = b"r" * 200 + b"\n"
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True).compressobj()
    frame = (compressor.compress(first_block) + compressor.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
             + compressor.compress(b"s" * 300 + b"\n") + compressor.flush())
    whole = first_block + b"s" * 300 + b"\n"
    outputs = {decode_torn_frame(frame[:cut]) for cut in range(len(frame))}
    assert outputs == {b"", first_block, whole}  # whole only once the checksum alone is missing
    assert decode_torn_frame(frame[:-4]) == whole
    assert decode_torn_frame(frame[:-5]) == first_block


def test_decode_torn_frame_of_a_frame_header_is_empty() -> None:
    frame = compress_frame(b"some text\n")
    for cut in range(0, 7):
        assert decode_torn_frame(frame[:cut]) == b""


def test_decode_torn_frame_of_garbage_is_empty() -> None:
    assert decode_torn_frame(ZSTD_MAGIC + b"\x00\x58" + (8 << 3 | 2 << 1).to_bytes(3, "little")
                             + b"\xff" * 8) == b""


@given(st.lists(st.binary(max_size=3000), min_size=1, max_size=4))
def test_compress_frame_writes_a_fresh_compressors_bytes_on_its_reused_context(texts: list[bytes]) -> None:
    """The per-thread compressor (issue 30) writes each frame exactly as a new one would (DSH's
    frames are compared byte for byte), however many frames it wrote before, on any thread."""
    def fresh(text: bytes) -> bytes:
        frame = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=False).compressobj()
        return frame.compress(text) + frame.flush()

    assert [compress_frame(text) for text in texts] == [fresh(text) for text in texts]
    elsewhere: list[bytes] = []
    worker = threading.Thread(target=lambda: elsewhere.extend(map(compress_frame, texts)))
    worker.start()
    worker.join()
    assert elsewhere == [fresh(text) for text in texts]
