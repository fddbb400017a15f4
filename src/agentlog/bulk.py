"""Bulk allocation: pausing the cyclic garbage collector while a log is built.

Events and frozen values hold no reference cycles, yet building hundreds of thousands of
them triggers full collections that re-scan everything built so far. Pausing the
collector for the duration of a restore or a cold load halves its time.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic GC inside the block (restoring its previous state after)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
