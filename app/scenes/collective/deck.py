"""The collective scene as drawable geometry: a topology on the left, every rank's buffer on the
right, one overlay group per step.

The deck is drawn as layers: frame 0 holds the whole starting state and frame k only the cells
that step k changed, plus its arrows. Showing frames 0…k therefore shows the state after step k,
so a deck of 126 steps on 64 ranks stays small, the player switches frames by showing and hiding
groups, and a standalone SVG of step k is the same deck cut after group k.

Cells are coloured by whose inputs they contain: one rank → that rank's colour; a partial sum →
stripes of the contributing ranks (up to 8 ranks) or a blue whose depth is the share of ranks
summed (more ranks). Changed cells remember where their data came from, so the player can fly
them in from the sender's row.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from app.sim.collectives.schedules import dtree_parents, depths
from app.sim.collectives.simulate import CollectiveTrace
from app.sim.mesh import node_of
from app.draw.geometry import Point, arrow, on_circle
from app.draw.palette import BLUES, ramp, rank_colour, text_on

WIDTH, HEIGHT = 1280, 720
TOPO_CX, TOPO_CY = 250, 380
GRID_LEFT, GRID_RIGHT, GRID_TOP, GRID_BOTTOM = 575, 1262, 112, 652
MAX_COLUMNS = 64
MAX_DECK_CELLS = 16384
"""Most cells a deck draws over all its steps: past it (64 ranks exchanging hundreds of
elements, 9 MB of markup) columns hold longer runs of elements until it fits."""
STRIPE_LIMIT = 8
MERGE_RANKS = 33
"""From this many ranks a row is under 17 units high: no number or tip fits a cell, and a
frame's cells are drawn as a few paths (:attr:`Deck.merged`), 64 ranks' 12,000 cells in a
sixth of the markup."""
COMPLETE = "complete"
"""The fill of a value that sums every rank's input: a CSS class (grey, dark on light themes and
light on dark ones), so finished chunks stand out from partial sums in either theme."""
LEGEND_STRIPES = "legend-stripes"

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


@dataclass(frozen=True)
class Cell:
    x: float
    y: float
    w: float
    h: float
    fill: str             # a colour, "url(#…)" for stripes, or "" for empty
    text: str
    ink: str
    dx: float             # where the data flew in from, relative to the cell (0: not moved)
    dy: float
    tip: str              # shown on hover (static/js/tooltip.js)


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    cells: tuple[Cell, ...]
    arrows: tuple[Arrow, ...]
    unit: str = ""   # what this step is, for the player ("reduce-scatter, round 2 of 7")


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    colour: str = ""
    anchor: str = "middle"
    size: float = 16


@dataclass(frozen=True)
class Stripes:
    id: str
    colours: tuple[str, ...]


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    title: str
    nodes: tuple[Node, ...]
    lines: tuple[Line, ...]
    node_arcs: tuple[tuple[str, Label], ...]
    lane_labels: tuple[Label, ...]
    row_labels: tuple[Label, ...]
    row_swatches: tuple[Node, ...]
    column_labels: tuple[Label, ...]
    separators: tuple[tuple[float, float, float], ...]   # x, y0, y1
    area_labels: tuple[Label, ...]
    stripes: tuple[Stripes, ...]
    frames: tuple[FrameView, ...]
    legend: tuple[tuple[str, str, float], ...]
    font: float
    cell_stroke: float
    merged: bool = False
    """Each frame's cells drawn as one path per fill and flight (MERGE_RANKS and beyond): no
    cell carries a number or a tip at that size, so the same picture needs no element per
    cell."""


def _mask_ranks(mask: int, world: int) -> list[int]:
    return [r for r in range(world) if mask >> r & 1]


class _Palette:
    """Fills for source masks; collects the stripe patterns the deck needs."""

    def __init__(self, world: int):
        self.world = world
        self.stripes: dict[int, Stripes] = {}
        self._fills: dict[int, str] = {}  # by source mask: a deck asks for the same few often
        self._inks: dict[int, str] = {}
        if world <= STRIPE_LIMIT:  # the legend's sample: a sum of the first ranks
            sample = tuple(rank_colour(r, world) for r in range(min(world, 3)))
            self.stripes[-1] = Stripes(LEGEND_STRIPES, sample)

    def fill(self, mask: int) -> str:
        fill = self._fills.get(mask)
        if fill is None:
            fill = self._fills[mask] = self._fill(mask)
        return fill

    def _fill(self, mask: int) -> str:
        count = mask.bit_count()
        if not count:
            return ""
        if count == 1:
            return rank_colour(mask.bit_length() - 1, self.world)
        if count == self.world:
            return COMPLETE
        if self.world <= STRIPE_LIMIT:
            ranks = _mask_ranks(mask, self.world)
            if mask not in self.stripes:
                self.stripes[mask] = Stripes(f"sum-{mask:x}",
                                             tuple(rank_colour(r, self.world) for r in ranks))
            return f"url(#sum-{mask:x})"
        return ramp(BLUES[2:], count / self.world)

    def ink(self, mask: int) -> str:
        ink = self._inks.get(mask)
        if ink is None:
            ink = self._inks[mask] = self._ink(mask)
        return ink

    def _ink(self, mask: int) -> str:
        count = mask.bit_count()
        if count == 1:
            return text_on(rank_colour(mask.bit_length() - 1, self.world))
        if count == self.world:
            return ""  # the theme's, with the fill
        if count > 1 and self.world > STRIPE_LIMIT:
            return text_on(ramp(BLUES[2:], count / self.world))
        return "#000000"  # stripes: black text with a white halo (see CSS .num)


def ring_radius_for(world: int) -> float:
    return 170 if world <= 8 else 180


def _node_radius(world: int) -> float:
    return 26 if world <= 8 else 17 if world <= 16 else 10 if world <= 32 else 6


def _topology(trace: CollectiveTrace):
    """Node positions per lane (two lanes for the double binary tree), static lines, labels."""
    p = trace.params
    n = p.world
    radius = _node_radius(n)
    lanes: list[dict[int, Point]] = []
    lines: list[Line] = []
    lane_labels: list[Label] = []
    if p.algorithm == "tree":
        trees = dtree_parents(n)
        half = p.count // 2
        spans = [(0, half), (half, p.count)]
        radius = min(radius, 0.42 * 400 / n)
        for k, parents in enumerate(trees):
            depth = depths(parents)
            top, bottom = (112, 340) if k == 0 else (430, 650)
            step_y = (bottom - top) / max(1, max(depth))
            lanes.append({r: Point(40 + (r + 0.5) * 400 / n, top + depth[r] * step_y)
                          for r in range(n)})
            for r, parent in enumerate(parents):
                if parent >= 0:
                    a, b = lanes[k][r], lanes[k][parent]
                    lines.append(Line(f"M{a.x:.1f},{a.y:.1f} L{b.x:.1f},{b.y:.1f}",
                                      node_of(r, p.gpus_per_node) != node_of(parent, p.gpus_per_node)))
            lo, hi = spans[k]
            lane_labels.append(Label(24, top - 26, f"tree {k}: elements {lo}–{hi - 1}"
                                     if hi > lo else f"tree {k}: (no elements)", anchor="start",
                                     size=17))
    else:
        ring_radius = ring_radius_for(n)
        lanes.append({r: on_circle(r, n, TOPO_CX, TOPO_CY, ring_radius) for r in range(n)})
        if p.algorithm == "ring":
            for r in range(n):
                a = arrow(lanes[0][r], lanes[0][(r + 1) % n], 0.12 if n > 2 else 0.3,
                          radius + 2, radius + 2, head=0.1)
                lines.append(Line(a.d, node_of(r, p.gpus_per_node)
                                  != node_of((r + 1) % n, p.gpus_per_node)))
    nodes = []
    for lane in lanes:
        for r, pt in lane.items():
            colour = rank_colour(r, n)
            inside = radius >= 14
            every = 1 if n <= 32 else 4
            label = str(r) if inside or r % every == 0 else ""
            if inside or p.algorithm == "tree":
                lx, ly = pt.x, pt.y + (0 if inside else radius + 14)
            else:  # inside the ring, so the node arcs outside stay clear
                spot = on_circle(r, n, TOPO_CX, TOPO_CY, ring_radius_for(n) - radius - 14)
                lx, ly = spot.x, spot.y
            nodes.append(Node(r, round(pt.x, 1), round(pt.y, 1), radius, colour, text_on(colour),
                              label, inside, round(lx, 1), round(ly, 1)))
    return lanes, radius, nodes, lines, lane_labels


def _node_arcs(trace: CollectiveTrace, radius: float):
    """Arcs around the ring marking which ranks share a node (machine)."""
    p = trace.params
    n, per = p.world, p.gpus_per_node
    if p.algorithm == "tree" or per >= n:
        return ()
    arcs = []
    ring_r = ring_radius_for(n) + radius + 10
    for node in range(math.ceil(n / per)):
        first, last = node * per, min(n, (node + 1) * per) - 1
        a0 = -math.pi / 2 + 2 * math.pi * (first - 0.4) / n
        a1 = -math.pi / 2 + 2 * math.pi * (last + 0.4) / n
        x0, y0 = TOPO_CX + ring_r * math.cos(a0), TOPO_CY + ring_r * math.sin(a0)
        x1, y1 = TOPO_CX + ring_r * math.cos(a1), TOPO_CY + ring_r * math.sin(a1)
        large = 1 if a1 - a0 > math.pi else 0
        mid = (a0 + a1) / 2
        label_r = ring_r + 20
        label = Label(round(TOPO_CX + label_r * math.cos(mid), 1),
                      round(TOPO_CY + label_r * math.sin(mid) + 5, 1),
                      f"node {node}" if n // per <= 8 else "", size=16)
        arcs.append((f"M{x0:.1f},{y0:.1f} A{ring_r},{ring_r} 0 {large} 1 {x1:.1f},{y1:.1f}", label))
    return tuple(arcs)


def _columns(trace: CollectiveTrace, least: int = 1):
    """Display columns: (area, first element, last element + 1, x, width); a column holds
    ``least`` elements or more."""
    p = trace.params
    length = trace.schedule.layout.buffer_len
    areas = [(0, p.count), (p.count, 2 * p.count)] if p.op == "all_to_all" else [(0, length)]
    group = max(least, 1 if length <= 48 else math.ceil(length / MAX_COLUMNS))
    gap = 28 if len(areas) > 1 else 0
    per_area = [math.ceil((hi - lo) / group) for lo, hi in areas]
    width = min(84.0, (GRID_RIGHT - GRID_LEFT - gap * (len(areas) - 1)) / sum(per_area))
    columns, x = [], float(GRID_LEFT)
    for a, (lo, hi) in enumerate(areas):
        for start in range(lo, hi, group):
            columns.append((a, start, min(hi, start + group), round(x, 2), width))
            x += width
        x += gap
    return columns, group, width


def _drawn_cells(trace: CollectiveTrace, columns) -> int:
    """Cells a deck with these columns draws: every cell at step 0, then the changed ones."""
    starts = [start for _, start, _, _, _ in columns]
    end = columns[-1][2]
    values, filled, sources = trace.values, trace.filled, trace.sources
    changed = ((values[1:] != values[:-1]) | (filled[1:] != filled[:-1])
               | (sources[1:] != sources[:-1]))[:, :, :end]     # (steps, world, elements)
    if changed.shape[0] == 0:
        return trace.params.world * len(columns)
    per_cell = np.logical_or.reduceat(changed, starts, axis=2)
    return trace.params.world * len(columns) + int(per_cell.sum())


def build_deck(trace: CollectiveTrace, upto: int | None = None) -> Deck:
    """The deck of ``trace``: every frame, or frames 0…``upto`` (a standalone export)."""
    p = trace.params
    n = p.world
    last = len(trace.frames) - 1 if upto is None else upto
    lanes, radius, nodes, lines, lane_labels = _topology(trace)
    columns, group, col_w = _columns(trace)
    least = group
    while _drawn_cells(trace, columns) > MAX_DECK_CELLS and len(columns) > 2:
        # too many cells to send and draw (and none legible at that size): coarser columns,
        # each a run of elements, until the whole deck fits MAX_DECK_CELLS
        least *= 2
        columns, group, col_w = _columns(trace, least)
    row_h = min(76.0, (GRID_BOTTOM - GRID_TOP) / n)
    row_y = [GRID_TOP + r * row_h for r in range(n)]
    column_starts = [start for _, start, _, _, _ in columns]  # contiguous, in buffer order
    col_of_element = {}
    for index, (_, start, stop, _, _) in enumerate(columns):
        for e in range(start, stop):
            col_of_element[e] = index

    values, filled, sources = trace.values, trace.filled, trace.sources
    digits = len(str(int(values.max()))) if values.size else 1
    font = min(26.0, row_h * 0.5, col_w * 0.5)
    numbers = group == 1 and font >= 11 and digits * 0.62 * font < col_w - 4
    tips = n <= 16
    palette = _Palette(n)
    pad = 1.5 if col_w >= 8 and row_h >= 8 else 0.4

    # a cell's rectangle from per-column and per-row tables (the same roundings, once each)
    cell_x = [round(x + pad, 2) for _, _, _, x, _ in columns]
    cell_w = [round(w - 2 * pad, 2) for _, _, _, _, w in columns]
    cell_y = [round(y + pad, 2) for y in row_y]
    cell_h = round(row_h - 2 * pad, 2)
    merged = n >= MERGE_RANKS

    def cell(r: int, c: int, k: int, fly: tuple[float, float]) -> Cell:
        start = columns[c][1]
        x, y, w, h = cell_x[c], cell_y[r], cell_w[c], cell_h
        if not filled[k, r, start]:
            return Cell(x, y, w, h, "", "", "",
                        0, 0, f"rank {r} · element {start}: nothing yet" if tips else "")
        mask = int(sources[k, r, start])
        value = int(values[k, r, start])
        tip = ""
        if tips:
            who = _mask_ranks(mask, n)
            origin = (f"rank {who[0]}'s input" if len(who) == 1
                      else f"sum of ranks {_ranges(who)}")
            tip = f"rank {r} · element {start} = {value} ({origin})"
        return Cell(x, y, w, h, palette.fill(mask),
                    str(value) if numbers else "", palette.ink(mask), fly[0], fly[1], tip)

    frames = []
    links: dict = {}  # (src, dst, lane) → arrow geometry: a schedule uses the same few links
    n_steps = len(trace.frames) - 1
    phases = [f.phase for f in trace.frames]
    for k in range(last + 1):
        frame = trace.frames[k]
        if k == 0:
            cells = (_merge(trace, 0, [(r, c) for r in range(n) for c in range(len(columns))],
                            None, columns, row_y, cell_x, cell_y, cell_w, cell_h, palette)
                     if merged else
                     tuple(cell(r, c, 0, (0, 0)) for r in range(n) for c in range(len(columns))))
            arrows: tuple[Arrow, ...] = ()
            header = "Before the collective"
            unit = "before the collective"
        else:
            changed = ((values[k] != values[k - 1]) | (filled[k] != filled[k - 1])
                       | (sources[k] != sources[k - 1]))  # (world, buffer_len)
            # any element of each drawn column changed: (world, columns)
            changed_cells = np.logical_or.reduceat(changed[:, :columns[-1][2]], column_starts, axis=1)
            origin = _origins(trace.schedule.steps[k - 1], columns, col_of_element, row_y)
            where = list(zip(*map(np.ndarray.tolist, np.nonzero(changed_cells))))
            cells = (_merge(trace, k, where, origin, columns, row_y, cell_x, cell_y, cell_w,
                            cell_h, palette) if merged else
                     tuple(cell(r, c, k, _fly(origin.get((r, c)), columns[c][3], row_y[r]))
                           for r, c in where))
            arrows = _arrows(trace, k, lanes, radius, links)
            header = f"Communication step {k} of {n_steps} · {frame.phase}"
            # the round within its phase: a ring all-reduce is n − 1 rounds of reduce-scatter,
            # then n − 1 of all-gather
            unit = (f"{frame.phase}, round {phases[:k + 1].count(frame.phase)} of "
                    f"{phases.count(frame.phase)}")
        frames.append(FrameView(k, header, cells, arrows, unit))

    # a label every row while 16-unit type fits in one (12 px at 960 px wide), else every 2nd,
    # 4th or 8th row: fewer labels at a legible size, never shrunken ones
    every = next((e for e in (1, 2, 4, 8) if e * row_h >= 17), 16)
    row_labels = tuple(Label(GRID_LEFT - 14, round(row_y[r] + row_h / 2 + 6, 1),
                             f"rank {r}" if n <= 16 else str(r), anchor="end",
                             size=min(20.0, max(16.0, row_h * 0.5)))
                       for r in range(n) if r % every == 0)
    swatch_r = min(9.0, row_h * 0.3)
    row_swatches = tuple(Node(r, GRID_LEFT - (98 if n <= 16 else 44), round(row_y[r] + row_h / 2, 1),
                              swatch_r, rank_colour(r, n), "", "", False, 0, 0)
                         for r in range(n))
    return Deck(
        WIDTH, HEIGHT, deck_title(p),
        tuple(nodes), tuple(lines), _node_arcs(trace, radius), tuple(lane_labels),
        row_labels, row_swatches, _column_labels(trace, columns, group, col_w),
        _separators(trace, columns, col_of_element, row_y[-1] + row_h),
        _area_labels(trace, columns), tuple(palette.stripes.values()), tuple(frames),
        _legend(trace), round(font, 1), 2.5 if n <= 16 else 1.0, merged)


@dataclass(frozen=True)
class MergedCells:
    """A merged deck's frame (MERGE_RANKS and beyond): its cells as the subpaths of one path
    per (fill, flight), in the order the cells come — what deck_svg draws, without a
    :class:`Cell` per cell (12,000 of them at 64 ranks). ``len`` counts the cells."""

    groups: tuple[tuple[str, float, float, str], ...]   # fill, dx, dy, path data
    count: int

    def __len__(self) -> int:
        return self.count


def _merge(trace, k: int, where, origin, columns, row_y, cell_x, cell_y, cell_w, cell_h,
           palette) -> MergedCells:
    """The cells at (rank, column) ``where`` of frame ``k``, grouped as deck_svg draws them:
    the same rectangles, fills and flights as :func:`build_deck`'s ``cell`` and ``_fly``."""
    filled, sources = trace.filled, trace.sources
    groups: dict[tuple, list[str]] = {}
    flights: dict[tuple, float] = {}
    for r, c in where:
        start = columns[c][1]
        if not filled[k, r, start]:
            key = ("", 0, 0)
        else:
            fly = origin.get((r, c)) if origin is not None else None
            if fly is None:
                dx = dy = 0
            else:
                dx = flights.get((fly[0], columns[c][3]))
                if dx is None:
                    dx = flights[(fly[0], columns[c][3])] = round(fly[0] - columns[c][3], 1)
                dy = flights.get((fly[1], row_y[r]))
                if dy is None:
                    dy = flights[(fly[1], row_y[r])] = round(fly[1] - row_y[r], 1)
            key = (palette.fill(int(sources[k, r, start])), dx, dy)
        w = cell_w[c]
        groups.setdefault(key, []).append(f"M{cell_x[c]} {cell_y[r]}h{w}v{cell_h}h-{w}z")
    return MergedCells(tuple((fill, dx, dy, "".join(parts))
                             for (fill, dx, dy), parts in groups.items()), len(where))


