"""One step of the tensor-parallel deck as geometry: the operands and result of a step on every
rank's lane, a collective's band across the lanes, or a check of the gathered result against the
unsharded one (app/scenes/tensor_parallel/deck.py puts the frames together into the deck).

Every step works on different tensors, so each frame is a whole page that covers the one before
(the player shows frames 0…k, k on top). All matrices of a frame share one cell size, chosen so
the widest step fits the lane and the tallest operand its height, and one number font. Every
size comes from the deck's box (:class:`Geometry`, docs/legibility.md): texts at its label,
small or header size, numbers between the small and the label size or not at all (the hover
tells), a column's note shortened or left out where it does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from app.sim.tensor_parallel.program import REPLICATED, SUMMED, Operand, Step
from app.draw import matrix
from app.draw.geometry import Point, arrow
from app.draw.palette import ramp, rank_colour
from app.draw.text import fits, text_width

FRAME_CELLS = 1400
"""most cells one frame draws (over every rank); larger tensors are drawn averaged in blocks"""
MAX_CELL = 46.0
GREYS = ("#eef0f2", "#8f99a4")
DARKS = ("#98a2b0", "#2e3440")
SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


@lru_cache(maxsize=32)
def source_colour(tp: int):
    @lru_cache(maxsize=512)
    def colour(source: int, depth: float) -> str:
        if source == REPLICATED:
            return ramp(GREYS, depth)
        if source == SUMMED:
            return ramp(DARKS, depth)
        return ramp(("#ffffff", rank_colour(source, tp)), 0.25 + 0.75 * depth)
    return colour


@dataclass(frozen=True)
class Geometry:
    """Where a frame draws, in the deck's box: the lanes' matrices from ``left`` to ``right``,
    the column heads from ``lanes_top`` (``names_h`` tall), the lanes down to
    ``lanes_bottom``; the box's type sizes."""

    width: float
    left: float
    right: float
    lanes_top: float
    names_h: float
    lanes_bottom: float
    text: float
    small: float
    head: float
    pad: float

    @property
    def numbers(self) -> tuple[float, float]:
        """The smallest and largest size of a matrix's numbers."""
        return self.small, max(self.text, self.small)


@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    size: float = 16
    anchor: str = "middle"
    cls: str = "ink"
    weight: str = "400"


@dataclass(frozen=True)
class Placed:
    view: matrix.MatrixView
    dx: float = 0.0            # fly in from (dx, dy) relative, 0: appear in place
    dy: float = 0.0
    outline: str = ""


@dataclass(frozen=True)
class Arrow:
    d: str
    head: str
    colour: str


@dataclass(frozen=True)
class Band:
    x: float
    y: float
    w: float
    h: float
    lines: tuple[Text, ...]


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    highlight: tuple[float, float, float, float] | None
    matrices: tuple[Placed, ...]
    texts: tuple[Text, ...]
    arrows: tuple[Arrow, ...]
    band: Band | None
    lanes: bool = True          # False: a whole-page view (a check), no rank lanes
    unit: str = ""              # the player's position text: "backward 3 of 4: all-reduce"


def _symbol_width(symbol: str, g: Geometry) -> tuple[float, float]:
    """(width, font) of a symbol between matrices."""
    if not symbol:
        return g.text * 2.2, 0.0
    font = g.head * 1.25 if len(symbol) <= 2 else g.text
    return text_width(symbol, font, bold=True) + g.text * 1.4, font


def _distinct(op: Operand) -> list[np.ndarray]:
    """Every rank's array, each once (a replicated tensor is the same array on every rank)."""
    return list({id(v): v for v in op.values}.values())


def _range(op: Operand, cell: tuple[float, float] | None = None,
           g: Geometry | None = None) -> tuple[float, float, bool]:
    """(smallest, largest, whether every value is an integer) over every rank's copy; the last
    is only worked out when ``cell`` is large enough to write numbers in."""
    arrays = _distinct(op)
    every = arrays[0] if len(arrays) == 1 else np.concatenate([v.ravel() for v in arrays])
    lo, hi = float(every.min()), float(every.max())
    readable = cell is None or _readable(cell, g)
    integral = readable and bool((np.abs(every - np.round(every)) < 1e-9).all())
    return lo, hi, integral


def _readable(cell: tuple[float, float], g: Geometry) -> bool:
    return cell[1] * 0.52 >= g.small and cell[0] >= max(20, g.small * 1.3)


def _note(op: Operand) -> str:
    shape = " × ".join(str(d) for d in op.shape[-2:])
    if len(op.shape) == 3:
        shape = f"{shape} each" if "head" in op.note else f"{op.shape[0]} heads of {shape}"
    return f"{op.note} · {shape}" if op.note else shape


