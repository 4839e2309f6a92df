"""The optimizer scene as drawable geometry: one row of cells per tensor (weights, gradient,
states, update), one column per parameter, the bytes each tensor keeps per parameter, and the
loss after every step.

Drawn as layers, like every deck: frame 0 holds every row's starting values, frame k redraws
only the rows step k changed (opaque cells over the old ones) and adds its piece of the loss
curve, so showing frames 0…k shows the state after step k and ``player.js`` works unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from app.draw.box import Box
from app.draw.layout import LINE, heading
from app.draw.palette import ramp, text_on
from app.draw.text import fits, text_width
from app.draw.widen import least_box
from app.scenes.optimizer.deck_band import (ROW_COLOURS, Band, Segment, Text, band_height,
                                            bottom_band)
from app.sim.optimizer.simulate import OptimizerTrace

MIN_WIDTH, MIN_HEIGHT = 600, 320
"""The smallest box the deck is laid out for: a narrower frame (a phone) scrolls it."""


@dataclass(frozen=True)
class RowCells:
    """One row of one frame: a cell per parameter, with its number and its hover text."""

    label: str
    y: float           # top of the row's cells
    fill: str
    ink: str
    dtype: str
    texts: tuple[str, ...]      # as shown; "" → not computed yet (a dashed outline and a dash)
    exact: tuple[str, ...]      # the value in full, for its hover text
    numbers: tuple[bool, ...] = ()
    """whether each computed value's number is written (left out where it does not fit its
    cell: the hover text still tells)"""


@dataclass(frozen=True)
class RowLabel:
    y: float           # the row's middle
    label: str
    sub: str
    colour: str
    named: bool = True
    """its name written (rows shorter than a label, at large type in a short box: every
    other row's; the swatch's colour and the hover still tell)"""


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    formula: str
    rows: tuple[RowCells, ...]
    outlines: tuple[tuple[float, float, float, float], ...]
    segment: Segment | None
    unit: str = ""
    """what the step is, for the player's position text (optimizer step 2 of 3: update)"""


@dataclass(frozen=True)
class OptimizerDeck:
    width: int
    height: int
    box: Box
    """the box asked for (its bucket is the deck's ``data-box``); width × height is what it
    was laid out in (wider on a phone: :data:`MIN_WIDTH`)"""
    title: str
    title_lines: tuple[Text, ...]
    header: tuple[float, float, float]     # x, baseline and size of each frame's header
    rule: tuple[float, float, float]       # and of its formula
    columns: tuple[Text, ...]
    row_labels: tuple[RowLabel, ...]
    label_x: float                         # the rows' names end here (right-aligned)
    swatch_x: float
    name_size: float
    sub_size: float                        # 0: the dtype line is left out
    frames: tuple[FrameView, ...]
    band: Band | None
    """the bytes and the loss along the bottom (None where the rows need all the height)"""
    font: float                            # the cells' numbers
    small: float
    cell_xs: tuple[float, ...]   # left edge of each column's cells
    cell_w: float
    cell_h: float


@lru_cache(maxsize=65536)
def fitted_number(x: float, size: float, room: float) -> str:
    """``x`` with as many significant digits (4 … 1) as fit ``room`` units at ``size``, in the
    shortest of its plain, exponent ("7e-4") and zero-less ("-.05") forms; "" when none fits."""
    if x == 0:
        return "0"
    for digits in (4, 3, 2, 1):
        plain = f"{x:.{digits}g}"
        for text in sorted(_forms(x, digits), key=lambda t: (t != plain, len(t))):
            if fits(text, size, room, bold=True):
                return text
    return ""


def _forms(x: float, digits: int) -> set[str]:
    plain = f"{x:.{digits}g}"
    mantissa, _, exponent = f"{x:.{digits - 1}e}".partition("e")
    forms = {plain, f"{mantissa}e{int(exponent)}"}
    if "e" in plain:
        a, _, b = plain.partition("e")
        forms.add(f"{a}e{int(b)}")
        forms.discard(plain)
    if plain.startswith(("0.", "-0.")):
        forms.add(plain.replace("0.", ".", 1))
    return forms


