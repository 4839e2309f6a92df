"""The tensor-parallel scene as drawable geometry: the block's data flow along the top, one lane
per rank below, and one frame per step (app/scenes/tensor_parallel/deck_frames.py draws each).

The deck is layered for static/js/player.js: frame k's group covers the frames before it, so
showing frames 0…k shows step k, and the standalone SVG of step k is its group alone. Every
frame highlights the box of the data flow its step belongs to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from app.draw.box import Box
from app.draw.layout import LINE, Heading, heading, legend_rows
from app.draw.palette import rank_colour
from app.draw.text import fits, text_width
from app.draw.widen import least_box
from app.scenes.tensor_parallel.deck_check import check_frame, check_height
from app.scenes.tensor_parallel.deck_frames import (FrameView, Geometry, Text, source_colour,
                                                    step_frame)
from app.sim.tensor_parallel.simulate import TensorParallelTrace

MIN_WIDTH, MIN_HEIGHT = 600, 340
"""The smallest box the deck is laid out for: a narrower frame (a phone) scrolls it."""
DETAILS_HEIGHT = 480
"""The flow's boxes carry their detail lines in boxes at least this tall."""
SHORT_TITLES = {"column": "column-parallel", "row": "row-parallel", "mlp": "MLP",
                "attention": "attention", "embedding": "embedding + loss"}
LEGEND = (("ranks", "one rank's shard or partial sum"), ("grey", "the same on every rank"),
          ("dark", "just summed over every rank"), ("shade", "pale → deep: small → large value"))


@dataclass(frozen=True)
class FlowBox:
    x: float
    y: float
    w: float
    h: float
    label: str
    lines: tuple[str, ...]
    region: str


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    box: Box
    """the box asked for (the deck's ``data-box``); width × height is what it was laid out in"""
    title: str
    top: Heading
    """the header's place and the title's lines"""
    geometry: Geometry
    flow: tuple[FlowBox, ...]
    flow_arrows: tuple[tuple[float, float, float], ...]     # x0, x1, y
    lanes: tuple[tuple[float, float], ...]                   # top, bottom of each rank's lane
    lane_labels: tuple[Text, ...]
    swatches: tuple[tuple[float, float, float, str], ...]    # cx, cy, r, colour
    frames: tuple[FrameView, ...]
    legend: tuple[tuple[str, str, float, float], ...]       # kind, text, x, y (swatch's top)
    swatch: float


def _flow(trace: TensorParallelTrace, area: Box, top: float, details: bool):
    """The block's data flow in a row of boxes, each as wide as its texts; without the detail
    lines where they do not fit (or the box is short), and none at all where even the labels
    do not: (boxes, arrows, index of each node's box, the row's bottom)."""
    nodes = trace.result.flow
    small, pad = area.small, area.pad
    gap = small * 1.8
    room = area.width - 2 * pad
    for with_lines in ((True, False) if details else (False,)):
        widths = [max([text_width(n.label, small, bold=True)]
                      + ([text_width(t, small) for t in n.detail.split(" · ")] if with_lines
                         else [])) + small * 1.2 for n in nodes]
        total = sum(widths) + gap * (len(nodes) - 1)
        if total <= room:
            break
    else:
        return (), (), {}, top
    lines = max((len(n.detail.split(" · ")) for n in nodes), default=0) if with_lines else 0
    h = round(small * (LINE * (1 + lines) + 0.7), 1)
    x = pad + (room - total) / 2
    boxes, arrows, index = [], [], {}
    for k, (node, w) in enumerate(zip(nodes, widths)):
        boxes.append(FlowBox(round(x, 1), round(top, 1), round(w, 1), h, node.label,
                             tuple(node.detail.split(" · ")) if with_lines else (),
                             node.region))
        index[node.key] = k
        if k < len(nodes) - 1:
            arrows.append((round(x + w + 3, 1), round(x + w + gap - 3, 1),
                           round(top + h / 2, 1)))
        x += w + gap
    return tuple(boxes), tuple(arrows), index, top + h


def _lanes(tp: int, top: float, bottom: float) -> tuple[tuple[float, float], ...]:
    height = (bottom - top) / tp
    gap = min(14.0, height * 0.18)
    return tuple((round(top + r * height + gap / 2, 1), round(top + (r + 1) * height - gap / 2, 1))
                 for r in range(tp))


