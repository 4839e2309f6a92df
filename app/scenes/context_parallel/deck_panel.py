"""The context-parallel deck's right half drawn in the rows' layout (:mod:`.deck_rows`): a row
per rank — its chip, the tokens it holds, what it holds or receives this step and the online
softmax of one of its query rows in numbers (where the layout has room: else the chip's hover
tells) — the step's transfers as arrows on the rows' left, the scores each rank has computed so
far as bars under the rows, and the result's table on the last frame (as many tokens and
dimensions as fit, then without its |diff| column).
"""

from __future__ import annotations

import numpy as np

from app.draw.fmt import coord
from app.draw.layout import LINE
from app.draw.palette import rank_colour, text_on
from app.draw.shapes import Arrow, Path, Rect, Text
from app.draw.text import fits, text_width
from app.scenes.context_parallel.deck_rows import (DETAIL_RANKS, Rows, doing, first_transfers,
                                                   softmax_text, spans)


def rank_panel(p, trace, rows: Rows, k: int, done: np.ndarray, total: np.ndarray) -> list:
    frame = trace.frames[k]
    if frame.phase == "result":
        return result_panel(p, trace, rows)
    t, small = rows.text, rows.small
    items: list = []
    for r, slot in zip(rows.shown, rows.slots):
        y = rows.y0 + slot * rows.row_h
        base = y + t * 0.35 + t * 0.95
        rf, rs = frame.rank(r), trace.ranks[r]
        colour = rank_colour(r, p.cp)
        what = doing(p, trace, frame, rf)
        soft = softmax_text(rf) if rf.rows else ""
        # the hover tells what the row leaves out (nothing when it shows it all)
        hidden = ([] if rows.doing_size else [what]) + ([soft] if soft and not rows.softmax_dy
                                                        else [])
        tip = f"rank {r}: " + " · ".join(hidden) if hidden else ""
        items.append(Rect(rows.chip_x, y + t * 0.35, rows.chip_w, t * 1.35, fill=colour,
                          tip=tip))
        items.append(Text(rows.chip_x + rows.chip_w / 2, base, str(r), size=t, anchor="middle",
                          weight=700, fill=text_on(colour), cls=""))
        items.append(Text(rows.tokens_x, base, f"tokens {spans(rs.tokens)}", size=t))
        if rows.doing_size:
            items.append(Text(rows.doing_x, base + rows.doing_dy, what, size=rows.doing_size,
                              weight=700 if rf.computed else 0,
                              cls="ink" if not rf.skipped else "bad-text"))
        if soft and rows.softmax_dy:
            items.append(Text(rows.tokens_x, base + rows.softmax_dy, soft, size=small,
                              cls="muted"))
    if rows.summary:
        y = rows.y0 + (len(rows.shown) - 1) * rows.row_h + t * 0.35 + t * 0.95
        first, last = len(rows.shown) - 1, p.cp - 2
        alike = f"rank {first}" if first == last else f"ranks {first} … {last}"
        items.append(Text(rows.tokens_x, y, f"⋮  {alike} alike", size=t, cls="muted"))
    return items + (bars(p, rows, done, total) if rows.bars else [])


def bars(p, rows: Rows, done: np.ndarray, total: np.ndarray) -> list:
    """Each rank's scores so far, over a dashed outline of all it will compute (so step 0
    already shows how the work will split: with contiguous chunks and a causal mask the last
    rank's outline is cp× the first's)."""
    t, small = rows.text, rows.small
    bx0, bx1, by0, by1 = rows.bx0, rows.bx1, rows.by0, rows.by1
    shares = done if done.min() > 0 else total    # before any work: the split to come
    spread = int(shares.max()) / max(int(shares.min()), 1)
    verdict = ("" if not shares.min() > 0 else f"busiest / idlest: {spread:.2g}×"
               if spread > 1.001 else "balanced")
    room = bx1 - rows.x0 - text_width(verdict, t, bold=True) - t
    title_y = by0 - small * 0.6
    items: list = []
    for title in ("scores per rank · dashed: to come", "scores per rank"):
        if fits(title, small, room):
            items.append(Text(rows.x0, title_y, title, size=small, cls="muted"))
            break
    if verdict:
        items.append(Text(bx1, title_y, verdict, size=t, anchor="end", weight=700))
    most = max(int(total.max()), 1)
    w = (bx1 - bx0) / p.cp
    # what is still to come, above each bar, as one path; a rank that is done has none
    scale = (by1 - by0) / most
    items.append(Path("".join(
            f"M{coord(bx0 + r * w + w * 0.1)} {coord(by1 - scale * work)}"
            f"v{coord(-scale * (whole - work))}h{coord(w * 0.8)}v{coord(scale * (whole - work))}"
            for r, (work, whole) in enumerate(zip(done.tolist(), total.tolist()))
            if whole > work), cls="empty"))
    for r, (work, whole) in enumerate(zip(done.tolist(), total.tolist())):
        h = (by1 - by0) * work / most
        if h > 0:
            items.append(Rect(bx0 + r * w + w * 0.1, by1 - h, w * 0.8, h,
                              fill=rank_colour(r, p.cp), tip=f"rank {r}: {work:,}"))
    items.append(Path(f"M{coord(bx0)} {coord(by1)}H{coord(bx1)}", cls="axis"))
    items.append(Text(bx0 - small * 0.5, by1, "0", size=small, anchor="end", cls="muted"))
    items.append(Text(bx0 - small * 0.5, by0 + small * 0.8, f"{most:,}", size=small,
                      anchor="end", cls="muted"))
    below = by1 + small * 1.15
    if p.cp <= DETAIL_RANKS and w >= text_width(str(p.cp - 1), small) + small * 0.5:
        items += [Text(bx0 + (r + 0.5) * w, below, str(r), size=small, anchor="middle",
                       cls="muted") for r in range(p.cp)]
    else:
        items.append(Text(bx0, below, "rank 0", size=small, cls="muted"))
        items.append(Text(bx1, below, f"rank {p.cp - 1}", size=small, anchor="end",
                          cls="muted"))
    return items


