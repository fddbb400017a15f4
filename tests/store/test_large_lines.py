"""Huge header lines and huge event lines read in time linear in their length (issue 11, item 9).

Timing ratios, not absolute seconds: the same read of a 16x longer line may take at most
``_LINEAR_BOUND`` times as long (linear is ~16x, quadratic ~256x), each side the best of a few
runs in CPU time of this process, so a noisy machine cannot make a linear reader fail nor a
quadratic one pass.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest

from agentlog import SessionHeader
from agentlog.store.jsonl.format import scan_log
from agentlog.store.jsonl.store import JsonlStore

Compression = Literal["zstd", "none"]
_SMALL_MB = 1
_LARGE_MB = 16
_LINEAR_BOUND = 64.0
"""Allowed time ratio for a 16x longer line: 4x linear headroom, a quarter of quadratic."""


def _blob(megabytes: int) -> str:
    """Incompressible text (base64 of random bytes): zstd frames as long as the line."""
    return base64.b64encode(os.urandom((megabytes << 20) * 3 // 4)).decode()


def _best_of(read: Callable[[], object], runs: int = 3) -> float:
    """The best CPU time of this process over ``runs`` reads: other processes' load does not count."""
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        read()
        best = min(best, time.process_time() - started)
    return best


def _message(text: str) -> dict[str, object]:
    return {"id": "m", "role": "user", "source": {"kind": "user"},
            "content": [{"type": "text", "text": text}]}


def _store_with_header(root: Path, compression: Compression, megabytes: int) -> JsonlStore:
    store = JsonlStore(root, compression=compression)
    live = store.start(SessionHeader(id="s", extra={"blob": _blob(megabytes)}))
    live.session.append("user/message", _message("hi"), surface_op="append")
    live.flush()
    live.close()
    return store


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_listing_reads_a_huge_header_line_in_linear_time(tmp_path: Path, compression: Compression) -> None:
    small = _store_with_header(tmp_path / "small", compression, _SMALL_MB)
    large = _store_with_header(tmp_path / "large", compression, _LARGE_MB)
    assert [header.id for header in large.list()] == ["s"]
    assert len(large.list()[0].extra["blob"]) == len(_blob(_LARGE_MB))
    ratio = _best_of(large.list) / _best_of(small.list)
    small.close()
    large.close()
    assert ratio < _LINEAR_BOUND, f"listing a {_LARGE_MB}x longer header took {ratio:.0f}x as long"


def _raw_log_with_a_huge_first_event(root: Path, megabytes: int) -> bytes:
    store = JsonlStore(root, compression="none")
    live = store.start("p")
    live.session.append("user/message", _message(_blob(megabytes)), surface_op="append")
    live.session.append("user/message", {**_message("after"), "id": "m2"}, surface_op="append")
    live.flush()
    live.close()
    store.close()
    return next(root.rglob("session.jsonl")).read_bytes()


def test_a_partial_scan_reads_a_huge_event_line_in_linear_time(tmp_path: Path) -> None:
    """What a shared-prefix fork reads of its parent (``until_seq``) feeds lines in 64 KiB pieces."""
    small = _raw_log_with_a_huge_first_event(tmp_path / "small", _SMALL_MB)
    large = _raw_log_with_a_huge_first_event(tmp_path / "large", _LARGE_MB)
    scan = scan_log(large, compressed=False, path="large", until_seq=2)
    assert [event[1] for event in scan.events] == [0, 1]
    ratio = (_best_of(lambda: scan_log(large, compressed=False, path="large", until_seq=2))
             / _best_of(lambda: scan_log(small, compressed=False, path="small", until_seq=2)))
    assert ratio < _LINEAR_BOUND, f"a partial scan of a {_LARGE_MB}x longer line took {ratio:.0f}x as long"


@pytest.mark.slow
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_50_mb_header_and_50_mb_event_lines_load_and_list(tmp_path: Path, compression: Compression) -> None:
    """The sizes of the issue's report: every reader answers in seconds, not minutes."""
    store = _store_with_header(tmp_path / "header", compression, 50)
    started = time.perf_counter()
    assert [header.id for header in store.list()] == ["s"]
    assert [event.type for event in store.inspect("s").events] == ["user/message"]
    assert [event.type for event in store.load("s").events] == ["user/message"]
    store.close()
    store = JsonlStore(tmp_path / "event", compression=compression)
    live = store.start("e")
    blob = _blob(50)
    live.session.append("user/message", _message(blob), surface_op="append")
    live.flush()
    live.close()
    store.close()
    store = JsonlStore(tmp_path / "event", compression=compression)
    assert store.read_from("e", 0).events[0].data["content"][0]["text"] == blob
    assert store.load("e").events[0].data["content"][0]["text"] == blob
    assert [header.id for header in store.list()] == ["e"]
    store.close()
    assert time.perf_counter() - started < 60
