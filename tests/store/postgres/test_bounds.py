"""Bounds on what a stored PostgreSQL row may make a reader allocate: a zstd bomb is corruption."""

from __future__ import annotations

import struct

import pytest
import zstandard

from agentlog.errors import SessionCorruptionError
from agentlog.store.postgres.rows import MAX_SCALAR_BYTES
from agentlog.store.postgres.store import PostgresStore
from tests.search_sessions import record
from tests.store.pg_worker import Schema


def rle_frame(declared: int, blocks: int, byte: bytes = b" ") -> bytes:
    """A zstd frame declaring ``declared`` content bytes, holding ``blocks`` RLE blocks of 128 KiB."""
    header = b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + struct.pack("<Q", declared)  # single segment, 8-byte size
    body = b"".join(struct.pack("<I", (1 << 1 | (index == blocks - 1) | (128 << 10) << 3))[:3] + byte
                    for index in range(blocks))
    return header + body


def test_the_crafted_frame_is_what_it_declares() -> None:
    frame = rle_frame(3 << 17, 3)
    assert zstandard.frame_content_size(frame) == 3 << 17
    assert zstandard.ZstdDecompressor().decompress(frame) == b" " * (3 << 17)


@pytest.mark.parametrize(("declared", "blocks"), [
    (1 << 40, 4),  # a size no buffer can hold, a few blocks
    ((MAX_SCALAR_BYTES >> 17) + 1 << 17, (MAX_SCALAR_BYTES >> 17) + 1),  # complete, 128 KiB past it
])
def test_a_zstd_bomb_in_a_scalar_row_is_corruption_naming_session_and_seq(
        store: PostgresStore, schema: Schema, declared: int, blocks: int) -> None:
    record(store, "bomb", ["a question", "an answer", "", "", "a result"])
    seq = schema.sql("SELECT seq FROM {s}.events WHERE session_id = 'bomb' AND type = 'user/message'")[0][0]
    schema.sql("UPDATE {s}.events SET data = NULL, data_zstd = %s WHERE session_id = 'bomb' AND seq = %s",
               (rle_frame(declared, blocks), seq))
    with schema.store() as fresh, pytest.raises(SessionCorruptionError) as info:
        fresh.load("bomb")
    assert (info.value.session_id, info.value.seq) == ("bomb", seq)
    assert f"invalid committed physical row at seq {seq}" in str(info.value)
    assert f"{MAX_SCALAR_BYTES} bytes" in str(info.value)


def test_a_compressed_scalar_row_under_the_bound_still_loads(store: PostgresStore, schema: Schema) -> None:
    record(store, "big", ["x" * 20_000])
    assert schema.sql("SELECT count(*) FROM {s}.events WHERE data_zstd IS NOT NULL")[0][0] == 1
    with schema.store() as fresh:
        assert fresh.load("big").events == store.load("big").events
