"""The ZeRO deck's grid cells: which elements are drawn as one cell, how each looks in a frame
(owner's colour, a rank's own gradient, the mean, stale, padding, not held), and runs of alike
cells merged into one rectangle so that large grids stay light.

A deck redraws only the cells a frame changed, and a slider move renders every frame of a new
deck, so this runs for hundreds of cells per request: looks are decided per frame on numpy
arrays, cells are light named tuples, and hover texts are written only for decks small enough
to carry them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from app.sim.zero.simulate import ZeroTrace
from app.sim.zero.frames import CURRENT, EMPTY, LOCAL, PAD, ROWS, STALE
from app.draw.palette import SUMMED as COMPLETE
from app.draw.palette import rank_colour, text_on

MAX_COLUMNS = 96
MAX_TITLED = 320             # cells and numbers that still get hover texts; bigger decks drop them
REPLICATED = "#7a8797"       # a stage-0 state that every rank holds whole: no owner
ROW_NAMES = {"params": "params", "grads": "grads", "optimizer": "Adam m"}


class Cell(NamedTuple):
    """One rectangle of a frame: one drawn cell, or a run of alike neighbours merged."""
    x: float
    y: float
    w: float
    h: float
    fill: str                 # a colour, or "" for the classes below
    cls: str                  # "" | "pad" | "freed"
    stale: bool               # faded (drawn at 0.3 over the background)
    place: tuple[int, int, int, int]      # row, drawn rank, first and last drawn column


class Numbers(NamedTuple):
    """The numbers written on a frame's cells, by the class that colours them: "cn-w" (white)
    or "cn-b" (black) on a colour, "ink" on a faded cell."""
    ink: str
    at: tuple[tuple[float, float, str], ...]    # (x, y, text) of each number's centre


@dataclass(frozen=True)
class Layout:
    """Where the grid's cells go: one entry per drawn column (``display``) and per drawn rank."""
    display: tuple[tuple[int, int], ...]      # (first column, stop) of each drawn cell
    grouped: bool                             # some drawn cells hold several elements
    cell_x: tuple[float, ...]                 # left edge of each drawn column's cell
    text_x: tuple[float, ...]                 # and its centre
    cell_y: tuple[tuple[float, ...], ...]     # [row][drawn rank] top edge of a cell
    text_y: tuple[tuple[float, ...], ...]     # and its middle
    cw: float                                 # a cell's width and height
    ch: float
    joins: tuple[bool, ...]                   # column j touches column j − 1 (same layer, no gap)
    show_numbers: bool


def grid_layout(display, grouped, xs, col_w, row_h, block, top, joins, n_ranks,
           show_numbers) -> Layout:
    """Cells inset from the column and row lines by ``pad``, their edges rounded once."""
    pad = 1.2 if col_w >= 8 else 0.3
    cw, ch = round(col_w - 2 * pad, 1), round(row_h - 2 * pad, 1)
    cell_x = tuple(round(x + pad, 1) for x in xs)
    cell_y = tuple(tuple(round(top + i * block + row * row_h + pad, 1) for i in range(n_ranks))
                   for row in range(3))
    return Layout(tuple(display), grouped, cell_x, tuple(round(x + cw / 2, 1) for x in cell_x),
                  cell_y, tuple(tuple(round(y + ch / 2, 1) for y in ys) for ys in cell_y),
                  cw, ch, tuple(joins), show_numbers)


def display_columns(trace: ZeroTrace):
    """Groups of grid columns drawn as one cell: single elements when they fit, else runs of
    consecutive elements of one shard. Returns [(first column, stop)], and whether grouped."""
    cols = trace.grids.columns
    group = max(1, math.ceil(len(cols) / MAX_COLUMNS))
    out, start = [], 0
    while start < len(cols):
        stop = start + 1
        while (stop < len(cols) and stop - start < group and cols[stop].unit == cols[start].unit
               and cols[stop].owner == cols[start].owner):
            stop += 1
        out.append((start, stop))
        start = stop
    return out, group > 1


def _states(status: np.ndarray, layout: Layout) -> np.ndarray:
    """(…, drawn cells): each drawn cell's state; a run of elements is padding only if all of
    it is, else the state of its first real element."""
    starts = [a for a, _ in layout.display]
    if not layout.grouped:
        return status[..., starts]
    n = status.shape[-1]
    first_real = np.minimum.reduceat(np.where(status != PAD, np.arange(n), n), starts, axis=-1)
    picked = np.take_along_axis(status, np.minimum(first_real, n - 1), axis=-1)
    return np.where(first_real < n, picked, PAD)


class FrameCells(NamedTuple):
    cells: list[Cell]
    numbers: list[Numbers]
    weight: int              # cells, plus the numbers on merged cells (they weigh like cells)


