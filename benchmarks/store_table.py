"""The ``store`` suite's last table: every backend that ran side by side, one row per figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from benchmarks.runner import Comparison, Context, Figure, format_value
from benchmarks.store_backends import Backend

__all__ = ["NOT_APPLICABLE", "READ_TAIL", "SIDE_BY_SIDE", "side_by_side"]

READ_TAIL: Final = 50
"""``read_from`` reads this many events at the end of the session."""

SIDE_BY_SIDE: Final = (
    ("persist.events_per_s", "record + persist, durable per turn (net)"),
    ("persist.fsync_share", "share of persist time in fsync"),
    ("load.s", "cold load + derive_messages(), fresh process (JSONL: from its checkpoint)"),
    ("load.full_s", "the same, checkpoint ignored (full read and validation)"),
    ("load.peak_rss_mb", "peak RSS of the cold load"),
    ("read_from.warm_ms", f"read_from(last {READ_TAIL}), warm store"),
    ("read_from.ms", f"read_from(last {READ_TAIL}), new store object"),
    ("fork.warm_ms", "fork at turn T/2, warm store"),
    ("fork.ms", "fork at turn T/2, new store object"),
    ("fork.bytes", "fork: bytes written"),
    ("size.packed_bytes", "bytes on disk"),
    ("size.unpacked_bytes", "bytes on disk, one chunk per line"),
)
"""Rows of the "backends side by side" table: figure key and row label."""
NOT_APPLICABLE: Final = {"persist.fsync_share": "n/a (the database syncs)",
                         "size.unpacked_bytes": "n/a (always packed)", "load.full_s": "n/a (no checkpoint)"}
"""What a database column shows for the figures only the file stores have."""


def _cell(figure: Figure | None, key: str, backend: Backend) -> str:
    if figure is None:
        return NOT_APPLICABLE.get(key, "—") if backend.database else "—"
    text = f"{format_value(figure.stat.median, figure.unit)} {figure.unit}"
    return text + {None: "", True: " ✓", False: " ✗"}[figure.passed]


def side_by_side(ctx: Context, backends: Sequence[Backend]) -> Comparison:
    """One row per figure, one column per backend that ran (medians; ✓/✗ against its target)."""
    found = {(figure.group, figure.key): figure for figure in ctx.result.figures}
    rows = []
    for key, label in SIDE_BY_SIDE:
        cells = tuple(_cell(found.get((backend.name, key)), key, backend) for backend in backends)
        if any(cell != "—" for cell in cells):
            rows.append((label, cells))
    return Comparison("backends side by side", f"T = {ctx.options.turns}, medians; ✓/✗ = target met/missed",
                      tuple(backend.name for backend in backends), tuple(rows))
