"""The /parallelism deck as drawable geometry: the ranks in their nodes (drawn once, under every
frame) and, for each frame of the trace, an overlay — the mesh's coordinates, one axis's groups,
the nodes, one group kind's traffic coloured by its link, the orders compared, the launch.

Each frame is a whole view: only the current one shows (the style hides the others), so a frame
draws everything it adds; the orders and torchrun frames cover the ranks with their own
background. Geometry lives here, markup in :mod:`app.scenes.parallelism.deck_svg`.

Drawing ranks: up to :data:`DETAILED_MAX` ranks every rank is a numbered cell inside its node's
box, when the cells can stay at least :data:`MIN_CELL` units wide; beyond, the drawing gives way
to a summary (node 0 in detail and a grid of nodes with their rank ranges), so that cells never
shrink into illegibility. Ranks carry no colour (they are numbered); the colours are the axes'
(AXIS_COLOURS) and the links' (LINK_COLOURS), each labelled, so a colour means one thing.

The viewBox is 1200 × 680 units and no text is under 15 units: shown 960 px wide, 12 px.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from functools import lru_cache

from app.draw.fmt import coord
from app.draw.shapes import Path, Rect, Text
from app.sim.parallelism.layout import DENSE_AXES, Layout
from app.sim.parallelism.simulate import ParallelismTrace

WIDTH, HEIGHT = 1200, 680
AREA = (20.0, 62.0, 770.0, 548.0)          # the ranks: x, y, width, height
PANEL_X, PANEL_W = 812.0, 368.0            # the right-hand panel
LEGEND_Y = 646.0
FONT, SMALL = 19.0, 16.0                   # headings and body text (the smallest)
DETAILED_MAX = 64
MIN_CELL = 36.0
MAX_CELL = 150.0
SUMMARY_NODES = 24
KINDS = ("tp", "cp", "ep", "dp", "pp")
"""The hover strips of a cell, left to right, and the order of the legend."""

AXIS_COLOURS = {"tp": "#7570b3", "cp": "#c99400", "ep": "#e7298a", "dp": "#1f78b4",
                "pp": "#a6761d", "dp_cp": "#1f78b4", "edp": "#e7298a"}
"""One colour per axis (ColorBrewer Dark2 and Paired picks, none of them a rank colour: ranks are
numbered, never coloured, in this deck)."""
LINK_COLOURS = {"nvlink": "#1b9e77", "infiniband": "#d95f02"}
LINK_NAMES = {"nvlink": "NVLink", "infiniband": "InfiniBand"}
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
    title: str
    detailed: bool
    nodes: tuple[Rect, ...]
    node_labels: tuple[Text, ...]
    cells: tuple[Cell, ...]
    cell_font: float
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


# -- where the ranks go --------------------------------------------------------------------------

def _fit(nodes: int, per: int) -> tuple[float, int, int]:
    """(cell size, node columns, cells per node row) that make the cells largest."""
    _, _, aw, ah = AREA
    cols = min(per, 8)
    rows = math.ceil(per / cols)
    best = (0.0, 1, cols)
    for nc in range(1, nodes + 1):
        nr = math.ceil(nodes / nc)
        s = min(((aw - (nc - 1) * 12) / nc - 14) / cols,
                ((ah - (nr - 1) * 12) / nr - 34) / rows, MAX_CELL)
        if s > best[0] + 0.5:
            best = (s, nc, cols)
    return best


def _place(layout: Layout):
    """Node boxes, their labels and the cells of the drawn ranks."""
    world, per = layout.world, min(layout.world, layout.gpus_per_node)
    x0, y0, aw, ah = AREA
    s, nc, cols = _fit(layout.nodes, per)
    detailed = world <= DETAILED_MAX and s >= MIN_CELL
    boxes, labels, spots = [], [], {}
    if detailed:
        rows = math.ceil(per / cols)
        bw, bh = cols * s + 14, rows * s + 34
        nr = math.ceil(layout.nodes / nc)
        ox = x0 + (aw - (nc * bw + (nc - 1) * 12)) / 2
        oy = y0 + (ah - (nr * bh + (nr - 1) * 12)) / 2
        for n in range(layout.nodes):
            bx, by = ox + (n % nc) * (bw + 12), oy + (n // nc) * (bh + 12)
            boxes.append(Rect(round(bx, 1), round(by, 1), round(bw, 1), round(bh, 1), cls="node-box"))
            labels.append(Text(bx + 8, by + 20, f"node {n}", SMALL, "muted", weight=700))
            for local in range(per):
                r = n * per + local
                spots[r] = (bx + 7 + (local % cols) * s, by + 27 + (local // cols) * s)
        return detailed, s, boxes, labels, spots
    # summary: node 0 whole, then the nodes as boxes with their rank ranges
    cols = min(per, 16)
    rows = math.ceil(per / cols)
    s = min(48.0, (aw - 14) / cols, (200 - 34) / rows)
    bw, bh = cols * s + 14, rows * s + 34
    boxes.append(Rect(x0, y0, round(bw, 1), round(bh, 1), cls="node-box"))
    labels.append(Text(x0 + 8, y0 + 20, f"node 0 (ranks 0–{per - 1}), every rank", SMALL,
                       "muted", weight=700))
    for local in range(per):
        spots[local] = (x0 + 7 + (local % cols) * s, y0 + 27 + (local // cols) * s)
    top = y0 + bh + 18
    bw2, bh2, gap = 150.0, 52.0, 8.0
    per_row = int((aw + gap) // (bw2 + gap))
    shown = min(layout.nodes, SUMMARY_NODES)
    more = layout.nodes - shown
    if more:
        shown -= 1
    for k in range(shown):
        bx, by = x0 + (k % per_row) * (bw2 + gap), top + (k // per_row) * (bh2 + gap)
        boxes.append(Rect(round(bx, 1), round(by, 1), bw2, bh2, cls="node-box"))
        labels.append(Text(bx + 8, by + 20, f"node {k}", SMALL, "muted", weight=700))
        first, last = k * per, k * per + per - 1
        labels.append(Text(bx + 8, by + 43, f"ranks {first}–{last}" if per > 1 else f"rank {k}",
                           SMALL, "ink"))
    if more:
        k = shown
        bx, by = x0 + (k % per_row) * (bw2 + gap), top + (k // per_row) * (bh2 + gap)
        boxes.append(Rect(round(bx, 1), round(by, 1), bw2, bh2, cls="node-box more"))
        labels.append(Text(bx + 8, by + 20, f"… {more} more", SMALL, "muted", weight=700))
        labels.append(Text(bx + 8, by + 43, f"to rank {world - 1}", SMALL, "ink"))
    return detailed, s, boxes, labels, spots


def node_box_of(deck_nodes: tuple[Rect, ...], node: int, detailed: bool) -> Rect | None:
    """The box drawing ``node`` (in a summary, box 0 is node 0's detail, box k+1 node k)."""
    index = node if detailed else node + 1
    if index < len(deck_nodes) and "more" not in deck_nodes[index].cls:
        return deck_nodes[index]
    return None


# -- the deck ------------------------------------------------------------------------------------

def build_deck(trace: ParallelismTrace, only: int | None = None) -> Deck:
    """Every frame, or only frame ``only`` (a standalone file)."""
    p, layout = trace.params, trace.layout
    detailed, s, boxes, labels, spots = _place(layout)
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
    cell_font = round(max(SMALL, min(34.0, s * 0.4)), 1)
    geometry = _Geometry(layout, detailed, {c.rank: c for c in cells}, tuple(boxes), lists)
    frames = []
    n = len(trace.frames)
    for k, frame in enumerate(trace.frames):
        if only is not None and k != only:
            continue
        groups_of = {f.over: f.group for f in trace.flows}
        title = PHASE_TITLES.get(frame.phase) or (
            f"{frame.axis} groups" if frame.phase == "groups"
            else f"Traffic of {groups_of.get(frame.axis, frame.axis)}")
        header = f"Step {k + 1} of {n} · {title}"   # counted from 1, as the player counts
        shapes = _frame_shapes(trace, k, geometry)
        frames.append(FrameView(k, header, frame.axis or "", tuple(shapes),
                                title[0].lower() + title[1:]))
    legend = _legend()
    return Deck(WIDTH, HEIGHT, deck_title(p), detailed, tuple(boxes), tuple(labels), tuple(cells),
                cell_font, tuple(frames), legend)


def _group_index(world: int, groups) -> list[int]:
    """rank → the index of its group in ``groups``."""
    out = [0] * world
    for i, g in enumerate(groups):
        for r in g:
            out[r] = i
    return out


@dataclass(frozen=True)
class _Geometry:
    layout: Layout
    detailed: bool
    cells: dict
    boxes: tuple
    groups: dict

    def centre(self, r: int) -> tuple[float, float]:
        """Where a group's links meet a cell: near its top, above the rank number."""
        c = self.cells[r]
        return c.x + c.s / 2, c.y + min(12.0, c.s * 0.15)


def _frame_shapes(trace: ParallelismTrace, k: int, g: _Geometry) -> list:
    frame = trace.frames[k]
    phase = frame.phase
    if phase == "mesh":
        return _mesh(trace, g)
    if phase == "groups":
        return _groups(trace, g, frame.axis)
    if phase == "nodes":
        return _nodes(trace, g)
    if phase == "traffic":
        return _traffic(trace, g, frame.axis)
    if phase == "orders":
        return _orders(trace)
    return _torchrun(trace)


def _panel_text(lines: list[tuple[str, float, str, int, bool]], y: float = 84.0) -> list[Text]:
    """Panel lines: (text, size, class, weight, monospace); long lines wrap to the panel."""
    out = []
    for text, size, cls, weight, mono in lines:
        if not text:
            y += size * 0.6
            continue
        per_char = size * (0.61 if mono else 0.55)
        for piece in textwrap.wrap(text, max(8, int(PANEL_W / per_char)),
                                   subsequent_indent="    " if mono else ""):
            out.append(Text(PANEL_X, round(y, 1), piece, size, cls, weight=weight, mono=mono))
            y += size * 1.35
    return out


def _formula(layout: Layout) -> str:
    """rank = tp_i + 2·(cp_i + 1·(dp_i + 2·pp_i)) in this layout's order and sizes."""
    size = layout.dense_sizes()
    names = [n for n in layout.names if n != "ep"]
    text = f"{names[-1]}"
    for name in reversed(names[:-1]):
        text = f"{name} + {size[name]}·({text})"
    return "rank = " + text


def _cell_notes(g: _Geometry, axis: str | None, coords: bool) -> list:
    """The text under each cell's rank number: its coordinate on ``axis``, or (mesh frame,
    large cells) all four dense coordinates."""
    out = []
    for c in g.cells.values():
        if c.s < 56:
            break
        co = g.layout.coords(c.rank)
        cx = c.x + c.s / 2
        if coords and c.s >= 80:
            out.append(Text(cx, c.y + c.s * 0.66, f"t{co['tp']} c{co['cp']}", SMALL, "muted",
                            "middle"))
            out.append(Text(cx, c.y + c.s * 0.66 + 17, f"d{co['dp']} p{co['pp']}", SMALL, "muted",
                            "middle"))
        elif axis:
            out.append(Text(cx, c.y + c.s * 0.78, f"{axis} {co[axis]}", SMALL, "muted", "middle"))
    return out


def _mesh(trace, g: _Geometry) -> list:
    layout = trace.layout
    shape, names = layout.torch_mesh()
    size = layout.size
    last = layout.world - 1
    co = layout.coords(last)
    lines = [
        (f"arange({layout.world}).reshape", FONT, "ink", 700, False),
        (f"Order {trace.params.order}: the first name varies fastest (ep lives in the "
         f"expert layers' mesh).", SMALL, "ink", 400, False),
        ("", SMALL, "", 400, False),
        (_formula(layout), SMALL, "ink", 700, True),
        ("", SMALL, "", 400, False),
        (f"rank {last} → tp {co['tp']}, cp {co['cp']}, dp {co['dp']}, pp {co['pp']}; ep "
         f"{co['ep']}", SMALL, "ink", 400, False),
        ("", SMALL, "", 400, False),
        ("torch (last dimension fastest):", SMALL, "muted", 400, False),
        (f'init_device_mesh("cuda", {tuple(shape)}, mesh_dim_names={names})', SMALL, "ink", 400,
         True),
        ("", SMALL, "", 400, False),
        (f"tp {size['tp']} × cp {size['cp']} × dp {size['dp']} × pp {size['pp']} = "
         f"{layout.world}", SMALL, "ink", 700, False),
    ]
    out: list = _panel_text(lines)
    out += _cell_notes(g, None, coords=True)
    if g.detailed and next(iter(g.cells.values())).s >= 80:
        out.append(Text(PANEL_X, 560, "In each cell: t c / d p = its tp, cp, dp, pp "
                                      "coordinates.", SMALL, "muted"))
    return out


def _member_path(g: _Geometry, group: tuple[int, ...]) -> list[tuple[float, float]]:
    return [g.centre(r) for r in group if r in g.cells]


def _arcs(points: list[tuple[float, float]]) -> list[str]:
    """Curved links between consecutive members (bowed, so a link never runs through a cell it
    does not join)."""
    out = []
    for (x1, y1), (x2, y2) in zip(points, points[1:]):
        dx, dy = x2 - x1, y2 - y1
        length = math.hypot(dx, dy) or 1
        bow = min(0.25 * length, 34)
        mx, my = (x1 + x2) / 2 + dy / length * bow, (y1 + y2) / 2 - dx / length * bow
        out.append(f"M{coord(x1)},{coord(y1)} Q{coord(mx)},{coord(my)} {coord(x2)},{coord(y2)}")
    return out


def _group_shapes(g: _Geometry, kind: str, colour_of) -> list:
    """Every group of ``kind`` as dots and arcs on the drawn cells; the first group (rank 0's)
    outlined. ``colour_of(a, b)`` → (colour, dashed) of the link between ranks a and b."""
    layout = g.layout
    groups = g.groups[kind]
    out: list = []
    if len(groups[0]) < 2:
        return out
    gpn = layout.gpus_per_node
    for i, group in enumerate(groups):
        drawn = [r for r in group if r in g.cells]
        if len(drawn) < 1:
            continue
        points = _member_path(g, tuple(drawn))
        for (a, b), d in zip(zip(drawn, drawn[1:]), _arcs(points)):
            colour, dashed = colour_of(a, b)
            out.append(Path(d, stroke=colour, width=4.5 if i == 0 else 3.0, dashed=dashed,
                            cls="conn first" if i == 0 else "conn"))
        if i == 0:
            for r in drawn:
                c = g.cells[r]
                out.append(Rect(c.x + 1, c.y + 1, c.s - 2, c.s - 2, cls="first-member",
                                stroke=colour_of(group[0], group[-1])[0]))
    if not g.detailed:   # the first group's other nodes, outlined in the summary grid
        first = groups[0]
        touched: dict[int, int] = {}
        for r in first:
            touched[r // gpn] = touched.get(r // gpn, 0) + 1
        colour = colour_of(first[0], first[-1])[0]
        for node, count in touched.items():
            box = node_box_of(g.boxes, node, False)
            if box is not None and node > 0:
                out.append(Rect(box.x, box.y, box.w, box.h, cls="first-node", stroke=colour))
                out.append(Text(box.x + box.w - 8, box.y + 20, f"{count}", SMALL, "ink", "end",
                                700))
    return out


def _axis_colour(kind: str):
    colour = AXIS_COLOURS[kind]
    return lambda a, b: (colour, False)


def _groups(trace, g: _Geometry, axis: str) -> list:
    layout = g.layout
    groups = g.groups[axis]
    size = len(groups[0])
    out: list = _group_shapes(g, axis, _axis_colour(axis))
    colour = AXIS_COLOURS[axis]
    crosses = layout.crosses_nodes(axis)
    head = [(f"{axis}: {len(groups)} group{'s' if len(groups) > 1 else ''} of {size}", FONT, "ink",
             700, False)]
    if size == 1:
        head.append((f"{axis} = 1: every rank is alone on this axis.", SMALL, "ink", 400, False))
    else:
        head.append(("crosses nodes → InfiniBand" if crosses
                     else "inside one node → NVLink", SMALL, "ink", 700, False))
        head.append(("", SMALL, "", 400, False))
        shown = groups[:8]
        for grp in shown:
            text = repr(list(grp))
            if len(text) > 38:
                text = text[:34] + " …]"
            head.append((text, SMALL, "ink", 400, True))
        if len(groups) > len(shown):
            head.append((f"… {len(groups) - len(shown)} more", SMALL, "muted", 400, False))
        head.append(("", SMALL, "", 400, False))
        head.append(("thick: the first group (rank 0's)", SMALL, "muted", 400, False))
    out.insert(0, Rect(PANEL_X, 66, 26, 8, cls="swatch", fill=colour))
    out += [t if t.y > 84 else Text(PANEL_X + 34, t.y, t.text, t.size, t.cls, weight=t.weight)
            for t in _panel_text(head)]
    out += _cell_notes(g, axis if axis in DENSE_AXES + ("ep",) else None, coords=False)
    return out


def _link_colour(layout: Layout):
    gpn = layout.gpus_per_node

    def colour(a: int, b: int) -> tuple[str, bool]:
        link = "infiniband" if a // gpn != b // gpn else "nvlink"
        return LINK_COLOURS[link], link == "infiniband"
    return colour


def _nodes(trace, g: _Geometry) -> list:
    layout = g.layout
    out: list = []
    for box in g.boxes:
        if "more" not in box.cls:
            out.append(Rect(box.x, box.y, box.w, box.h, cls="node-focus"))
    lines = [(f"{layout.nodes} node{'s' if layout.nodes > 1 else ''} × "
              f"{min(layout.world, layout.gpus_per_node)} GPUs", FONT, "ink", 700, False),
             (f"rank r → node r // {layout.gpus_per_node}, local rank r % "
              f"{layout.gpus_per_node}", SMALL, "ink", 400, True),
             ("", SMALL, "", 400, False)]
    for kind in KINDS:
        size = len(g.groups[kind][0])
        if size == 1:
            status = "size 1, no traffic"
        else:
            status = "crosses nodes: InfiniBand" if layout.crosses_nodes(kind) else \
                "inside nodes: NVLink"
        lines.append((f"{kind} ({size}): {status}", SMALL, "ink", 400, False))
    lines += [("", SMALL, "", 400, False),
              ("Inside a node GPUs talk over NVLink; between nodes over InfiniBand, about "
               "10× slower.", SMALL, "muted", 400, False)]
    return out + _panel_text(lines)


def _traffic(trace, g: _Geometry, over: str) -> list:
    layout = g.layout
    flow = next(f for f in trace.flows if f.over == over)
    out: list = _group_shapes(g, over, _link_colour(layout))
    params = trace.params
    gbs = params.inter_node_gbs if flow.link == "infiniband" else params.intra_node_gbs
    lines = [(f"{flow.group}: {flow.collective}", FONT, "ink", 700, False),
             (f"{flow.bytes_per_step / 1e9:.3g} GB per rank per step over "
              f"{LINK_NAMES[flow.link]} ({gbs:g} GB/s → "
              f"{flow.bytes_per_step / (gbs * 1e9) * 1e3:.3g} ms)", SMALL, "ink", 700, False),
             ("", SMALL, "", 400, False)]
    out += _panel_text(lines)
    # every group kind's bytes, this one outlined
    top = 200.0
    biggest = max(f.bytes_per_step for f in trace.flows) or 1
    out.append(Text(PANEL_X, top - 12, "bytes per rank per step, every group", SMALL, "muted"))
    for i, f in enumerate(trace.flows):
        y = top + i * 40
        w = max(2.0, (PANEL_W - 150) * f.bytes_per_step / biggest)
        out.append(Text(PANEL_X, y + 20, f.group, SMALL, "ink", weight=700))
        out.append(Rect(PANEL_X + 48, y + 4, round(w, 1), 22,
                        cls="bar " + f.link + (" current-bar" if f is flow else ""),
                        fill=LINK_COLOURS[f.link]))
        out.append(Text(PANEL_X + 56 + w, y + 20, f"{f.bytes_per_step / 1e9:.3g} GB", SMALL,
                        "ink", weight=700 if f is flow else 400))
    y = top + len(trace.flows) * 40 + 16
    out += _panel_text([(flow.what + ".", SMALL, "muted", 400, False)], y)
    return out


def _cover() -> Rect:
    return Rect(0, 50, WIDTH, LEGEND_Y - 70, cls="cover")


def _orders(trace) -> list:
    out: list = [_cover()]
    orders = trace.orders
    valid = [o for o in orders if o.valid]
    biggest = max((o.inter_node_bytes for o in valid), default=0) or 1
    x0, top = 40.0, 92.0
    out.append(Text(x0, top - 14, "InfiniBand bytes per rank per step, by order (the slowest "
                                  "link's load)", FONT, "ink", weight=700))
    bar_x, bar_w = x0 + 200, 520.0
    for i, o in enumerate(orders):
        y = top + 12 + i * 50
        chosen = o.order == trace.params.order
        out.append(Text(x0, y + 22, o.order, FONT, "ink", weight=700 if chosen else 400,
                        mono=True))
        if not o.valid:
            out.append(Text(bar_x, y + 21, "not allowed: the expert and dense layers would get "
                                           "different pipeline stages", SMALL, "muted"))
            continue
        w = max(2.0, bar_w * o.inter_node_bytes / biggest)
        out.append(Rect(bar_x, y + 4, round(w, 1), 28,
                        cls="bar infiniband" + (" current-bar" if chosen else ""),
                        fill=LINK_COLOURS["infiniband"]))
        crossing = ", ".join(o.crossing) if o.crossing else "nothing"
        out.append(Text(bar_x + w + 10, y + 22,
                        f"{o.inter_node_bytes / 1e9:.3g} GB, {o.inter_node_s * 1e3:.3g} ms · "
                        f"crosses: {crossing}" + ("   ← chosen" if chosen else ""),
                        SMALL, "ink", weight=700 if chosen else 400))
    y = top + 12 + len(orders) * 50 + 30
    for piece in textwrap.wrap(trace.why_tp_first, 112):
        out.append(Text(x0, y, piece, SMALL + 1, "ink"))
        y += 25
    return out


def _torchrun(trace) -> list:
    out: list = [_cover()]
    run, layout = trace.launch, trace.layout
    x0, y = 40.0, 88.0
    shown = run.commands[:3]
    out.append(Text(x0, y, f"On each of the {layout.nodes} node{'s' if layout.nodes > 1 else ''}"
                           ":", FONT, "ink", weight=700))
    y += 26
    for command in shown:
        head, _, rest = command.partition(" --rdzv-backend")
        out.append(Text(x0, y, head + " \\", SMALL, "ink", mono=True))
        out.append(Text(x0 + 30, y + 20, "--rdzv-backend" + rest, SMALL, "ink", mono=True))
        y += 46
    if len(run.commands) > len(shown):
        out.append(Text(x0, y - 6, f"… and {len(run.commands) - len(shown)} more nodes, each "
                                   f"with its --node-rank", SMALL, "muted"))
        y += 18
    y += 10
    out.append(Text(x0, y, "What each process is told", FONT, "ink", weight=700))
    y += 26
    columns = (("RANK", 0), ("LOCAL_RANK", 90), ("WORLD_SIZE", 220), ("node", 350),
               ("MASTER_ADDR:PORT", 430), ("device", 640))
    for name, dx in columns:
        out.append(Text(x0 + dx, y, name, SMALL, "muted", weight=700, mono=True))
    rows = run.processes[:6]
    for proc in rows:
        y += 21
        values = (proc.rank, proc.local_rank, proc.world_size, proc.node,
                  f"{proc.master_addr}:{proc.master_port}", proc.device)
        for (name, dx), v in zip(columns, values):
            out.append(Text(x0 + dx, y, str(v), SMALL, "ink", mono=True))
    if len(run.processes) > len(rows):
        y += 21
        out.append(Text(x0, y, f"… {len(run.processes) - len(rows)} more processes: RANK = node"
                               f" × {min(layout.world, layout.gpus_per_node)} + LOCAL_RANK",
                        SMALL, "muted"))
    y += 34
    out.append(Text(x0, y, "Then every process builds its groups:", FONT, "ink", weight=700))
    for call in run.device_mesh:
        y += 22
        out.append(Text(x0, y, call, SMALL, "ink", mono=True))
    return out


def _legend() -> tuple:
    out: list = []
    x = 22.0
    for link in ("nvlink", "infiniband"):
        out.append(Path(f"M{coord(x)},{coord(LEGEND_Y)} h30", stroke=LINK_COLOURS[link],
                        width=4.0, dashed=link == "infiniband", cls="legend-line"))
        label = f"{LINK_NAMES[link]} (inside a node)" if link == "nvlink" else \
            f"{LINK_NAMES[link]} (between nodes)"
        out.append(Text(x + 38, LEGEND_Y + 5, label, SMALL, "muted"))
        x += 38 + len(label) * 8.9 + 28
    out.append(Text(x, LEGEND_Y + 5, "axes:", SMALL, "muted"))
    x += 46
    for kind in KINDS:
        out.append(Rect(x, LEGEND_Y - 5, 22, 10, cls="swatch", fill=AXIS_COLOURS[kind]))
        out.append(Text(x + 28, LEGEND_Y + 5, kind, SMALL, "muted"))
        x += 64
    out.append(Text(x + 4, LEGEND_Y + 5, "· hover a rank", SMALL, "muted"))
    return tuple(out)
