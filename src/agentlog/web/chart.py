"""Token pressure per step as an inline SVG line chart (no script, no style attribute: CSP-clean):
axes with ticks, and each drawn step a point whose ``<title>`` the browser shows on hover."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape
from typing import Final

from agentlog.web.scan import Bracket, StepPoint

__all__ = ["MAX_POINTS", "pressure_chart"]

WIDTH: Final = 900
HEIGHT: Final = 200
PAD: Final = 36
LEFT: Final = 64
"""Room for the token axis labels."""
Y_TICKS: Final = 4
MAX_POINTS: Final = 600
"""Steps drawn at most; longer sessions are sampled evenly (the last step always drawn)."""


def _sample(points: Sequence[StepPoint]) -> list[StepPoint]:
    if len(points) <= MAX_POINTS:
        return list(points)
    stride = len(points) / MAX_POINTS
    picked = [points[int(position * stride)] for position in range(MAX_POINTS - 1)]
    return [*picked, points[-1]]


def _short(value: float) -> str:
    """A tick label: 0, 950, 12k, 1.5M."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if value >= 1_000:
        return f"{value / 1_000:.3g}k"
    return f"{value:.0f}"


def _nice_step(top: float) -> float:
    """A round tick spacing giving about ``Y_TICKS`` ticks below ``top``."""
    raw = top / Y_TICKS
    magnitude = 10 ** (len(str(int(raw))) - 1) if raw >= 1 else 1
    return next((step * magnitude for step in (1, 2, 2.5, 5, 10) if step * magnitude >= raw), 10 * magnitude)


def _hover(point: StepPoint) -> str:
    turn = f" · turn {point.turn}" if isinstance(point.turn, int) else ""
    provider = f" · provider {point.provider_tokens:,}" if point.provider_tokens else ""
    return f"seq {point.seq}{turn}{provider} · estimate {point.estimated_tokens:,} tokens"


def _axes(first: int, last: int, top: float, x: Callable[[float], float],
          y: Callable[[float], float]) -> list[str]:
    """Grid lines and labels of both axes, and the axis titles."""
    parts = [f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{WIDTH - PAD}" y2="{y(0):.1f}" stroke="#999"/>',
             f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{LEFT}" y2="{y(top):.1f}" stroke="#999"/>']
    step = _nice_step(top)
    value = 0.0
    while value <= top:
        parts.append(f'<line x1="{LEFT}" y1="{y(value):.1f}" x2="{WIDTH - PAD}" y2="{y(value):.1f}" '
                     f'stroke="#eee"/><text class="tick-y" x="{LEFT - 4}" y="{y(value) + 4:.1f}" '
                     f'font-size="10" text-anchor="end" fill="#555">{_short(value)}</text>')
        value += step
    parts.extend(f'<text class="tick-x" x="{x(seq):.1f}" y="{y(0) + 14:.1f}" font-size="10" '
                 f'text-anchor="middle" fill="#555">seq {seq}</text>'
                 for seq in sorted({first, (first + last) // 2, last}))
    parts.append(f'<text class="axis-title" x="12" y="{y(top / 2):.1f}" font-size="11" fill="#555" '
                 f'transform="rotate(-90 12 {y(top / 2):.1f})" text-anchor="middle">tokens</text>')
    return parts


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

    def x(seq: float) -> float:
        return LEFT + (seq - first) / (last - first) * (WIDTH - LEFT - PAD)

    def y(value: float) -> float:
        return HEIGHT - PAD - value / top * (HEIGHT - PAD - 12)

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-label="token pressure per step" xmlns="http://www.w3.org/2000/svg">',
             *_axes(first, last, top, x, y)]
    if context_window and context_window <= top:
        parts.append(f'<line class="window" x1="{LEFT}" y1="{y(context_window):.1f}" x2="{WIDTH - PAD}" '
                     f'y2="{y(context_window):.1f}" stroke="#c33" stroke-dasharray="6 4"/>'
                     f'<text x="{LEFT + 4}" y="{y(context_window) - 4:.1f}" font-size="11" fill="#c33">'
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
    parts.extend(f'<circle class="point" cx="{x(point.seq):.1f}" cy="{y(point.estimated_tokens):.1f}" '
                 f'r="3" fill="#36c" fill-opacity="0.25"><title>{_hover(point)}</title></circle>'
                 for point in shown)
    parts.append(f'<text x="{WIDTH - PAD}" y="{HEIGHT - 4}" font-size="11" text-anchor="end" fill="#555">'
                 f'{len(points):,} steps; green: provider usage, blue: estimate (token meter); '
                 f'peak {peak:,} tokens{above}</text></svg>')
    return "".join(parts)
