"""The MoE deck's frames 4–7, expert parallelism, laid out for the box (:mod:`.deck_parts`): the
ep × ep dispatch matrix and the all-to-all's cost on the left; on the right one column per rank
holding the token vectors it receives (4; they fly in from their sender's column), the experts'
outputs and the load of each rank (5), the combine all-to-all back to the tokens' ranks (6),
the weighted sum (7).

The matrix's counts show where a cell holds them at the label or the small size; the cost's
lines wrap to the matrix's column and the last ones are left out where the column is short; a
rank column lists as many rows as fit a small label tall and counts the rest; beyond
:data:`RANK_COLUMNS` ranks the first four columns are drawn.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from app.draw.fmt import coord
from app.draw.layout import LINE
from app.draw.palette import rank_colour, text_on
from app.draw.shapes import Path, Rect, Text
from app.draw.text import fits, text_width, wrap
from app.scenes.moe.deck_parts import Lay, batch, cells, first_fit, note, value_fill
from app.scenes.moe.deck_router import prob
from app.sim.moe.captions import human_bytes, num
from app.sim.moe.dispatch import expert_mlp

RANK_COLUMNS = 8
STRIP_VALUES = 16


@dataclass(frozen=True)
class Columns:
    ranks: tuple[int, ...]
    x: tuple[float, ...]
    w: float
    y0: float                  # the headers' top
    head_h: float
    rows_y: float              # the first row's top
    rh: float
    rows: int                  # rows listed per column
    strip: int                 # vector entries drawn per row
    sw: float                  # width of one entry
    y1: float                  # the rows end here (the footer under)
    size: float                # the rows' words: the label size where every row fits so


def columns(p, trace, lay: Lay) -> Columns:
    t, small = lay.text, lay.small
    ranks = tuple(range(p.ep if p.ep <= RANK_COLUMNS else 4))
    n = len(ranks)
    x0, x1 = lay.ep_split + lay.pad, lay.width - lay.pad
    gap = small * 0.7
    w = (x1 - x0 - gap * (n - 1)) / n
    head_h = t * 1.5
    rows_y = lay.body + head_h + small * 0.4
    y1 = lay.bottom - t * LINE - small * 1.6
    room = y1 - rows_y
    most = max(int(trace.run.rank_rows[list(ranks)].max()), 1)
    words = f"t{p.tokens - 1}·E{p.experts - 1}"
    size = t if room / most >= t * 1.45 and fits(words, t, w * 0.45) else small
    rh = min(size * 1.6, max(size * 1.45, room / most))
    rows = max(1, int(room // rh))
    label_w = text_width(words, size) + small
    strip = min(p.token_width, STRIP_VALUES)
    sw = min(small, (w - label_w - 6) / strip)
    if sw < 3:
        strip, sw = 0, 0.0
    return Columns(ranks, tuple(x0 + k * (w + gap) for k in range(n)), w, lay.body, head_h,
                   rows_y, rh, rows, strip, sw, y1, size)


def _received(trace, dst: int, limit: int) -> tuple[list[tuple[int, int, int, int]], int]:
    """The first ``limit`` (src, token, slot, expert) rows rank ``dst`` receives, in its
    receive order, and how many it receives in all."""
    out, total = [], 0
    for src, row in enumerate(trace.run.sent):
        t, slot, e = row[dst]
        total += len(t)
        room = limit - len(out)
        if room > 0:
            out += [(src, int(a), int(b), int(c)) for a, b, c in
                    zip(t[:room].tolist(), slot[:room].tolist(), e[:room].tolist())]
    return out, total


def _returned(trace, home: int, ep: int, limit: int) -> tuple[list, int]:
    """The first ``limit`` (expert rank, token, slot, expert) results coming back to rank
    ``home`` in the combine, and how many come back in all."""
    out, total = [], 0
    for dst in range(ep):
        t, slot, e = trace.run.sent[home][dst]
        total += len(t)
        room = limit - len(out)
        if room > 0:
            out += [(dst, int(a), int(b), int(c)) for a, b, c in
                    zip(t[:room].tolist(), slot[:room].tolist(), e[:room].tolist())]
    return out, total


def _strip(boxes, values, x: float, y: float, cols: Columns, scale: float) -> None:
    """A vector's first entries, −scale (palest) … +scale (darkest)."""
    for i in range(cols.strip):
        v = float(values[i])
        cells(boxes, x + i * cols.sw, y + 2, cols.sw - 0.6, cols.rh - 4,
              value_fill((v / scale + 1.0) / 2.0))


def _expert_rows(trace, rows) -> np.ndarray:
    """expert_e(x_t) of the listed (…, token, slot, expert) rows, (rows, hidden)."""
    x, w_in, w_out = trace.inputs.x, trace.inputs.w_in, trace.inputs.w_out
    out = np.zeros((len(rows), x.shape[1]))
    for i, row in enumerate(rows):
        t, e = row[1], row[3]
        out[i] = expert_mlp(x[t][None, :], w_in[e], w_out[e])[0]
    return out


def _scale(values: np.ndarray) -> float:
    return float(np.abs(values).max(initial=0.0)) or 1.0


