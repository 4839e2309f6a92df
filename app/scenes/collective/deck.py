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

from app.draw.box import PAGE, Box
from app.draw.palette import BLUES, ramp, rank_colour, text_on
from app.draw.text import text_width
from app.scenes.collective.deck_topology import (STRIPE_LIMIT, Arrow, Label, Layout, Line, Node,
                                                 _arrows, _legend_items, _node_arcs, _taken,
                                                 _topology, deck_title, headers, layout)
from app.sim.collectives.simulate import CollectiveTrace

MAX_COLUMNS = 64
MAX_DECK_CELLS = 16384
"""Most cells a deck draws over all its steps: past it (64 ranks exchanging hundreds of
elements, 9 MB of markup) columns hold longer runs of elements until it fits."""
MERGE_RANKS = 33
"""From this many ranks a row is under 17 units high: no number or tip fits a cell, and a
frame's cells are drawn as a few paths (:attr:`Deck.merged`), 64 ranks' 12,000 cells in a
sixth of the markup."""
COMPLETE = "complete"
"""The fill of a value that sums every rank's input: a CSS class (grey, dark on light themes and
light on dark ones), so finished chunks stand out from partial sums in either theme."""
LEGEND_STRIPES = "legend-stripes"

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
class Stripes:
    id: str
    colours: tuple[str, ...]


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    title: str
    layout: Layout
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
    legend: tuple[tuple[str, str, float, float], ...]
    """(kind, text, x, y) of each legend item: x, y the swatch's top left"""
    font: float
    cell_stroke: float
    merged: bool = False
    """Each frame's cells drawn as one path per fill and flight (MERGE_RANKS and beyond): no
    cell carries a number or a tip at that size, so the same picture needs no element per
    cell."""
    node_font: float = 16.0
    """the size of the rank numbers in or beside the topology's circles"""


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


def _columns(trace: CollectiveTrace, lay: Layout, least: int = 1):
    """Display columns: (area, first element, last element + 1, x, width); a column holds
    ``least`` elements or more."""
    p = trace.params
    length = trace.schedule.layout.buffer_len
    areas = [(0, p.count), (p.count, 2 * p.count)] if p.op == "all_to_all" else [(0, length)]
    group = max(least, 1 if length <= 48 else math.ceil(length / MAX_COLUMNS))
    left, _, right, _ = lay.grid
    gap = lay.small * 1.8 if len(areas) > 1 else 0
    per_area = [math.ceil((hi - lo) / group) for lo, hi in areas]
    width = min(lay.text * 5.4, (right - left - gap * (len(areas) - 1)) / sum(per_area))
    columns, x = [], float(left)
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