def _fit(ops: list[Operand], symbols: list[str], lane_h: float, tp: int, g: Geometry,
         extra_w: float = 0.0) -> tuple[float, float]:
    """The largest (cell_w, cell_h) that fits every operand of a step in a lane."""
    rows = max(matrix.rows_of(op.shape) for op in ops)
    cols = sum(matrix.columns_of(op.shape) for op in ops)
    heads_gaps = sum(10.0 * (op.shape[0] - 1) for op in ops if len(op.shape) == 3)
    fixed = sum(_symbol_width(s, g)[0] for s in symbols) + heads_gaps + extra_w
    width_limit = (g.right - g.left - fixed) / cols
    cell_h = min(MAX_CELL, lane_h / rows, width_limit)
    # cells may be wider than tall (up to 1.55×, or 24 px in thin lanes) but never wider
    # than the lane allows
    cell_w = min(width_limit, max(cell_h * 2.0, 24.0), MAX_CELL * 1.4)
    return max(0.5, cell_w), max(0.5, cell_h)


def _font_cap(ops: list[Operand], cell: tuple[float, float], g: Geometry) -> float:
    """One font size for every number of a frame: the largest that fits in all its matrices."""
    cell_w, cell_h = cell
    low, high = g.numbers
    fonts = []
    if not _readable(cell, g):
        return high
    for op in ops:
        if op.values[0].size > 400:      # drawn as a heat map, without numbers
            continue
        fitted = matrix.number_texts(op.values[0], cell_w, min(high, cell_h * 0.52),
                                     _range(op)[2], low)
        if fitted:
            fonts.append(fitted[1])
    return min(fonts, default=high)


