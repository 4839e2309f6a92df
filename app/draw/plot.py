"""Line charts as geometry: axes, ticks and polylines in pixel coordinates.

A view builds a :class:`Chart`; ``templates/_partials/chart.html`` draws it. Scales are linear
or logarithmic; log ticks fall on powers of ten (or of two for byte sizes). A deck that draws a
chart of its own writes its gridlines and tick labels with :func:`tick_marks`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.draw.palette import DASHES, SERIES
from app.draw.svg import esc


@dataclass(frozen=True)
class Scale:
    lo: float
    hi: float
    px_lo: float
    px_hi: float
    log: bool = False

    def __call__(self, value: float) -> float:
        if self.log:
            a, b, v = math.log(self.lo), math.log(self.hi), math.log(max(value, self.lo * 1e-9))
        else:
            a, b, v = self.lo, self.hi, value
        if b == a:   # one value only (a single step, a constant series): the middle
            return (self.px_lo + self.px_hi) / 2
        return self.px_lo + (v - a) / (b - a) * (self.px_hi - self.px_lo)


def log_ticks(lo: float, hi: float, base: int = 10, every: int = 1) -> list[float]:
    """Powers of ``base`` in [lo, hi], keeping every ``every``-th one."""
    first, last = math.ceil(math.log(lo, base) - 1e-9), math.floor(math.log(hi, base) + 1e-9)
    return [float(base ** k) for k in range(first, last + 1) if (k - first) % every == 0]


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]  # pixels
    colour: str
    dash: str
    label_at: tuple[float, float]


@dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclass(frozen=True)
class Marker:
    x: float
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    left: float
    right: float
    top: float
    bottom: float
    x_label: str
    y_label: str
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    series: tuple[Series, ...]
    markers: tuple[Marker, ...]
    title: str


def line_chart(data: Sequence[tuple[str, Sequence[float], Sequence[float]]], *,
               x_label: str, y_label: str, title: str = "",
               x_log: bool = False, y_log: bool = False,
               x_format: Callable[[float], str] = lambda v: f"{v:g}",
               y_format: Callable[[float], str] = lambda v: f"{v:g}",
               x_tick_base: int = 10, x_tick_every: int = 1,
               markers: Sequence[tuple[float, str]] = (),
               width: int = 640, height: int = 360) -> Chart:
    """A chart of ``(name, xs, ys)`` series, sharing axes that fit them all."""
    left, right, top, bottom = 84.0, width - 150.0, 36.0, height - 56.0
    xs = [x for _, series_x, _ in data for x in series_x]
    ys = [y for _, _, series_y in data for y in series_y]
    x_lo, x_hi = min(xs), max(xs)
    y_lo, y_hi = min(ys), max(ys)
    if y_log:
        y_lo, y_hi = 10 ** math.floor(math.log10(y_lo)), 10 ** math.ceil(math.log10(y_hi))
    else:
        y_lo, y_hi = min(0.0, y_lo), y_hi * 1.05 or 1.0
    sx = Scale(x_lo, x_hi, left, right, x_log)
    sy = Scale(y_lo, y_hi, bottom, top, y_log)
    x_ticks = (log_ticks(x_lo, x_hi, x_tick_base, x_tick_every) if x_log
               else linear_ticks(x_lo, x_hi))
    y_ticks = log_ticks(y_lo, y_hi) if y_log else linear_ticks(y_lo, y_hi)
    series = []
    for k, (name, series_x, series_y) in enumerate(data):
        points = tuple((round(sx(x), 1), round(sy(y), 1)) for x, y in zip(series_x, series_y))
        series.append(Series(name, points, SERIES[k % len(SERIES)], DASHES[k % len(DASHES)],
                             (points[-1][0] + 6, points[-1][1])))
    _spread_labels(series, lowest=bottom + 8)
    return Chart(width, height, left, right, top, bottom, x_label, y_label,
                 tuple(Tick(round(sx(v), 1), x_format(v)) for v in x_ticks),
                 tuple(Tick(round(sy(v), 1), y_format(v)) for v in y_ticks),
                 tuple(series),
                 tuple(Marker(round(sx(x), 1), label) for x, label in markers
                       if x_lo <= x <= x_hi),
                 title)


def linear_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round values (1, 2 or 5 × 10^k apart) covering [lo, hi], at most about ``count``."""
    step = 10 ** math.floor(math.log10((hi - lo) / count or 1))
    for factor in (1, 2, 5, 10):
        if (hi - lo) / (step * factor) <= count:
            step *= factor
            break
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step + 1e-9) + 1)]


def _spread_labels(series: list[Series], gap: float = 18.0,
                   lowest: float = math.inf) -> None:
    """Move end-of-line labels apart vertically so they never overlap, and no lower than
    ``lowest`` (the stack moves up when it would run past it)."""
    order = sorted(range(len(series)), key=lambda k: series[k].label_at[1])
    ys, last = [], -math.inf
    for k in order:
        last = max(series[k].label_at[1], last + gap)
        ys.append(last)
    for i in range(len(ys) - 1, -1, -1):   # from the bottom up, pull back inside the chart
        limit = lowest if i == len(ys) - 1 else ys[i + 1] - gap
        ys[i] = min(ys[i], limit)
    for k, y in zip(order, ys):
        series[k] = Series(series[k].name, series[k].points, series[k].colour, series[k].dash,
                           (series[k].label_at[0], y))


def tick_marks(left: float, right: float, bottom: float,
               y_ticks: Sequence[tuple[float, str]], x_ticks: Sequence[tuple[float, str]],
               num: Callable[[float], str]) -> list[str]:
    """A deck's chart furniture as SVG: a gridline at each y tick from ``left`` to ``right``,
    the y ticks' labels right-aligned left of the axis and the x ticks' centred under
    ``bottom``, muted at 16 units; coordinates written by ``num`` (app.draw.fmt's coord or
    coord2)."""
    out = []
    if y_ticks:
        out.append('<path class="gridline" d="'
                   + "".join(f"M{num(left)},{num(y)}H{num(right)}" for y, _ in y_ticks) + '"/>')
    out.append('<g class="muted" font-size="16"><g text-anchor="end">')
    out += [f'<text x="{num(left - 10)}" y="{num(y + 5)}">{esc(label)}</text>'
            for y, label in y_ticks]
    out.append('</g><g text-anchor="middle">')
    out += [f'<text x="{num(x)}" y="{num(bottom + 22)}">{esc(label)}</text>'
            for x, label in x_ticks]
    out.append("</g></g>")
    return out
