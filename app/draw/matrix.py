"""Matrices as drawable geometry: a grid of cells coloured by where each value came from and
shaded by its size, with the numbers written in when the cells are large enough to read.

A cell's hue says whose it is (a rank's colour, grey for a value every rank holds, dark for a
value just summed over every rank, as in the collectives chapter); its depth says how large
the value is within its matrix (pale: smallest, saturated: largest), so structure — zeros, a
causal triangle, one-hot rows — shows even when the numbers do not fit. Cells of equal colour
are drawn as one path, and the numbers of one ink as one text element, so a deck of many
matrices stays small.

Large matrices are shown at a lower resolution: blocks of cells averaged into one, so no
drawing holds more than a bounded number of cells whatever the sizes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from dataclasses import dataclass

import numpy as np
from markupsafe import Markup, escape

from app.humanize import fixed
from app.draw.palette import text_on

_ink = lru_cache(maxsize=1024)(text_on)

LEVELS = 7
"""shades per hue: values are binned into this many depths"""
MIN_NUMBER_FONT = 16.0
MAX_NUMBER_FONT = 19.0
DIGIT_EM = 0.62
"""width of a digit in DejaVu Sans bold, in em"""


@dataclass(frozen=True)
class CellPath:
    fill: str
    d: str


@dataclass(frozen=True)
class NumberRun:
    ink: str
    spans: str
    """the numbers as ``<tspan x y>`` markup, positions relative to the matrix"""


@dataclass(frozen=True)
class MatrixView:
    x: float
    y: float
    w: float
    h: float
    paths: tuple[CellPath, ...]
    numbers: tuple[NumberRun, ...]
    font: float
    separators: tuple[float, ...]    # x of gaps between heads (3-D values), relative
    title: str

    def placed(self, y: float, title: str) -> MatrixView:
        """The same drawing at another height, with another hover text."""
        return MatrixView(self.x, y, self.w, self.h, self.paths, self.numbers, self.font,
                          self.separators, title)

    @property
    def markup(self) -> Markup:
        """The matrix as an SVG group, written here rather than in a template loop: a deck
        holds thousands of cells, and this keeps a page render within its budget."""
        tip = f' data-tip="{escape(self.title)}"' if self.title else ""
        parts = [f'<g transform="translate({self.x},{self.y})"{tip}>']
        parts += [f'<path fill="{p.fill}" d="{p.d}"/>' for p in self.paths]
        parts += [f'<line class="head-gap" x1="{s}" x2="{s}" y1="-3" y2="{self.h + 3}"/>'
                  for s in self.separators]
        parts += [f'<text class="num" font-size="{self.font}" fill="{run.ink}" '
                  f'text-anchor="middle" dominant-baseline="central">{run.spans}</text>'
                  for run in self.numbers]
        parts.append(f'<rect class="mx-edge" x="-0.5" y="-0.5" width="{self.w + 1:.1f}" '
                     f'height="{self.h + 1:.1f}"/></g>')
        return Markup("".join(parts))


def number_texts(values: np.ndarray, cell_w: float, font: float,
                 integral: bool | None = None,
                 min_font: float = MIN_NUMBER_FONT) -> tuple[list[str], float] | None:
    """Every value of ``values`` as text, and the font that fits the widest in ``cell_w``:
    integers as they are, other numbers with two decimals when that still reads at 15 px, else
    one; None when even that needs a font under ``min_font`` (a deck laid out for its box
    passes its small size). ``integral`` decides the format for several matrices at once
    (every rank's copy of an operand)."""
    flat = values.reshape(-1).tolist()
    room = cell_w - 8
    if integral is None:
        integral = all(abs(v - round(v)) < 1e-9 for v in flat)
    for decimals, smallest in (((0, min_font),) if integral
                               else ((2, max(16.0, min_font)), (1, min_font))):
        texts = [fixed(v, decimals) for v in flat]  # (no "−0.0")
        fits = min(font, room / (max(len(t) for t in texts) * DIGIT_EM))
        if fits >= smallest:
            return texts, fits
    return None


def _blocks(size: int, most: int) -> np.ndarray:
    """Start indices that cut ``size`` indices into at most ``most`` contiguous groups."""
    return np.arange(0, size, math.ceil(size / max(1, most)))


def display_grid(rows: int, cols: int, budget: int) -> tuple[int, int]:
    """How many rows and columns of cells to draw so that their product stays ≤ ``budget``,
    shrinking both by the same factor."""
    if rows * cols <= budget:
        return rows, cols
    factor = math.sqrt(rows * cols / budget)
    return max(1, math.floor(rows / factor)), max(1, math.floor(cols / factor))


def _block_means(stack: np.ndarray, row_starts: np.ndarray, col_starts: np.ndarray) -> np.ndarray:
    """(heads, rows, cols) → the mean of each block of cells."""
    sums = np.add.reduceat(np.add.reduceat(stack, row_starts, axis=1), col_starts, axis=2)
    counts = np.outer(np.diff(np.append(row_starts, stack.shape[1])),
                      np.diff(np.append(col_starts, stack.shape[2])))
    return sums / counts


def draw(values: np.ndarray, sources: np.ndarray, x: float, y: float, cell_w: float,
         cell_h: float, lo: float, hi: float, colour: Callable[[int, float], str], *,
         budget: int, title: str = "", numbers: bool = True, head_gap: float = 10.0,
         integral: bool | None = None, font_cap: float = MAX_NUMBER_FONT,
         min_font: float = MIN_NUMBER_FONT, max_font: float = MAX_NUMBER_FONT) -> MatrixView:
    """Geometry of one matrix (2-D) or a row of matrices (3-D: heads side by side); its numbers
    between ``min_font`` and ``max_font`` (or none).

    ``colour(source, depth)`` gives the fill of a cell from ``source`` with depth in [0, 1];
    ``lo``/``hi``: the value range that maps to depth 0 and 1 (shared by every rank's copy)."""
    stack = values if values.ndim == 3 else values[None]
    src_stack = sources if sources.ndim == 3 else sources[None]
    heads, rows, cols = stack.shape
    if rows * cols * heads <= budget:            # every cell drawn (display_grid's answer)
        exact, shown, shown_src = True, stack, src_stack
    else:
        show_rows, show_cols = display_grid(rows, cols * heads, budget)
        row_starts = _blocks(rows, show_rows)
        col_starts = _blocks(cols, max(1, show_cols // heads))
        exact = len(row_starts) == rows and len(col_starts) == cols
        shown = stack if exact else _block_means(stack, row_starts, col_starts)
        shown_src = src_stack[:, row_starts][:, :, col_starts]
    n_rows, n_cols = shown.shape[1:]
    bw, bh = cols * cell_w / n_cols, rows * cell_h / n_rows
    gap = 1.0 if min(bw, bh) >= 6 else 0.0
    span = hi - lo
    font = min(max_font, bh * 0.52, font_cap)
    fitted = (number_texts(shown, bw, font, integral, min_font) if numbers and exact and bw >= 20
              and font >= min_font else None)
    texts, font = fitted if fitted else (None, font)
    cell_paths, cell_spans = _grid(heads, n_rows, n_cols, cols * cell_w + head_gap, bw, bh, gap)
    # a cell's colour: its source's hue at one of LEVELS depths (pale: lo … deep: hi)
    top = LEVELS - 1
    if span > 0:
        level = np.minimum(np.maximum(((shown - lo) / span * LEVELS).astype(int), 0), top)
        keys = (shown_src.astype(np.int64) * LEVELS + level).ravel().tolist()
    else:
        keys = (shown_src.astype(np.int64) * LEVELS + 3).ravel().tolist()
    # one path per fill and one text per ink, in order of first appearance, cells in order
    cells: dict[str, list[str]] = {}
    inks: dict[str, list[str]] = {}
    fills: dict[int, tuple[list[str], list | None]] = {}
    for n, key in enumerate(keys):
        out = fills.get(key)
        if out is None:
            fill = colour(key // LEVELS, (key % LEVELS) / top)
            out = fills[key] = (cells.setdefault(fill, []),
                                inks.setdefault(_ink(fill), []) if texts is not None else None)
        out[0].append(cell_paths[n])
        if out[1] is not None:
            out[1].append(cell_spans[n] + texts[n] + "</tspan>")
    separators = tuple(round(k * (cols * cell_w + head_gap) - head_gap / 2, 1)
                       for k in range(1, heads))
    width = heads * cols * cell_w + (heads - 1) * head_gap
    return MatrixView(round(x, 1), round(y, 1), round(width, 1), round(rows * cell_h, 1),
                      tuple(CellPath(f, "".join(d)) for f, d in cells.items()),
                      tuple(NumberRun(ink, "".join(spans)) for ink, spans in inks.items()),
                      round(font, 1), separators, title)


def _short(v: float) -> str:
    """A coordinate to 0.1 px, without a trailing ".0" (the path data is most of a deck)."""
    text = f"{v:.1f}"
    return text[:-2] if text.endswith(".0") else text


@lru_cache(maxsize=256)
def _grid(heads: int, rows: int, cols: int, stride: float, bw: float, bh: float,
          gap: float) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every cell's subpath and the start of its number's ``<tspan>``, in order (heads, then
    rows, then columns): the drawn cells keep the matrix's overall size, each covering a block
    of real cells. Shared by every matrix of the same shape and cell size."""
    col_x = [k * stride + j * bw for k in range(heads) for j in range(cols)]
    row_y = [i * bh for i in range(rows)]
    # without gaps, cells overlap their neighbours by half a pixel so no seam shows between them
    grow = 0.6 if gap == 0 else -gap
    tail = f"h{_short(bw + grow)}v{_short(bh + grow)}h{_short(-bw - grow)}z"
    x_text = [f"M{_short(x)} " for x in col_x]
    y_text = [f"{_short(y)}{tail}" for y in row_y]
    span_x = [f'<tspan x="{_short(x + (bw - gap) / 2)}" y="' for x in col_x]
    span_y = [f'{_short(y + (bh - gap) / 2)}">' for y in row_y]
    paths, spans = [], []
    for k in range(heads):
        for i in range(rows):
            for j in range(cols):
                paths.append(x_text[k * cols + j] + y_text[i])
                spans.append(span_x[k * cols + j] + span_y[i])
    return tuple(paths), tuple(spans)


def width_of(shape: tuple[int, ...], cell_w: float, head_gap: float = 10.0) -> float:
    heads, cols = (shape[0], shape[2]) if len(shape) == 3 else (1, shape[1])
    return heads * cols * cell_w + (heads - 1) * head_gap


def columns_of(shape: tuple[int, ...]) -> int:
    return shape[0] * shape[2] if len(shape) == 3 else shape[1]


def rows_of(shape: tuple[int, ...]) -> int:
    return shape[-2]
