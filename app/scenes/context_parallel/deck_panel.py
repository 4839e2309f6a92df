"""The context-parallel deck's right half, laid out for its box (:mod:`.deck`): a row per rank —
its chip, the tokens it holds, what it holds or receives this step and the online softmax of
one of its query rows in numbers — the step's transfers as arrows on the rows' left, the scores
each rank has computed so far as bars under the rows, and the result's table on the last frame.

Every column is as wide as its widest text over every frame (app/draw/text.py): what a step
does stands beside the tokens where both fit, else under them; the softmax line is drawn where
the rows have room for it and fits the panel at the small size (else the chip's hover tells);
more ranks than rows fit are summarised by the first three and the last, never shrunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.draw.box import Box
from app.draw.fmt import coord
from app.draw.layout import LINE
from app.draw.palette import rank_colour, text_on
from app.draw.shapes import Arrow, Path, Rect, Text
from app.draw.text import fits, text_width
from app.sim.context_parallel.methods import Transfers

DETAIL_RANKS = 8
"""Up to this many ranks each get a row (where they fit); beyond, the first three and the last."""
ARROWS = 8
"""At most this many transfers drawn a step."""


@dataclass(frozen=True)
class Rows:
    """The rank rows, the arrows' gutter and the bars under them."""
    text: float
    small: float
    x0: float                    # the panel's text starts here (the result's table too)
    x1: float
    top: float
    bottom: float
    shown: tuple[int, ...]       # the ranks with a row
    slots: tuple[int, ...]       # each shown rank's row (the last one after the "alike" row)
    summary: bool                # a row says the ranks between are alike
    y0: float                    # the first row's top
    row_h: float
    chip_x: float
    chip_w: float
    tokens_x: float
    doing_x: float
    doing_dy: float              # from a row's first baseline to the doing text's
    doing_size: float            # 0: not drawn (the chip's hover tells)
    softmax_dy: float            # 0: the softmax line is not drawn
    bx0: float                   # the bars
    bx1: float
    by0: float
    by1: float
    bars: bool                   # the bars drawn (where the rows leave room for them)


def spans(tokens) -> str:
    """[0, 1, 2, 3, 14, 15] → "0–3, 14–15"."""
    tokens = sorted(int(t) for t in tokens)
    if not tokens:
        return "none"
    runs, start = [], tokens[0]
    for a, b in zip(tokens, tokens[1:] + [None]):
        if b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}–{a}")
            start = b
    return ", ".join(runs)


def _num(x) -> str:
    if x is None:
        return "−∞"
    return f"{x:.3g}".replace("-", "−")


def _candidates(cp: int) -> list[tuple[tuple[int, ...], bool]]:
    """The ranks given a row, most first, and whether a row says those between are alike."""
    out = [(tuple(range(cp)), False)] if cp <= DETAIL_RANKS else []
    if cp > 4:
        out.append(((0, 1, 2, cp - 1), True))
    if cp > 2:
        out.append(((0, cp - 1), True))
    return out


def rows_layout(p, trace, area: Box, x0: float, x1: float, top: float, bottom: float) -> Rows:
    """The rows' layout: the most ranks that fit with what each step does beside or under
    their tokens, the softmax line where there is room; else fewer ranks, then without the
    step's words (the chip's hover has them), then without the bars."""
    t, small = area.text, area.small
    chip_w = text_width(str(p.cp - 1), t, bold=True) + t * 0.9
    frames = [f for f in trace.frames if f.phase != "result"]
    most = max(int(np.max(np.sum([np.array(f.source.unmasked) for f in trace.frames],
                                 axis=0))), 1)
    options = _candidates(p.cp)
    tries = [(bars_on, words, option) for bars_on in (True, False) for words in (True, False)
             for option in options]
    for n, (bars_on, words, (shown, summary)) in enumerate(tries):
        last = n == len(tries) - 1
        bars_min = small * LINE + small * 0.6 + t * 2.6 + small * 1.5 if bars_on else 0.0
        n_rows = len(shown) + summary
        labels = [_arrow_label(p, f, shown) for f in trace.frames]
        widest_label = max((text_width(lab, small, bold=True) for lab in labels if lab),
                           default=0.0)
        reach = 14 + 10 * min(n_rows - 1, 6)
        chip_x = x0 + (reach + widest_label + small * 0.6 if any(labels) else 0.0)
        tokens_x = chip_x + chip_w + t * 0.5
        tokens_w = max(text_width(f"tokens {spans(trace.ranks[r].tokens)}", t) for r in shown)
        doing_w = max(text_width(doing(p, trace, f, f.rank(r)), t, bold=True)
                      for f in frames for r in shown)
        soft_w = max((text_width(softmax_text(f.rank(r)), small) for f in frames for r in shown
                      if f.rank(r).rows), default=0.0)
        side = tokens_x + tokens_w + t * 1.2 + doing_w <= x1
        if side:
            doing_x, doing_dy, doing_size = tokens_x + tokens_w + t * 1.2, 0.0, t
        elif words:
            doing_x, doing_dy = tokens_x, t * LINE
            doing_size = (t if tokens_x + doing_w <= x1 else small
                          if tokens_x + doing_w * small / t <= x1 else 0.0)
        else:
            doing_x, doing_dy, doing_size = tokens_x, 0.0, 0.0
        lines = 2 if doing_dy else 1
        base_h = lines * t * LINE + t * 0.35
        avail = bottom - top - bars_min
        soft = soft_w > 0 and tokens_x + soft_w <= x1
        if soft and n_rows * (base_h + small * LINE) <= avail:
            row_h, softmax_dy = base_h + small * LINE, (lines - 1) * t * LINE + small * LINE
        elif n_rows * base_h <= avail or last:
            row_h, softmax_dy = base_h, 0.0
        else:
            continue
        row_h = min(row_h * 1.35, max(row_h, avail / n_rows))
        rows_end = top + n_rows * row_h
        slots = tuple(range(len(shown) - 1)) + (n_rows - 1,) if summary else tuple(
            range(len(shown)))
        bx0 = x0 + text_width(f"{most:,}", small) + small * 0.6
        by1 = bottom - small * 1.5
        by0 = max(rows_end + small * LINE + small * 0.6, by1 - t * 7) if bars_on else by1
        return Rows(t, small, x0, x1, top, bottom, shown, slots, summary, top, row_h, chip_x,
                    chip_w, tokens_x, doing_x, doing_dy, doing_size, softmax_dy, bx0, x1, by0,
                    by1, bars_on)
    raise AssertionError("no row layout")   # the last try always returns


