"""Fuzz the pure decoders directly: storage lines and packed rows (``store.codec``, ``packed``),
zstd frame scanning and decoding, and the whole-transcript scanner and header reader."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import AgentlogError
from agentlog.core.packed import ChunkRun
from agentlog.store import codec
from agentlog.store.jsonl.format import read_header_prefix, scan_log
from agentlog.store.jsonl.zstd_frames import decode_frame, decode_torn_frame, scan_zstd_frames
from tests.fuzz.harness import LONG, SHORT, Damaged, jsonl_seeds
from tests.fuzz.mutations import mutated

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _lines() -> tuple[bytes, ...]:
    """Every complete stored line of the raw seeds: events and packed rows."""
    return tuple(line for seed in jsonl_seeds("none") for line in seed.data.split(b"\n")[1:-1] if line)


@functools.cache
def _rows() -> list[dict[str, Any]]:
    """The packed rows among ``_lines``, parsed."""
    parsed = [orjson.loads(line) for line in _lines() if line.startswith(b'{"type":"')]
    return [row for row in parsed if row.get("type") in codec.ROW_TAGS]


def _refuses_cleanly(decode: Callable[[], Any]) -> Any:
    try:
        return decode()
    except AgentlogError:
        return None


def _decode_line(line: bytes) -> None:
    entry = _refuses_cleanly(lambda: codec.decode_line_entry(line))
    if isinstance(entry, ChunkRun):
        members = entry.events()  # a validated row expands without failing
        assert [event.seq for event in members] == list(range(entry.seq0, entry.seq0 + entry.count))


@st.composite
def _row_parts(draw: st.DrawFn) -> tuple[str, Any, Any, Any]:
    """A packed row's parts: a real row from the seeds with one member replaced by random JSON."""
    row = draw(st.sampled_from(_rows()))
    data = dict(row["data"])
    if draw(st.booleans()):
        data[draw(st.sampled_from([*data, "extra"]))] = draw(_JSON)
    seq0, time0 = row["seq0"], row["time0"]
    if draw(st.booleans()):
        seq0, time0 = draw(st.sampled_from([(seq0, draw(_JSON)), (draw(_JSON), time0)]))
    tag = draw(st.sampled_from([row["type"], *codec.ROW_TAGS]))
    return tag, seq0, time0, data


def _decode_row(parts: tuple[str, Any, Any, Any]) -> None:
    run = _refuses_cleanly(lambda: codec.decode_row_run(*parts))
    if run is not None:
        assert len(run.events()) == run.count


def _zstd_frames(data: bytes) -> None:
    scan = _refuses_cleanly(lambda: scan_zstd_frames(data, path="f"))
    if scan is None:
        return
    for span in scan.frames:
        _refuses_cleanly(lambda span=span: decode_frame(data, span, path="f"))
    if scan.torn_start is not None:
        decode_torn_frame(data[scan.torn_start:])


def _scan(case: tuple[bool, bytes, int]) -> None:
    compressed, data, chunk = case
    _refuses_cleanly(lambda: scan_log(data, compressed=compressed, path="f"))
    _refuses_cleanly(lambda: scan_log(data, compressed=compressed, path="f", until_seq=5))
    pieces = [data[start:start + chunk] for start in range(0, len(data), chunk)]
    _refuses_cleanly(lambda: read_header_prefix(iter(pieces), compressed=compressed, path="f"))


def _line_cases() -> st.SearchStrategy[bytes]:
    lines = _lines()
    return st.one_of(st.builds(Damaged, st.sampled_from(lines).flatmap(lambda line: mutated(line, lines))),
                     st.builds(Damaged, st.binary(max_size=64)))


def _frame_cases() -> st.SearchStrategy[bytes]:
    seeds = tuple(seed.data for seed in jsonl_seeds("zstd"))
    return st.sampled_from(seeds).flatmap(lambda data: mutated(data, seeds)).map(Damaged)


def _scan_cases() -> st.SearchStrategy[tuple[bool, bytes, int]]:
    def of(compressed: bool) -> st.SearchStrategy[tuple[bool, bytes, int]]:
        seeds = tuple(seed.data for seed in jsonl_seeds("zstd" if compressed else "none"))
        return st.tuples(st.just(compressed), st.sampled_from(seeds).flatmap(lambda d: mutated(d, seeds))
                         .map(Damaged), st.sampled_from([1, 7, 8192]))
    return of(True) | of(False)


_TARGETS: dict[str, tuple[Callable[[], st.SearchStrategy[Any]], Callable[[Any], None]]] = {
    "codec-line": (_line_cases, _decode_line),
    "packed-row": (_row_parts, _decode_row),
    "zstd-frames": (_frame_cases, _zstd_frames),
    "scan-log": (_scan_cases, _scan),
}


@pytest.mark.parametrize("target", sorted(_TARGETS))
def test_decoders_decode_or_raise_agentlog_errors(target: str) -> None:
    strategy, check = _TARGETS[target]
    settings(SHORT, max_examples=SHORT.max_examples * 6)(given(strategy())(check))()  # cheap: more inputs


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(_TARGETS))
def test_decoders_long_run(target: str) -> None:
    strategy, check = _TARGETS[target]
    LONG(given(strategy())(check))()


def test_the_seeds_are_transcripts_with_lines_and_packed_rows() -> None:
    """Without ``../shared`` the seeds are agentlog's own: transcripts (not their ``.seek``
    sidecars), which hold both event lines and packed rows for the samplers above."""
    assert all(seed.relpath.endswith("session.jsonl") for seed in jsonl_seeds("none"))
    assert all(seed.relpath.endswith("session.jsonl.zstd") for seed in jsonl_seeds("zstd"))
    assert _lines() and _rows()
