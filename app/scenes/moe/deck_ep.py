"""The MoE deck's frames 4–7, expert parallelism, laid out for the box (:mod:`.deck_parts`): the
ep × ep dispatch matrix and the all-to-all's cost on the left; on the right one column per rank
holding the token vectors it receives (4; they fly in from their sender's column), the experts'
outputs and the load of each rank (5), the combine all-to-all back to the tokens' ranks (6),
the weighted sum (7).

The matrix's counts show where a cell holds them at the label or the small size; the cost's
lines wrap to the matrix's column and the last ones are left out where the column is short; a
rank column lists as many rows as fit a small label tall and counts the rest; beyond
:data:`.deck_columns.RANK_COLUMNS` ranks the first four columns are drawn.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from app.draw.fmt import coord
from app.draw.layout import LINE
from app.draw.palette import rank_colour, text_on
from app.draw.shapes import Path, Rect, Text
from app.draw.text import fits, text_width, wrap
from app.scenes.moe.deck_columns import (STRIP_VALUES, Columns, column_headers, expert_rows,
                                         listed_rows, returned, rows_frame, shown_rows,
                                         vector_scale)
from app.scenes.moe.deck_parts import Lay, batch, cells, first_fit, note, value_fill
from app.scenes.moe.deck_router import prob
from app.sim.moe.captions import human_bytes, num


def matrix(p, lay: Lay, values: np.ndarray, title: str, row_word: str, col_word: str,
           cost: list[str]) -> list:
    """The ep × ep matrix of rows sent (counts where they fit), its labels, and the all-to-all's
    cost under it — as many of ``cost``'s lines as the column holds."""
    ep, t, small = values.shape[0], lay.text, lay.small
    x_left = lay.pad + small * 0.6 + small * 0.5 + text_width(str(ep - 1), small) + small * 0.4
    col_w = lay.ep_split - x_left
    y0 = lay.body + small * LINE * 2
    lines = [(k, line) for k, text in enumerate(cost)
             for line in wrap(text, small, lay.ep_split - lay.pad, bold=k == 2)]
    below = small * LINE * 2 + small * 0.6
    while True:
        cost_h = len(lines) * small * LINE + (small * 0.6 if lines else 0)
        size = min(col_w, lay.bottom - y0 - below - cost_h)
        # the matrix first: its counts a small label tall (where the column is that wide)
        if size >= min(col_w, max(ep * small * 1.8, small * 4)) or not lines:
            break
        lines = lines[:-1]
    size = max(size, small * 2)
    cell = size / ep
    items: list = [Rect(0, lay.top, lay.ep_split + lay.pad * 0.5, lay.bottom - lay.top,
                        cls="panel-bg")]
    items += note(lay, lay.pad, lay.ep_split, title)
    hi = max(int(values.max()), 1)
    boxes: dict[str, list[str]] = defaultdict(list)
    texts = []
    widest = str(int(values.max()))
    head = lay.head
    n_size = next((s for s in (head, t, small) if fits(widest, s, cell - 6, bold=True)
                   and cell >= s * (2.2 if s == head else 1.5)), 0.0)
    for i in range(ep):
        for j in range(ep):
            v = int(values[i, j])
            fill = value_fill(v / hi) if v else "#ffffff"
            cells(boxes, x_left + j * cell + 1, y0 + i * cell + 1, cell - 2, cell - 2, fill)
            if n_size:
                texts.append(Text(x_left + (j + 0.5) * cell, y0 + (i + 0.5) * cell + n_size * 0.35,
                                  str(v), size=n_size, cls="", anchor="middle",
                                  fill=text_on(fill), weight=700 if i != j else 0))
    items.append(batch(boxes, texts))
    if n_size:
        items.append(Path("".join(f"M{coord(x_left + i * cell + 2)},{coord(y0 + i * cell + 2)}"
                                  f"h{coord(cell - 4)}v{coord(cell - 4)}h{coord(4 - cell)}z"
                                  for i in range(ep)), cls="ghost"))
    step = max(1, math.ceil(small * 1.2 / cell),
               math.ceil((text_width(str(ep - 1), small) + small * 0.5) / cell))
    for i in range(0, ep, step):
        items.append(Rect(lay.pad, y0 + i * cell + 2, small * 0.6, max(cell - 4, 2.0),
                          rank_colour(i, ep)))
        middle = y0 + (i + 0.5) * cell
        if middle - small * 0.45 >= y0 and middle + small * 0.6 <= y0 + ep * cell:
            items.append(Text(x_left - small * 0.4, middle + small * 0.35, str(i), size=small,
                              anchor="end"))
        items.append(Text(x_left + (i + 0.5) * cell, y0 - small * 0.4, str(i), size=small,
                          anchor="middle"))
    heading = first_fit((f"to: {col_word}", "to"), small, col_w + x_left - lay.pad)
    items.append(Text(x_left + ep * cell / 2, y0 - small * 1.7, heading, size=small,
                      anchor="middle", cls="muted"))
    y = y0 + ep * cell + small * 1.2
    rows_note = first_fit((f"rows: from {row_word}", "rows: from"), small, lay.ep_split - lay.pad)
    items.append(Text(lay.pad, y, rows_note, size=small, cls="muted"))
    if n_size:
        items.append(Text(lay.pad, y + small * LINE, first_fit(
            ("dashed: stays on its rank", "dashed: stays"), small, lay.ep_split - lay.pad),
            size=small, cls="muted"))
    y += small * LINE * 2 + small * 0.3
    for n, (k, line) in enumerate(lines):
        items.append(Text(lay.pad, y + n * small * LINE, line, size=small,
                          cls="muted" if k == 0 else "ink", weight=700 if k == 2 else 0))
    return items