def result_panel(p, trace, rows: Rows) -> list:
    """Output head 0 of the first tokens, context parallel beside plain attention, as many
    tokens and dimensions as fit; the largest difference over all of them; what was sent."""
    t, small, x0, x1 = rows.text, rows.small, rows.x0, rows.x1
    step = t * LINE
    items: list = []
    y = rows.top + t
    for title in ("output head 0, first tokens: CP vs plain attention",
                  "output head 0: CP vs plain attention", "CP vs plain attention"):
        if fits(title, t, x1 - x0, bold=True):
            items.append(Text(x0, y, title, size=t, weight=700))
            break
    chip_w = max(text_width("token", small), text_width(str(min(p.example_tokens, 8) - 1), t)
                 + t * 0.9)
    gap = t * 0.9
    shown = min(p.example_tokens, 8)
    heads = ("token", "context parallel", "plain attention", "|diff|")
    for dims, diff in [(d, True) for d in range(min(p.head_dim, 3), 0, -1)] + [(1, False)]:
        values = [(" ".join(f"{x:+.3f}" for x in trace.output[k, 0, :dims]).replace("-", "−"),
                   " ".join(f"{x:+.3f}" for x in trace.reference[k, 0, :dims]).replace("-", "−"),
                   f"{np.abs(trace.output[k, 0, :dims] - trace.reference[k, 0, :dims]).max():.0e}")
                  [:3 if diff else 2] for k in range(shown)]
        widths = [max(text_width(head, small), *(text_width(v[c], t) for v in values))
                  for c, head in enumerate(heads[1:4 if diff else 3])]
        if x0 + chip_w + gap * len(widths) + sum(widths) <= x1:
            break
    xs = [x0, x0 + chip_w + gap]
    for w in widths[:-1]:
        xs.append(xs[-1] + w + gap)
    y += step
    for x, head in zip(xs, heads):
        items.append(Text(x, y, head, size=small, cls="muted"))
    room = int((rows.bottom - y - 2 * step - small * LINE) // step)
    for k in range(min(shown, max(room, 1))):
        y += step
        owner = next(r.rank for r in trace.ranks if k in r.tokens)
        fill = rank_colour(owner, p.cp)
        items.append(Rect(x0, y - t * 0.95, chip_w, t * 1.25, fill=fill,
                          tip=f"token {k} is rank {owner}'s"))
        items.append(Text(x0 + chip_w / 2, y, str(k), size=t, anchor="middle",
                          fill=text_on(fill), cls=""))
        for x, v in zip(xs[1:], values[k]):
            items.append(Text(x, y, v, size=t))
    error = trace.max_abs_error
    y += step * 1.4
    for line in (f"max |difference| over all {p.example_tokens}×{p.heads}×{p.head_dim} "
                 f"numbers: {error:.1e}", f"max |difference|: {error:.1e}"):
        if fits(line, t, x1 - x0, bold=True):
            items.append(Text(x0, y, line, size=t, weight=700,
                              cls="good-text" if error <= 1e-9 else "bad-text"))
            break
    sent = trace.ranks[0].elements_sent
    items.append(Text(x0, y + small * LINE * 1.1, f"each rank sent {sent:,} numbers",
                      size=small, cls="muted"))
    return items


def arrows(p, rows: Rows, frame) -> tuple[list[Arrow], list[Text]]:
    """The step's transfers between the shown rows, on the chips' left edge (at most
    :data:`ARROWS`); the first one's count of numbers left of its bend."""
    t = rows.text
    slot = dict(zip(rows.shown, rows.slots))
    out, labels = [], []
    for n, tr in enumerate(first_transfers(p, frame, rows.shown)):
        y0 = rows.y0 + slot[tr.src] * rows.row_h + t * 1.0
        y1 = rows.y0 + slot[tr.dst] * rows.row_h + t * 1.0
        x = rows.chip_x - 4
        bend = 14 + 10 * min(abs(slot[tr.dst] - slot[tr.src]), 6)
        colour = rank_colour(tr.src, p.cp)
        d = (f"M{coord(x)} {coord(y0)}C{coord(x - bend)} {coord(y0)} {coord(x - bend)} "
             f"{coord(y1)} {coord(x - 6)} {coord(y1)}")
        head = (f"{coord(x)} {coord(y1)} {coord(x - 9)} {coord(y1 - 5)} {coord(x - 9)} "
                f"{coord(y1 + 5)}")
        out.append(Arrow(d, head, colour))
        if n == 0:
            labels.append(Text(x - bend * 0.75 - 4, (y0 + y1) / 2 + rows.small * 0.35,
                               f"{tr.elements:,}", size=rows.small, anchor="end", weight=700,
                               cls="ink halo-bg"))
    return out, labels
