"""The /parallelism deck as drawable geometry, laid out for its box (app/draw/box.py): the ranks
in their nodes (drawn once, under every frame) and, for each frame of the trace, an overlay —
the mesh's coordinates, one axis's groups, the nodes, one group kind's traffic coloured by its
link, the orders compared, the launch.

Each frame is a whole view: only the current one shows (the style hides the others), so a frame
draws everything it adds; the orders and torchrun frames cover the ranks with their own
background. Geometry lives here, in :mod:`app.scenes.parallelism.deck_geometry` (the parts the
frames share) and in :mod:`app.scenes.parallelism.deck_panels` (the frames'
texts), markup in :mod:`app.scenes.parallelism.deck_svg`.

The layout (docs/legibility.md): the step's header and the title along the top, the legend's
rows along the bottom, the ranks on the left and the frame's panel on the right, sized from
the box's type. Up to :data:`DETAILED_MAX` ranks every rank is a numbered cell inside its
node's box, when a cell can hold its number at the label size; beyond, the drawing gives way to
a summary (node 0 in detail and as many nodes' boxes with their rank ranges as fit), so that
cells never shrink into illegibility. A cell's notes (its coordinate on the frame's axis, or all
four in the mesh frame) show where the cell is large enough for them at the small size. Ranks
carry no colour (they are numbered); the colours are the axes' (AXIS_COLOURS) and the links'
(LINK_COLOURS), each labelled, so a colour means one thing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from app.draw.box import Box
from app.draw.layout import LINE, heading, legend_rows
from app.draw.shapes import Rect, Text
from app.draw.text import text_width
from app.sim.parallelism.layout import Layout
from app.scenes.parallelism.deck_geometry import LEGEND, Frame, Geometry
from app.scenes.parallelism.deck_panels import frame_shapes, legend_shapes
from app.sim.parallelism.simulate import ParallelismTrace

MIN_WIDTH, MIN_HEIGHT = 600, 320
"""The smallest box the deck is laid out for: a narrower frame (a phone) scrolls it."""
FIGURE = Box(880, 480)
"""The box of the deck drawn as a figure outside its own page (the /train page's mesh, at most
56 rem wide there): about one unit a pixel."""
DETAILED_MAX = 64
SUMMARY_NODES = 40
"""At most this many nodes' boxes in a summary."""
PHASE_TITLES = {"mesh": "The mesh", "nodes": "Nodes", "orders": "Which order?",
                "torchrun": "Launch with torchrun"}


@dataclass(frozen=True)
class Cell:
    rank: int
    x: float
    y: float
    s: float
    groups: str          # "tp3 cp5 …": the index of its group of every kind (static/js/mesh.js)
    tip: str


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    axis: str
    shapes: tuple
    unit: str = ""
    """what the step shows, for the player's position text: "tp groups", "traffic of dp" (the tour's stop)"""


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    box: Box
    """the box asked for (its bucket is the deck's ``data-box``); width × height is what it
    was laid out in (wider on a phone: :data:`MIN_WIDTH`)"""
    title: str
    """the deck's title, whole (its accessible name)"""
    titles: tuple[Text, ...]
    """the title's lines, at the top right"""
    header: Text
    """where each frame writes its header (the text is the frame's)"""
    detailed: bool
    nodes: tuple[Rect, ...]
    node_labels: tuple[Text, ...]
    cells: tuple[Cell, ...]
    cell_font: float
    number_at: float
    """where a cell's number is centred, as a share of the cell's side from its top"""
    strip: float
    """the height of a cell's hover strips"""
    frames: tuple[FrameView, ...]
    legend: tuple


