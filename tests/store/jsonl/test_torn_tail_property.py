"""Property: any tail that is not a whole record is a torn tail (DESIGN 8b, issue 25 item 1).

Whatever bytes follow the last good record, and wherever a zero fill (delayed allocation)
starts inside the last zstd frame, ``scan_log`` keeps every event before the damage, names the
tail, and recovers only events of the original log.
"""

from __future__ import annotations

import base64
import itertools
import random
from collections.abc import Sequence
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.core.events import Event
from agentlog.core.packed import LogEntry, resolve_entries
from agentlog.store.jsonl.format import (
    compress_frame,
    encode_batch,
    encode_header_line,
    scan_log,
    scan_zstd_frames,
)
from agentlog.store.jsonl.zstd_frames import ZSTD_MAGIC
from tests.contract.logs import LogBuilder
from tests.store.jsonl.test_bombs import HEADER

PATH = "/logs/s.jsonl.zstd"


@cache
def transcript(compressed: bool) -> tuple[bytes, list[Event]]:
    """Three turns in three batches, the last one with a 300 KB tool output (a multi-block frame)."""
    log = LogBuilder()
    for turn in range(1, 4):
        log.turn(turn)
    events = [Event.from_wire(event) for event in log.events]
    noise = base64.b64encode(random.Random(7).randbytes(225_000)).decode()
    last = events[-1]
    events.append(Event.from_wire({**last.to_wire(), "type": "session/note", "seq": last.seq + 1,
                                   "data": {"text": noise}, "ignorable": True}))
    cuts = [0, len(events) // 3, 2 * len(events) // 3, len(events)]
    batches = [encode_batch(events[a:b]) for a, b in itertools.pairwise(cuts)]
    head = encode_header_line(HEADER)
    data = (compress_frame(head) + b"".join(map(compress_frame, batches)) if compressed
            else head + b"".join(batches))
    return data, events


def events_of(scan_events: Sequence[LogEntry]) -> list[Event]:
    return list(resolve_entries(scan_events))


@settings(max_examples=150, deadline=None)
@given(compressed=st.booleans(), tail=st.one_of(
    st.binary(min_size=1, max_size=600),
    st.integers(min_value=1, max_value=9000).map(lambda size: b"\0" * size),
))
def test_bytes_after_the_last_record_are_a_torn_tail(compressed: bool, tail: bytes) -> None:
    data, events = transcript(compressed)
    if compressed and tail.startswith(ZSTD_MAGIC):
        tail = b"\1" + tail
    scan = scan_log(data + tail, compressed=compressed, path=PATH)
    assert events_of(scan.events) == events
    assert scan.torn is not None and (scan.torn.truncate_to, scan.torn.size) == (len(data), len(tail))
    assert scan.torn.recovered == []


@pytest.mark.parametrize("compressed", [True, False])
def test_a_zero_fill_from_any_page_or_any_point_of_the_last_frame_is_torn(compressed: bool) -> None:
    data, events = transcript(compressed)
    last_start = scan_zstd_frames(data).frames[-1][0] if compressed else data.rindex(b"\n", 0, -1) + 1
    pages = range((last_start // 4096 + 1) * 4096, len(data), 4096)
    rng = random.Random(25)
    points = [*pages, last_start, last_start + 1, *rng.sample(range(last_start, len(data) - 4), 40)]
    recovering = 0
    for start in points:
        damaged = data[:start] + b"\0" * (len(data) - start)
        scan = scan_log(damaged, compressed=compressed, path=PATH)
        assert scan.torn is not None and scan.torn.truncate_to == last_start, start
        kept = events_of(scan.events) + scan.torn.recovered
        assert kept == events[:len(kept)] and len(kept) >= len(events_of(scan.events)), start
        recovering += bool(scan.torn.recovered)
    assert recovering > 0 or not compressed  # whole blocks before the zeros give their records back
