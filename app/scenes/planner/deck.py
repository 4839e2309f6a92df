"""The planner's deck, laid out for its box (app/draw/box.py): every mix as a point (peak memory
× tokens/s), the Pareto front and the best mix, then the best mix's time budget as a stacked
bar beside the chart (drawn dashed, and said, before it comes). Frames add layers; each names
its step in a header line (and in ``data-unit`` for the player's position text). Memory is in
GiB throughout, as chapter 1's ledger and the GPUs' capacities (an "80 GB" H100 holds 80 GiB).

The layout (docs/legibility.md): the header and the title along the top, the legend's row along
the bottom; between them the rate ticks' column, the scatter, and the budget's column — its bar
and its shares' labels, as wide as the longest label at the box's small size. The number of
ticks follows from the plot's size; the capacity's and the best mix's labels take a place from
:class:`app.draw.layout.Spots` (the best mix's is left out where none is free: the caption
names it); the budget's labels are spread along the bar, the smallest shares left out where
they would not fit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from app.draw.box import Box
from app.draw.column import Column
from app.draw.layout import LINE, Spots, heading, legend_rows, text_box
from app.draw.plot import linear_ticks
from app.draw.shapes import Text
from app.draw.svg import esc
from app.draw.text import text_width

GIB = 2 ** 30
MIN_WIDTH, MIN_HEIGHT = 560, 320
"""The smallest box the deck is laid out for: a narrower frame (a phone) scrolls it."""
FITS, MISSES, LIMIT = "#0072B2", "#bbbbbb", "#D55E00"
COLOURS = {"compute": "#0072B2", "tp": "#E69F00", "cp": "#56B4E9", "ep": "#009E73",
           "pp": "#F0E442", "dp": "#D55E00", "bubble": "#CC79A7", "optimizer": "#999999"}
LABELS = {"compute": "compute", "tp": "TP comm", "cp": "CP comm", "ep": "EP all-to-all",
          "pp": "PP sends", "dp": "DP / ZeRO comm", "bubble": "bubble", "optimizer": "optimizer"}
UNITS = ("every mix", "the Pareto front", "the best mix's budget")
"""What each step is (the player's position text)."""
LATER = "step 3: where the best mix's step time goes"
"""Beside the dashed bar while it is empty (steps 1 and 2, counted from 1)."""


@dataclass(frozen=True)
class Layer:
    index: int
    header: str
    texts: tuple[Text, ...]
    """labels that stay drawn once the layer is (every later step shows them too)"""
    marks: tuple[str, ...]
    """its shapes' markup (points, lines, bars)"""
    current: tuple[Text, ...] = ()
    """labels shown only while the layer is the step on screen"""


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    box: Box
    label: str
    titles: tuple[Text, ...]
    header: Text
    legend: tuple[Text, ...]
    legend_marks: tuple[str, ...]
    layers: tuple[Layer, ...]


def pareto(points):
    front, best = [], -1.0
    for mem, tps, fits, *_ in sorted((p for p in points if p[2]), key=lambda p: p[0]):
        if tps > best:
            front.append((mem, tps))
            best = tps
    return front


def _spread(ys: list[float], gap: float, lowest: float) -> list[float]:
    """Label heights moved apart by at least ``gap``, none below ``lowest`` (top to bottom)."""
    out, last = [], -math.inf
    for y in ys:
        last = max(y, last + gap)
        out.append(last)
    for i in range(len(out) - 1, -1, -1):
        out[i] = min(out[i], lowest if i == len(out) - 1 else out[i + 1] - gap)
    return out


def _rate(t: float) -> str:
    """A tokens/s tick: 0, 250k, 1.5M."""
    if t == 0:
        return "0"
    if t >= 1e6:
        return f"{t / 1e6:g}M"
    return f"{t / 1e3:g}k"


def _axis(top: float, count: int) -> list[float]:
    """Ticks from 0 that reach ``top``."""
    ticks = linear_ticks(0, top, count)
    if ticks[-1] < top and len(ticks) > 1:
        ticks = linear_ticks(0, ticks[-1] + (ticks[1] - ticks[0]), count)
    return ticks


def _inside(x: float, y: float, w: float, size: float, anchor: str, left: float, top: float,
            right: float, bottom: float) -> bool:
    """Whether a label of width ``w`` at baseline (x, y) lies inside the plot."""
    x0 = x if anchor == "start" else x - w
    return x0 >= left and x0 + w <= right and y - size >= top and y <= bottom - size * 0.3


def headers(trace) -> list[str]:
    plan, cap = trace.plan, trace.params.cluster().gpu.capacity / GIB
    b = plan.best
    out = ["Every mix: peak memory against tokens/s" if b else
           f"Every mix: none fits in {cap:.0f} GiB"]
    if b:
        out += ["The Pareto front and the best mix",
                f"Where the best mix's {b.step_s:.2f} s step goes"]
    return out


def _c(x: float) -> str:
    """A coordinate in markup."""
    return f"{x:.1f}"


def _p(x: float) -> str:
    """A point's centre in markup, in whole units: the deck is drawn near one unit a pixel and
    a point is 5 across, so a tenth is invisible and a thousand points' tenths are 2 KB of a
    first load (the front's corners and the best mix's ring sit on the same centres)."""
    return f"{x:.0f}"


def _r(x: float) -> float:
    """A label's coordinate."""
    return round(x, 1)


def build_deck(trace, box: Box) -> Deck:
    plan, p = trace.plan, trace.params
    area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
    width, height = area.width, area.height
    pad, text, small = area.pad, area.text, area.small
    gpu = p.cluster().gpu
    cap = gpu.capacity / GIB
    short = re.sub(r"\s*\d+\s*GB$", "", gpu.name)      # "H100 80 GB" → "H100"
    b = plan.best
    named = headers(trace)
    top = heading(area, named, f"{p.gpus:,} × {short} · {plan.searched:,} mixes")
    # memory in GiB, as chapter 1's ledger and the GPUs' capacities (80 GB H100 = 80 GiB)
    pts = [(m * 1e9 / GIB, t, f, tip) for m, t, f, tip in plan.points]
    edge = max([cap * 1.6] + [min(q[0], cap * 3) for q in pts]) if pts else cap * 2
    clipped_at = None
    legend_texts = ["fits", "does not fit"]
    # the budget's column: the bar, then its labels (the note of what comes fills it before)
    kinds = [k for k, t in (b.budget.items() if b else ()) if t > 0]
    label_w = max([text_width(f"{LABELS[k]} 100 %", small) for k in kinds] + [small * 8])
    bar_w = round(small * 2.6, 1)
    budget_w = bar_w + small * 1.0 + label_w if b else 0.0
    if b:
        budget_w = max(budget_w, text_width(f"best mix: {b.step_s:.2f} s a step", small))
    budget_x = width - pad - budget_w
    # the plot: ticks' column at the left, the axes' titles above and under
    plot_top = top.top + small * LINE * 1.5
    ymax_seen = max([q[1] for q in pts] + [1.0])
    xticks = _axis(edge, 5)
    if any(q[0] > xticks[-1] for q in pts):
        clipped_at = xticks[-1]
        legend_texts.append(f"beyond {clipped_at:g} GiB: drawn at the edge")
    legend = legend_rows(area, legend_texts)
    plot_bottom = legend.top - pad * 0.4 - small * LINE * 2.2
    yticks = _axis(ymax_seen, max(2, min(6, int((plot_bottom - plot_top) / (small * 2.4)))))
    tick_w = max(text_width(_rate(t), small) for t in yticks)
    plot_left = pad + tick_w + small * 0.5
    plot_right = (budget_x - pad * 1.5) if b else width - pad
    xmax, ymax = xticks[-1], yticks[-1]
    count = max(2, min(6, int((plot_right - plot_left) / (text_width("0000", small) * 2))))
    xticks = linear_ticks(0, xmax, count)
    xmax = xticks[-1]
    pw, ph = plot_right - plot_left, plot_bottom - plot_top

    def x(m):
        return plot_left + pw * min(m, xmax) / xmax

    def y(t):
        return plot_bottom - ph * t / ymax

    spots = Spots([text_box(top.header_x, top.header_y, max(named, key=len), area.head,
                            bold=True)] + [text_box(*line[:2], line[2], small, "end")
                                           for line in top.title])
    labels: list[Text] = []

    def put(t: Text) -> bool:
        if spots.take(text_box(t.x, t.y, t.text, t.size, t.anchor, t.weight >= 600)):
            labels.append(t)
            return True
        return False

    for t in yticks:
        put(Text(_r(plot_left - small * 0.4), _r(y(t) + small * 0.35), _rate(t), small,
                 "muted", "end"))
    for m in xticks:
        put(Text(_r(x(m)), _r(plot_bottom + small * 1.3), f"{m:g}", small, "muted", "middle"))
    put(Text(_r(plot_left + pw / 2), _r(plot_bottom + small * 2.7), "peak memory per GPU (GiB)",
             small, "ink", "middle"))
    put(Text(_r(pad), _r(plot_top - small * 0.9), "tokens / s", small, "ink"))
    cx = x(cap)
    holds = f"{short} holds {cap:.0f} GiB"
    for tx, anchor in ((cx + small * 0.4, "start"), (cx - small * 0.4, "end")):
        end = tx + text_width(holds, small) if anchor == "start" else tx
        if end <= plot_right and put(Text(_r(tx), _r(plot_top + small * 0.95), holds, small,
                                          "bad", anchor, weight=700)):
            break
    r = round(max(2.5, small * 0.2), 1)
    marks0 = [f'<line class="axis" x1="{_c(plot_left)}" y1="{_c(plot_bottom)}" '
              f'x2="{_c(plot_right)}" y2="{_c(plot_bottom)}"/>',
              f'<line class="axis" x1="{_c(plot_left)}" y1="{_c(plot_top)}" '
              f'x2="{_c(plot_left)}" y2="{_c(plot_bottom)}"/>',
              f'<line x1="{_c(cx)}" y1="{_c(plot_top)}" x2="{_c(cx)}" y2="{_c(plot_bottom)}" '
              f'stroke="{LIMIT}" stroke-width="2" stroke-dasharray="6 4"/>']
    # every mix a point, in the order searched (the paint order); the fill and opacity they
    # share are the group's, so a thousand points do not each repeat them
    marks0.append(f'<g fill="{MISSES}" fill-opacity="0.6">')
    fits_fill = f' fill="{FITS}"'
    for mem, tps, fits, tip in pts:
        marks0.append(f'<circle cx="{_p(x(mem))}" cy="{_p(y(tps))}" r="{r}"'
                      f'{fits_fill if fits else ""} data-tip="{esc(tip)}"/>')
    marks0.append("</g>")
    later: tuple[Text, ...] = ()
    bar_x, bar_top, bar_bottom = budget_x, plot_top, plot_bottom
    if b:
        marks0.append(f'<rect class="blank" x="{_c(bar_x)}" y="{_c(bar_top)}" '
                      f'width="{bar_w}" height="{_c(bar_bottom - bar_top)}"/>')
        note = Column(bar_x + bar_w + small, (bar_top + bar_bottom) / 2 - small * LINE * 1.5,
                      budget_w - bar_w - small, bar_bottom)
        note.add(LATER, small, "muted")
        later = tuple(note.texts)
    layers = [Layer(0, named[0], tuple(labels), tuple(marks0), later)]
    if b:
        bmem = b.peak_bytes / GIB
        front = pareto(pts + [(bmem, b.tokens_per_s, True, "")])   # the sample may miss it
        d = " ".join(f"{'M' if i == 0 else 'L'}{_p(x(m))},{_p(y(t))}"
                     for i, (m, t) in enumerate(front))
        bx, by = x(bmem), y(b.tokens_per_s)
        marks1 = [f'<path class="scale-line" d="{d}" fill="none" stroke-width="2"/>',
                  f'<circle cx="{_p(bx)}" cy="{_p(by)}" r="{round(r * 2.3, 1)}" fill="none" '
                  f'stroke="{LIMIT}" stroke-width="3"/>']
        names = (f"best: tp {b.tp} pp {b.pp} dp {b.dp} cp {b.cp} ZeRO {b.zero}",
                 f"best: tp {b.tp} pp {b.pp} dp {b.dp} cp {b.cp} Z{b.zero}", "best")
        before = len(labels)
        gap = r * 2.3 + small * 0.3
        for best, size in ((n, s) for n in names for s in (text, small)):
            w = text_width(best, size, True)
            spots_at = ((bx + gap, by - gap, "start"), (bx - gap, by - gap, "end"),
                        (bx + gap, by + gap + size * 0.8, "start"),
                        (bx - gap, by + gap + size * 0.8, "end"))
            if any(_inside(tx, ty, w, size, anchor, plot_left, plot_top, plot_right,
                           plot_bottom) and put(Text(_r(tx), _r(ty), best, size, "ink halo-bg",
                                                     anchor, weight=700))
                   for tx, ty, anchor in spots_at):
                break
        layers.append(Layer(1, named[1], tuple(labels[before:]), tuple(marks1), later))
        layers.append(_budget(b, area, named[2], bar_x, bar_w, bar_top, bar_bottom,
                              plot_bottom))
    legend_out, legend_marks = [], []
    for k, t in enumerate(legend_texts):
        sx, sy = legend.at[k]
        legend_out.append(Text(_r(sx + legend.text_dx), _r(sy + legend.text_dy), t, small,
                               "muted"))
        if k < 2:
            legend_marks.append(f'<circle cx="{_c(sx + legend.swatch / 2)}" '
                                f'cy="{_c(sy + legend.swatch / 2)}" r="{_c(legend.swatch / 2.6)}"'
                                f' fill="{(FITS, MISSES)[k]}"/>')
    titles = tuple(Text(tx, ty, line, small, "muted", "end") for tx, ty, line in top.title)
    return Deck(width, height, box, "Planner: every mix, memory against throughput", titles,
                Text(top.header_x, top.header_y, "", area.head, weight=700), tuple(legend_out),
                tuple(legend_marks), tuple(layers))


def _budget(b, area: Box, header: str, bar_x: float, bar_w: float, top: float, bottom: float,
            plot_bottom: float) -> Layer:
    """The best mix's step as a stacked bar, each share that rounds to 1 % or more labelled
    beside it (the smallest left out where the labels would not fit along the bar)."""
    small = area.small
    marks, labels, at = [], [], top
    span = bottom - top
    for kind, t in b.budget.items():
        if t <= 0:
            continue
        h = span * t / b.step_s
        marks.append(f'<rect x="{_c(bar_x)}" y="{_c(at)}" width="{bar_w}" height="{_c(h)}" '
                     f'fill="{COLOURS[kind]}" stroke="#fff"/>')
        if t >= 0.005 * b.step_s:            # a share that rounds to 1 % or more
            labels.append((at + h / 2, kind, 100 * t / b.step_s))
        at += h
    gap = small * LINE
    while labels and len(labels) * gap > span + small:
        labels.remove(min(labels, key=lambda item: item[2]))
    ys = _spread([mid for mid, _, _ in labels], gap, bottom - small * 0.2)
    texts = [Text(_r(bar_x), _r(plot_bottom + small * 1.3), f"best mix: {b.step_s:.2f} s a step",
                  small, "ink", weight=700)]
    lx = bar_x + bar_w + small
    for yy, (mid, kind, pct) in zip(ys, labels):
        marks.append(f'<line class="axisline" x1="{_c(bar_x + bar_w)}" y1="{_c(mid)}" '
                     f'x2="{_c(lx - small * 0.3)}" y2="{_c(yy)}"/>')
        texts.append(Text(_r(lx), _r(yy + small * 0.35), f"{LABELS[kind]} {pct:.0f} %", small))
    return Layer(2, header, tuple(texts), tuple(marks))