def deck_title(p) -> str:
    nodes = -(-p.world // p.gpus_per_node)
    return (f"{p.world} ranks · tp {p.tp} · cp {p.cp} · ep {p.ep} · dp {p.dp} · pp {p.pp} · "
            f"{nodes} node{'s' if nodes > 1 else ''} × {min(p.world, p.gpus_per_node)} GPUs")


@lru_cache(maxsize=8)
def group_lists(layout: Layout) -> dict[str, tuple[tuple[int, ...], ...]]:
    """Every group list of ``layout`` by kind, built once (a list of 4,096 ranks takes a few
    milliseconds to turn into tuples, and the deck and the page ask for each several times)."""
    return {kind: layout.groups(kind) for kind in ("tp", "cp", "ep", "dp", "pp", "edp", "dp_cp")}


def frame_of(area: Box, top: float, bottom: float) -> Frame:
    """The ranks at the left, the panel at the right: the panel about a third of the width,
    within 16 and 30 small labels' heights."""
    pad, small = area.pad, area.small
    panel_w = round(max(small * 16, min(area.width * 0.36, small * 30)), 1)
    ranks_w = area.width - 3 * pad - panel_w
    return Frame(area, (pad, top, round(ranks_w, 1), round(bottom - top, 1)),
                 round(area.width - pad - panel_w, 1), panel_w, top, bottom, pad,
                 area.width - pad)


# -- where the ranks go --------------------------------------------------------------------------

def min_cell(f: Frame, world: int) -> float:
    """The least side of a cell: its number at the label size, bold, with a margin."""
    text, small = f.box.text, f.box.small
    return max(text_width(str(world - 1), text, bold=True) + small * 0.8, text * 2.0)


def _fit(f: Frame, nodes: int, per: int) -> tuple[float, int, int]:
    """(cell size, node columns, cells per node row) that make the cells largest."""
    _, _, aw, ah = f.ranks
    cols = min(per, 8)
    rows = math.ceil(per / cols)
    best = (0.0, 1, cols)
    for nc in range(1, nodes + 1):
        nr = math.ceil(nodes / nc)
        s = min(((aw - (nc - 1) * f.gap) / nc - 2 * f.inset) / cols,
                ((ah - (nr - 1) * f.gap) / nr - f.label_h - f.inset) / rows, f.box.head * 6)
        if s > best[0] + 0.5:
            best = (s, nc, cols)
    return best


def _node_label(f: Frame, bx: float, by: float, text: str) -> Text:
    return Text(round(bx + f.inset, 1), round(by + f.inset * 0.4 + f.box.small * 0.95, 1), text,
                f.box.small, "muted", weight=700)


def _place(f: Frame, layout: Layout):
    """Node boxes, their labels and the cells of the drawn ranks."""
    world, per = layout.world, min(layout.world, layout.gpus_per_node)
    x0, y0, aw, ah = f.ranks
    s, nc, cols = _fit(f, layout.nodes, per)
    detailed = world <= DETAILED_MAX and s >= min_cell(f, world)
    boxes, labels, spots = [], [], {}
    if detailed:
        rows = math.ceil(per / cols)
        bw, bh = cols * s + 2 * f.inset, rows * s + f.label_h + f.inset
        nr = math.ceil(layout.nodes / nc)
        ox = x0 + (aw - (nc * bw + (nc - 1) * f.gap)) / 2
        oy = y0 + (ah - (nr * bh + (nr - 1) * f.gap)) / 2
        for n in range(layout.nodes):
            bx, by = ox + (n % nc) * (bw + f.gap), oy + (n // nc) * (bh + f.gap)
            boxes.append(Rect(round(bx, 1), round(by, 1), round(bw, 1), round(bh, 1),
                              cls="node-box"))
            labels.append(_node_label(f, bx, by, f"node {n}"))
            for local in range(per):
                spots[n * per + local] = (bx + f.inset + (local % cols) * s,
                                          by + f.label_h + (local // cols) * s)
        return detailed, s, boxes, labels, spots
    # summary: node 0 whole, then the nodes as boxes with their rank ranges
    small = f.box.small
    least = min_cell(f, per)
    cols = max(1, min(per, 16, int((aw - 2 * f.inset) // least)))
    rows = math.ceil(per / cols)
    s = max(least, min(f.box.text * 3.2, (aw - 2 * f.inset) / cols))
    bw, bh = cols * s + 2 * f.inset, rows * s + f.label_h + f.inset
    boxes.append(Rect(x0, y0, round(bw, 1), round(bh, 1), cls="node-box"))
    name = next((t for t in (f"node 0 (ranks 0–{per - 1}), every rank", f"node 0: ranks 0–"
                             f"{per - 1}") if text_width(t, small, True) <= bw - 2 * f.inset),
                "node 0")
    labels.append(_node_label(f, x0, y0, name))
    for local in range(per):
        spots[local] = (x0 + f.inset + (local % cols) * s, y0 + f.label_h + (local // cols) * s)
    _summary_grid(f, layout, y0 + bh + f.gap, boxes, labels)
    return detailed, s, boxes, labels, spots


def _summary_grid(f: Frame, layout: Layout, top: float, boxes: list, labels: list) -> None:
    """As many nodes' boxes as fit under node 0's, each with its rank range; the last one says
    how many more there are."""
    world, per, small = layout.world, min(layout.world, layout.gpus_per_node), f.box.small
    x0, y0, aw, ah = f.ranks
    last = layout.nodes - 1
    bw = 2 * f.inset + max(text_width(f"node {last}", small, True) + small * 0.6
                           + text_width(str(per), small, True),
                           text_width(f"ranks {world - per}–{world - 1}", small),
                           text_width(f"… {layout.nodes} more", small, True))
    bh, gap = 2 * small * LINE + f.inset * 1.2, f.gap
    per_row = max(1, int((aw + gap) // (bw + gap)))
    rows = max(0, int((y0 + ah - top + gap) // (bh + gap)))
    shown = min(layout.nodes, SUMMARY_NODES, per_row * rows)
    more = layout.nodes - shown
    if more and shown:
        shown -= 1
        more += 1
    for k in range(shown + (1 if more and per_row * rows else 0)):
        bx, by = x0 + (k % per_row) * (bw + gap), top + (k // per_row) * (bh + gap)
        last_box = k == shown
        boxes.append(Rect(round(bx, 1), round(by, 1), round(bw, 1), round(bh, 1),
                          cls="node-box more" if last_box else "node-box"))
        second = round(by + f.inset * 0.4 + small * 0.95 + small * LINE, 1)
        if last_box:
            labels.append(_node_label(f, bx, by, f"… {more} more"))
            labels.append(Text(round(bx + f.inset, 1), second, f"to rank {world - 1}", small))
            continue
        labels.append(_node_label(f, bx, by, f"node {k}"))
        labels.append(Text(round(bx + f.inset, 1), second,
                           f"ranks {k * per}–{k * per + per - 1}" if per > 1 else f"rank {k}",
                           small))


# -- the deck ------------------------------------------------------------------------------------

def headers(trace: ParallelismTrace) -> list[tuple[str, str]]:
    """Every frame's (header, title)."""
    groups_of = {f.over: f.group for f in trace.flows}
    n, out = len(trace.frames), []
    for k, frame in enumerate(trace.frames):
        title = PHASE_TITLES.get(frame.phase) or (
            f"{frame.axis} groups" if frame.phase == "groups"
            else f"Traffic of {groups_of.get(frame.axis, frame.axis)}")
        out.append((f"Step {k + 1} of {n} · {title}", title))   # counted from 1, as the player
    return out


def build_deck(trace: ParallelismTrace, box: Box = FIGURE, only: int | None = None) -> Deck:
    """Every frame, or only frame ``only`` (a standalone file), laid out for ``box``."""
    p, layout = trace.params, trace.layout
    area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
    named = headers(trace)
    top = heading(area, [h for h, _ in named], deck_title(p))
    legend = legend_rows(area, list(LEGEND))
    f = frame_of(area, top.top, round(legend.top - area.pad * 0.5, 1))
    detailed, s, boxes, labels, spots = _place(f, layout)
    lists = group_lists(layout)
    index = {kind: _group_index(layout.world, groups) for kind, groups in lists.items()}
    cells = []
    for r, (x, y) in spots.items():
        c = layout.coords(r)
        groups = " ".join(f"{k}{index[k][r]}" for k in index)
        tip = (f"rank {r} · node {r // layout.gpus_per_node}, local rank "
               f"{r % layout.gpus_per_node} · tp {c['tp']} cp {c['cp']} dp {c['dp']} pp "
               f"{c['pp']} ep {c['ep']}")
        cells.append(Cell(r, round(x, 1), round(y, 1), round(s, 1), groups, tip))
    font = area.head if s >= area.head * 2.8 else area.text
    geometry = Geometry(f, layout, detailed, {c.rank: c for c in cells}, tuple(boxes), lists,
                        font)
    frames = []
    for k, (header, title) in enumerate(named):
        if only is not None and k != only:
            continue
        frames.append(FrameView(k, header, trace.frames[k].axis or "",
                                tuple(frame_shapes(trace, k, geometry)),
                                title[0].lower() + title[1:]))
    titles = tuple(Text(x, y, line, area.small, "muted", "end") for x, y, line in top.title)
    return Deck(area.width, area.height, box, deck_title(p), titles,
                Text(top.header_x, top.header_y, "", area.head, weight=700), detailed,
                tuple(boxes), tuple(labels), tuple(cells), font, geometry.number_at,
                round(area.small * 0.6, 1), tuple(frames), legend_shapes(area, legend))


def _group_index(world: int, groups) -> list[int]:
    """rank → the index of its group in ``groups``."""
    out = [0] * world
    for i, g in enumerate(groups):
        for r in g:
            out[r] = i
    return out
