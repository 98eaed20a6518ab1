"""SVG line charts, computed on the server: no chart library, no script, nothing fetched.

A :class:`Chart` is geometry only (point lists and tick labels in the SVG's
coordinates); ``templates/_chart.html`` draws it, so every label passes
through the template's escaping like any other text.

Example:
    >>> chart = line_chart("jobs per minute", [(0.0, 1.0), (60.0, 3.0)], start=0.0, end=180.0, period=60)
    >>> chart.line  # the third minute had no runs: zero
    '48.0,118.8 300.0,64.4 552.0,146.0'
    >>> [label for _, label in chart.y_ticks], [label for _, label, _ in chart.x_ticks]
    (['0', '2.5', '5'], ['00:00', '00:01', '00:02'])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

WIDTH: Final = 560
HEIGHT: Final = 170
LEFT: Final = 48  # room for the y labels
RIGHT: Final = 8
TOP: Final = 10
BOTTOM: Final = 24  # room for the x labels


@dataclass(frozen=True, kw_only=True)
class Chart:
    """One chart's geometry in a ``WIDTH x HEIGHT`` viewBox."""

    title: str
    unit: str
    line: str  #: ``x,y x,y ...`` for a polyline
    area: str  #: the same, closed along the x axis, for a polygon
    y_ticks: tuple[tuple[float, str], ...]
    x_ticks: tuple[tuple[float, str, str], ...]  #: (x, label, text-anchor)
    latest: str
    empty: bool
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM


def line_chart(title: str, points: Sequence[tuple[float, float]], *, start: float, end: float, period: int,
               unit: str = "", fill_missing: float | None = 0.0) -> Chart:
    """A chart of ``points`` (epoch seconds, value) over ``[start, end)`` in buckets of ``period``.

    Buckets without a point count as ``fill_missing`` (no runs: zero jobs per
    minute), or are left out when it is None.
    """
    by_bucket = {_bucket(t, start, period): v for t, v in points}
    first = _bucket(start, start, period)
    buckets = [first + i * period for i in range(max(1, math.ceil((end - first) / period)))]
    series = [(b, by_bucket.get(b, fill_missing)) for b in buckets]
    shown = [(b, v) for b, v in series if v is not None]
    top_value = _nice_ceiling(max([v for _, v in shown], default=0.0))
    plot_w, plot_h = WIDTH - RIGHT - LEFT, HEIGHT - BOTTOM - TOP
    span = max(1.0, buckets[-1] - buckets[0])

    def x(t: float) -> float:
        return round(LEFT + (t - buckets[0]) / span * plot_w, 1)

    def y(v: float) -> float:
        return round(TOP + plot_h - (v / top_value) * plot_h, 1)

    line = " ".join(f"{x(t)},{y(v)}" for t, v in shown)
    base = HEIGHT - BOTTOM
    area = f"{x(shown[0][0])},{base} {line} {x(shown[-1][0])},{base}" if shown else ""
    y_ticks = tuple((y(v), _number(v)) for v in (0.0, top_value / 2, top_value))
    times = _x_tick_times(buckets)
    anchors = ["start", *["middle"] * (len(times) - 2), "end"]
    x_ticks = tuple((x(t), _clock(t), anchor) for t, anchor in zip(times, anchors, strict=True))
    latest = _number(shown[-1][1]) + (f" {unit}" if unit else "") if shown else "no data"
    return Chart(title=title, unit=unit, line=line, area=area, y_ticks=y_ticks, x_ticks=x_ticks, latest=latest,
                 empty=not any(v for _, v in points))


def _bucket(t: float, start: float, period: int) -> float:
    first = math.floor(start / 60) * 60  # as GetMetricData rounds StartTime
    return first + (t - first) // period * period


def _nice_ceiling(value: float) -> float:
    """1, 2, 5 x a power of ten at or above ``value`` (at least 1)."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)


def _x_tick_times(buckets: Sequence[float]) -> list[float]:
    if len(buckets) < 3:
        return [buckets[0], buckets[-1]]
    return [buckets[0], buckets[len(buckets) // 2], buckets[-1]]


def _number(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M")
