"""gc_paused: the collector is off inside the block, and what the block built ends up old."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from agentlog.core.bulk import gc_paused


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_paused_inside_and_restored_after(collector: None) -> None:
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: the outer block restores it
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()  # a collector the caller turned off stays off


def test_objects_built_in_the_block_skip_the_young_generations(collector: None) -> None:
    gc.collect()
    with gc_paused():
        built = [{"n": [i]} for i in range(50_000)]
        assert gc.get_count()[0] >= 50_000
    assert gc.get_count()[0] < 1_000  # promoted unscanned: no young collection is owed
    assert all(gc.is_tracked(item) for item in built[:10])  # still collectable, only older


def test_an_application_freeze_is_left_alone(collector: None) -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            _ = [{"n": [i]} for i in range(1_000)]
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