def frame_cells(trace: ZeroTrace, frames: int, layout: Layout,
                fills: tuple[tuple[str, ...], np.ndarray]) -> list[FrameCells]:
    """For each of the first ``frames`` frames: the cells it redraws (every cell in frame 0,
    then those with an element that changed), alike neighbours merged, and the numbers written
    on them. ``fills``: the drawn ranks' colours, and the position among them of each drawn
    column's owner. All frames at once: numpy's cost is per call, not per cell."""
    p, g = trace.params, trace.grids
    palette, owner = fills
    n_ranks = len(palette)
    complete, replicated = n_ranks, n_ranks + 1
    looks = (*palette, COMPLETE, REPLICATED)
    firsts_of = np.array([a for a, _ in layout.display])
    status, values = g.status[:frames], g.values[:frames]          # (F, 3, R, columns)
    states = _states(status, layout)                               # (F, 3, R, D)
    changed = np.ones(states.shape, dtype=bool)
    diff = (status[1:] != status[:-1]) | (values[1:] != values[:-1])
    changed[1:] = np.logical_or.reduceat(diff, firsts_of, axis=-1)
    # 1. each cell's look: a colour (index into looks) or a class, and whether it is stale
    stale = states == STALE
    fill = np.empty(states.shape, dtype=np.int64)
    fill[:, 0] = fill[:, 2] = replicated if p.stage == 0 else owner
    own = (states[:, 1] == LOCAL) | (stale[:, 1] & (p.stage == 1))   # a rank's own gradient
    fill[:, 1] = np.where(own, np.arange(n_ranks)[:, None], complete)
    cls = np.where(states == EMPTY, 1, np.where(states == PAD, 2, 0))
    key = np.where(cls > 0, -cls, fill * 2 + stale)
    # 2. runs: changed neighbours of one look in one layer, merged into one rectangle
    same = np.zeros(changed.shape, dtype=bool)
    same[..., 1:] = (changed[..., 1:] & changed[..., :-1] & np.array(layout.joins[1:])
                     & (key[..., 1:] == key[..., :-1]))
    starts = changed & ~same
    ends = changed.copy()
    ends[..., :-1] &= ~same[..., 1:]
    at = np.nonzero(starts)
    lasts = np.nonzero(ends)[3].tolist()
    classes = ("", "freed", "pad")
    cx, cy, cw, ch = layout.cell_x, layout.cell_y, layout.cw, layout.ch
    out = [FrameCells([], [], 0) for _ in range(frames)]
    for k, row, i, first, last, c, f, st in zip(*(a.tolist() for a in at), lasts,
                                                 cls[at].tolist(), fill[at].tolist(),
                                                 stale[at].tolist()):
        out[k].cells.append(Cell(cx[first], cy[row][i],
                                 cw if first == last else round(cx[last] + cw - cx[first], 2),
                                 ch, "" if c else looks[f], classes[c], st,
                                 (row, i, first, last)))
    weights = [len(o.cells) for o in out]
    # 3. numbers on the coloured cells, by ink; those on merged cells add to the weight
    if layout.show_numbers:
        written = changed & (cls == 0)
        merged = same.copy()                 # joined to a neighbour: part of a merged cell
        merged[..., :-1] |= same[..., 1:]
        on = np.nonzero(written)
        inks = ["ink" if st else _ink(looks[f])
                for st, f in zip(stale[on].tolist(), fill[on].tolist())]
        by_ink: list[dict[str, list]] = [{} for _ in range(frames)]
        tx, ty = layout.text_x, layout.text_y
        for k, row, i, j, ink, value, inside in zip(
                *(a.tolist() for a in on), inks,
                values[on[0], on[1], on[2], firsts_of[on[3]]].tolist(), merged[on].tolist()):
            by_ink[k].setdefault(ink, []).append((tx[j], ty[row][i], _compact(value)))
            weights[k] += inside
        for k in range(frames):
            out[k].numbers.extend(Numbers(ink, tuple(at)) for ink, at in by_ink[k].items())
    return [FrameCells(o.cells, o.numbers, w) for o, w in zip(out, weights)]


def tip(trace: ZeroTrace, layout: Layout, k: int, cell: Cell) -> str:
    """A cell's hover text: whose element it is, and its value or why it has none."""
    g = trace.grids
    row, i, first, last = cell.place
    a, b = layout.display[first]
    col = g.columns[a]
    name = f"rank {g.ranks[i]} {ROW_NAMES[ROWS[row]]}, layer {col.unit}"
    if first != last:
        return f"{name} ({last - first + 1} cells)"
    where = (f"{name} " + (f"[{col.offset}]" if b - a == 1 else
                           f"[{col.offset}–{g.columns[b - 1].offset}]")
             + f" (rank {col.owner}'s shard)")
    state = int(_states(g.status[k][row:row + 1, i:i + 1], layout)[0, 0, first])
    if state == EMPTY:
        return f"{where}: not held"
    if state == PAD:
        return f"{where}: padding (zeros)"
    kind = {CURRENT: "", LOCAL: ", its own gradient", STALE: ", stale"}[state]
    return f"{where} = {float(g.values[k][row, i, a]):.6g}{kind}"


@lru_cache(maxsize=64)
def _ink(fill: str) -> str:
    """The number's class on a cell of this colour: white or black, whichever reads."""
    return "cn-w" if text_on(fill) == "#ffffff" else "cn-b"


def colour(trace: ZeroTrace, rank: int) -> str:
    """A rank's colour: Okabe–Ito by rank up to 8 ranks; beyond, by its place among the drawn
    ranks, so the eight drawn ones stay distinct (their numbers are written on them)."""
    ranks = trace.grids.ranks
    if trace.params.dp <= len(ranks):
        return rank_colour(rank, trace.params.dp)
    return rank_colour(ranks.index(rank), len(ranks))


def _compact(value: float) -> str:
    """−0.134 → "-.13": two decimals without the leading zero, so it fits a narrow cell."""
    text = f"{value:.2f}"
    if text in ("-0.00", "0.00"):
        return "0"
    return text.replace("0.", ".", 1)
