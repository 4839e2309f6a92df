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

from app.sim.optimizer.simulate import OptimizerTrace
from app.draw.palette import CATEGORY, ramp, text_on
from app.draw.plot import line_chart

WIDTH, HEIGHT = 1280, 720
GRID_LEFT, GRID_RIGHT, GRID_TOP = 310, 1262, 104
ROW_H_MAX = 62
BOTTOM_TOP = 556

ROW_COLOURS = {"w16": "#8877cc", "w": CATEGORY["params"], "g": CATEGORY["grads"],
               "buf": CATEGORY["optimizer"], "m": CATEGORY["optimizer"], "v": "#AA4499",
               "m_hat": "#a1d4cc", "v_hat": "#d4a1ca", "update": "#EE7733"}
"""The categories' scheme (app/draw/palette.py CATEGORY, never a rank's colour): weights
indigo, gradient sand, states teal/purple, the update orange; derived (transient) rows take a
paler tint of their state; every row is labelled by name."""


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


@dataclass(frozen=True)
class RowLabel:
    y: float
    label: str
    sub: str
    colour: str


@dataclass(frozen=True)
class Segment:
    d: str
    x: float
    y: float


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
class BarPart:
    x: float
    w: float
    fill: str
    ink: str
    label: str
    state: bool        # counts as optimizer state (what ZeRO-1 shards)


@dataclass(frozen=True)
class Tick:
    x: float
    y: float
    label: str
    anchor: str


@dataclass(frozen=True)
class OptimizerDeck:
    width: int
    height: int
    title: str
    columns: tuple[tuple[float, float, str], ...]
    row_labels: tuple[RowLabel, ...]
    frames: tuple[FrameView, ...]
    bar: tuple[BarPart, ...]
    bar_y: float
    bar_title: str
    bar_note: str
    state_span: tuple[float, float, str] | None
    chart_box: tuple[float, float, float, float]
    chart_ticks: tuple[Tick, ...]
    chart_grid: tuple[float, ...]
    chart_title: str
    font: float
    cell_xs: tuple[float, ...]   # left edge of each column's cells
    cell_w: float
    cell_h: float


def short_number(x: float, chars: int) -> str:
    """``x`` in at most ``chars`` characters, as many significant digits as fit (≤ 4)."""
    if x == 0:
        return "0"
    for digits in (4, 3, 2, 1):
        text = f"{x:.{digits}g}"
        if "e" in text:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}e{int(exponent)}"
        if len(text) <= chars:
            return text
    return text


def build_deck(trace: OptimizerTrace, upto: int | None = None) -> OptimizerDeck:
    p = trace.params
    last = len(trace.frames) - 1 if upto is None else upto
    n, rows = p.size, trace.rows
    col_w = min(130.0, (GRID_RIGHT - GRID_LEFT) / n)
    available = BOTTOM_TOP - 24 - GRID_TOP
    row_h = min(ROW_H_MAX, available / len(rows))
    top = GRID_TOP + (available - row_h * len(rows)) / 2  # centred in its band
    font = round(min(19.0, col_w / 5.4, row_h * 0.42), 1)
    chars = max(4, int((col_w - 8) / (font * 0.62)))
    pad = 2.0
    xs = [GRID_LEFT + j * col_w for j in range(n)]
    ys = [top + i * row_h for i in range(len(rows))]

    w, h = round(col_w - 2 * pad, 1), round(row_h - 2 * pad, 1)

    def row_cells(i: int, values) -> RowCells:
        row = rows[i]
        fill = _fill(row.key)
        texts, exact = [], []
        for value in values.tolist():
            if math.isnan(value):
                texts.append("")
                exact.append("")
            else:
                texts.append(short_number(value, chars))
                exact.append(f"{value:.9g}")
        return RowCells(row.label, round(ys[i] + pad, 1), fill, _ink(fill), row.dtype,
                        tuple(texts), tuple(exact))

    chart = _loss_chart(trace)
    frames = []
    n_steps = p.steps
    for k in range(last + 1):
        f = trace.frames[k]
        values = trace.values[k]
        cells, outlines = [], []
        for i, row in enumerate(rows):
            if k and row.key not in trace.changed[k]:
                continue
            cells.append(row_cells(i, values[i]))
            if k:
                outlines.append((GRID_LEFT - 2, round(ys[i] - 1, 1), round(n * col_w + 4, 1),
                                 round(row_h + 2, 1)))
        segment = chart["segments"].get(k)
        header = ("Before the first optimizer step" if k == 0 else
                  f"Optimizer step {f.step} of {n_steps} · {f.phase}")
        unit = ("before optimizer step 1" if k == 0 else
                f"optimizer step {f.step} of {n_steps}: {f.phase}")
        frames.append(FrameView(k, header, formula(f.phase, p.optimizer, p.precision),
                                tuple(cells), tuple(outlines), segment, unit))

    columns = tuple((round(x + col_w / 2, 1), round(top - 10, 1), f"[{j}]")
                    for j, x in enumerate(xs))
    labels = tuple(RowLabel(round(ys[i] + row_h / 2, 1), r.label,
                            f"{r.dtype} · {r.bytes_per_param} B kept" if r.bytes_per_param
                            else f"{r.dtype} · computed, not kept", ROW_COLOURS[r.key])
                   for i, r in enumerate(rows))
    bar, span, bar_title, bar_note = _bytes_bar(trace)
    precision = "mixed precision (bf16 + fp32 master)" if p.precision == "mixed" else "fp32"
    return OptimizerDeck(
        WIDTH, HEIGHT, f"{_NAMES[p.optimizer]} · {precision} · {n} parameters",
        columns, labels, tuple(frames), bar, BOTTOM_TOP + 58, bar_title, bar_note, span,
        chart["box"], chart["ticks"], chart["grid"], chart["title"], font,
        tuple(round(x + pad, 1) for x in xs), w, h)


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


