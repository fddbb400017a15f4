"""Which surface span to compact, and whether a given span may be (spec compaction §2 T2, R1-R5).

Spans are positions on the surface, never numeric seq intervals: after a replace a high
seq sits at an old position, so ``start`` may be numerically greater than ``end``. Every
selection starts at the surface head and always keeps the newest node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentlog.compaction.pairing import PairingIndex
from agentlog.compaction.tokens import Measurement
from agentlog.errors import SurfaceError

__all__ = ["Region", "select_compactable_range", "span_seqs", "validate_region"]


@dataclass(frozen=True, slots=True)
class Region:
    """An inclusive positional span: the seqs of its first and last surface nodes."""

    start: int
    end: int


def validate_region(pairing: PairingIndex, start: int, end: int) -> tuple[int, int]:
    """T2: both ends on the surface, in order, with balanced cuts; returns their positions."""
    try:
        first = pairing.position(start)
    except SurfaceError:
        raise SurfaceError(f"start seq {start} not found in surface") from None
    try:
        last = pairing.position(end)
    except SurfaceError:
        raise SurfaceError(f"end seq {end} not found in surface") from None
    if first > last:
        raise SurfaceError(f"start seq {start} (position {first}) is after end seq {end} (position {last})")
    if not pairing.balanced_before_position(first):
        raise SurfaceError(f"start seq {start} is not a balanced boundary (it would split a tool call "
                           "from its result)")
    if not pairing.balanced_after(end):
        raise SurfaceError(f"end seq {end} is not a balanced boundary (it would split a tool call from "
                           "its result)")
    return first, last


def span_seqs(nodes: Sequence[int], first: int, last: int) -> tuple[int, ...]:
    """The seqs at positions ``first..last`` of ``nodes``."""
    return tuple(nodes[first : last + 1])


def select_compactable_range(nodes: Sequence[int], measurement: Measurement, pairing: PairingIndex,
                             retain_tokens: int) -> Region | None:
    """R1-R5: the head span that leaves at least ``retain_tokens`` (and the newest node) behind.

    ``nodes`` is the live surface; ``pairing`` must be current with it.
    """
    priced = measurement.nodes
    count = len(priced)
    if count == 0:
        return None
    if count != len(nodes) or priced.seqs != list(nodes):
        raise SurfaceError("token-meter surface does not match the session surface")
    prices = priced.prices
    keep = count - 1
    retained = prices[keep]
    while retained < retain_tokens and keep > 0:
        keep -= 1
        retained += prices[keep]
    while keep > 0 and not pairing.balanced_before_position(keep):
        keep -= 1
    if keep == 0:
        return None
    return Region(nodes[0], nodes[keep - 1])