def _ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 5] → "0–2, 5"."""
    parts, start = [], ranks[0]
    for a, b in zip(ranks, ranks[1:] + [None]):
        if b != a + 1:
            parts.append(str(start) if start == a else f"{start}–{a}")
            start = b
    return ", ".join(parts)


def deck_title(p) -> str:
    return f"{p.op} · {p.algorithm.replace('_', '-')} · {p.world} ranks · {p.count} elements"


def _fly(origin: tuple[float, float] | None, x: float, y: float) -> tuple[float, float]:
    if origin is None:
        return (0, 0)
    return (round(origin[0] - x, 1), round(origin[1] - y, 1))


def _origins(step, columns, col_of_element, row_y):
    """(dst rank, column) → (x, y) of the cell its data came from in this step: for each move,
    the columns whose first element it writes (found by bisection in the columns' starts, which
    are in buffer order), and where that element came from."""
    out = {}
    starts = [start for _, start, _, _, _ in columns]
    for m in step.moves:
        lo, shift = m.dst_lo, m.src_lo - m.dst_lo
        y = row_y[m.src]
        for c in range(bisect_left(starts, lo), bisect_left(starts, lo + m.length)):
            out[(m.dst, c)] = (columns[col_of_element[starts[c] + shift]][3], y)
    return out


def _arrows(trace: CollectiveTrace, k: int, lanes, radius: float,
            links: dict | None = None) -> tuple[Arrow, ...]:
    p = trace.params
    n = p.world
    half = p.count // 2
    pairs: dict[tuple[int, int, int], list] = {}
    for m in trace.schedule.steps[k - 1].moves:
        if m.local:
            continue
        lane = (0 if m.dst_lo < half else 1) if p.algorithm == "tree" else 0
        pairs.setdefault((m.src, m.dst, lane), []).append(m)
    width = 4.0 if n <= 8 else 3.0 if n <= 16 else 2.0
    labelled = n <= 8 and len(pairs) <= 8
    if p.algorithm == "tree":
        bend = 0.18
    elif p.algorithm == "ring" and p.op != "all_to_all":
        bend = 0.12 if n > 2 else 0.3
    else:
        bend = 0.14
    out = []
    links = {} if links is None else links
    for key, moves in pairs.items():
        src, dst, lane = key
        if not labelled:  # the same arrow every step it uses this link
            drawn = links.get((key, width))
            if drawn is None:
                a = arrow(lanes[lane][src], lanes[lane][dst], bend, radius + 3, radius + 3,
                          head=14 if n <= 16 else 8)
                drawn = links[(key, width)] = Arrow(
                    a.d, a.head, rank_colour(src, n), width,
                    node_of(src, p.gpus_per_node) != node_of(dst, p.gpus_per_node),
                    "", round(a.mid.x, 1), round(a.mid.y, 1))
            out.append(drawn)
            continue
        a = arrow(lanes[lane][src], lanes[lane][dst], bend, radius + 3, radius + 3,
                  head=14 if n <= 16 else 8)
        elements = sum(m.length for m in moves)
        name = moves[0].label if len(moves) == 1 else f"{elements} elements"
        label = f"{name} {'+' if moves[0].reduce else ''}".strip()
        out.append(Arrow(a.d, a.head, rank_colour(src, n), width,
                         node_of(src, p.gpus_per_node) != node_of(dst, p.gpus_per_node),
                         label, round(a.mid.x, 1), round(a.mid.y, 1)))
    return tuple(out)


def _column_labels(trace, columns, group, col_w) -> tuple[Label, ...]:
    p = trace.params
    labels = []
    if p.op == "all_to_all":
        c = p.count // p.world
        for a, (prefix, word) in enumerate((("→", "for"), ("←", "from"))):
            for d in range(p.world):
                cols = [col for col in columns if col[0] == a and
                        a * p.count + d * c <= col[1] < a * p.count + (d + 1) * c]
                if cols and len(cols) * col_w >= 34:
                    x = (cols[0][3] + cols[-1][3] + cols[-1][4]) / 2
                    labels.append(Label(round(x, 1), GRID_TOP - 10, f"{prefix}r{d}", size=16))
        return tuple(labels)
    if group == 1 and col_w >= 22:
        for _, start, _, x, w in columns:
            labels.append(Label(round(x + w / 2, 1), GRID_TOP - 10, str(start), size=16))
    return tuple(labels)


def _separators(trace, columns, col_of_element, bottom) -> tuple[tuple[float, float, float], ...]:
    """Vertical lines where the schedule cuts the buffer into chunks."""
    if trace.params.world > 16:
        return ()
    cuts = set()
    for step in trace.schedule.steps:
        for m in step.moves:
            cuts.update((m.dst_lo, m.dst_lo + m.length))
    xs = set()
    for e in cuts:
        c = col_of_element.get(e)
        if c is not None and columns[c][1] == e and c > 0 and columns[c - 1][0] == columns[c][0]:
            xs.add(columns[c][3])
    return tuple((round(x, 1), GRID_TOP - 4, round(bottom + 4, 1)) for x in sorted(xs))


def _area_labels(trace, columns) -> tuple[Label, ...]:
    p = trace.params
    if p.op != "all_to_all":
        first, last = columns[0], columns[-1]
        return (Label(round((first[3] + last[3] + last[4]) / 2, 1), 84,
                      "each rank's buffer (element index above)", size=17),)
    labels = []
    for a, text in enumerate(("send area: block for rank d (also in transit)",
                              "receive area: block from rank s")):
        cols = [col for col in columns if col[0] == a]
        labels.append(Label(round((cols[0][3] + cols[-1][3] + cols[-1][4]) / 2, 1), 84, text,
                            size=16))
    return tuple(labels)


def _legend(trace: CollectiveTrace) -> tuple[tuple[str, str, float], ...]:
    """(kind, text, x) of each legend item along the bottom edge."""
    p = trace.params
    items = [("stripes", "striped: sum of those ranks' inputs") if p.world <= STRIPE_LIMIT
             else ("blues", "blue: partial sum, darker = more ranks"),
             ("complete", "grey: sum of every rank's input"),
             ("empty", "dashed: nothing received yet")]
    if p.gpus_per_node < p.world:
        items.append(("dashed", "dashed link: crosses nodes"))
    out, x = [], 22.0
    for kind, text in items:
        out.append((kind, text, x))
        x += 28 + len(text) * 7.8 + 32  # swatch, text at 14 px, gap
    return tuple(out)



def rank_swatches(world: int) -> list[tuple[int, str, str]]:
    """(rank, colour, ink) for legends and tables."""
    return [(r, rank_colour(r, world), text_on(rank_colour(r, world))) for r in range(world)]