def build_deck(trace: CollectiveTrace, box: Box = PAGE, upto: int | None = None) -> Deck:
    """The deck of ``trace`` laid out for ``box``: every frame, or frames 0…``upto`` (a
    standalone export)."""
    p = trace.params
    n = p.world
    last = len(trace.frames) - 1 if upto is None else upto
    lay = layout(trace, box)
    text, small = lay.text, lay.small
    lanes, radius, nodes, lines, lane_labels, ring, node_font = _topology(trace, lay)
    columns, group, col_w = _columns(trace, lay)
    least = group
    while _drawn_cells(trace, columns) > MAX_DECK_CELLS and len(columns) > 2:
        # too many cells to send and draw (and none legible at that size): coarser columns,
        # each a run of elements, until the whole deck fits MAX_DECK_CELLS
        least *= 2
        columns, group, col_w = _columns(trace, lay, least)
    grid_left, grid_top, grid_right, grid_bottom = lay.grid
    row_h = min(text * 4.8, (grid_bottom - grid_top) / n)
    row_y = [grid_top + r * row_h for r in range(n)]
    column_starts = [start for _, start, _, _, _ in columns]  # contiguous, in buffer order
    col_of_element = {}
    for index, (_, start, stop, _, _) in enumerate(columns):
        for e in range(start, stop):
            col_of_element[e] = index

    values, filled, sources = trace.values, trace.filled, trace.sources
    merged = n >= MERGE_RANKS
    digits = len(str(int(values.max()))) if values.size else 1
    # a cell's number at the largest size its cell holds, never below the small size
    font = min(text * 1.4, row_h * 0.62)
    while font > small and text_width("8" * digits, font, bold=True) > col_w - 6:
        font -= 0.5
    numbers = (group == 1 and not merged and row_h >= small * 1.25 and font >= small
               and text_width("8" * digits, font, bold=True) <= col_w - 6)
    tips = n <= 16
    palette = _Palette(n)
    pad = 1.5 if col_w >= 8 and row_h >= 8 else 0.4

    # a cell's rectangle from per-column and per-row tables (the same roundings, once each)
    cell_x = [round(x + pad, 2) for _, _, _, x, _ in columns]
    cell_w = [round(w - 2 * pad, 2) for _, _, _, _, w in columns]
    cell_y = [round(y + pad, 2) for y in row_y]
    cell_h = round(row_h - 2 * pad, 2)

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
    taken = _taken(nodes, node_font, lay)
    phases = [f.phase for f in trace.frames]
    titles = headers(trace)
    changes = _changed_cells(trace, last, columns, column_starts)
    for k in range(last + 1):
        frame = trace.frames[k]
        if k == 0:
            cells = (_merge(trace, 0, [(r, c) for r in range(n) for c in range(len(columns))],
                            None, columns, row_y, cell_x, cell_y, cell_w, cell_h, palette)
                     if merged else
                     tuple(cell(r, c, 0, (0, 0)) for r in range(n) for c in range(len(columns))))
            arrows: tuple[Arrow, ...] = ()
            unit = "before the collective"
        else:
            where, firsts = changes[k - 1]
            origin = _origins(trace.schedule.steps[k - 1], columns, col_of_element, row_y)
            cells = (_merge(trace, k, where, origin, columns, row_y, cell_x, cell_y, cell_w,
                            cell_h, palette, firsts) if merged else
                     tuple(cell(r, c, k, _fly(origin.get((r, c)), columns[c][3], row_y[r]))
                           for r, c in where))
            arrows = _arrows(trace, k, lanes, radius, lay, links, taken)
            # the round within its phase: a ring all-reduce is n − 1 rounds of reduce-scatter,
            # then n − 1 of all-gather
            unit = (f"{frame.phase}, round {phases[:k + 1].count(frame.phase)} of "
                    f"{phases.count(frame.phase)}")
        frames.append(FrameView(k, titles[k], cells, arrows, unit))

    # a label every row while the type fits in one, else every 2nd, 4th or 8th row: fewer
    # labels at a legible size, never shrunken ones
    every = next((e for e in (1, 2, 4, 8, 16) if e * row_h >= text * 1.15), 32)
    row_labels = tuple(Label(lay.row_label_x, round(row_y[r] + row_h / 2 + text * 0.35, 1),
                             f"rank {r}" if n <= 16 else str(r), anchor="end", size=text)
                       for r in range(n) if r % every == 0)
    swatch_r = min(text * 0.45, 9.0, row_h * 0.3)
    row_swatches = tuple(Node(r, lay.swatch_x, round(row_y[r] + row_h / 2, 1),
                              round(swatch_r, 1), rank_colour(r, n), "", "", False, 0, 0)
                         for r in range(n))
    return Deck(
        lay.width, lay.height, deck_title(p), lay,
        tuple(nodes), tuple(lines), _node_arcs(trace, ring, radius, lay), tuple(lane_labels),
        row_labels, row_swatches, _column_labels(trace, columns, group, col_w, lay),
        _separators(trace, columns, col_of_element, row_y[-1] + row_h, lay),
        _area_labels(trace, columns, lay), tuple(palette.stripes.values()), tuple(frames),
        _legend(trace, lay), round(font, 1), 2.5 if n <= 16 else 1.0, merged, node_font)


@dataclass(frozen=True)
class MergedCells:
    """A merged deck's frame (MERGE_RANKS and beyond): its cells as the subpaths of one path
    per (fill, flight), in the order the cells come — what deck_svg draws, without a
    :class:`Cell` per cell (12,000 of them at 64 ranks). ``len`` counts the cells."""

    groups: tuple[tuple[str, float, float, str], ...]   # fill, dx, dy, path data
    count: int

    def __len__(self) -> int:
        return self.count


def _changed_cells(trace, last: int, columns, column_starts) -> list[tuple[list, tuple]]:
    """For each step k = 1 … ``last``: the (rank, column) cells it changes (any element of the
    column changed in value, fill or sources), in rank then column order, and what their
    first elements hold after it (filled, sources) — for every step at once (a few array
    operations, not a few per step)."""
    if last < 1:
        return []
    end = columns[-1][2]
    values, filled, sources = (a[:last + 1, :, :end] for a in
                               (trace.values, trace.filled, trace.sources))
    changed = ((values[1:] != values[:-1]) | (filled[1:] != filled[:-1])
               | (sources[1:] != sources[:-1]))                 # (steps, world, elements)
    per_cell = np.logical_or.reduceat(changed, column_starts, axis=2)   # (steps, world, columns)
    steps, rows, cols = np.nonzero(per_cell)
    starts = np.asarray(column_starts)[cols]
    full = filled[steps + 1, rows, starts].tolist()
    masks = sources[steps + 1, rows, starts].tolist()
    bounds = np.searchsorted(steps, np.arange(last + 1)).tolist()
    cells = list(zip(rows.tolist(), cols.tolist()))
    return [(cells[a:b], (full[a:b], masks[a:b])) for a, b in zip(bounds, bounds[1:])]


