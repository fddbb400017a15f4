"""``salvage_log``, the pure reader behind ``repair --salvage``: what it keeps, loses and drops."""

from __future__ import annotations

import pytest

from agentlog.errors import SessionCorruptionError
from agentlog.store.jsonl.format import encode_batch, scan_zstd_frames
from agentlog.store.jsonl.salvage import Dropped, Loss, salvage_log
from tests.store.jsonl.test_torn_tail_property import PATH, transcript


@pytest.mark.parametrize("compressed", [True, False])
def test_an_intact_log_is_salvaged_whole_and_nothing_is_lost(compressed: bool) -> None:
    data, events = transcript(compressed)
    salvage = salvage_log(data, compressed=compressed, path=PATH)
    assert salvage.events == events and salvage.gap_at is None
    assert salvage.lost == [] and salvage.dropped == []


def test_a_torn_final_frame_gives_its_complete_records_and_is_named() -> None:
    data, events = transcript(True)
    start = scan_zstd_frames(data).frames[-1][0]
    salvage = salvage_log(data[:-10], compressed=True, path=PATH)
    assert salvage.events == events[:len(salvage.events)] and len(salvage.events) > 0
    what = "torn final frame (the complete records in it are kept)"
    assert salvage.lost == [Loss(start, len(data) - 10 - start, what)]


def test_a_repeated_raw_line_stops_the_salvage_there() -> None:
    data, events = transcript(False)
    lines = data.split(b"\n")
    repeated = b"\n".join([*lines[:4], lines[3], *lines[4:]])
    salvage = salvage_log(repeated, compressed=False, path=PATH)
    offset = sum(len(line) + 1 for line in lines[:4])
    kept = len(salvage.events)
    assert salvage.events == events[:kept] and salvage.gap_at == kept
    assert salvage.dropped == [Dropped(offset, events[kept - 1].seq, events[-1].seq)]  # one run
    assert salvage.lost == []


def test_a_header_that_cannot_be_read_leaves_nothing_to_salvage() -> None:
    data, _ = transcript(True)
    damaged = b"\0" * 8 + data[8:]
    with pytest.raises(SessionCorruptionError, match="nothing to salvage"):
        salvage_log(damaged, compressed=True, path=PATH)
    with pytest.raises(SessionCorruptionError, match="nothing to salvage"):
        salvage_log(encode_batch([])[:0], compressed=False, path=PATH)