def cost_lines(p, trace) -> list[str]:
    c = trace.a2a.dispatch
    busiest = float(c.bytes_sent.max())
    return [f"scaled to {p.cost_tokens} tokens/rank × {p.hidden} × {p.dtype}:",
            f"busiest rank sends {human_bytes(busiest)} per all-to-all",
            f"NVLink {num(c.nvlink_us)} µs · InfiniBand {num(c.infiniband_us)} µs",
            f"{p.gpus_per_node} GPUs a node: {num(c.time_us)} µs; combine "
            f"{num(trace.a2a.combine.time_us)} µs"]


def _cover(lay: Lay) -> Rect:
    """Over the columns' half: what an earlier frame drew there."""
    return Rect(lay.ep_split + lay.pad * 0.5, lay.top, lay.width - lay.ep_split - lay.pad * 0.5,
                lay.bottom - lay.top, cls="panel-bg")


def _shown_note(p, lay: Lay, cols: Columns) -> list:
    if len(cols.ranks) >= p.ep:
        return []
    return [Text(lay.width - lay.pad, lay.bottom - lay.small * 0.4,
                 f"ranks 0–{len(cols.ranks) - 1} of {p.ep} shown", size=lay.small,
                 anchor="end", cls="muted")]


def frame4(p, trace, lay: Lay, cols: Columns) -> list:
    items: list = [Rect(0, lay.top, lay.width, lay.bottom - lay.top, cls="panel-bg")]
    items += matrix(p, lay, trace.dispatch, (f"dispatch: {p.ep} × {p.ep} rows sent",
                                             "dispatch"), "token's rank", "expert's rank",
                    cost_lines(p, trace))
    items += note(lay, cols.x[0], lay.width - lay.pad, (
        "rows each rank receives: token · expert, then its vector",
        "rows received: token · expert", "rows received"))
    items += column_headers(p, lay, cols, lambda r, per: (
        f"rank {r} · E{r * per}–{(r + 1) * per - 1}" if per > 1 else f"rank {r} · E{r}",
        f"rank {r}", f"r{r}", str(r)))
    items += rows_frame(p, trace, lay, cols, outputs=False)
    return items + _shown_note(p, lay, cols)


def frame5(p, trace, lay: Lay, cols: Columns) -> list:
    rows = trace.run.rank_rows
    busiest = int(rows.max())
    t, small = lay.text, lay.small
    items: list = [_cover(lay)]
    items += note(lay, cols.x[0], lay.width - lay.pad, (
        "each rank's experts run on what it received: outputs", "the experts' outputs"))
    items += column_headers(p, lay, cols, lambda r, per: (
        f"rank {r}: {int(rows[r])} rows" + (" — busiest" if rows[r] == busiest else ""),
        f"rank {r}: {int(rows[r])}", f"{int(rows[r])}", ""))
    items += rows_frame(p, trace, lay, cols, outputs=True)
    bar_y = cols.y1 + small * 0.3
    for k, r in enumerate(cols.ranks):
        w = cols.w * rows[r] / max(busiest, 1)
        fill = rank_colour(r, p.ep)
        items.append(Rect(cols.x[k], bar_y, cols.w, small * 0.8, cls="blank"))
        items.append(Rect(cols.x[k], bar_y, w, small * 0.8, fill,
                          tip=f"rank {r} computes {int(rows[r])} rows"))
    ratio = num(rows.max() / max(rows.mean(), 1e-12))
    line = first_fit((f"compute time follows the busiest rank: {ratio}× the mean",
                      f"busiest rank: {ratio}× the mean", f"busiest: {ratio}×"), t,
                     lay.width - lay.pad - cols.x[0], bold=True)
    items.append(Text(cols.x[0], lay.bottom - small * 0.4, line, size=t, weight=700))
    return items


