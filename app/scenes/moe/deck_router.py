"""The MoE deck's frames 0–2 on the left, the router's table, laid out for the box
(:mod:`.deck_parts`): the token × expert table — logits (0), softmax probabilities with their
mean P̄ (1), the top-k choice with its gate weights (2). The bins on the right are
:mod:`.deck_bins`'s.

The table shows as many tokens as have rows a small label tall (at most :data:`TABLE_ROWS`) and
its numbers where a cell holds one at the label or the small size.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from app.draw.layout import LINE
from app.draw.palette import rank_colour, text_on
from app.draw.shapes import Rect, Text
from app.draw.text import fits, text_width
from app.humanize import fixed
from app.scenes.moe.deck_parts import CHOSEN, Lay, batch, cells, note, value_fill

TABLE_ROWS, TABLE_COLUMNS = 16, 16


@dataclass(frozen=True)
class Table:
    rows: int
    cols: int
    x0: float
    y0: float
    cw: float
    rh: float
    size: float                # the numbers' size (0: none)
    label_every: int           # a row label every this many rows
    col_step: int              # an expert label every this many columns

    def x(self, e: int) -> float:
        return self.x0 + e * self.cw

    def y(self, t: int) -> float:
        return self.y0 + t * self.rh

    @property
    def x1(self) -> float:
        return self.x0 + self.cols * self.cw


def widest_number(p, trace) -> str:
    """The widest number the table writes: a logit, a probability or a gate weight."""
    rows, cols = min(p.tokens, TABLE_ROWS), min(p.experts, TABLE_COLUMNS)
    logits = [_logit(float(v)) for v in np.ravel(trace.logits[:rows, :cols])]
    return max(logits + ["0.00"], key=len)


def table(p, trace, lay: Lay) -> Table:
    small = lay.small
    cols = min(p.experts, TABLE_COLUMNS)
    y0 = lay.body + small * 1.4
    room = lay.bottom - y0
    rows = min(p.tokens, TABLE_ROWS, max(2, int(room / (small * LINE) - 1.3)))
    rh = min(lay.text * 1.9, room / (rows + 1.3))
    x0 = lay.pad + small * 0.6 + small * 0.5 + text_width(f"t{rows - 1}", small) + small * 0.4
    x1 = lay.split - arrow_gap(lay)
    cw = (x1 - x0) / cols
    widest = widest_number(p, trace)
    size = next((s for s in (lay.text, small)
                 if fits(widest, s, cw - 5) and rh - 2 >= s * 1.2), 0.0)
    every = max(1, math.ceil(small * 1.1 / rh))
    step = max(1, math.ceil((text_width(f"E{cols - 1}", small) + small * 0.5) / cw))
    return Table(rows, cols, x0, y0, cw, rh, size, every, step)


def arrow_gap(lay: Lay) -> float:
    """Between the table and the bins: where the arrows leave and token 0's weights stand."""
    return text_width("0.00", lay.small, bold=True) + lay.small * 2.4


def _matrix_cells(tab: Table, values: np.ndarray, lo: float, hi: float, fmt,
                  row0: int = 0) -> list:
    boxes: dict[str, list[str]] = defaultdict(list)
    texts = []
    span = (hi - lo) or 1.0
    for t in range(values.shape[0]):
        for e in range(tab.cols):
            v = float(values[t, e])
            fill = value_fill((v - lo) / span)
            cells(boxes, tab.x(e) + 1, tab.y(t + row0) + 1, tab.cw - 2, tab.rh - 2, fill)
            if tab.size:
                texts.append(Text(tab.x(e) + tab.cw / 2,
                                  tab.y(t + row0) + tab.rh / 2 + tab.size * 0.35, fmt(v),
                                  size=tab.size, cls="", anchor="middle", fill=text_on(fill)))
    return [batch(boxes, texts)]


def _logit(v: float) -> str:
    return fixed(v, 1)


def prob(v: float) -> str:
    return f"{v:.2f}"


