"""The ZeRO deck's grid cells: which elements are drawn as one cell, how each looks in a frame
(owner's colour, a rank's own gradient, the mean, stale, padding, not held), and runs of alike
cells merged into one rectangle so that large grids stay light."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from app.sim.zero import ZeroTrace
from app.sim.zero_frames import CURRENT, EMPTY, LOCAL, PAD, ROWS, STALE
from app.views.palette import SUMMED as COMPLETE
from app.views.palette import rank_colour, text_on

MAX_COLUMNS = 96
REPLICATED = "#7a8797"       # a stage-0 state that every rank holds whole: no owner
ROW_NAMES = {"params": "params", "grads": "grads", "optimizer": "Adam m"}


@dataclass(frozen=True)
class Cell:
    x: float
    y: float
    w: float
    h: float
    fill: str            # colour, or "" for the classes below
    cls: str             # "" | "pad" | "empty"
    opacity: float
    text: str
    ink: str
    title: str


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


def cell(trace, status, values, row, i, rank, a, b, x, y, w, h, show_numbers) -> Cell:
    """One drawn cell: elements a … b−1 of rank ``rank``'s row ``row`` in this frame."""
    p, g = trace.params, trace.grids
    if b - a == 1:
        state = int(status[row, i, a])
    else:                                   # a run of elements: padding only if all of it is
        run = status[row, i, a:b]
        state = PAD if (run == PAD).all() else int(run[run != PAD][0])
    col = g.columns[a]
    pad = 1.2 if w >= 8 else 0.3
    geometry = (round(x + pad, 1), round(y + pad, 1), round(w - 2 * pad, 1), round(h - 2 * pad, 1))
    where = (f"rank {rank} {ROW_NAMES[ROWS[row]]}, layer {col.unit} "
             + (f"[{col.offset}]" if b - a == 1 else f"[{col.offset}–{g.columns[b - 1].offset}]")
             + f" (rank {col.owner}'s shard)")
    if state == EMPTY:
        return Cell(*geometry, "", "freed", 1.0, "", "", f"{where}: not held")
    if state == PAD:
        return Cell(*geometry, "", "pad", 1.0, "", "", f"{where}: padding (zeros)")
    if row == 1 and state == LOCAL:
        fill = colour(trace, rank)
    elif row == 1 and state in (CURRENT, STALE) and not (state == STALE and p.stage == 1):
        fill = COMPLETE
    elif row == 1:
        fill = colour(trace, rank)                        # ZeRO-1's stale local gradient
    elif p.stage == 0:
        fill = REPLICATED
    else:
        fill = colour(trace, col.owner)
    value = float(values[row, i, a])
    kind = {CURRENT: "", LOCAL: ", its own gradient", STALE: ", stale"}[state]
    text = _compact(value) if show_numbers else ""
    return Cell(*geometry, fill, "", 0.3 if state == STALE else 1.0, text,
                _ink(fill) if state != STALE else "", f"{where} = {value:.6g}{kind}")


@lru_cache(maxsize=64)
def _ink(fill: str) -> str:
    """The number's class on a cell of this colour: white or black, whichever reads."""
    return "cn-w" if text_on(fill) == "#ffffff" else "cn-b"


def fields(cell: Cell) -> tuple:
    return (cell.x, cell.y, cell.w, cell.h, cell.fill, cell.cls, cell.opacity, cell.text,
            cell.ink, cell.title)


def continues(last: Cell, cell: Cell, last_unit: int, unit: int) -> bool:
    """Whether ``cell`` extends ``last`` into one rectangle: same look, same layer, adjacent."""
    return (last_unit == unit and last.fill == cell.fill and last.cls == cell.cls
            and last.opacity == cell.opacity and abs(last.x + last.w - cell.x) < 3.5)


def merge(run: list[Cell]) -> list[Cell]:
    """A run of alike cells as one rectangle (its numbers kept as zero-width text cells)."""
    if len(run) <= 1:
        return run
    first, last = run[0], run[-1]
    where = first.title.split(" [")[0].split(":")[0]
    block = Cell(first.x, first.y, round(last.x + last.w - first.x, 2), first.h, first.fill,
                 first.cls, first.opacity, "", first.ink, f"{where} ({len(run)} cells)")
    texts = [Cell(c.x, c.y, c.w, c.h, "", "text", 1.0, c.text, c.ink, "") for c in run if c.text]
    return [block] + texts


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
