"""The optimizer deck's bottom band, laid out for its box: on the left the bytes each kept
tensor holds per parameter (a bar of 16 bytes — mixed-precision Adam's — with the optimizer
state K braced, ZeRO's K = 12 for Adam), on the right the loss after each step, a segment per
step drawn in the frame that finishes the step.

Every label is at the box's small size: a bar part's "w₁₆ 2" where it fits the part (else its
byte count, else nothing), the brace's words shortened to what fits, the plot's ticks as many
as their labels leave room for (app/draw/axes.py) and its left margin as wide as its widest
tick label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from app.draw.axes import Linear, every_candidates, inset, nice_candidates, spaced
from app.draw.box import Box
from app.draw.layout import LINE
from app.draw.palette import CATEGORY, text_on
from app.draw.text import fits
from app.sim.optimizer.simulate import OptimizerTrace

ROW_COLOURS = {"w16": "#8877cc", "w": CATEGORY["params"], "g": CATEGORY["grads"],
               "buf": CATEGORY["optimizer"], "m": CATEGORY["optimizer"], "v": "#AA4499",
               "m_hat": "#a1d4cc", "v_hat": "#d4a1ca", "update": "#EE7733"}
"""The categories' scheme (app/draw/palette.py CATEGORY, never a rank's colour): weights
indigo, gradient sand, states teal/purple, the update orange; derived (transient) rows take a
paler tint of their state; every row is labelled by name."""
FULL_BAR = 16
"""Bytes per parameter that fill the bar (mixed-precision Adam's); smaller ones fall short."""


class Text(NamedTuple):
    x: float
    y: float
    text: str


@dataclass(frozen=True)
class Segment:
    d: str
    x: float
    y: float


@dataclass(frozen=True)
class BarPart:
    x: float
    w: float
    fill: str
    ink: str
    label: str         # "" where nothing fits the part
    state: bool        # counts as optimizer state (what ZeRO-1 shards)


@dataclass(frozen=True)
class Band:
    bar_title: Text
    parts: tuple[BarPart, ...]
    bar_y: float
    bar_h: float
    span: tuple[float, float, float] | None      # left, right, y of the brace
    span_label: Text | None
    note: Text | None
    chart_title: Text
    plot: tuple[float, float, float, float]      # left, top, right, bottom
    grid: tuple[float, ...]
    y_ticks: tuple[Text, ...]                    # right-aligned at the axis
    x_ticks: tuple[Text, ...]                    # centred under their step
    segments: dict[int, Segment]
    dot: float                                   # the loss dot's radius


def band_height(area: Box, note: bool) -> float:
    """The band's least height: the bar's title, the bar, the brace and its words, the note."""
    small = area.small
    return small * LINE + small * 1.7 + small * 0.5 + small * 0.6 + small * LINE + (
        small * LINE if note else 0.0)


def _short(row) -> str:
    return {"w16": "w₁₆", "w": "w", "g": "g", "buf": "b", "m": "m", "v": "v"}[row.key]


def bottom_band(trace: OptimizerTrace, area: Box, top: float, note: bool) -> Band:
    """The band from ``top`` to the bottom of ``area``."""
    small, pad = area.small, area.pad
    width, bottom = area.width, area.height - pad
    bar_left = pad
    bar_right = pad + min(width * 0.46, small * 36)
    kept = [r for r in trace.rows if r.bytes_per_param]
    total = sum(r.bytes_per_param for r in kept)
    unit = (bar_right - bar_left) / FULL_BAR
    state_keys = {"buf", "m", "v"} | ({"w"} if trace.params.precision == "mixed" else set())
    title_y = top + small * 0.8
    bar_y = round(title_y + small * 0.5, 1)
    bar_h = round(small * 1.7, 1)
    parts, x = [], bar_left
    for r in kept:
        w = r.bytes_per_param * unit
        colour = ROW_COLOURS[r.key]
        label = next((t for t in (f"{_short(r)} {r.bytes_per_param}", str(r.bytes_per_param))
                      if fits(t, small, w - small * 0.5, bold=True)), "")
        parts.append(BarPart(round(x, 1), round(w, 1), colour, text_on(colour), label,
                             r.key in state_keys))
        x += w
    states = [b for b in parts if b.state]
    span = span_label = None
    if states:
        k = sum(r.bytes_per_param for r in kept if r.key in state_keys)
        left, right = states[0].x, states[-1].x + states[-1].w
        brace_y = round(bar_y + bar_h + small * 0.4, 1)
        span = (left, right, brace_y)
        room = bar_right + pad * 0.5 - left
        words = next((t for t in (f"optimizer state K = {k} B: what ZeRO-1 shards",
                                  f"state K = {k} B: what ZeRO-1 shards",
                                  f"K = {k} B: ZeRO-1 shards",
                                  f"K = {k} B") if fits(t, small, room)), "")
        if words:
            span_label = Text(round(left, 1), round(brace_y + small * 0.5 + small * 0.95, 1),
                              words)
    note_text = None
    if note:
        words = (" + ".join(f"{r.bytes_per_param} {_short(r)}" for r in kept)
                 + " bytes per parameter")
        y = bar_y + bar_h + small * 0.4 + small * 0.5 + small * 0.95 + small * LINE
        if fits(words, small, bar_right + pad * 0.5 - bar_left):
            note_text = Text(round(bar_left, 1), round(y, 1), words)
    words = next((t for t in (f"Bytes kept per parameter: {total}", f"Bytes per parameter: {total}",
                              f"{total} B per parameter", f"{total} B")
                  if fits(t, small, bar_right - bar_left, bold=True)), f"{total} B")
    bar_title = Text(round(bar_left, 1), round(title_y, 1), words)
    return Band(bar_title, tuple(parts), bar_y, bar_h, span, span_label, note_text,
                *_loss_chart(trace, area, bar_right + pad * 1.5, top, width - pad, bottom))


def _loss_chart(trace: OptimizerTrace, area: Box, left: float, top: float, right: float,
                bottom: float):
    """The loss after each step: its title, plot box, gridlines, ticks, and a segment per
    step (in the frame that finishes the step)."""
    small = area.small
    title = next((t for t in ("loss L(w) after each step", "loss L(w)", "loss")
                  if fits(t, small, right - left, bold=True)), "")
    title_y = top + small * 0.8
    plot_top = title_y + small * 0.9
    plot_bottom = bottom - small * 1.35
    steps = [s.step for s in trace.history]
    losses = [s.loss for s in trace.history]
    hi = max(losses) or 1.0
    y = Linear(0.0, hi, plot_bottom, plot_top)
    y_ticks = spaced(nice_candidates(0.0, hi, 8), y, lambda v: f"{v:g}", small, vertical=True)
    y_ticks = tuple(t for t in y_ticks if plot_top - 0.5 <= t[0] <= plot_bottom + 0.5)
    if len(y_ticks) < 2 and plot_bottom - plot_top >= small * LINE * 1.2:
        y_ticks = ((y(0.0), "0"), (y(hi), f"{hi:.2g}"))    # a short plot: its two ends
    plot_left = left + inset([t for _, t in y_ticks], small)
    last = max(steps[-1], 1)
    x = Linear(0.0, float(last), plot_left + small * 0.4, right - small * 0.4)
    x_ticks = spaced(every_candidates(0, last), x, lambda v: f"{v:g}", small)
    points = [(x(s), y(v)) for s, v in zip(steps, losses)]
    last_frame = {}
    for k, f in enumerate(trace.frames):
        last_frame[f.step] = k
    segments = {0: Segment("", *points[0])}
    for t in range(1, len(points)):
        (x0, y0), (x1, y1) = points[t - 1], points[t]
        segments[last_frame[t]] = Segment(f"M{x0},{y0} L{x1},{y1}", x1, y1)
    return (Text(round(left, 1), round(title_y, 1), title),
            (round(plot_left, 1), round(plot_top, 1), round(right, 1), round(plot_bottom, 1)),
            tuple(py for py, _ in y_ticks),
            tuple(Text(round(plot_left - small * 0.4, 1), round(py + small * 0.35, 1), t)
                  for py, t in y_ticks),
            tuple(Text(px, round(plot_bottom + small * 1.15, 1), t) for px, t in x_ticks),
            segments, round(max(3.0, small * 0.3), 1))
