"""The collective deck's regions in its box and its topology (see :mod:`app.scenes.collective.deck`):
the header and title on top, the legend's rows at the bottom, and between them the topology — a
ring (its machines' arcs and labels beside it) or the two trees of the double binary tree — on
the left of the buffers' grid; each step's arrows, labelled where the label finds a free spot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.draw.box import Box
from app.draw.geometry import Point, arrow, on_circle
from app.draw.layout import LINE, Spots, heading, legend_rows, text_box
from app.draw.palette import rank_colour, text_on
from app.draw.shapes import Label
from app.draw.text import text_width
from app.draw.widen import least_box
from app.sim.collectives.schedules import dtree_parents, depths
from app.sim.collectives.simulate import CollectiveTrace
from app.sim.mesh import node_of

MIN_WIDTH, MIN_HEIGHT = 600, 320
"""The smallest box the deck is laid out for: a narrower frame (a phone) scrolls it; at large
type it is laid out wider for its headers and taller for its ring and rows
(:func:`least_box`)."""
STRIPE_LIMIT = 8
"""Up to this many ranks a partial sum is drawn as stripes of its ranks' colours (the legend
says so); beyond, as a blue whose depth is the share of ranks summed."""


@dataclass(frozen=True)
class Node:
    rank: int
    x: float
    y: float
    r: float
    fill: str
    ink: str
    label: str
    inside: bool          # label inside the circle (else beside it)
    lx: float
    ly: float


@dataclass(frozen=True)
class Line:
    d: str
    dashed: bool


@dataclass(frozen=True)
class Arrow:
    d: str
    head: str
    colour: str
    width: float
    dashed: bool
    label: str
    lx: float
    ly: float
    size: float = 16.0
    """the label's size"""


@dataclass(frozen=True)
class Layout:
    """Where the deck's parts go in its box: the header and title on top, the legend's rows at
    the bottom, between them the topology (a square on the left) and the buffers' grid, with
    its row labels, column labels and the area's label above it."""

    box: Box
    width: int
    height: int
    text: float
    small: float
    header: tuple[float, float, float]
    """x, baseline and size of the step's header"""
    title: tuple[tuple[float, float, str], ...]
    legend: tuple[tuple[float, float], ...]
    swatch: float
    topo: tuple[float, float, float, float]
    """left, top, right, bottom of the topology's region"""
    area_y: float
    """baseline of the area labels over the grid"""
    column_y: float
    """baseline of the column labels"""
    grid: tuple[float, float, float, float]
    """left, top, right, bottom of the buffers' grid"""
    row_label_x: float
    """where the row labels end (right-aligned); their swatches sit left of them"""
    swatch_x: float


def deck_title(p) -> str:
    return f"{p.op} · {p.algorithm.replace('_', '-')} · {p.world} ranks · {p.count} elements"



def _legend_items(trace: CollectiveTrace) -> list[tuple[str, str]]:
    p = trace.params
    items = [("stripes", "striped: sum of those ranks' inputs") if p.world <= STRIPE_LIMIT
             else ("blues", "blue: partial sum, darker = more ranks"),
             ("complete", "grey: sum of every rank's input"),
             ("empty", "dashed: nothing received yet")]
    if p.gpus_per_node < p.world:
        items.append(("dashed", "dashed link: crosses nodes"))
    return items



def headers(trace) -> list[str]:
    """Each frame's header: "Before the collective", then "Communication step k of N · phase"
    (the collective's own steps, named apart from the player's "step")."""
    n_steps = len(trace.frames) - 1
    return ["Before the collective"] + [
        f"Communication step {k} of {n_steps} · {f.phase}" for k, f in enumerate(trace.frames) if k]