def _bytes_bar(trace: OptimizerTrace):
    """A stacked bar of the bytes each kept tensor holds per parameter."""
    kept = [r for r in trace.rows if r.bytes_per_param]
    total = sum(r.bytes_per_param for r in kept)
    left, right = 24.0, 600.0
    unit = (right - left) / 16  # 16 bytes (mixed Adam) fill the bar; smaller ones fall short
    parts, x = [], left
    state_keys = {"buf", "m", "v"} | ({"w"} if trace.params.precision == "mixed" else set())
    for r in kept:
        w = r.bytes_per_param * unit
        colour = ROW_COLOURS[r.key]
        parts.append(BarPart(round(x, 1), round(w, 1), colour, text_on(colour),
                             f"{_short(r)} {r.bytes_per_param}", r.key in state_keys))
        x += w
    states = [b for b in parts if b.state]
    span = None
    k = sum(r.bytes_per_param for r in kept if r.key in state_keys)
    if states:
        span = (states[0].x, states[-1].x + states[-1].w,
                f"optimizer state K = {k} B: what ZeRO-1 shards")
    title = f"Bytes kept per parameter: {total}"
    legend = " + ".join(f"{r.bytes_per_param} {_short(r)}" for r in kept)
    return tuple(parts), span, title, legend


def _short(row) -> str:
    return {"w16": "w₁₆", "w": "w", "g": "g", "buf": "b", "m": "m", "v": "v"}[row.key]


def _loss_chart(trace: OptimizerTrace) -> dict:
    """The loss after each step: axes in frame 0, one segment per step in its last frame."""
    box = (700.0, BOTTOM_TOP + 22, 1262.0, HEIGHT - 34)
    steps = [s.step for s in trace.history]
    losses = [s.loss for s in trace.history]
    width, height = int(box[2] - box[0]), int(box[3] - box[1])
    xs_data = steps if len(steps) > 1 else [0, 1]
    chart = line_chart([("loss", xs_data, losses if len(steps) > 1 else losses * 2)],
                       x_label="step", y_label="loss", width=width + 150, height=height + 56)
    # line_chart leaves room for labels; map its pixel coordinates into the box
    sx = (box[2] - box[0] - 54) / (chart.right - chart.left)
    sy = (box[3] - box[1] - 22) / (chart.bottom - chart.top)

    def at(px: float, py: float) -> tuple[float, float]:
        return (round(box[0] + 54 + (px - chart.left) * sx, 1),
                round(box[1] + (py - chart.top) * sy, 1))

    points = [at(x, y) for x, y in chart.series[0].points]
    last_frame = {}
    for k, f in enumerate(trace.frames):
        last_frame[f.step] = k
    segments = {0: Segment("", *points[0])}
    for t in range(1, len(points)):
        (x0, y0), (x1, y1) = points[t - 1], points[t]
        segments[last_frame[t]] = Segment(f"M{x0},{y0} L{x1},{y1}", x1, y1)
    ticks = [Tick(at(t.at, chart.bottom)[0], box[3] + 18, t.label, "middle")
             for t in chart.x_ticks if float(t.label).is_integer()]
    grid = []
    for t in chart.y_ticks:
        y = at(chart.left, t.at)[1]
        ticks.append(Tick(box[0] + 46, y + 5, t.label, "end"))
        grid.append(y)
    return {"box": box, "segments": segments, "ticks": tuple(ticks), "grid": tuple(grid),
            "title": "loss L(w) after each step"}
