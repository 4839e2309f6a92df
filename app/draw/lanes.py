"""Timelines as geometry: one row per lane (a GPU's compute stream, its NCCL stream, a PCIe link
…), one bar per task, coloured by what the task does. :func:`lane_svg` draws a
:class:`LaneChart`; decks reuse its bars inside their own SVG.

Thousands of tiny tasks (one per gradient tensor of a 175 B model) would make a heavy SVG, so
neighbouring bars of the same kind that touch within half a pixel are merged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Protocol

from markupsafe import Markup

from app.draw.palette import text_on
from app.humanize import human_time_us


class Timed(Protocol):
    """What a bar is drawn from: any object with these fields (a simulation's timeline span,
    app.sim.timeline.Span, is one; the drawing knows no simulation)."""

    name: str           # "backward L11 (…)": the bar's label is the part before " ("
    lane: str           # the row it is drawn in
    start_us: float
    end_us: float
    kind: str           # a key of KIND_COLOURS: its colour and legend text
    detail: str         # the hover text


KIND_COLOURS: dict[str, tuple[str, str]] = {
    # kind: (colour, legend text) — Paul Tol's schemes, never a rank's colour (DESIGN
    # principle 15): compute cool, communication warm; every kind is named in the legend
    "forward": ("#88CCEE", "forward"),
    "backward": ("#4477AA", "backward"),
    "loss": ("#DDCC77", "loss"),
    "optimizer": ("#AA4499", "optimizer step"),
    "all_reduce": ("#CC6677", "all-reduce"),
    "reduce_scatter": ("#EE7733", "reduce-scatter"),
    "all_gather": ("#44AA99", "all-gather"),
    "broadcast": ("#999933", "broadcast / reduce"),
    "reduce": ("#999933", "broadcast / reduce"),
    "scatter": ("#117733", "scatter / gather"),
    "gather": ("#117733", "scatter / gather"),
    "pcie": ("#8c6bb1", "PCIe copy"),
    "nvme": ("#7a5c00", "NVMe read / write"),
}


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    w: float
    h: float
    fill: str
    ink: str
    label: str
    title: str


@dataclass(frozen=True)
class LaneChart:
    width: int
    height: int
    left: float
    right: float
    top: float
    lanes: tuple[tuple[float, str], ...]          # (y of the row's middle, name)
    bars: tuple[Bar, ...]
    ticks: tuple[tuple[float, str], ...]           # (x, time)
    legend: tuple[tuple[float, str, str], ...]     # (x, colour, text)
    title: str
    row_h: float
    axis_y: float


def lane_chart(spans: Sequence[Timed], lanes: tuple[str, ...], *, title: str = "",
               width: int = 1200, left: float = 150, row_h: float = 34, label_min: float = 70,
               end_us: float | None = None, top: float | None = None,
               fit: Callable[[str, float], str] | None = None) -> LaneChart:
    """``fit(name, width)``: the label a bar ``width`` units wide shows of its ``name`` ("":
    none); by default the name cut to fit at 13 px (a deck laid out for its box passes its own:
    a label at its box's size, or none)."""
    top = top if top is not None else (40.0 if title else 12.0)
    right = width - 20.0
    end = end_us if end_us is not None else max((s.end_us for s in spans), default=1.0)
    end = end or 1.0
    scale = (right - left) / end
    ys = {lane: top + k * (row_h + 8) for k, lane in enumerate(lanes)}
    bars: list[Bar] = []
    kinds_seen: list[str] = []
    for lane in lanes:
        merged: list[list] = []                    # [x0, x1, kind, names]
        for s in sorted((s for s in spans if s.lane == lane), key=lambda s: s.start_us):
            if s.end_us <= s.start_us:
                continue
            x0, x1 = left + s.start_us * scale, left + s.end_us * scale
            if merged and merged[-1][2] == s.kind and x0 - merged[-1][1] <= 0.5:
                merged[-1][1] = max(merged[-1][1], x1)
                merged[-1][3].append(s)
            else:
                merged.append([x0, x1, s.kind, [s]])
        for x0, x1, kind, group in merged:
            colour = KIND_COLOURS.get(kind, ("#777777", kind))[0]
            first, last = group[0], group[-1]
            text = first.detail if len(group) == 1 else f"{len(group)} tasks: {first.detail} … {last.detail}"
            duration = last.end_us - first.start_us
            name = first.name.split(" (")[0] if len(group) == 1 else _common(group)
            label = fit(name, x1 - x0) if fit else _fit(name, x1 - x0, label_min)
            bars.append(Bar(round(x0, 2), ys[lane], round(max(x1 - x0, 0.8), 2), row_h, colour,
                            text_on(colour), label, f"{text} · {human_time_us(duration)}"))
            if kind not in kinds_seen:
                kinds_seen.append(kind)
    ticks = tuple((round(left + t * scale, 1), human_time_us(t)) for t in _ticks(end))
    legend, x = [], left
    seen_text = set()
    for kind in kinds_seen:
        colour, text = KIND_COLOURS.get(kind, ("#777777", kind))
        if text in seen_text:
            continue
        seen_text.add(text)
        legend.append((x, colour, text))
        x += 34 + len(text) * 8.2
    axis_y = top + len(lanes) * (row_h + 8)
    height = int(axis_y + 60)
    return LaneChart(width, height, left, right, top,
                     tuple((ys[lane] + row_h / 2, lane) for lane in lanes), tuple(bars), ticks,
                     tuple(legend), title, row_h, axis_y)


def _fit(text: str, width: float, label_min: float) -> str:
    """The label if it fits the bar at 13 px (about 7.5 px a character), else nothing."""
    if width < label_min:
        return ""
    most = int((width - 8) / 7.5)
    return text if len(text) <= most else (text[:most - 1] + "…" if most > 4 else "")


def _common(group) -> str:
    """A merged bar's label: what its tasks do (they share a kind)."""
    kind = group[0].kind
    return KIND_COLOURS.get(kind, ("", kind.replace("_", "-")))[1].split(" / ")[0]


def _ticks(end: float, count: int = 6) -> list[float]:
    """Round times (1, 2 or 5 × 10ᵏ µs apart) from 0 to ``end``."""
    raw = end / count
    step = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1.0
    for factor in (1, 2, 5, 10):
        if end / (step * factor) <= count:
            step *= factor
            break
    return [k * step for k in range(int(end / step) + 1)]


def lane_svg(c: LaneChart, label: str = "") -> Markup:
    """The chart as SVG markup: one row per lane, one bar per task (its hover text on the bar),
    the time axis and the legend. Labels that share a style are ``<tspan>``s of one ``<text>``:
    a browser lays out a text element at a cost that dwarfs its spans'."""
    out = [f'<svg class="chart lanes" viewBox="0 0 {c.width} {c.height}" role="img" '
           f'aria-label="{escape(label or c.title)}" font-family="\'DejaVu Sans\', Arial, '
           f'sans-serif">']
    if c.title:
        out.append(f'<text class="chart-title" x="{c.left}" y="22" font-size="17" '
                   f'font-weight="600">{escape(c.title)}</text>')
    out.append('<text class="ink lane-name" text-anchor="end" font-size="15">'
               + "".join(f'<tspan x="{c.left - 10}" y="{y}" dy="0.35em">{escape(name)}</tspan>'
                         for y, name in c.lanes) + "</text>")
    for b in c.bars:
        text = (f'<text x="{b.x + 5}" y="{b.y + b.h / 2}" dy="0.35em" font-size="13" '
                f'fill="{b.ink}">{escape(b.label)}</text>' if b.label else "")
        out.append(f'<g class="bar" data-tip="{escape(b.title)}"><rect x="{b.x}" y="{b.y}" '
                   f'width="{b.w}" height="{b.h}" fill="{b.fill}" rx="2"/>{text}</g>')
    y = c.axis_y
    out.append(f'<line class="axis-line" x1="{c.left}" x2="{c.right}" y1="{y}" y2="{y}"/>')
    out += [f'<line class="axis-line" x1="{x}" x2="{x}" y1="{y}" y2="{y + 6}"/>'
            for x, _ in c.ticks]
    out.append('<text class="muted" text-anchor="middle" font-size="14">'
               + "".join(f'<tspan x="{x}" y="{y + 22}">{label}</tspan>' for x, label in c.ticks)
               + "</text>")
    out += [f'<rect x="{round(x, 1)}" y="{y + 34}" width="22" height="14" fill="{colour}" '
            f'rx="2"/>' for x, colour, _ in c.legend]
    out.append(f'<text class="muted" y="{y + 46}" font-size="14">'
               + "".join(f'<tspan x="{round(x + 28, 1)}">{text}</tspan>'
                         for x, _, text in c.legend) + "</text>")
    out.append("</svg>")
    return Markup("".join(out))