def _merge(trace, k: int, where, origin, columns, row_y, cell_x, cell_y, cell_w, cell_h,
           palette, firsts: tuple[list, list] | None = None) -> MergedCells:
    """The cells at (rank, column) ``where`` of frame ``k``, grouped as deck_svg draws them:
    the same rectangles, fills and flights as :func:`build_deck`'s ``cell`` and ``_fly``.
    ``firsts``: what each cell's first element holds in frame k (filled, sources), where
    :func:`_changed_cells` has read them."""
    groups: dict[tuple, list[str]] = {}
    flights: dict[tuple, float] = {}
    if firsts is None:   # each cell's first element, read from the frame's arrays at once
        rows = [r for r, _ in where]
        starts = [columns[c][1] for _, c in where]
        firsts = (trace.filled[k][rows, starts].tolist(), trace.sources[k][rows, starts].tolist())
    is_filled, masks = firsts
    for (r, c), full, mask in zip(where, is_filled, masks):
        if not full:
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
            key = (palette.fill(mask), dx, dy)
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


def _column_labels(trace, columns, group, col_w, lay: Layout) -> tuple[Label, ...]:
    p = trace.params
    small = lay.small
    labels = []
    if p.op == "all_to_all":
        c = p.count // p.world
        for a, (prefix, word) in enumerate((("→", "for"), ("←", "from"))):
            for d in range(p.world):
                cols = [col for col in columns if col[0] == a and
                        a * p.count + d * c <= col[1] < a * p.count + (d + 1) * c]
                name = f"{prefix}r{d}"
                if cols and len(cols) * col_w >= text_width(name, small) + small * 0.6:
                    x = (cols[0][3] + cols[-1][3] + cols[-1][4]) / 2
                    labels.append(Label(round(x, 1), lay.column_y, name, size=small))
        return tuple(labels)
    widest = text_width(str(columns[-1][1]), small)
    if group == 1 and col_w >= widest + small * 0.5:
        for _, start, _, x, w in columns:
            labels.append(Label(round(x + w / 2, 1), lay.column_y, str(start), size=small))
    return tuple(labels)


def _separators(trace, columns, col_of_element, bottom, lay: Layout
                ) -> tuple[tuple[float, float, float], ...]:
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
    top = lay.grid[1] - 4
    return tuple((round(x, 1), round(top, 1), round(bottom + 4, 1)) for x in sorted(xs))


AREA_TEXTS = {"buffer": ("each rank's buffer (element index above)", "each rank's buffer"),
              "send": ("send area: block for rank d (also in transit)", "send area"),
              "receive": ("receive area: block from rank s", "receive area")}
"""The labels over the grid's areas, long and short: the short one where the long one does
not fit over its area."""


def _area_labels(trace, columns, lay: Layout) -> tuple[Label, ...]:
    p = trace.params
    names = ("buffer",) if p.op != "all_to_all" else ("send", "receive")
    labels = []
    for a, name in enumerate(names):
        cols = [col for col in columns if col[0] == a]
        span = cols[-1][3] + cols[-1][4] - cols[0][3]
        text = next((t for t in AREA_TEXTS[name] if text_width(t, lay.small) <= span),
                    AREA_TEXTS[name][-1])
        if text_width(text, lay.small) > span + lay.small * 1.5:
            continue
        labels.append(Label(round(cols[0][3] + span / 2, 1), lay.area_y, text, size=lay.small))
    return tuple(labels)


def _legend(trace: CollectiveTrace, lay: Layout) -> tuple[tuple[str, str, float, float], ...]:
    """(kind, text, x, y) of each legend item along the bottom edge."""
    return tuple((kind, text, x, y)
                 for (kind, text), (x, y) in zip(_legend_items(trace), lay.legend))



def rank_swatches(world: int) -> list[tuple[int, str, str]]:
    """(rank, colour, ink) for legends and tables."""
    return [(r, rank_colour(r, world), text_on(rank_colour(r, world))) for r in range(world)]
