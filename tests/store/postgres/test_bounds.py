"""Bounds on what a PostgreSQL read touches: a zstd bomb is corruption, a cold fork reads its prefix only."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pytest
import zstandard

from agentlog import Recorder, SessionHeader
from agentlog.core.events import TURN_END, Event
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


def three_turns(store: PostgresStore) -> tuple[Sequence[Event], int]:
    """Session "p" of three turns, written through ``store`` (then closed): its events and the
    seq of its first ``turn/end``."""
    for turn in range(3):
        with store.start(SessionHeader(id="p")) if turn == 0 else store.open("p") as live, \
                Recorder(live).turn() as recorded:
            recorded.user_message(f"turn {turn}")
    events = store.load("p").events
    store.close()
    return events, next(event.seq for event in events if event.type == TURN_END)


def test_a_cold_fork_reads_only_the_prefix_it_shares(store: PostgresStore, schema: Schema) -> None:
    events, boundary = three_turns(store)
    later = events[-3].seq  # a committed row of the last turn, past the boundary
    schema.sql("UPDATE {s}.events SET data = 'x' WHERE session_id = 'p' AND seq = %s", (later,))
    with schema.store() as cold:
        with cold.fork("p", boundary, "child") as child:
            assert child.session.events[:boundary + 1] == events[:boundary + 1]
        with pytest.raises(SessionCorruptionError, match=f"seq {later}"):
            cold.load("p")
    with schema.store() as fresh:
        assert fresh.load("child").events[:boundary + 1] == events[:boundary + 1]


def test_a_second_fork_reuses_the_prefix_read_while_the_revision_holds(store: PostgresStore,
                                                                       schema: Schema) -> None:
    _events, boundary = three_turns(store)
    with schema.store() as cold:
        cold.fork("p", boundary, "c1").close()
        schema.sql("UPDATE {s}.events SET data = 'x' WHERE session_id = 'p' AND seq = 1")
        cold.fork("p", boundary, "c2").close()  # the same revision: the prefix is not read again
    with schema.store() as fresh, pytest.raises(SessionCorruptionError, match="seq 1"):
        fresh.fork("p", boundary, "c3")