def headers(trace: OptimizerTrace) -> tuple[list[str], list[str]]:
    """Every frame's header and unit (the player's position text)."""
    n_steps = trace.params.steps
    out, units = [], []
    for k, f in enumerate(trace.frames):
        out.append("Before the first optimizer step" if k == 0 else
                   f"Optimizer step {f.step} of {n_steps} · {f.phase}")
        units.append("before optimizer step 1" if k == 0 else
                     f"optimizer step {f.step} of {n_steps}: {f.phase}")
    return out, units


def build_deck(trace: OptimizerTrace, box: Box, upto: int | None = None) -> OptimizerDeck:
    """The deck laid out for ``box``: the header and title along the top, the step's rule
    under them, the rows of cells (their names as wide as the widest), and along the bottom
    the bytes each kept tensor holds and the loss after each step (app/scenes/optimizer/
    deck_band.py)."""
    p = trace.params
    last = len(trace.frames) - 1 if upto is None else upto
    all_headers, units = headers(trace)
    n, rows = p.size, trace.rows
    precision = "mixed precision (bf16 + fp32 master)" if p.precision == "mixed" else "fp32"
    title = f"{_NAMES[p.optimizer]} · {precision} · {n} parameters"
    rules = {formula(f.phase, p.optimizer, p.precision) for f in trace.frames}
    # the least box: the rows a small label apart where the bottom band is left out
    area = least_box(box, MIN_WIDTH, MIN_HEIGHT, all_headers, lambda a: _top_band(
        a, all_headers, title, rules)[3] + len(rows) * a.small * 1.05 + a.pad * 1.8)
    width, height = area.width, area.height
    pad, text, small = area.pad, area.text, area.small
    top, rule_y, columns_y, grid_top = _top_band(area, all_headers, title, rules)
    # the bottom band, with its note where the rows keep room for two lines of label
    room = lambda band_h: (height - pad - band_h - pad * 0.8 - grid_top) / len(rows)  # noqa: E731
    note = room(band_height(area, True)) >= (text + small) * LINE + 4
    banded = room(band_height(area, False)) >= small * 1.15  # else the rows take it all
    row_h = min(text * 2.8, room(band_height(area, note)) if banded else room(-pad * 0.8))
    band_top = grid_top + row_h * len(rows) + pad * 0.8      # the band takes what is left
    two_lines = row_h >= (text + small) * LINE + 4
    name_size = text if row_h >= text * 1.25 else small
    labels = tuple(RowLabel(0, r.label, f"{r.dtype} · {r.bytes_per_param} B kept"
                            if r.bytes_per_param else f"{r.dtype} · computed, not kept",
                            ROW_COLOURS[r.key]) for r in rows)
    label_w = max(max(text_width(lb.label, name_size, bold=True) for lb in labels),
                  max(text_width(lb.sub, small) for lb in labels) if two_lines else 0.0)
    swatch_x = pad * 0.8
    label_x = swatch_x + small * 0.45 + small * 0.5 + label_w
    grid_left = label_x + small * 0.8
    col_w = min(text * 7.5, (width - pad - grid_left) / n)
    cell_pad = 2.0
    xs = [grid_left + j * col_w for j in range(n)]
    ys = [grid_top + i * row_h for i in range(len(rows))]
    w, h = round(col_w - 2 * cell_pad, 1), round(row_h - 2 * cell_pad, 1)
    font = text if fits("-0.0007252", text, w - 8, bold=True) and h >= text * 1.15 else small
    show = h >= font * 1.05
    room_w = w - font * 0.5

    def row_cells(i: int, values) -> RowCells:
        row = rows[i]
        fill = _fill(row.key)
        texts, exact, numbers = [], [], []
        for value in values.tolist():
            if math.isnan(value):
                texts.append("")
                exact.append("")
                numbers.append(False)
            else:
                shown = fitted_number(value, font, room_w) if show else ""
                texts.append(shown or "·")
                exact.append(f"{value:.9g}")
                numbers.append(bool(shown))
        return RowCells(row.label, round(ys[i] + cell_pad, 1), fill, _ink(fill), row.dtype,
                        tuple(texts), tuple(exact), tuple(numbers))

    grid_right = grid_left + n * col_w
    band = bottom_band(trace, area, band_top, note) if banded else None
    frames = []
    for k in range(last + 1):
        f = trace.frames[k]
        values = trace.values[k]
        cells, outlines = [], []
        for i, row in enumerate(rows):
            if k and row.key not in trace.changed[k]:
                continue
            cells.append(row_cells(i, values[i]))
            if k:
                outlines.append((round(grid_left - 2, 1), round(ys[i] - 1, 1),
                                 round(grid_right - grid_left + 4, 1), round(row_h + 2, 1)))
        frames.append(FrameView(k, all_headers[k], formula(f.phase, p.optimizer, p.precision),
                                tuple(cells), tuple(outlines),
                                band.segments.get(k) if band else None, units[k]))
    # the columns' indices, every one where they fit, else every 2nd, 3rd … ([0] always)
    index_w = text_width(f"[{n - 1}]", small) + small * 0.5
    every = next((e for e in (1, 2, 3, 4, 6) if e * col_w >= index_w), n)
    columns = tuple(Text(round(x + col_w / 2, 1), round(columns_y, 1), f"[{j}]")
                    for j, x in enumerate(xs) if j % every == 0)
    pitch = (name_size + (small if two_lines else 0.0)) * 1.05
    placed, last_y = [], -math.inf
    for i, lb in enumerate(labels):
        y = ys[i] + row_h / 2
        named = y - last_y >= pitch
        last_y = y if named else last_y
        placed.append(RowLabel(round(y, 1), lb.label, lb.sub, lb.colour, named))
    placed = tuple(placed)
    titles = tuple(Text(x, y, line) for x, y, line in top.title)
    return OptimizerDeck(
        width, height, box, title, titles, (top.header_x, top.header_y, area.head),
        (top.header_x, rule_y, text), columns, placed, round(label_x, 1), round(swatch_x, 1),
        name_size, small if two_lines else 0.0, tuple(frames), band, font, small,
        tuple(round(x + cell_pad, 1) for x in xs), w, h)