def _row(ops: list[Operand], symbols: list[str], step: Step, tp: int, lanes, colour,
         cell: tuple[float, float], g: Geometry, font_cap: float):
    """Operands left to right in every lane, with the symbols between them."""
    cell_w, cell_h = cell
    placed, texts = [], []
    x = g.left
    low, high = g.numbers
    budget = max(4, FRAME_CELLS // (tp * max(1, len(ops))))
    spots = []
    for op, symbol in zip(ops, symbols):
        w = matrix.width_of(op.shape, cell_w)
        lo, hi, integral = _range(op, cell, g)
        drawn: dict[tuple[int, int], matrix.MatrixView] = {}
        for r, (top, _) in enumerate(lanes):
            key = (id(op.values[r]), id(op.sources[r]))    # a replicated tensor: draw it once
            if key not in drawn:
                drawn[key] = matrix.draw(op.values[r], op.sources[r], x, top, cell_w, cell_h,
                                         lo, hi, colour, budget=budget, integral=integral,
                                         font_cap=font_cap, min_font=low, max_font=high)
            placed.append(Placed(drawn[key].placed(round(top, 1), _title(op, r))))
        sw, font = _symbol_width(symbol, g)
        texts += _column_head(op, x, w, sw, g)
        spots.append((x, w))
        lane_h = lanes[0][1] - lanes[0][0]
        font = min(font, max(g.small, lane_h * 0.7))
        if symbol and lane_h >= g.small * 1.1:
            first_h = matrix.rows_of(op.shape) * cell_h
            for top, _ in lanes:
                texts.append(Text(round(x + w + sw / 2, 1),
                                  round(top + min(first_h, font * 2.2) / 2 + font * 0.35, 1),
                                  symbol, font, cls="ink", weight="700"))
        x += w + sw
    return placed, texts, spots, x


def _title(op: Operand, r: int) -> str:
    name = op.name.replace("ᵣ", str(r).translate(SUBSCRIPTS) if op.per_rank else "")
    return f"rank {r} · {name} ({_note(op)})"


def _column_head(op: Operand, x: float, w: float, gap: float, g: Geometry) -> list[Text]:
    """The column's name and its note over it, within its width and the gap after it: a long
    note loses its words first, then goes."""
    cx = round(x + w / 2, 1)
    room = w + min(gap, g.text * 2)
    name = op.name if op.per_rank else op.name.replace("ᵣ", "")
    out = [Text(cx, round(g.lanes_top + g.text * 1.0, 1), name, g.text, weight="700")]
    note = next((n for n in (_note(op), " × ".join(str(d) for d in op.shape[-2:]))
                 if fits(n, g.small, room)), "")
    if note and g.names_h >= g.text * 1.2 + g.small * 1.3:
        out.append(Text(cx, round(g.lanes_top + g.text * 1.1 + g.small * 1.15, 1), note,
                        g.small, cls="muted"))
    return out


def step_frame(k: int, step: Step, tp: int, lanes, colour, header: str,
               highlight, g: Geometry) -> FrameView:
    """A step of the block's program (the check frames are deck_check.check_frame's)."""
    lane_h = lanes[0][1] - lanes[0][0]
    ops = list(step.operands) + ([step.result] if step.result is not None else [])
    symbols = list(step.symbols) + [""] * (len(ops) - len(step.symbols))
    band = None
    arrows: list[Arrow] = []
    if step.kind == "collective":
        lines = _band_lines(step, tp)
        band_w = max(text_width(lines[0], g.text, bold=True),
                     *(text_width(t, g.small) for t in lines[1:])) + g.pad * 2
        arrow_w = max(40.0, g.text * 2.2)
        cell = _fit(ops, [""], lane_h, tp, g, extra_w=band_w + 2 * arrow_w - g.text * 2.2)
        before, after = step.operands[0], step.result
        font_cap = _font_cap([before, after], cell, g)
        placed, texts, spots, x = _row([before], [""], step, tp, lanes, colour, cell, g,
                                       font_cap)
        bx = spots[0][0] + spots[0][1] + arrow_w
        after_x = bx + band_w + arrow_w
        band = _band(lines, bx, band_w, lanes, g)
        after_placed, after_texts = _after(after, after_x, spots[0][0], lanes, colour, cell,
                                           tp, font_cap, g)
        placed += after_placed
        texts += after_texts
        for r, (top, _) in enumerate(lanes):
            mid = top + min(matrix.rows_of(before.shape) * cell[1], lane_h) / 2
            a = arrow(Point(spots[0][0] + spots[0][1] + 6, mid), Point(bx, mid), 0, 0, 2, head=11)
            arrows.append(Arrow(a.d, a.head, rank_colour(r, tp)))
            mid2 = top + min(matrix.rows_of(after.shape) * cell[1], lane_h) / 2
            b = arrow(Point(bx + band_w, mid2), Point(after_x - 6, mid2), 0, 2, 0, head=11)
            arrows.append(Arrow(b.d, b.head, rank_colour(r, tp)))
    else:
        cell = _fit(ops, symbols[:-1], lane_h, tp, g)
        placed, texts, _, _ = _row(ops, symbols, step, tp, lanes, colour, cell, g,
                                   _font_cap(ops, cell, g))
    return FrameView(k, header, highlight, tuple(placed), tuple(texts), tuple(arrows), band)


def _band_lines(step: Step, tp: int) -> tuple[str, str, str]:
    """A collective's band: its name, what it does, how many numbers it moves."""
    c = step.collective
    src = step.result.sources[0]
    by_rows = src.ndim == 2 and len(np.unique(src[0])) == 1
    how = {"all_reduce": f"{'max' if c.reduce_op == 'max' else 'sum'} over {tp} ranks",
           "all_gather": f"{tp} pieces {'stacked' if by_rows else 'side by side'}",
           "reduce_scatter": f"sum, keep 1/{tp}"}[c.op]
    return c.op.replace("_", "-"), how, f"{c.elements:,} numbers"


def _band(lines: tuple[str, str, str], x: float, w: float, lanes, g: Geometry) -> Band:
    top, bottom = lanes[0][0], lanes[-1][1]
    mid = (top + bottom) / 2
    cx = round(x + w / 2, 1)
    # as many of its lines as its height holds (the caption tells the rest)
    shown = 3 if bottom - top >= g.text * 4.6 else 2 if bottom - top >= g.text * 3.2 else 1
    mid -= (shown - 1) * g.small * 0.65
    return Band(round(x, 1), round(top, 1), round(w, 1), round(bottom - top, 1), tuple(
        Text(cx, round(mid + g.text * 0.35 + k * g.small * 1.3, 1), line,
             g.text if k == 0 else g.small, weight="700" if k == 0 else "400",
             cls="ink" if k == 0 else "muted")
        for k, line in enumerate(lines[:shown])))


def _after(after: Operand, x: float, before_x: float, lanes, colour, cell, tp: int,
           font_cap: float, g: Geometry):
    """The result of a collective in every lane; after an all-gather, each rank's block flies
    in from the lane that sent it."""
    cell_w, cell_h = cell
    lo, hi, integral = _range(after, cell, g)
    low, high = g.numbers
    budget = max(4, FRAME_CELLS // (2 * tp))
    placed = []
    src = after.sources[0]
    axis = 1 if len(np.unique(src[0])) > 1 else 0
    # each rank's block flies in from the lane that sent it (up to 4 ranks: beyond, the
    # blocks are too thin to follow and t² of them would swell the deck)
    gathered = (not after.per_rank and 1 < tp <= 4 and len(np.unique(src)) == tp
                and int(src.min()) >= 0)
    drawn: dict[tuple[int, int], matrix.MatrixView] = {}
    for r, (top, _) in enumerate(lanes):
        if not gathered:
            key = (id(after.values[r]), id(after.sources[r]))
            if key not in drawn:
                drawn[key] = matrix.draw(after.values[r], after.sources[r], x, top, cell_w,
                                         cell_h, lo, hi, colour, budget=budget,
                                         integral=integral, font_cap=font_cap, min_font=low,
                                         max_font=high)
            placed.append(Placed(drawn[key].placed(round(top, 1), _title(after, r))))
            continue
        pieces = np.split(after.values[r], tp, axis=axis)
        sources = np.split(after.sources[r], tp, axis=axis)
        for s, (piece, source) in enumerate(zip(pieces, sources)):
            px = x + (s * piece.shape[1] * cell_w if axis == 1 else 0)
            py = top + (s * piece.shape[0] * cell_h if axis == 0 else 0)
            view = matrix.draw(piece, source, px, py, cell_w, cell_h, lo, hi, colour,
                               budget=max(2, budget // tp), title=f"from rank {s}",
                               integral=integral, font_cap=font_cap, min_font=low,
                               max_font=high)
            placed.append(Placed(view, round(before_x - px, 1), round(lanes[s][0] - py, 1)))
    w = matrix.width_of(after.shape, cell_w)
    return placed, _column_head(after, x, w, g.pad, g)