def _column_headers(p, lay: Lay, cols: Columns, options) -> list:
    items = []
    per_ep = p.experts // p.ep
    for k, r in enumerate(cols.ranks):
        fill = rank_colour(r, p.ep)
        items.append(Rect(cols.x[k], cols.y0, cols.w, cols.head_h, fill))
        for size in (lay.text, lay.small):
            label = first_fit(options(r, per_ep), size, cols.w - 8, bold=True)
            if label:
                items.append(Text(cols.x[k] + cols.w / 2, cols.y0 + cols.head_h / 2 + size * 0.35,
                                  label, size=size, anchor="middle", cls="", weight=700,
                                  fill=text_on(fill)))
                break
    return items


def _listed(p, trace, lay: Lay, cols: Columns, listed: dict, values: dict, colour_of,
            text_of, fly: bool) -> list:
    """Each column's rows (a sender's chip, its words, the vector's strip), and how many more."""
    items: list = []
    small = lay.small
    scale = max((_scale(v) for v in values.values()), default=1.0)
    for k, dst in enumerate(cols.ranks):
        total, shown = listed[dst]
        by_src: dict[int, list] = defaultdict(list)
        for i, row in enumerate(shown):
            by_src[row[0]].append((i, row))
        for src, group in by_src.items():
            boxes: dict[str, list[str]] = defaultdict(list)
            texts = []
            for i, row in group:
                y = cols.rows_y + i * cols.rh
                boxes[colour_of(row)].append(
                    f"M{coord(cols.x[k])},{coord(y + 2)}h5v{coord(cols.rh - 4)}h-5z")
                texts.append(Text(cols.x[k] + small * 0.7, y + cols.rh / 2 + cols.size * 0.35,
                                  text_of(row), size=cols.size))
                if cols.strip:
                    _strip(boxes, values[dst][i], cols.x[k] + cols.w - cols.strip * cols.sw - 2,
                           y, cols, scale)
            dx = (cols.x[cols.ranks.index(src)] - cols.x[k]
                  if fly and src != dst and src in cols.ranks else 0.0)
            items.append(batch(boxes, texts, dx=dx))
        if total > len(shown):
            y = cols.rows_y + len(shown) * cols.rh + cols.rh / 2 + small * 0.35
            more = first_fit((f"+ {total - len(shown)} more rows", f"+ {total - len(shown)}"),
                             small, cols.w - small)
            items.append(Text(cols.x[k] + small * 0.7, y, more, size=small, cls="muted"))
    return items


def _shown(cols: Columns, rows: list, total: int) -> list:
    return rows[:cols.rows if total <= cols.rows else cols.rows - 1]


def _rows_frame(p, trace, lay: Lay, cols: Columns, outputs: bool) -> list:
    """Frame 4 (the token vectors each rank receives) or 5 (its experts' outputs)."""
    x = trace.inputs.x
    listed = {}
    for dst in cols.ranks:
        rows, total = _received(trace, dst, cols.rows)
        listed[dst] = (total, _shown(cols, rows, total))
    values = {dst: (_expert_rows(trace, shown) if outputs else x[[row[1] for row in shown]])
              for dst, (_, shown) in listed.items()}
    return _listed(p, trace, lay, cols, listed, values, lambda row: rank_colour(row[0], p.ep),
                   lambda row: f"t{row[1]}·E{row[3]}", fly=not outputs)


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
    items += _column_headers(p, lay, cols, lambda r, per: (
        f"rank {r} · E{r * per}–{(r + 1) * per - 1}" if per > 1 else f"rank {r} · E{r}",
        f"rank {r}", f"r{r}", str(r)))
    items += _rows_frame(p, trace, lay, cols, outputs=False)
    return items + _shown_note(p, lay, cols)


def frame5(p, trace, lay: Lay, cols: Columns) -> list:
    rows = trace.run.rank_rows
    busiest = int(rows.max())
    t, small = lay.text, lay.small
    items: list = [_cover(lay)]
    items += note(lay, cols.x[0], lay.width - lay.pad, (
        "each rank's experts run on what it received: outputs", "the experts' outputs"))
    items += _column_headers(p, lay, cols, lambda r, per: (
        f"rank {r}: {int(rows[r])} rows" + (" — busiest" if rows[r] == busiest else ""),
        f"rank {r}: {int(rows[r])}", f"{int(rows[r])}", ""))
    items += _rows_frame(p, trace, lay, cols, outputs=True)
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
    items += _column_headers(p, lay, cols, lambda r, per: (f"rank {r}: its tokens' results",
                                                           f"rank {r}", f"r{r}", str(r)))
    experts_per = p.experts // p.ep
    listed = {}
    for home in cols.ranks:
        rows, total = _returned(trace, home, p.ep, cols.rows)
        listed[home] = (total, _shown(cols, rows, total))
    values = {h: _expert_rows(trace, shown) for h, (_, shown) in listed.items()}
    items += _listed(p, trace, lay, cols, listed, values,
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
    scale = _scale(out[:n, :strip]) if strip else 1.0
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