def doing(p, trace, frame, rf) -> str:
    phase = frame.phase
    if phase == "start":
        return "holds Q, K, V of its tokens"
    if phase == "all_to_all":
        rs = trace.ranks[rf.rank]
        return f"now heads {spans(rs.query_heads)} of tokens {spans(rs.query_tokens)}"
    if phase == "all_to_all_back":
        return "gets back all heads of its tokens"
    if phase == "all_gather":
        return f"holds K/V of {len(rf.holds)} of {p.cp} ranks"
    if phase == "attend":
        return f"{rf.unmasked_scores:,} scores, all keys"
    if rf.skipped:
        return f"K/V of rank {rf.kv_block}: skipped"
    if rf.kv_block is None:
        return "idle"
    return f"K/V of rank {rf.kv_block}: {rf.unmasked_scores:,} scores"


def softmax_text(rf) -> str:
    """The online softmax of the shown row that this step changed most, in numbers:
    m → m′, and l′ = l·e^(m−m′) + the block's Σ e^(S−m′)."""
    row = max(rf.rows, key=lambda r: r["l_after"] - r["l_rescaled"])
    added = row["l_after"] - row["l_rescaled"]
    if not rf.computed:
        return f"q{row['token']}: m {_num(row['m_after'])}, l {_num(row['l_after'])} unchanged"
    if row["m_before"] is None:
        return (f"q{row['token']}: m −∞ → {_num(row['m_after'])}   "
                f"l′ = 0 + {_num(added)} = {_num(row['l_after'])}")
    return (f"q{row['token']}: m {_num(row['m_before'])} → {_num(row['m_after'])}   "
            f"l′ = {_num(row['l_before'])}×{_num(row['correction'])} + {_num(added)} = "
            f"{_num(row['l_after'])}")


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


def _first_transfers(p, frame, shown) -> list:
    where = set(shown)
    firsts = [tr for tr in _between(frame.transfers, where) if tr.src in where and tr.dst in where]
    if frame.phase in ("all_to_all", "all_to_all_back"):
        firsts = [tr for tr in firsts if tr.src == 0] or firsts
    return firsts[:ARROWS]


def _arrow_label(p, frame, shown) -> str:
    firsts = _first_transfers(p, frame, shown)
    return f"{firsts[0].elements:,}" if firsts else ""


def arrows(p, rows: Rows, frame) -> tuple[list[Arrow], list[Text]]:
    """The step's transfers between the shown rows, on the chips' left edge (at most
    :data:`ARROWS`); the first one's count of numbers left of its bend."""
    t = rows.text
    slot = dict(zip(rows.shown, rows.slots))
    out, labels = [], []
    for n, tr in enumerate(_first_transfers(p, frame, rows.shown)):
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


def _between(transfers, where):
    """The transfers whose ends are both in ``where`` (read from the arrays of a ring or
    all-gather step, without making the other 60 of 64 ranks' transfers)."""
    if not isinstance(transfers, Transfers):
        return transfers
    shown = np.zeros(len(transfers.src), dtype=bool)
    shown[list(where)] = True
    keep = np.flatnonzero(shown[transfers.src] & shown[transfers.dst])
    return [transfers[i] for i in keep]
