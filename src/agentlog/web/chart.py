"""Token pressure per step as an inline SVG line chart (no script, no style attribute: CSP-clean)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Final

from agentlog.web.scan import Bracket, StepPoint

__all__ = ["MAX_POINTS", "pressure_chart"]

WIDTH: Final = 900
HEIGHT: Final = 180
PAD: Final = 36
MAX_POINTS: Final = 600
"""Steps drawn at most; longer sessions are sampled evenly (the last step always drawn)."""


def _sample(points: Sequence[StepPoint]) -> list[StepPoint]:
    if len(points) <= MAX_POINTS:
        return list(points)
    stride = len(points) / MAX_POINTS
    picked = [points[int(position * stride)] for position in range(MAX_POINTS - 1)]
    return [*picked, points[-1]]


def _path(coordinates: list[tuple[float, float]]) -> str:
    return " ".join(f"{'M' if n == 0 else 'L'}{x:.1f},{y:.1f}" for n, (x, y) in enumerate(coordinates))


def pressure_chart(points: Sequence[StepPoint], brackets: Sequence[Bracket],
                   context_window: int | None) -> str:
    """An SVG of the provider-reported and estimated prompt size after each step, with the context
    window as a dashed line and each compaction as a vertical marker; empty without steps."""
    if not points:
        return ""
    shown = _sample(points)
    values = [value for point in shown for value in (point.provider_tokens or 0, point.estimated_tokens)]
    peak = max([*values, 1])
    near = context_window is not None and context_window <= peak * 1.5
    top = max(peak, context_window or 0) * 1.05 if near else peak * 1.15
    first, last = shown[0].seq, max(shown[-1].seq, shown[0].seq + 1)

    def x(seq: int) -> float:
        return PAD + (seq - first) / (last - first) * (WIDTH - 2 * PAD)

    def y(value: float) -> float:
        return HEIGHT - PAD + 8 - value / top * (HEIGHT - PAD - 8)

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-label="token pressure per step" xmlns="http://www.w3.org/2000/svg">',
             f'<line x1="{PAD}" y1="{y(0):.1f}" x2="{WIDTH - PAD}" y2="{y(0):.1f}" stroke="#999"/>']
    if context_window and context_window <= top:
        parts.append(f'<line class="window" x1="{PAD}" y1="{y(context_window):.1f}" x2="{WIDTH - PAD}" '
                     f'y2="{y(context_window):.1f}" stroke="#c33" stroke-dasharray="6 4"/>'
                     f'<text x="{PAD}" y="{y(context_window) - 4:.1f}" font-size="11" fill="#c33">'
                     f'context window {context_window:,}</text>')
    parts.extend(f'<line class="compaction" x1="{x(bracket.start_seq):.1f}" y1="{PAD / 2}" '
                 f'x2="{x(bracket.start_seq):.1f}" y2="{y(0):.1f}" stroke="#a60" stroke-width="2">'
                 f'<title>compaction {escape(bracket.compaction_id)}</title></line>'
                 for bracket in brackets if first <= bracket.start_seq <= last)
    estimated = [(x(point.seq), y(point.estimated_tokens)) for point in shown]
    parts.append(f'<path class="estimated" d="{_path(estimated)}" fill="none" stroke="#36c" '
                 'stroke-width="1.5"/>')
    above = f" (context window {context_window:,})" if context_window and context_window > top else ""
    reported = [(x(point.seq), y(point.provider_tokens)) for point in shown if point.provider_tokens]
    if reported:
        parts.append(f'<path class="reported" d="{_path(reported)}" fill="none" stroke="#2a2" '
                     f'stroke-width="1.5"/>')
    parts.append(f'<text x="{WIDTH - PAD}" y="{HEIGHT - 6}" font-size="11" text-anchor="end" fill="#555">'
                 f'{len(points):,} steps; green: provider usage, blue: estimate (token meter); '
                 f'peak {peak:,} tokens{above}</text></svg>')
    return "".join(parts)
