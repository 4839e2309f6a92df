"""One step of the tensor-parallel deck as geometry: the operands and result of a step on every
rank's lane, a collective's band across the lanes, or a check of the gathered result against the
unsharded one (app/scenes/tensor_parallel/deck.py puts the frames together into the deck).

Every step works on different tensors, so each frame is a whole page that covers the one before
(the player shows frames 0…k, k on top). All matrices of a frame share one cell size, chosen so
the widest step fits the lane and the tallest operand its height, and one number font.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from app.sim.tensor_parallel.program import REPLICATED, SUMMED, Operand, Step
from app.draw import matrix
from app.draw.geometry import Point, arrow
from app.draw.palette import ramp, rank_colour

WIDTH, HEIGHT = 1280, 720
LANES_TOP, LANES_BOTTOM = 134, 680
NAMES_H = 46                       # column headers above the lanes: name, then note and shape
LEFT, RIGHT = 116, 1262
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


def _symbol_width(symbol: str) -> tuple[float, float]:
    """(width, font) of a symbol between matrices."""
    if not symbol:
        return 44.0, 0.0
    font = 28.0 if len(symbol) <= 2 else 18.0
    return len(symbol) * font * 0.6 + 26, font


def _distinct(op: Operand) -> list[np.ndarray]:
    """Every rank's array, each once (a replicated tensor is the same array on every rank)."""
    return list({id(v): v for v in op.values}.values())


def _range(op: Operand, cell: tuple[float, float] | None = None) -> tuple[float, float, bool]:
    """(smallest, largest, whether every value is an integer) over every rank's copy; the last
    is only worked out when ``cell`` is large enough to write numbers in."""
    arrays = _distinct(op)
    every = arrays[0] if len(arrays) == 1 else np.concatenate([v.ravel() for v in arrays])
    lo, hi = float(every.min()), float(every.max())
    readable = cell is None or _readable(cell)
    integral = readable and bool((np.abs(every - np.round(every)) < 1e-9).all())
    return lo, hi, integral


def _readable(cell: tuple[float, float]) -> bool:
    return cell[1] * 0.52 >= matrix.MIN_NUMBER_FONT and cell[0] >= 20


def _note(op: Operand) -> str:
    shape = " × ".join(str(d) for d in op.shape[-2:])
    if len(op.shape) == 3:
        shape = f"{shape} each" if "head" in op.note else f"{op.shape[0]} heads of {shape}"
    return f"{op.note} · {shape}" if op.note else shape


def _fit(ops: list[Operand], symbols: list[str], lane_h: float, tp: int,
         extra_w: float = 0.0) -> tuple[float, float]:
    """The largest (cell_w, cell_h) that fits every operand of a step in a lane."""
    rows = max(matrix.rows_of(op.shape) for op in ops)
    cols = sum(matrix.columns_of(op.shape) for op in ops)
    heads_gaps = sum(10.0 * (op.shape[0] - 1) for op in ops if len(op.shape) == 3)
    fixed = sum(_symbol_width(s)[0] for s in symbols) + heads_gaps + extra_w
    width_limit = (RIGHT - LEFT - fixed) / cols
    cell_h = min(MAX_CELL, lane_h / rows, width_limit)
    # cells may be wider than tall (up to 1.55×, or 24 px in thin lanes) but never wider
    # than the lane allows
    cell_w = min(width_limit, max(cell_h * 2.0, 24.0), MAX_CELL * 1.4)
    return max(0.5, cell_w), max(0.5, cell_h)


def _font_cap(ops: list[Operand], cell: tuple[float, float]) -> float:
    """One font size for every number of a frame: the largest that fits in all its matrices."""
    cell_w, cell_h = cell
    fonts = []
    if not _readable(cell):
        return matrix.MAX_NUMBER_FONT
    for op in ops:
        if op.values[0].size > 400:      # drawn as a heat map, without numbers
            continue
        fitted = matrix.number_texts(op.values[0], cell_w, min(matrix.MAX_NUMBER_FONT,
                                                               cell_h * 0.52), _range(op)[2])
        if fitted:
            fonts.append(fitted[1])
    return min(fonts, default=matrix.MAX_NUMBER_FONT)