def frame6(p, trace, lay: Lay, cols: Columns) -> list:
    items: list = matrix(p, lay, trace.dispatch.T, ("combine: the same rows back, dispatchᵀ",
                                                    "combine: dispatchᵀ", "combine"),
                         "expert's rank", "token's rank", cost_lines(p, trace))
    items += [_cover(lay)]
    items += note(lay, cols.x[0], lay.width - lay.pad, (
        "results back on each token's rank: expert · token", "results back: expert · token",
        "results back"))
    items += column_headers(p, lay, cols, lambda r, per: (f"rank {r}: its tokens' results",
                                                           f"rank {r}", f"r{r}", str(r)))
    experts_per = p.experts // p.ep
    listed = {}
    for home in cols.ranks:
        rows, total = returned(trace, home, p.ep, cols.rows)
        listed[home] = (total, shown_rows(cols, rows, total))
    values = {h: expert_rows(trace, shown) for h, (_, shown) in listed.items()}
    items += listed_rows(p, trace, lay, cols, listed, values,
                     lambda row: rank_colour(row[3] // experts_per, p.ep),
                     lambda row: f"E{row[3]}·t{row[1]}", fly=True)
    return items + _shown_note(p, lay, cols)


def frame7(p, trace, lay: Lay, cols: Columns) -> list:
    """Each token's output y_t = Σ w·expert(x_t), listed by token."""
    r, d = trace.routing, trace.drops
    t, small = lay.text, lay.small
    x0, x1 = cols.x[0], lay.width - lay.pad
    items: list = [_cover(lay)]
    items += note(lay, x0, x1, ("y_t = Σ w · expert(x_t) over the kept experts",
                                "y_t = Σ w · expert(x_t)"))
    y0 = lay.body
    per_rank = p.tokens // p.ep
    # the label size where the first 16 tokens' sums fit a row each, else the small one
    size = t if (cols.y1 - y0) // (t * 1.5) >= min(p.tokens, 16) else small
    rh = size * 1.5
    fit = int((cols.y1 - y0) // rh)
    n = p.tokens if p.tokens <= fit else max(fit - 1, 0)
    bodies = []
    for tok in range(n):
        terms = [f"{prob(float(r.weights[tok, s]))}·E{int(r.experts[tok, s])}"
                 if d.kept[tok, s] else f"E{int(r.experts[tok, s])} dropped"
                 for s in range(p.top_k)]
        shown = terms[:3] + (["…"] if len(terms) > 3 else [])
        bodies.append(f"t{tok} = " + (" + ".join(shown) if any(d.kept[tok])
                                      else "all dropped: residual only, 0"))
    widest = max((text_width(b, size) for b in bodies), default=0.0)
    strip = min(p.token_width, STRIP_VALUES)
    sw = min(small, (x1 - x0 - small - widest - small) / strip)
    if sw < 3:
        strip = 0
    boxes: dict[str, list[str]] = defaultdict(list)
    texts = []
    out = trace.run.output
    scale = vector_scale(out[:n, :strip]) if strip else 1.0
    for tok in range(n):
        y = y0 + tok * rh
        boxes[rank_colour(tok // per_rank, p.ep)].append(
            f"M{coord(x0)},{coord(y + 3)}h6v{coord(rh - 6)}h-6z")
        texts.append(Text(x0 + small * 0.8, y + rh / 2 + size * 0.35, bodies[tok], size=size,
                          cls="ink" if any(d.kept[tok]) else "bad-text"))
        if not any(d.kept[tok]) or not strip:
            continue
        for i in range(strip):
            v = float(out[tok, i])
            cells(boxes, x1 - strip * sw + i * sw, y + 3, sw - 0.6, rh - 6,
                  value_fill((v / scale + 1.0) / 2.0))
    items.append(batch(boxes, texts))
    if p.tokens > n:
        items.append(Text(x0 + small * 0.8, y0 + n * rh + rh / 2 + size * 0.35,
                          f"+ {p.tokens - n} more tokens", size=size, cls="muted"))
    error = f"{trace.run.max_abs_error:.2g}"
    line = first_fit((f"expert-parallel vs dense layer: max |difference| {error}",
                      f"EP vs dense: max |difference| {error}", f"max |diff| {error}"), t,
                     x1 - x0, bold=True)
    items.append(Text(x0, lay.bottom - small * 0.4, line, size=t, weight=700))
    return items