def layout(trace: CollectiveTrace, box: Box) -> Layout:
    """The regions of the deck in ``box`` (see :class:`Layout`)."""
    p = trace.params
    every_header, title = headers(trace), deck_title(p)
    legend_texts = [t for _, t in _legend_items(trace)]

    def need(a: Box) -> float:
        """The top band, the legend, and between them a body as tall as a ring of rank
        numbers and its arrows' labels needs (nine labels) and as the grid's labels and rows
        (up to 8 a rank's name apart, more a number every 32 rows a label apart)."""
        grid = a.small * (0.9 + LINE + 0.6) + a.text * 1.2 * max(min(p.world, 8), p.world / 32)
        return (heading(a, every_header, title).top + max(a.text * 9, grid) + a.pad * 0.6
                + a.height - legend_rows(a, legend_texts).top)

    area = least_box(box, MIN_WIDTH, MIN_HEIGHT, every_header, need)
    width, height = area.width, area.height
    pad, text, small = area.pad, area.text, area.small
    top = heading(area, every_header, title)
    legend = legend_rows(area, legend_texts)
    body_top, body_bottom = top.top, legend.top - pad * 0.6
    # the topology: as tall as the body, a little wider (the machines' labels sit beside the
    # ring at its sides), at most 36 % of the width
    tall = body_bottom - body_top
    side = min(tall + 2 * text_width("node 7", small), width * 0.36)
    topo = (pad, body_top, pad + side, body_bottom)
    area_y = body_top + small * 0.9
    column_y = area_y + small * LINE
    grid_top = column_y + small * 0.6
    longest = f"rank {p.world - 1}" if p.world <= 16 else str(p.world - 1)
    swatch_r = min(text * 0.45, 9.0)
    label_w = text_width(longest, text) + small * 0.6 + 2 * swatch_r + small * 0.5
    grid_left = topo[2] + pad + label_w
    row_label_x = grid_left - small * 0.6
    swatch_x = row_label_x - text_width(longest, text) - small * 0.5 - swatch_r
    return Layout(box, width, height, text, small, (top.header_x, top.header_y, area.head),
                  top.title, legend.at, legend.swatch,
                  tuple(round(v, 1) for v in topo), round(area_y, 1), round(column_y, 1),
                  (round(grid_left, 1), round(grid_top, 1), round(width - pad, 1),
                   round(body_bottom, 1)),
                  round(row_label_x, 1), round(swatch_x, 1))


def _ring(lay: Layout, world: int, arcs: bool) -> tuple[float, float, float, float]:
    """Centre, ring radius and node radius of the ring in the topology's region: room outside
    the ring for the node arcs and their labels where ranks share machines."""
    left, top, right, bottom = lay.topo
    cx, cy = (left + right) / 2, (top + bottom) / 2
    half = min(right - left, bottom - top) / 2
    node_r = min(lay.text * 1.6, max(3.0, 0.8 * math.pi * half * 0.7 / world))
    label = text_width("node 7", lay.small) + lay.small * 0.6   # beside the arc at the sides
    above = node_r + (8 + lay.small * 1.7 if arcs else 4)
    beside = node_r + (8 + label if arcs else 4)
    ring_r = max(min((bottom - top) / 2 - above, (right - left) / 2 - beside), half * 0.5)
    # nodes leave room between them for an arrow (large type in a small ring)
    node_r = min(node_r, 0.8 * math.pi * ring_r / world, ring_r * 0.42)
    return cx, cy, ring_r, node_r


def _node_label(world: int, node_r: float, lay: Layout) -> tuple[bool, float]:
    """Whether rank numbers go inside their circles, and at which size."""
    size = min(node_r * 0.95, lay.text * 1.2)
    fits = (size >= lay.small and node_r * 2 - 4 >= text_width(str(world - 1), size, bold=True))
    return fits, round(size, 1) if fits else lay.small