def _names(trace: TensorParallelTrace, area: Box, title: str, formulas: bool = True
           ) -> tuple[list[str], list[str]]:
    """Each step's deck header ("Forward 1/2 · column-parallel matmul:  Y = XA", the formula
    dropped when it would not fit beside the title, or without ``formulas``) and its name for
    the player's position text ("forward 1 of 2: column-parallel matmul", "backward 3 of 4:
    all-reduce", "check: gradients")."""
    steps = trace.result.steps
    totals = {p: sum(1 for s in steps if s.pass_ == p) for p in ("forward", "backward")}
    seen = {"forward": 0, "backward": 0}
    headers, units = [], []
    room = area.width - 3 * area.pad - text_width(title, area.small)
    for s in steps:
        if s.pass_ in seen:
            seen[s.pass_] += 1
            head = f"{s.pass_.capitalize()} {seen[s.pass_]}/{totals[s.pass_]} · {s.title}"
            units.append(f"{s.pass_} {seen[s.pass_]} of {totals[s.pass_]}: {s.title}")
        elif s.kind == "check":
            head = f"Check · {s.title}"
            units.append(f"check: {s.title}")
        else:
            head = "Before · what each rank holds"
            units.append("before the forward pass")
        full = head + (f":  {s.formula}" if s.formula and formulas else "")
        # the header shares the top line with the deck's title: drop the formula if too long
        headers.append(full if fits(full, area.head, room, bold=True) else head)
    return headers, units


def build_deck(trace: TensorParallelTrace, box: Box, only: int | None = None) -> Deck:
    """Every frame, or frame ``only`` alone (a standalone export), laid out for ``box``: the
    header and title on top, the block's data flow under them, a lane per rank (its swatch and
    name in a column as wide as the widest), each step's matrices in the lanes, the legend's
    rows below."""
    p = trace.params
    tp = p.tp
    colour = source_colour(tp)
    title = (f"{SHORT_TITLES[p.block]} · tp {tp} · {p.tokens} tokens"
             f"{' · SP' if p.sequence_parallel else ''}")
    # as wide as the headers without their formulas need (the formula is dropped first)
    area = least_box(box, MIN_WIDTH, MIN_HEIGHT, _names(trace, box, title, formulas=False)[0])
    width, height = area.width, area.height
    pad, text, small = area.pad, area.text, area.small
    headers, units = _names(trace, area, title)
    top = heading(area, headers, title)
    boxes, flow_arrows, index, flow_bottom = _flow(trace, area, top.top,
                                                   height >= DETAILS_HEIGHT)
    legend = legend_rows(area, [t for _, t in LEGEND])
    lanes_top = round(flow_bottom + pad * 0.9, 1)
    names_h = round(text * 1.3 + (small * 1.3 if height >= DETAILS_HEIGHT else 0.0), 1)
    # the lanes need room for a collective's three lines and a check's two rows of matrices:
    # where large type leaves less, the deck is drawn taller (its frame scales it)
    checks = [s for s in trace.result.steps if s.kind == "check"]
    more = any(len(s.comparisons) > 1 for s in checks)    # a check shows one row at least
    check_h = check_height(area, 1, more) - names_h if checks else 0.0
    need = max(tp * text * 1.5, text * 7.5, check_h)
    short = need - (legend.top - pad * 0.5 - lanes_top - names_h)
    if short > 0:
        height = math.ceil(height + short)
        legend = legend_rows(area, [t for _, t in LEGEND], bottom=height)
    lanes_bottom = round(legend.top - pad * 0.5, 1)
    lanes = _lanes(tp, lanes_top + names_h, lanes_bottom)
    lane_h = lanes[0][1] - lanes[0][0]
    named = f"rank {tp - 1}" if tp <= 8 else f"r{tp - 1}"
    radius = round(min(small * 0.45, lane_h * 0.3), 1)
    left = pad + radius * 2 + small * 0.4 + text_width(named, text, bold=True) + pad
    g = Geometry(width, round(left, 1), width - pad, lanes_top, names_h, lanes_bottom, text,
                 small, area.head, pad)
    frames = []
    for k, step in enumerate(trace.result.steps):
        if only is not None and k != only:
            continue
        flow_box = boxes[index[step.flow]] if step.flow in index else None
        highlight = ((flow_box.x - 4, flow_box.y - 4, flow_box.w + 8, flow_box.h + 8)
                     if flow_box else None)
        view = (check_frame(k, step, tp, colour, headers[k], g) if step.kind == "check" else
                step_frame(k, step, tp, lanes, colour, headers[k], highlight, g))
        frames.append(replace(view, unit=units[k]))
    every = next((e for e in (1, 2, 4) if e * (lane_h + 4) >= text * 1.2), 8)
    label_x = round(left - pad, 1)
    lane_labels = tuple(Text(label_x, round((a + b) / 2 + text * 0.35, 1),
                             f"rank {r}" if tp <= 8 else f"r{r}", text, anchor="end",
                             weight="700")
                        for r, (a, b) in enumerate(lanes) if r % every == 0)
    swatches = tuple((round(pad + radius, 1), round((a + b) / 2, 1), radius, rank_colour(r, tp))
                     for r, (a, b) in enumerate(lanes))
    placed = tuple((kind, t, x, y) for (kind, t), (x, y) in zip(LEGEND, legend.at))
    return Deck(width, height, box, title, top, g, boxes, flow_arrows, lanes, lane_labels,
                swatches, tuple(frames), placed, legend.swatch)
