"""The MoE deck's rank columns in frames 4–7, laid out for the box (:mod:`.deck_parts`): one
column per rank (the first four beyond :data:`RANK_COLUMNS` ranks) headed by its chip, listing
the rows it receives or sends back — the sender's colour, token · expert, the vector's first
entries — as many as fit a small label tall (the label size where every row fits) and
"+ n more".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from app.draw.fmt import coord
from app.draw.layout import LINE
from app.draw.palette import rank_colour, text_on
from app.draw.shapes import Rect, Text
from app.draw.text import fits, text_width
from app.scenes.moe.deck_parts import Lay, batch, cells, first_fit, value_fill
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


def received(trace, dst: int, limit: int) -> tuple[list[tuple[int, int, int, int]], int]:
    """The first ``limit`` (src, token, slot, expert) rows rank ``dst`` receives, in its
    receive order, and how many it receives in all."""
    return _first_rows(((src, row[dst]) for src, row in enumerate(trace.run.sent)), limit)


def returned(trace, home: int, ep: int, limit: int) -> tuple[list, int]:
    """The first ``limit`` (expert rank, token, slot, expert) results coming back to rank
    ``home`` in the combine, and how many come back in all."""
    return _first_rows(((dst, trace.run.sent[home][dst]) for dst in range(ep)), limit)


def _first_rows(blocks, limit: int) -> tuple[list[tuple[int, int, int, int]], int]:
    """The first ``limit`` (rank, token, slot, expert) rows of ``blocks`` — (rank, (tokens,
    slots, experts)) in order — and how many rows they hold in all."""
    out, total = [], 0
    for rank, (t, slot, e) in blocks:
        total += len(t)
        room = limit - len(out)
        if room > 0:
            out += [(rank, int(a), int(b), int(c)) for a, b, c in
                    zip(t[:room].tolist(), slot[:room].tolist(), e[:room].tolist())]
    return out, total


def vector_strip(boxes, values, x: float, y: float, cols: Columns, scale: float) -> None:
    """A vector's first entries, −scale (palest) … +scale (darkest)."""
    for i in range(cols.strip):
        v = float(values[i])
        cells(boxes, x + i * cols.sw, y + 2, cols.sw - 0.6, cols.rh - 4,
              value_fill((v / scale + 1.0) / 2.0))


def expert_rows(trace, rows) -> np.ndarray:
    """expert_e(x_t) of the listed (…, token, slot, expert) rows, (rows, hidden)."""
    x, w_in, w_out = trace.inputs.x, trace.inputs.w_in, trace.inputs.w_out
    out = np.zeros((len(rows), x.shape[1]))
    for i, row in enumerate(rows):
        t, e = row[1], row[3]
        out[i] = expert_mlp(x[t][None, :], w_in[e], w_out[e])[0]
    return out


def vector_scale(values: np.ndarray) -> float:
    return float(np.abs(values).max(initial=0.0)) or 1.0


def column_headers(p, lay: Lay, cols: Columns, options) -> list:
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


def listed_rows(p, trace, lay: Lay, cols: Columns, listed: dict, values: dict, colour_of,
            text_of, fly: bool) -> list:
    """Each column's rows (a sender's chip, its words, the vector's strip), and how many more."""
    items: list = []
    small = lay.small
    scale = max((vector_scale(v) for v in values.values()), default=1.0)
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
                    x = cols.x[k] + cols.w - cols.strip * cols.sw - 2
                    vector_strip(boxes, values[dst][i], x, y, cols, scale)
            dx = (cols.x[cols.ranks.index(src)] - cols.x[k]
                  if fly and src != dst and src in cols.ranks else 0.0)
            items.append(batch(boxes, texts, dx=dx))
        if total > len(shown):
            y = cols.rows_y + len(shown) * cols.rh + cols.rh / 2 + small * 0.35
            more = first_fit((f"+ {total - len(shown)} more rows", f"+ {total - len(shown)}"),
                             small, cols.w - small)
            items.append(Text(cols.x[k] + small * 0.7, y, more, size=small, cls="muted"))
    return items


def shown_rows(cols: Columns, rows: list, total: int) -> list:
    return rows[:cols.rows if total <= cols.rows else cols.rows - 1]


def rows_frame(p, trace, lay: Lay, cols: Columns, outputs: bool) -> list:
    """Frame 4 (the token vectors each rank receives) or 5 (its experts' outputs)."""
    x = trace.inputs.x
    listed = {}
    for dst in cols.ranks:
        rows, total = received(trace, dst, cols.rows)
        listed[dst] = (total, shown_rows(cols, rows, total))
    values = {dst: (expert_rows(trace, shown) if outputs else x[[row[1] for row in shown]])
              for dst, (_, shown) in listed.items()}
    return listed_rows(p, trace, lay, cols, listed, values, lambda row: rank_colour(row[0], p.ep),
                   lambda row: f"t{row[1]}·E{row[3]}", fly=not outputs)
