"""The tensor-parallel deck's check frame: the gathered tensor-parallel results against the
unsharded ones, laid out in the deck's box (its :class:`~app.scenes.tensor_parallel.deck_frames.
Geometry`): the tensors' names in a column as wide as the widest, the matrices, and the
largest difference beside them in a column as wide as its text."""

from __future__ import annotations

import numpy as np

from app.draw import matrix
from app.draw.text import fits, text_width
from app.scenes.tensor_parallel.deck_frames import (FRAME_CELLS, MAX_CELL, FrameView, Geometry,
                                                    Placed, Text, _font_cap, _readable)
from app.sim.tensor_parallel.program import REPLICATED, Operand, Step


def _check_cell(height: float, rows: int, per_col: float) -> tuple[float, float]:
    """The cell size that fits ``rows`` rows in ``height`` and a column in ``per_col`` (a
    unit at least)."""
    per_col = max(per_col, 1.0)
    cell_h = max(1.0, min(MAX_CELL, height / rows))
    cell_w = min(per_col, max(cell_h * 2.0, 24.0), MAX_CELL * 1.4)
    return cell_w, min(cell_h, cell_w)


def check_height(g, rows: int, more: bool) -> float:
    """The least height a check of ``rows`` rows takes (``more``: and the line naming the
    others), from the top of the lanes' column heads; ``g`` has the box's sizes."""
    small = g.small
    return (small * 3.2 + rows * (g.head * 0.8 + small * 1.6) + (rows - 1) * small * 1.7
            + (small * 1.8 if more else 0.0))


def check_frame(k: int, step: Step, tp: int, colour, header: str, g: Geometry) -> FrameView:
    """The gathered tensor-parallel results against the unsharded ones, a row per tensor (three
    at most, fewer where the box is short; the others in words), on one common cell size: side
    by side, or — when that makes the cells larger, as for a wide and short result — the
    gathered copy above the unsharded one, so the numbers are big enough to read and
    compare."""
    count = len(step.comparisons)
    rows = next((n for n in (3, 2) if n <= count and check_height(g, n, count > n)
                 <= g.lanes_bottom - g.lanes_top), 1)
    shown, more = list(step.comparisons[:rows]), step.comparisons[rows:]
    text, small, head = g.text, g.small, g.head
    label = small * 2.0                   # a stacked matrix's label above it
    left = g.pad + max(text_width(c.name, head, bold=True) for c in shown) + g.pad
    note = max(max(text_width(f"max |Δ| = {c.error:.3g}", head, bold=True),
                   text_width("rounding only", small)) for c in shown) + g.pad * 2
    vs = text_width("vs", text) + g.pad * 2
    top = g.lanes_top + small * 2.2
    bottom = g.lanes_bottom - (small * 1.8 if more else 0)
    gap = small * 1.7
    rows = sum(c.sharded.shape[0] for c in shown)
    cols = max(c.sharded.shape[1] for c in shown)
    free = bottom - top - gap * (len(shown) - 1)
    # a row is as tall as its matrices, and at least as its name and its difference's lines:
    # the cells are sized for what the rows' least heights leave them
    least = head * 0.8 + small * 1.6
    room = free
    for _ in range(4):
        side = _check_cell(room, rows, (g.width - g.pad - left - vs - note) / (2 * cols))
        # stacked, a comparison takes a label, its matrix, a label, its matrix
        stacked = _check_cell(room - len(shown) * (2 * label + 8), 2 * rows,
                              (g.width - g.pad - left - note) / cols)
        stack = (_readable(stacked, g) and not _readable(side, g)) if len(shown) > 1 else \
            stacked[0] > side[0] * 1.15
        cell_w, cell_h = stacked if stack else side
        row_h = [max(c.sharded.shape[0] * cell_h * (2 if stack else 1)
                     + ((2 * label + 8) if stack else 0), least) for c in shown]
        over = sum(row_h) - free
        if over <= 0.5 or room <= rows:
            break
        room = max(float(rows), room - over)
    width = cols * cell_w
    used = sum(row_h) + gap * (len(shown) - 1)
    y = top + max(0.0, (free + gap * (len(shown) - 1) - used) / 2)
    x1 = left
    x2 = x1 if stack else x1 + width + vs
    texts: list[Text] = []
    if not stack:
        for x, words in ((x1, ("tensor-parallel, gathered from the ranks", "tensor-parallel")),
                         (x2, ("one GPU, unsharded", "one GPU"))):
            shown_words = next((w for w in words if fits(w, small, width + vs * 0.8)), "")
            if shown_words:
                texts.append(Text(round(x + width / 2, 1), round(y - small * 0.7, 1),
                                  shown_words, small, cls="muted"))
    placed = []
    budget = FRAME_CELLS // (2 * len(shown))
    low, high = g.numbers
    for c, pitch in zip(shown, row_h):
        h = c.sharded.shape[0] * cell_h
        row_top = y
        if stack:
            y1 = y + label
            y2 = y1 + h + 8 + label
        else:
            y1 = y2 = y
        lo = float(min(c.sharded.min(), c.reference.min()))
        hi = float(max(c.sharded.max(), c.reference.max()))
        ref_sources = np.full(c.reference.shape, REPLICATED)
        font = _font_cap([Operand(c.name, (c.sharded,), (c.sources,), False)],
                         (cell_w, cell_h), g)
        placed += [Placed(matrix.draw(c.sharded, c.sources, x1, y1, cell_w, cell_h, lo, hi,
                                      colour, budget=budget, title=f"{c.name}, tensor-parallel",
                                      font_cap=font, min_font=low, max_font=high)),
                   Placed(matrix.draw(c.reference, ref_sources, x2, y2, cell_w, cell_h, lo, hi,
                                      colour, budget=budget, title=f"{c.name}, one GPU",
                                      font_cap=font, min_font=low, max_font=high))]
        if stack:
            for x, yy, words in ((x1, y1, (f"{c.name}: tensor-parallel, gathered from the ranks",
                                           f"{c.name}: tensor-parallel")),
                                 (x2, y2, (f"{c.name}: one GPU, unsharded", f"{c.name}: one GPU"))):
                shown_words = next((w for w in words if fits(w, small, width + g.pad)), "")
                if shown_words:
                    texts.append(Text(x, round(yy - small * 0.6, 1), shown_words, small,
                                      anchor="start", cls="muted"))
            mid = (y1 + y2 + h) / 2
        else:
            mid = y + (max(min(h, text * 3.5), least) - least) / 2 + head * 0.8
            texts.append(Text(round(x1 + width + vs / 2, 1), round(mid + text * 0.35, 1), "vs",
                              text, cls="muted"))
        right = x2 + width + g.pad
        texts += [Text(round(x1 - g.pad, 1), round(mid + head * 0.35, 1), c.name, head,
                       anchor="end", weight="700"),
                  Text(round(right, 1), round(mid, 1), f"max |Δ| = {c.error:.3g}", head,
                       anchor="start", weight="700"),
                  Text(round(right, 1), round(mid + small * 1.3, 1),
                       "exact" if c.error == 0 else "rounding only", small, anchor="start",
                       cls="muted")]
        y = row_top + pitch + gap
    if more:
        words = "also: " + ", ".join(f"{c.name} max |Δ| = {c.error:.3g}" for c in more)
        if (fits(words, small, g.width - g.pad - x1)
                and y - gap + small <= g.lanes_bottom - small * 1.2):
            texts.append(Text(x1, round(g.lanes_bottom - small * 0.4, 1), words, small,
                              anchor="start", cls="muted"))
    return FrameView(k, header, None, tuple(placed), tuple(texts), (), None, lanes=False)