def _topology(trace: CollectiveTrace, lay: Layout):
    """Node positions per lane (two lanes for the double binary tree), static lines, labels."""
    p = trace.params
    n = p.world
    lanes: list[dict[int, Point]] = []
    lines: list[Line] = []
    lane_labels: list[Label] = []
    small = lay.small
    left, top, right, bottom = lay.topo
    if p.algorithm == "tree":
        trees = dtree_parents(n)
        half = p.count // 2
        spans = [(0, half), (half, p.count)]
        span_w = right - left
        radius = min(lay.text * 1.4, 0.42 * span_w / n)
        lane_h = (bottom - top) / 2
        for k, parents in enumerate(trees):
            depth = depths(parents)
            lo_y = top + k * lane_h + small * 1.6 + radius
            hi_y = top + (k + 1) * lane_h - radius - (small * 1.4 if radius < small else 0)
            step_y = (hi_y - lo_y) / max(1, max(depth))
            lanes.append({r: Point(left + (r + 0.5) * span_w / n, lo_y + depth[r] * step_y)
                          for r in range(n)})
            for r, parent in enumerate(parents):
                if parent >= 0:
                    a, b = lanes[k][r], lanes[k][parent]
                    lines.append(Line(f"M{a.x:.1f},{a.y:.1f} L{b.x:.1f},{b.y:.1f}",
                                      node_of(r, p.gpus_per_node) != node_of(parent, p.gpus_per_node)))
            lo, hi = spans[k]
            lane_labels.append(Label(round(left, 1), round(top + k * lane_h + small * 0.9, 1),
                                     f"tree {k}: elements {lo}–{hi - 1}"
                                     if hi > lo else f"tree {k}: (no elements)", anchor="start",
                                     size=small))
        cx = cy = ring_r = 0.0
    else:
        cx, cy, ring_r, radius = _ring(lay, n, p.gpus_per_node < n)
        lanes.append({r: on_circle(r, n, cx, cy, ring_r) for r in range(n)})
        if p.algorithm == "ring":
            for r in range(n):
                a = arrow(lanes[0][r], lanes[0][(r + 1) % n], 0.12 if n > 2 else 0.3,
                          radius + 2, radius + 2, head=0.1)
                lines.append(Line(a.d, node_of(r, p.gpus_per_node)
                                  != node_of((r + 1) % n, p.gpus_per_node)))
    inside, size = _node_label(n, radius, lay)
    digits = text_width(str(n - 1), small, bold=True)
    if p.algorithm == "tree":
        spacing = (right - left) / n
    else:
        spacing = 2 * math.pi * max(ring_r - radius - small, 1) / n
    every = 1 if inside else next((e for e in (1, 2, 4, 8, 16) if e * spacing >= digits + small * 0.6), 32)
    nodes = []
    for lane in lanes:
        for r, pt in lane.items():
            colour = rank_colour(r, n)
            label = str(r) if r % every == 0 else ""
            if inside or p.algorithm == "tree":
                lx, ly = pt.x, pt.y + (0 if inside else radius + small * 0.85)
            else:  # inside the ring, so the node arcs outside stay clear
                spot = on_circle(r, n, cx, cy, ring_r - radius - small * 0.9)
                lx, ly = spot.x, spot.y
            nodes.append(Node(r, round(pt.x, 1), round(pt.y, 1), round(radius, 1), colour,
                              text_on(colour), label, inside, round(lx, 1), round(ly, 1)))
    return lanes, radius, nodes, lines, lane_labels, (cx, cy, ring_r), size


def _node_arcs(trace: CollectiveTrace, ring, radius: float, lay: Layout):
    """Arcs around the ring marking which ranks share a node (machine)."""
    p = trace.params
    n, per = p.world, p.gpus_per_node
    if p.algorithm == "tree" or per >= n:
        return ()
    cx, cy, ring_radius = ring
    arcs = []
    ring_r = ring_radius + radius + 8
    machines = math.ceil(n / per)
    label_r = ring_r + lay.small * 0.5
    # a machine's label where its arc is long enough for it
    named = machines <= 8 and 2 * math.pi * label_r * per / n >= text_width("node 7", lay.small) * 1.2
    for node in range(machines):
        first, last = node * per, min(n, (node + 1) * per) - 1
        a0 = -math.pi / 2 + 2 * math.pi * (first - 0.4) / n
        a1 = -math.pi / 2 + 2 * math.pi * (last + 0.4) / n
        x0, y0 = cx + ring_r * math.cos(a0), cy + ring_r * math.sin(a0)
        x1, y1 = cx + ring_r * math.cos(a1), cy + ring_r * math.sin(a1)
        large = 1 if a1 - a0 > math.pi else 0
        mid = (a0 + a1) / 2
        # outside the arc: to its right on the right side, to its left on the left side
        cos, sin = math.cos(mid), math.sin(mid)
        anchor = "start" if cos > 0.35 else "end" if cos < -0.35 else "middle"
        lift = lay.small * (0.35 + 0.55 * sin) if anchor == "middle" else lay.small * 0.35
        label = Label(round(cx + label_r * cos, 1), round(cy + label_r * sin + lift, 1),
                      f"node {node}" if named else "", anchor=anchor, size=lay.small)
        arcs.append((f"M{x0:.1f},{y0:.1f} A{ring_r:.1f},{ring_r:.1f} 0 {large} 1 {x1:.1f},{y1:.1f}",
                     label))
    return tuple(arcs)