def frame0(p, trace, lay: Lay, tab: Table) -> list:
    T, E = p.tokens, p.experts
    per_rank = T // p.ep
    small = lay.small
    logits = trace.logits[:tab.rows, :tab.cols]
    shown = (f" · tokens 0–{tab.rows - 1} of {T}" if T > tab.rows else "") + (
        f" · experts 0–{tab.cols - 1} of {E}" if E > tab.cols else "")
    items: list = note(lay, lay.pad, lay.split - small, (
        f"router logits x·W + skew·b{shown}", "router logits x·W + skew·b", "router logits"))
    items += [Text(tab.x(e) + tab.cw / 2, tab.y0 - small * 0.45, f"E{e}", size=small,
                   anchor="middle", cls="muted") for e in range(0, tab.cols, tab.col_step)]
    for t in range(tab.rows):
        r = t // per_rank
        items.append(Rect(lay.pad, tab.y(t) + 2, small * 0.6, tab.rh - 4, rank_colour(r, p.ep),
                          tip=f"token {t} lives on rank {r}"))
        if t % tab.label_every == 0:
            items.append(Text(tab.x0 - small * 0.4, tab.y(t) + tab.rh / 2 + small * 0.35,
                              f"t{t}", size=small, anchor="end"))
    hi = float(np.abs(logits).max()) or 1.0
    items += _matrix_cells(tab, logits, -hi, hi, _logit)
    return items


def frame1(p, trace, lay: Lay, tab: Table) -> list:
    small = lay.small
    probs = trace.routing.probs[:tab.rows, :tab.cols]
    items: list = note(lay, lay.pad, lay.split - small, (
        "softmax over all experts: each row sums to 1", "softmax: each row sums to 1"),
        cover=True)
    hi = float(probs.max()) or 1.0
    items += _matrix_cells(tab, probs, 0.0, hi, prob)
    mean = trace.routing.probs.mean(axis=0)[None, :tab.cols]
    y = tab.y(tab.rows) + 0.3 * tab.rh
    items.append(Text(tab.x0 - small * 0.4, y + tab.rh / 2 + small * 0.35, "P̄", size=small,
                      anchor="end", weight=700))
    boxes: dict[str, list[str]] = defaultdict(list)
    texts = []
    for e in range(tab.cols):
        v = float(mean[0, e])
        fill = value_fill(v / max(float(mean.max()), 1e-12))
        cells(boxes, tab.x(e) + 1, y + 1, tab.cw - 2, tab.rh - 2, fill)
        if tab.size:
            texts.append(Text(tab.x(e) + tab.cw / 2, y + tab.rh / 2 + tab.size * 0.35,
                              prob(v), size=tab.size, cls="", anchor="middle",
                              fill=text_on(fill)))
    items.append(batch(boxes, texts))
    return items


def frame2(p, trace, lay: Lay, tab: Table) -> list:
    r = trace.routing
    gates = "probabilities" if p.router == "softmax_topk" else "softmax of the chosen logits"
    items: list = note(lay, lay.pad, lay.split - lay.small, (
        f"top-{p.top_k} per token, gate weights ({gates})", f"top-{p.top_k} per token, gate "
        f"weights", f"top-{p.top_k} per token"), cover=True)
    boxes: dict[str, list[str]] = defaultdict(list)
    texts = []
    for t in range(tab.rows):
        for slot in range(p.top_k):
            e = int(r.experts[t, slot])
            if e >= tab.cols:
                continue
            cells(boxes, tab.x(e) + 1, tab.y(t) + 1, tab.cw - 2, tab.rh - 2, CHOSEN)
            if tab.size:
                texts.append(Text(tab.x(e) + tab.cw / 2, tab.y(t) + tab.rh / 2 + tab.size * 0.35,
                                  prob(float(r.weights[t, slot])), size=tab.size, cls="",
                                  anchor="middle", weight=700, fill="#ffffff"))
    items.append(batch(boxes, texts))
    return items