def _top_band(area: Box, all_headers, title: str, rules):
    """The heading, the rule's baseline (on the title's line, at its left, where both fit;
    else under the header), the columns' indices' baseline and the grid's top."""
    pad, text, small = area.pad, area.text, area.small
    top = heading(area, all_headers, title)
    rule_w = max(text_width(r, text) for r in rules)
    if (len(top.title) == 1 and top.title[0][1] > top.header_y
            and rule_w + pad + text_width(title, small) <= area.width - 2 * pad):
        rule_y = top.title[0][1]
        columns_y = rule_y + text * 0.3 + small * 1.2
    else:
        rule_y = round(top.top + text * 0.75, 1)
        columns_y = rule_y + text * 0.35 + small * 1.1
    return top, rule_y, columns_y, columns_y + small * 0.45


def formula(phase: str, optimizer: str, precision: str) -> str:
    """The rule a frame applies, as a lecturer would write it on the board."""
    if phase == "weight decay":
        return "w ← w·(1 − ηλ)   (decoupled)" if optimizer == "adamw" else "g ← g + λ·w   (L2)"
    if phase == "update":
        return {"sgd": "Δw = −η·g", "momentum": "Δw = −η·b"}.get(
            optimizer, "Δw = −η·m̂ / (√v̂ + ε)")
    if phase == "gradient":
        return "g = ∇L = a ⊙ (w₁₆ − c), rounded to bf16" if precision == "mixed" else \
            "g = ∇L = a ⊙ (w − c)"
    return {"start": "L(w) = ½ Σ aᵢ (wᵢ − cᵢ)²", "momentum": "b ← μ·b + g",
            "first moment": "m ← β₁·m + (1 − β₁)·g",
            "second moment": "v ← β₂·v + (1 − β₂)·g²",
            "bias correction": "m̂ = m / (1 − β₁ᵗ),   v̂ = v / (1 − β₂ᵗ)",
            "apply": "w ← w + Δw" + ("   (the fp32 master copy)" if precision == "mixed" else ""),
            "cast to bf16": "w₁₆ ← bf16(w)"}.get(phase, "")


_NAMES = {"sgd": "SGD", "momentum": "SGD + momentum", "adam": "Adam", "adamw": "AdamW"}


_ink = lru_cache(maxsize=64)(text_on)


@lru_cache(maxsize=64)
def _fill(key: str) -> str:
    return ramp((ROW_COLOURS[key], "#ffffff"), 0.35)