def _arrows(trace: CollectiveTrace, k: int, lanes, radius: float, lay: Layout,
            links: dict | None = None, taken=()) -> tuple[Arrow, ...]:
    """Step ``k``'s arrows, one per (sender, receiver, lane); labelled with what they carry
    (up to 8 ranks and 8 arrows) where the label overlaps neither a rank's number (``taken``)
    nor another arrow's label."""
    p = trace.params
    n = p.world
    half = p.count // 2
    pairs: dict[tuple[int, int, int], list] = {}
    for m in trace.schedule.steps[k - 1].moves:
        if m.local:
            continue
        lane = (0 if m.dst_lo < half else 1) if p.algorithm == "tree" else 0
        pairs.setdefault((m.src, m.dst, lane), []).append(m)
    scale = lay.text / 15.5
    width = round((4.0 if n <= 8 else 3.0 if n <= 16 else 2.0) * min(1.6, max(0.8, scale)), 1)
    head = (14 if n <= 16 else 8) * min(1.6, max(0.8, scale))
    if p.algorithm != "tree":   # no longer than a third of the way between ring neighbours
        a, b = lanes[0][0], lanes[0][1 % n]
        head = min(head, max(4.0, (math.dist((a.x, a.y), (b.x, b.y)) - 2 * radius) / 3))
    labelled = n <= 8 and len(pairs) <= 8
    if p.algorithm == "tree":
        bend = 0.18
    elif p.algorithm == "ring" and p.op != "all_to_all":
        bend = 0.12 if n > 2 else 0.3
    else:
        bend = 0.14
    out = []
    links = {} if links is None else links
    spots = Spots(taken)
    left, top, right, bottom = lay.topo
    centre = Point((left + right) / 2, (top + bottom) / 2)
    for key, moves in pairs.items():
        src, dst, lane = key
        if not labelled:  # the same arrow every step it uses this link
            drawn = links.get((key, width))
            if drawn is None:
                a = arrow(lanes[lane][src], lanes[lane][dst], bend, radius + 3, radius + 3,
                          head=head)
                drawn = links[(key, width)] = Arrow(
                    a.d, a.head, rank_colour(src, n), width,
                    node_of(src, p.gpus_per_node) != node_of(dst, p.gpus_per_node),
                    "", round(a.mid.x, 1), round(a.mid.y, 1))
            out.append(drawn)
            continue
        a = arrow(lanes[lane][src], lanes[lane][dst], bend, radius + 3, radius + 3, head=head)
        elements = sum(m.length for m in moves)
        name = moves[0].label if len(moves) == 1 else f"{elements} elements"
        label = f"{name} {'+' if moves[0].reduce else ''}".strip()
        lx, ly = _label_spot(a.mid, label, centre, lay, spots)
        out.append(Arrow(a.d, a.head, rank_colour(src, n), width,
                         node_of(src, p.gpus_per_node) != node_of(dst, p.gpus_per_node),
                         label if lx is not None else "", lx or a.mid.x, ly or a.mid.y,
                         lay.small))
    return tuple(out)


def _label_spot(mid: Point, label: str, centre: Point, lay: Layout, spots: Spots):
    """Where an arrow's label goes: at the arrow's middle, else moved towards the topology's
    centre (a ring's inside is mostly empty) or away from it, a line at a time; (None, None)
    when no such place is free."""
    dx, dy = centre.x - mid.x, centre.y - mid.y
    length = math.hypot(dx, dy) or 1.0
    left, top, right, bottom = lay.topo
    for shift in (0.0, 1.2, 2.4, -1.2):
        x = mid.x + dx / length * shift * lay.small
        y = mid.y + dy / length * shift * lay.small + lay.small * 0.35
        spot = text_box(x, y, label, lay.small, "middle", bold=True)
        # within the topology's column: the rows' swatches and labels start right of it, the
        # header above it, the legend below
        inside = (left - lay.small <= spot[0] and spot[2] <= lay.swatch_x - lay.text * 0.5
                  and top - lay.small * 0.5 <= spot[1] and spot[3] <= bottom + lay.small * 0.5)
        if inside and spots.take(spot):
            return round(x, 1), round(y, 1)
    return None, None


def _taken(nodes, node_font: float, lay: Layout) -> list:
    """The boxes the topology's rank numbers cover (an arrow's label keeps clear of them)."""
    out = []
    for n in nodes:
        if n.inside:
            out.append((n.x - n.r, n.y - n.r, n.x + n.r, n.y + n.r))
        elif n.label:
            out.append(text_box(n.lx, n.ly + node_font * 0.35, n.label, node_font, "middle", True))
    return out
