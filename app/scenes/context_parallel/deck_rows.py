"""The context-parallel deck's rank rows laid out for the box (:mod:`.deck`): which ranks get a
row, each column as wide as its widest text over every frame (app/draw/text.py) — the chip, the
tokens, what the step does (beside the tokens where both fit, else under them), the online
softmax's line where the rows have room for it — the arrows' gutter as wide as its bends and
the first arrow's count, and the bars' place under the rows. More ranks than rows fit are
summarised by the first three and the last (then the first and the last), never shrunk.

The words of a row are written here too, for the layout measures them: :func:`doing`,
:func:`softmax_text`; the drawing is :mod:`.deck_panel`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.draw.box import Box
from app.draw.layout import LINE
from app.draw.text import text_width
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


def first_transfers(p, frame, shown) -> list:
    where = set(shown)
    firsts = [tr for tr in _between(frame.transfers, where) if tr.src in where and tr.dst in where]
    if frame.phase in ("all_to_all", "all_to_all_back"):
        firsts = [tr for tr in firsts if tr.src == 0] or firsts
    return firsts[:ARROWS]


def _arrow_label(p, frame, shown) -> str:
    firsts = first_transfers(p, frame, shown)
    return f"{firsts[0].elements:,}" if firsts else ""


def _between(transfers, where):
    """The transfers whose ends are both in ``where`` (read from the arrays of a ring or
    all-gather step, without making the other 60 of 64 ranks' transfers)."""
    if not isinstance(transfers, Transfers):
        return transfers
    shown = np.zeros(len(transfers.src), dtype=bool)
    shown[list(where)] = True
    keep = np.flatnonzero(shown[transfers.src] & shown[transfers.dst])
    return [transfers[i] for i in keep]