def _row(ops: list[Operand], symbols: list[str], step: Step, tp: int, lanes, colour,
         cell: tuple[float, float], x0: float = LEFT, font_cap: float = matrix.MAX_NUMBER_FONT):
    """Operands left to right in every lane, with the symbols between them."""
    cell_w, cell_h = cell
    placed, texts = [], []
    x = x0
    budget = max(4, FRAME_CELLS // (tp * max(1, len(ops))))
    spots = []
    for op, symbol in zip(ops, symbols):
        w = matrix.width_of(op.shape, cell_w)
        lo, hi, integral = _range(op, cell)
        drawn: dict[tuple[int, int], matrix.MatrixView] = {}
        for r, (top, _) in enumerate(lanes):
            key = (id(op.values[r]), id(op.sources[r]))    # a replicated tensor: draw it once
            if key not in drawn:
                drawn[key] = matrix.draw(op.values[r], op.sources[r], x, top, cell_w, cell_h,
                                         lo, hi, colour, budget=budget, integral=integral,
                                         font_cap=font_cap)
            placed.append(Placed(drawn[key].placed(round(top, 1), _title(op, r))))
        texts += _column_head(op, x, w)
        spots.append((x, w))
        sw, font = _symbol_width(symbol)
        if symbol:
            first_h = matrix.rows_of(op.shape) * cell_h
            for top, _ in lanes:
                texts.append(Text(round(x + w + sw / 2, 1),
                                  round(top + min(first_h, 60) / 2 + font * 0.35, 1),
                                  symbol, font, cls="ink", weight="700"))
        x += w + sw
    return placed, texts, spots, x


def _title(op: Operand, r: int) -> str:
    name = op.name.replace("ᵣ", str(r).translate(SUBSCRIPTS) if op.per_rank else "")
    return f"rank {r} · {name} ({_note(op)})"


def _column_head(op: Operand, x: float, w: float) -> list[Text]:
    cx = round(x + w / 2, 1)
    note = _note(op)
    # keep the header inside its column: long notes lose their words first
    if len(note) * 7.6 > max(w, 120) + 40:
        note = " × ".join(str(d) for d in op.shape[-2:])
    return [Text(cx, LANES_TOP + 18, op.name if op.per_rank else op.name.replace("ᵣ", ""), 18,
                 weight="700"),
            Text(cx, LANES_TOP + 38, note, 16, cls="muted")]


def step_frame(k: int, step: Step, tp: int, lanes, colour, header: str,
                highlight) -> FrameView:
    lane_h = lanes[0][1] - lanes[0][0]
    if step.kind == "check":
        return check_frame(k, step, tp, colour, header)
    ops = list(step.operands) + ([step.result] if step.result is not None else [])
    symbols = list(step.symbols) + [""] * (len(ops) - len(step.symbols))
    band = None
    arrows: list[Arrow] = []
    if step.kind == "collective":
        band_w = 190.0
        cell = _fit(ops, [""], lane_h, tp, extra_w=band_w + 60)
        before, after = step.operands[0], step.result
        font_cap = _font_cap([before, after], cell)
        placed, texts, spots, x = _row([before], [""], step, tp, lanes, colour, cell,
                                       font_cap=font_cap)
        bx = spots[0][0] + spots[0][1] + 40
        after_x = bx + band_w + 40
        band = _band(step, bx, band_w, lanes, tp)
        after_placed, after_texts = _after(after, after_x, spots[0][0], lanes, colour, cell,
                                           tp, font_cap)
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
        cell = _fit(ops, symbols[:-1], lane_h, tp)
        placed, texts, _, _ = _row(ops, symbols, step, tp, lanes, colour, cell,
                                   font_cap=_font_cap(ops, cell))
    return FrameView(k, header, highlight, tuple(placed), tuple(texts), tuple(arrows), band)


def _band(step: Step, x: float, w: float, lanes, tp: int) -> Band:
    c = step.collective
    top, bottom = lanes[0][0], lanes[-1][1]
    mid = (top + bottom) / 2
    op = c.op.replace("_", "-")
    src = step.result.sources[0]
    by_rows = src.ndim == 2 and len(np.unique(src[0])) == 1
    how = {"all_reduce": f"{'max' if c.reduce_op == 'max' else 'sum'} over {tp} ranks",
           "all_gather": f"{tp} pieces {'stacked' if by_rows else 'side by side'}",
           "reduce_scatter": f"sum, keep 1/{tp}"}[c.op]
    return Band(round(x, 1), round(top, 1), w, round(bottom - top, 1), (
        Text(round(x + w / 2, 1), round(mid - 14, 1), op, 20, weight="700"),
        Text(round(x + w / 2, 1), round(mid + 8, 1), how, 16, cls="muted"),
        Text(round(x + w / 2, 1), round(mid + 28, 1), f"{c.elements:,} numbers", 16,
             cls="muted")))


def _after(after: Operand, x: float, before_x: float, lanes, colour, cell, tp: int,
           font_cap: float):
    """The result of a collective in every lane; after an all-gather, each rank's block flies
    in from the lane that sent it."""
    cell_w, cell_h = cell
    lo, hi, integral = _range(after, cell)
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
                                         integral=integral, font_cap=font_cap)
            placed.append(Placed(drawn[key].placed(round(top, 1), _title(after, r))))
            continue
        pieces = np.split(after.values[r], tp, axis=axis)
        sources = np.split(after.sources[r], tp, axis=axis)
        for s, (piece, source) in enumerate(zip(pieces, sources)):
            px = x + (s * piece.shape[1] * cell_w if axis == 1 else 0)
            py = top + (s * piece.shape[0] * cell_h if axis == 0 else 0)
            view = matrix.draw(piece, source, px, py, cell_w, cell_h, lo, hi, colour,
                               budget=max(2, budget // tp), title=f"from rank {s}",
                               integral=integral, font_cap=font_cap)
            placed.append(Placed(view, round(before_x - px, 1), round(lanes[s][0] - py, 1)))
    w = matrix.width_of(after.shape, cell_w)
    return placed, _column_head(after, x, w)


CHECK_LEFT = 200.0          # matrices start here; the tensor's name sits left of them
CHECK_NOTE = 250.0          # room right of the matrices for "max |Δ| = …"
CHECK_LABEL = 30.0          # a stacked matrix's label above it


def _check_cell(height: float, rows: int, per_col: float) -> tuple[float, float]:
    """The cell size that fits ``rows`` rows in ``height`` and a column in ``per_col``."""
    cell_h = min(MAX_CELL, height / rows)
    cell_w = min(per_col, max(cell_h * 2.0, 24.0), MAX_CELL * 1.4)
    return cell_w, min(cell_h, cell_w)


def check_frame(k: int, step: Step, tp: int, colour, header: str) -> FrameView:
    """The gathered tensor-parallel results against the unsharded ones, a row per tensor (three
    at most; the others in words), on one common cell size: side by side, or — when that makes
    the cells larger, as for a wide and short result — the gathered copy above the unsharded
    one, so the numbers are big enough to read and compare."""
    shown, more = list(step.comparisons[:3]), step.comparisons[3:]
    top, bottom, gap = LANES_TOP + 36, LANES_BOTTOM - (30 if more else 0), 26.0
    rows = sum(c.sharded.shape[0] for c in shown)
    cols = max(c.sharded.shape[1] for c in shown)
    free = bottom - top - gap * (len(shown) - 1)
    side = _check_cell(free, rows, (RIGHT - CHECK_LEFT - 80 - CHECK_NOTE) / (2 * cols))
    # stacked, a comparison takes a label, its matrix, a label, its matrix
    stacked = _check_cell(free - len(shown) * (2 * CHECK_LABEL + 8), 2 * rows,
                          (RIGHT - CHECK_LEFT - CHECK_NOTE) / cols)
    stack = (_readable(stacked) and not _readable(side)) if len(shown) > 1 else \
        stacked[0] > side[0] * 1.15
    cell_w, cell_h = stacked if stack else side
    width = cols * cell_w
    used = (rows * cell_h * 2 + len(shown) * (2 * CHECK_LABEL + 8) if stack
            else rows * cell_h) + gap * (len(shown) - 1)
    y = top + max(0.0, (free + gap * (len(shown) - 1) - used) / 2)
    x1 = CHECK_LEFT
    x2 = x1 if stack else x1 + width + 80
    texts: list[Text] = []
    if not stack:
        texts += [Text(x1 + width / 2, y - 12, "tensor-parallel, gathered from the ranks", 16,
                       cls="muted"),
                  Text(x2 + width / 2, y - 12, "one GPU, unsharded", 16, cls="muted")]
    placed = []
    budget = FRAME_CELLS // (2 * len(shown))
    for c in shown:
        h = c.sharded.shape[0] * cell_h
        if stack:
            y1 = y + CHECK_LABEL
            y2 = y1 + h + 8 + CHECK_LABEL
        else:
            y1 = y2 = y
        lo = float(min(c.sharded.min(), c.reference.min()))
        hi = float(max(c.sharded.max(), c.reference.max()))
        ref_sources = np.full(c.reference.shape, REPLICATED)
        font = _font_cap([Operand(c.name, (c.sharded,), (c.sources,), False)],
                         (cell_w, cell_h))
        placed += [Placed(matrix.draw(c.sharded, c.sources, x1, y1, cell_w, cell_h, lo, hi,
                                      colour, budget=budget, title=f"{c.name}, tensor-parallel",
                                      font_cap=font)),
                   Placed(matrix.draw(c.reference, ref_sources, x2, y2, cell_w, cell_h, lo, hi,
                                      colour, budget=budget, title=f"{c.name}, one GPU",
                                      font_cap=font))]
        if stack:
            texts += [Text(x1, y1 - 10, f"{c.name}: tensor-parallel, gathered from the ranks",
                           16, anchor="start", cls="muted"),
                      Text(x2, y2 - 10, f"{c.name}: one GPU, unsharded", 16, anchor="start",
                           cls="muted")]
            mid = (y1 + y2 + h) / 2
        else:
            mid = y + min(h, 60) / 2
            texts.append(Text(x1 + width + 40, mid + 6, "vs", 18, cls="muted"))
        right = x2 + width + 28
        texts += [Text(x1 - 18, mid + 8, c.name, 22, anchor="end", weight="700"),
                  Text(right, mid, f"max |Δ| = {c.error:.3g}", 22, anchor="start",
                       weight="700"),
                  Text(right, mid + 24, "exact" if c.error == 0 else "rounding only",
                       16, anchor="start", cls="muted")]
        y = y2 + h + gap
    if more:
        texts.append(Text(x1, LANES_BOTTOM - 6, "also: " + ", ".join(
            f"{c.name} max |Δ| = {c.error:.3g}" for c in more), 16, anchor="start", cls="muted"))
    return FrameView(k, header, None, tuple(placed), tuple(texts), (), None, lanes=False)
