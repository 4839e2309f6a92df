"""The MoE scene as drawable geometry: one MoE layer's forward pass in eight layered frames.

Frames 0–3 (router): on the left the token × expert table — logits (0), softmax
probabilities with their mean P̄ (1), the top-k choice with its gate weights (2); on the right
the experts' bins, grouped by the expert-parallel rank that holds them, one sub-column per
sending rank: the assignments arrive as slots in the order the drop policy keeps them (2),
the capacity line and the dropped slots above it, or the padding of a dropless layer (3).
Frames 4–7 (expert parallelism) cover that drawing: the ep × ep dispatch matrix and the
all-to-all's cost on the left; on the right one column per rank holding the token vectors it
receives (4; they fly in from their sender's column), the experts' outputs and the load of
each rank (5), the combine all-to-all back to the tokens' ranks (6), the weighted sum (7).

Large layers are summarised, never shrunk into illegibility: the table shows the first
:data:`TABLE_ROWS` tokens and :data:`TABLE_COLUMNS` experts, the bins become bars (one per
expert, all ranks together, beyond :data:`SUB_COLUMNS` sub-columns), the matrix drops its
numbers, a rank column lists its first rows and counts the rest, and beyond eight ranks the
first four columns are drawn.

Colours: ranks take app.draw.palette's rank colours (a token's chip, a slot's sender, a
column's header); values (logits, probabilities, vector entries, matrix counts) a purple
ramp, darker for larger; experts are told apart by their labels E0, E1, …; dropped slots are
hatched.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from app.draw.fmt import coord
from app.humanize import fixed
from app.draw.palette import ramp, rank_colour, text_on
from app.draw.shapes import FONT_SIZE, Arrow, Path, Rect, Text
from app.sim.moe.capacity import WEIGHT_GRID
from app.sim.moe.captions import human_bytes, num
from app.sim.moe.dispatch import expert_mlp

WIDTH, HEIGHT = 1040, 540
FONT = FONT_SIZE                # the smallest text: 12.9 px when the deck is 960 px wide
TABLE_ROWS, TABLE_COLUMNS = 16, 16
SUB_COLUMNS = 64
"""at most this many (expert, sending rank) bins; beyond, one bar per expert"""
ARROW_SLOTS = 8
"""top-k arrows drawn for the first tokens, up to this many; token 0's carry its gate weights"""
RANK_COLUMNS = 8
STRIP_VALUES = 16
PURPLES = ("#f2f0f7", "#dadaeb", "#bcbddc", "#9e9ac8", "#807dba", "#6a51a3", "#4a1486")
CHOSEN = "#3f007d"
COVER_TOP = 46

# the two halves' regions
TABLE_X0, TABLE_X1, TABLE_Y0, TABLE_Y1 = 84, 470, 98, 500
BIN_X0, BIN_X1, BIN_Y0, BIN_Y1 = 530, 1020, 96, 448
MAT_X0, MAT_Y0, MAT_SIZE = 74, 120, 250
COL_X0, COL_X1, COL_Y0, COL_Y1 = 430, 1020, 80, 496


@dataclass(frozen=True)
class Batch:
    """Rectangles of one fill each drawn as one path, and texts, moved together: the rows a
    rank sends one other rank fly in from the sender's column by (dx, dy)."""
    paths: tuple[tuple[str, str], ...]     # (fill, d)
    texts: tuple[Text, ...]
    dx: float = 0.0
    dy: float = 0.0


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    items: tuple
    arrows: tuple[Arrow, ...] = ()
    unit: str = ""
    """what the step is, for the player's position text (stage 3 of 7 of the MoE layer: …)"""


@dataclass(frozen=True)
class MoeDeck:
    width: int
    height: int
    title: str
    frames: tuple[FrameView, ...]


def deck_title(p) -> str:
    return (f"MoE layer · {p.tokens} tokens · {p.experts} experts · top-{p.top_k} · "
            f"ep {p.ep}")


LEVELS = tuple(ramp(PURPLES, k / 10) for k in range(11))
"""the value ramp in 11 steps: few fills, so a frame's cells batch into few paths"""


def value_fill(t: float) -> str:
    """A value's shade, ``t`` ∈ [0, 1] (clipped)."""
    return LEVELS[min(10, max(0, int(round(t * 10))))] if t == t else LEVELS[0]


def _cells(boxes: dict[str, list[str]], x: float, y: float, w: float, h: float, fill: str):
    boxes[fill].append("M%.1f,%.1fh%.1fv%.1fh%.1fz" % (x, y, w, h, -w))


def _batch(boxes: dict[str, list[str]], texts=(), dx=0.0, dy=0.0) -> Batch:
    return Batch(tuple((f, "".join(d)) for f, d in boxes.items()), tuple(texts), dx, dy)


def _fits(text: str, width: float, size: float = FONT) -> bool:
    return len(text) * 0.62 * size <= width


# --- frames 0–3: the router ---------------------------------------------------------------

@dataclass(frozen=True)
class _Table:
    rows: int
    cols: int
    cw: float
    rh: float
    numbers: bool

    def x(self, e: int) -> float:
        return TABLE_X0 + e * self.cw

    def y(self, t: int) -> float:
        return TABLE_Y0 + t * self.rh


def _table(p) -> _Table:
    rows, cols = min(p.tokens, TABLE_ROWS), min(p.experts, TABLE_COLUMNS)
    cw = (TABLE_X1 - TABLE_X0) / cols
    rh = min(28.0, (TABLE_Y1 - TABLE_Y0) / (rows + 1.3))
    return _Table(rows, cols, cw, rh, cw >= 40 and rh >= 18)


def _matrix_cells(tab: _Table, values: np.ndarray, lo: float, hi: float, fmt, tip: str,
                  row0: int = 0) -> list:
    boxes: dict[str, list[str]] = defaultdict(list)
    texts = []
    span = (hi - lo) or 1.0
    for t in range(values.shape[0]):
        for e in range(tab.cols):
            v = float(values[t, e])
            fill = value_fill((v - lo) / span)
            _cells(boxes, tab.x(e) + 1, tab.y(t + row0) + 1, tab.cw - 2, tab.rh - 2, fill)
            if tab.numbers:
                texts.append(Text(tab.x(e) + tab.cw / 2, tab.y(t + row0) + tab.rh / 2 + 5,
                                  fmt(v), cls="", anchor="middle", fill=text_on(fill)))
    return [_batch(boxes, texts)]


def _logit(v: float) -> str:
    return fixed(v, 1)


def _prob(v: float) -> str:
    return f"{v:.2f}"


def _table_frame0(p, trace, tab: _Table) -> list:
    T, E = p.tokens, p.experts
    per_rank = T // p.ep
    logits = trace.logits[:tab.rows, :tab.cols]
    shown = (f" · tokens 0–{tab.rows - 1} of {T}" if T > tab.rows else "") + (
        f" · experts 0–{tab.cols - 1} of {E}" if E > tab.cols else "")
    items: list = [Text(20, 66, f"router logits x·W + skew·b{shown}", size=15, cls="muted")]
    step = max(1, math.ceil(2.4 * FONT / tab.cw))
    items += [Text(tab.x(e) + tab.cw / 2, TABLE_Y0 - 8, f"E{e}", anchor="middle", cls="muted")
              for e in range(0, tab.cols, step)]
    label_every = max(1, math.ceil(FONT * 1.05 / tab.rh))
    for t in range(tab.rows):
        r = t // per_rank
        items.append(Rect(20, tab.y(t) + 2, 8, tab.rh - 4, rank_colour(r, p.ep), tip=f"token {t} lives on rank {r}"))
        if t % label_every == 0:
            items.append(Text(TABLE_X0 - 8, tab.y(t) + tab.rh / 2 + 5, f"t{t}", anchor="end"))
    hi = float(np.abs(logits).max()) or 1.0
    items += _matrix_cells(tab, logits, -hi, hi, _logit, "logit")
    items += _legend(p)
    return items


def _legend(p) -> list:
    """Under the router's half: rank chips, the value ramp, the dropped hatching."""
    y = HEIGHT - 12
    items: list = []
    x = 20.0
    ranks = min(p.ep, 4)
    for r in range(ranks):
        items.append(Rect(x, y - 12, 14, 14, rank_colour(r, p.ep)))
        label = f"rank {r}" + ("" if r < ranks - 1 or p.ep == ranks else " …")
        items.append(Text(x + 19, y, label))
        x += 19 + _width(label) + 14
    items.append(Text(x, y, "(a token's rank, a slot's sender)", cls="muted"))
    x += _width("(a token's rank, a slot's sender)") + 22
    for k, fill in enumerate(PURPLES):
        items.append(Rect(x + 9 * k, y - 12, 9, 14, fill))
    items.append(Text(x + 9 * len(PURPLES) + 6, y, "value: darker is larger", cls="muted"))
    x += 9 * len(PURPLES) + 6 + _width("value: darker is larger") + 22
    items.append(Rect(x, y - 12, 14, 14, "url(#drop-hatch)"))
    items.append(Text(x + 19, y, "dropped", cls="muted"))
    return items


def _width(text: str, size: float = FONT) -> float:
    return len(text) * 0.58 * size


def _table_frame1(p, trace, tab: _Table) -> list:
    probs = trace.routing.probs[:tab.rows, :tab.cols]
    items: list = [Rect(16, 50, BIN_X0 - 26, 22, cls="panel-bg"),
                   Text(20, 66, "softmax over all experts: each row sums to 1", size=15,
                        cls="muted")]
    hi = float(probs.max()) or 1.0
    items += _matrix_cells(tab, probs, 0.0, hi, _prob, "p")
    mean = trace.routing.probs.mean(axis=0)[None, :tab.cols]
    y = tab.y(tab.rows) + 0.3 * tab.rh
    items.append(Text(TABLE_X0 - 8, y + tab.rh / 2 + 5, "P̄", anchor="end", weight=700))
    boxes: dict[str, list[str]] = defaultdict(list)
    texts = []
    for e in range(tab.cols):
        v = float(mean[0, e])
        fill = value_fill(v / max(float(mean.max()), 1e-12))
        _cells(boxes, tab.x(e) + 1, y + 1, tab.cw - 2, tab.rh - 2, fill)
        if tab.numbers:
            texts.append(Text(tab.x(e) + tab.cw / 2, y + tab.rh / 2 + 5, _prob(v), cls="",
                              anchor="middle", fill=text_on(fill)))
    items.append(_batch(boxes, texts))
    return items


def _table_frame2(p, trace, tab: _Table) -> list:
    r = trace.routing
    items: list = [Rect(16, 50, BIN_X0 - 26, 22, cls="panel-bg"),
                   Text(20, 66, f"top-{p.top_k} per token, gate weights "
                                f"({'probabilities' if p.router == 'softmax_topk' else 'softmax of the chosen logits'})",
                        size=15, cls="muted")]
    boxes: dict[str, list[str]] = defaultdict(list)
    texts = []
    for t in range(tab.rows):
        for slot in range(p.top_k):
            e = int(r.experts[t, slot])
            if e >= tab.cols:
                continue
            _cells(boxes, tab.x(e) + 1, tab.y(t) + 1, tab.cw - 2, tab.rh - 2, CHOSEN)
            if tab.numbers:
                texts.append(Text(tab.x(e) + tab.cw / 2, tab.y(t) + tab.rh / 2 + 5,
                                  _prob(float(r.weights[t, slot])), cls="", anchor="middle",
                                  weight=700, fill="#ffffff"))
    items.append(_batch(boxes, texts))
    return items


@dataclass(frozen=True)
class _Bins:
    per_rank: bool             # one sub-column per (expert, sending rank), else per expert
    unit: float                # height of one assignment
    slots: bool                # each assignment its own box
    labels: bool               # … with its token number
    expert_x: tuple[float, ...]
    expert_w: float
    sub_w: float
    top: int                   # the scale's largest count


def _policy_order(p, trace) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(rank, expert) → its assignments (token, slot) in the order the drop policy keeps them."""
    r = trace.routing
    per_rank = p.tokens // p.ep
    groups: dict[tuple[int, int], list] = defaultdict(list)
    for t in range(p.tokens):
        for slot in range(p.top_k):
            groups[(t // per_rank, int(r.experts[t, slot]))].append((t, slot))
    if p.drop_policy == "probs":
        for key, items in groups.items():
            items.sort(key=lambda ts: (-round(float(r.weights[ts]) * WEIGHT_GRID), ts[0]))
    return groups


def _bins(p, trace) -> _Bins:
    E, ep = p.experts, p.ep
    d = trace.drops
    per_rank = E * ep <= SUB_COLUMNS
    gap = 14.0 if ep <= 16 and E // ep >= 1 and E <= 64 else 0.0
    inner = 3.0 if E <= 64 else 0.6
    width = BIN_X1 - BIN_X0 - gap * (ep - 1)
    expert_w = width / E
    xs = tuple(BIN_X0 + e * expert_w + (e // (E // ep)) * gap for e in range(E))
    sub = (expert_w - inner) / (ep if per_rank else 1)
    counts = d.load if per_rank else d.load.sum(axis=0, keepdims=True)
    cap = d.capacity if d.capacity is not None else 0
    top = max(int(counts.max()), cap * (1 if per_rank else ep), 1)
    unit = (BIN_Y1 - BIN_Y0) / top
    slots = per_rank and unit >= 12 and sub >= 8
    labels = slots and unit >= 17 and _fits(str(p.tokens - 1), sub - 2)
    return _Bins(per_rank, min(unit, 30.0) if slots else unit, slots, labels, xs, expert_w,
                 sub, top)


def _bin_frame(p, trace, bins: _Bins, capacity_frame: bool) -> list:
    """Frame 2 (every assignment arriving) or 3 (capacity line, dropped slots / padding)."""
    d, E, ep = trace.drops, p.experts, p.ep
    items: list = []
    boxes: dict[str, list[str]] = defaultdict(list)
    texts: list[Text] = []
    if not capacity_frame:
        items.append(Text(BIN_X0, 66, "expert bins: assignments from each rank, by expert",
                          size=15, cls="muted"))
        items += _bin_axes(p, bins)
    order = _policy_order(p, trace) if bins.slots else {}
    cap = d.capacity
    for e in range(E):
        for s in range(ep if bins.per_rank else 1):
            x = bins.expert_x[e] + s * bins.sub_w
            load = int(d.load[s, e] if bins.per_rank else d.load[:, e].sum())
            kept = int(d.kept_load[s, e] if bins.per_rank else d.kept_load[:, e].sum())
            colour = rank_colour(s, ep) if bins.per_rank else "#6a51a3"
            if bins.slots:
                for place, (t, slot) in enumerate(order.get((s, e), [])):
                    dropped = place >= kept
                    if capacity_frame and not dropped:
                        continue
                    y = BIN_Y1 - (place + 1) * bins.unit
                    fill = "url(#drop-hatch)" if capacity_frame else colour
                    _cells(boxes, x + 1, y + 1, bins.sub_w - 2, bins.unit - 2, fill)
                    if bins.labels:
                        ink = "#000000" if capacity_frame else text_on(colour)
                        texts.append(Text(x + bins.sub_w / 2, y + bins.unit / 2 + 5, str(t),
                                          cls="", anchor="middle", fill=ink,
                                          weight=700 if capacity_frame else 0))
            elif not capacity_frame and load:
                _cells(boxes, x + 0.5, BIN_Y1 - load * bins.unit, max(bins.sub_w - 1, 0.8),
                       load * bins.unit, colour)
            elif capacity_frame and load > kept:
                _cells(boxes, x + 0.5, BIN_Y1 - load * bins.unit, max(bins.sub_w - 1, 0.8),
                       (load - kept) * bins.unit, "url(#drop-hatch)")
            if capacity_frame and cap is None and bins.per_rank:
                top = int(d.load.max())
                if load < top:
                    items.append(Rect(x + 1, BIN_Y1 - top * bins.unit, bins.sub_w - 2,
                                      (top - load) * bins.unit, cls="pad"))
    items.append(_batch(boxes, texts))
    if capacity_frame:
        items.insert(0, Rect(BIN_X0 - 4, 50, BIN_X1 - BIN_X0 + 8, 22, cls="panel-bg"))
        if cap is None:
            top = int(d.load.max() if bins.per_rank else d.load.sum(axis=0).max())
            y = BIN_Y1 - top * bins.unit
            items.append(Text(BIN_X0, 66, f"dropless: nothing dropped; static shapes pad every "
                                          f"bin to the busiest ({top})", size=15, cls="muted"))
            items.append(Path(f"M{coord(BIN_X0)},{coord(y)}H{coord(BIN_X1)}", cls="limit"))
        else:
            line = cap if bins.per_rank else cap * ep
            y = BIN_Y1 - line * bins.unit
            what = f"capacity {cap} per expert per rank" + ("" if bins.per_rank else
                                                            f" (× {ep} ranks = {line})")
            items.append(Text(BIN_X0, 66, f"{what}; hatched: {len(d.dropped)} dropped",
                              size=15, cls="muted"))
            items.append(Path(f"M{coord(BIN_X0 - 4)},{coord(y)}H{coord(BIN_X1 + 4)}",
                              cls="limit-halo"))
            items.append(Path(f"M{coord(BIN_X0 - 4)},{coord(y)}H{coord(BIN_X1 + 4)}",
                              cls="limit"))
    return items


def _bin_axes(p, bins: _Bins) -> list:
    E, ep = p.experts, p.ep
    per_ep = E // ep
    items: list = [Path(f"M{coord(BIN_X0 - 4)},{BIN_Y1}H{coord(BIN_X1 + 4)}", cls="axis")]
    step = max(1, math.ceil(_width(f"E{E - 1}  ") / bins.expert_w))
    items += [Text(bins.expert_x[e] + bins.expert_w / 2 - 1.5, BIN_Y1 + 20, f"E{e}",
                   anchor="middle", cls="muted") for e in range(0, E, step)]
    groups = ep if ep <= 16 else 0
    for r in range(groups):
        x0 = bins.expert_x[r * per_ep]
        x1 = bins.expert_x[(r + 1) * per_ep - 1] + bins.expert_w - 3
        items.append(Rect(x0, BIN_Y1 + 30, x1 - x0, 5, rank_colour(r, ep), tip=f"rank {r}"))
        label = f"rank {r}" if _fits(f"rank {r}", x1 - x0) else (str(r) if _fits(str(r), x1 - x0) else "")
        if label:
            items.append(Text((x0 + x1) / 2, BIN_Y1 + 52, label, anchor="middle"))
    if groups == 0:
        items.append(Text(BIN_X0, BIN_Y1 + 52, f"{ep} ranks × {per_ep} experts each",
                          cls="muted"))
    # a count scale on the left of the bars (slots are counted by eye)
    ticks = [] if bins.slots else sorted({0, bins.top // 2, bins.top})
    for v in ticks:
        y = BIN_Y1 - v * bins.unit
        items.append(Text(BIN_X0 - 10, y + 5, str(v), anchor="end", cls="muted"))
    return items


def _bin_preview(p, trace, bins: _Bins) -> list:
    """Step 0, while it is current: the empty expert bins of step 2, grouped by rank, the
    capacity line of step 3 dashed, and what will fill them: the deck's right half says what is
    about to happen instead of staying empty."""
    cap = trace.drops.capacity
    k = p.top_k
    items = [Text(BIN_X0, 66, f"next: each token's top-{k} expert{'s' if k > 1 else ''} "
                              f"fill these bins", size=15, cls="muted")]
    items += _bin_axes(p, bins)
    if cap is not None:
        line = cap if bins.per_rank else cap * p.ep
        y = BIN_Y1 - line * bins.unit
        items.append(Path(f"M{coord(BIN_X0 - 4)},{coord(y)}H{coord(BIN_X1 + 4)}", cls="limit"))
        items.append(Text(BIN_X0, y - 10, f"capacity: {line} per expert"
                          + (" from each rank" if bins.per_rank else ""), cls="muted"))
    return [replace(item, cls=f"{item.cls} only-current".strip()) for item in items]


def _arrows(p, trace, tab: _Table, bins: _Bins) -> tuple[Arrow, ...]:
    """Top-k arrows of the first tokens, from their row into the column of their slot, with the
    gate weight. Each leaves its row level and drops onto the top of the slot's column, its
    head on the column's topmost box; the deck draws the arrows under the bins (so no line runs
    through a slot's number) and outlines the slot each arrow stands for (:func:`_arrow_slots`).
    They used to end at the slot's left edge, which, beside a shorter column, was in mid-air."""
    if not bins.slots:
        return ()
    r, per_rank = trace.routing, p.tokens // p.ep
    order = _policy_order(p, trace)
    out = []
    head = 9.0
    for t in range(_arrow_tokens(p, tab)):
        for slot in range(p.top_k):
            e, s = int(r.experts[t, slot]), t // per_rank
            x = bins.expert_x[e] + (s + 0.5) * bins.sub_w
            top = BIN_Y1 - len(order[(s, e)]) * bins.unit - 1
            sx, sy = TABLE_X1 + 6, tab.y(t) + tab.rh / 2
            cy = min(sy, top - 40)
            d = (f"M{coord(sx)},{coord(sy)} Q{coord(x)},{coord(cy)} "
                 f"{coord(x)},{coord(top - head)}")
            tip = f"{coord(x)},{coord(top)} {coord(x - head / 2)},{coord(top - head)} " \
                  f"{coord(x + head / 2)},{coord(top - head)}"
            # token 0's weights stacked beside the arrows' start, in choice order
            lx, ly = sx + 28, sy - 4 + 15 * slot
            label = _prob(float(r.weights[t, slot])) if t == 0 and slot < 4 else ""
            out.append(Arrow(d, tip, rank_colour(s, p.ep), label, lx, ly))
    return tuple(out)


def _arrow_tokens(p, tab: _Table) -> int:
    """How many of the first tokens get arrows."""
    return min(tab.rows, max(1, ARROW_SLOTS // p.top_k) if p.top_k <= 2 else 1)


def _arrow_slots(p, trace, bins: _Bins) -> list:
    """The slots the arrows stand for, outlined while their step is current."""
    if not bins.slots:
        return []
    r, per_rank = trace.routing, p.tokens // p.ep
    order = _policy_order(p, trace)
    place = {ts: k for items in order.values() for k, ts in enumerate(items)}
    out = []
    for t in range(_arrow_tokens(p, _table(p))):
        for slot in range(p.top_k):
            e, s = int(r.experts[t, slot]), t // per_rank
            x = bins.expert_x[e] + s * bins.sub_w
            y = BIN_Y1 - (place[(t, slot)] + 1) * bins.unit
            out.append(Rect(x + 1, y + 1, bins.sub_w - 2, bins.unit - 2,
                            cls="only-current changed-box"))
    return out


# --- frames 4–7: expert parallelism ------------------------------------------------------

@dataclass(frozen=True)
class _Columns:
    ranks: tuple[int, ...]
    x: tuple[float, ...]
    w: float
    rh: float
    rows: int                  # rows listed per column
    strip: int                 # vector entries drawn per row
    sw: float                  # width of one entry


def _columns(p, trace) -> _Columns:
    ranks = tuple(range(p.ep if p.ep <= RANK_COLUMNS else 4))
    n = len(ranks)
    gap = 10.0
    w = (COL_X1 - COL_X0 - gap * (n - 1)) / n
    room = COL_Y1 - 40 - (COL_Y0 + 36)
    most = max(int(trace.run.rank_rows[list(ranks)].max()), 1)
    rh = min(24.0, max(19.0, room / most))
    rows = int(room // rh)
    label_w = 0.62 * FONT * len(f"t{p.tokens - 1}·E{p.experts - 1}") + 14
    strip = min(p.token_width, STRIP_VALUES)
    sw = min(14.0, (w - label_w - 6) / strip)
    if sw < 3:
        strip, sw = 0, 0.0
    return _Columns(ranks, tuple(COL_X0 + k * (w + gap) for k in range(n)), w, rh, rows, strip,
                    sw)


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


def _strip(boxes, values, x: float, y: float, cols: _Columns, scale: float) -> None:
    """A vector's first entries, −scale (palest) … +scale (darkest)."""
    for i in range(cols.strip):
        v = float(values[i])
        _cells(boxes, x + i * cols.sw, y + 2, cols.sw - 0.6, cols.rh - 4,
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


def _column_headers(p, cols: _Columns, text_of) -> list:
    items = []
    per_ep = p.experts // p.ep
    for k, r in enumerate(cols.ranks):
        fill = rank_colour(r, p.ep)
        items.append(Rect(cols.x[k], COL_Y0, cols.w, 28, fill))
        for label in text_of(r, per_ep):
            if _fits(label, cols.w - 8):
                items.append(Text(cols.x[k] + cols.w / 2, COL_Y0 + 19, label, anchor="middle",
                                  cls="", weight=700, fill=text_on(fill)))
                break
    if len(cols.ranks) < p.ep:
        items.append(Text(COL_X1, COL_Y1 + 40, f"ranks 0–{len(cols.ranks) - 1} of {p.ep} shown",
                          anchor="end", cls="muted"))
    return items


def _rows_frame(p, trace, cols: _Columns, outputs: bool) -> list:
    """Frame 4 (the token vectors each rank receives) or 5 (its experts' outputs)."""
    x = trace.inputs.x
    items: list = []
    listed = {dst: _received(trace, dst, cols.rows) for dst in cols.ranks}
    shown_of = {dst: rows[:cols.rows if total <= cols.rows else cols.rows - 1]
                for dst, (rows, total) in listed.items()}
    values = {dst: (_expert_rows(trace, shown) if outputs else
                    x[[row[1] for row in shown]])
              for dst, shown in shown_of.items()}
    scale = max((_scale(v) for v in values.values()), default=1.0)
    for k, dst in enumerate(cols.ranks):
        total, shown = listed[dst][1], shown_of[dst]
        by_src: dict[int, list] = defaultdict(list)
        for i, row in enumerate(shown):
            by_src[row[0]].append((i, row))
        for src, group in by_src.items():
            boxes: dict[str, list[str]] = defaultdict(list)
            texts = []
            for i, (_, t, slot, e) in group:
                y = COL_Y0 + 36 + i * cols.rh
                boxes[rank_colour(src, p.ep)].append(
                    f"M{coord(cols.x[k])},{coord(y + 2)}h5v{coord(cols.rh - 4)}h-5z")
                texts.append(Text(cols.x[k] + 9, y + cols.rh - 5, f"t{t}·E{e}"))
                if cols.strip:
                    _strip(boxes, values[dst][i], cols.x[k] + cols.w - cols.strip * cols.sw - 2,
                           y, cols, scale)
            dx = 0.0
            if not outputs and src != dst and src in cols.ranks:
                dx = cols.x[cols.ranks.index(src)] - cols.x[k]
            items.append(_batch(boxes, texts, dx=dx))
        if total > len(shown):
            items.append(Text(cols.x[k] + 9, COL_Y0 + 36 + len(shown) * cols.rh + cols.rh - 5,
                              f"+ {total - len(shown)} more rows", cls="muted"))
    return items


def _matrix(p, values: np.ndarray, title: str, row_word: str, col_word: str) -> list:
    ep = values.shape[0]
    cell = min(96.0, MAT_SIZE / ep)
    items: list = [Rect(0, 50, COL_X0 - 8, MAT_Y0 + MAT_SIZE + 60 - 50, cls="panel-bg"),
                   Text(20, 66, title, size=15, cls="muted")]
    hi = max(int(values.max()), 1)
    boxes: dict[str, list[str]] = defaultdict(list)
    texts = []
    numbers = cell >= 26
    size = 20 if cell >= 60 else 16 if cell >= 36 else FONT
    for i in range(ep):
        for j in range(ep):
            v = int(values[i, j])
            fill = value_fill(v / hi) if v else "#ffffff"
            _cells(boxes, MAT_X0 + j * cell + 1, MAT_Y0 + i * cell + 1, cell - 2, cell - 2, fill)
            if numbers:
                texts.append(Text(MAT_X0 + (j + 0.5) * cell, MAT_Y0 + (i + 0.5) * cell + size / 3,
                                  str(v), size=size, cls="", anchor="middle", fill=text_on(fill),
                                  weight=700 if i != j else 0))
    items.append(_batch(boxes, texts))
    if numbers:
        items.append(Path("".join(f"M{coord(MAT_X0 + i * cell + 2)},{coord(MAT_Y0 + i * cell + 2)}"
                                  f"h{coord(cell - 4)}v{coord(cell - 4)}h{coord(4 - cell)}z"
                                  for i in range(ep)), cls="ghost"))
    step = max(1, math.ceil(1.6 * FONT / cell))
    for i in range(0, ep, step):
        items.append(Rect(MAT_X0 - 14, MAT_Y0 + i * cell + 3, 8, max(cell - 6, 2.0),
                          rank_colour(i, ep)))
        items.append(Text(MAT_X0 - 18, MAT_Y0 + (i + 0.5) * cell + 5, str(i), anchor="end"))
        items.append(Text(MAT_X0 + (i + 0.5) * cell, MAT_Y0 - 8, str(i), anchor="middle"))
    items.append(Text(MAT_X0 + ep * cell / 2, MAT_Y0 - 28, f"to: {col_word}",
                      anchor="middle", cls="muted"))
    items.append(Text(20, MAT_Y0 + ep * cell + 24, f"rows: from {row_word}", cls="muted"))
    if numbers:
        items.append(Text(20, MAT_Y0 + ep * cell + 44, "dashed: stays on its rank", cls="muted"))
    return items


def _cost_top(p) -> float:
    return MAT_Y0 + min(MAT_SIZE, p.ep * min(96.0, MAT_SIZE / p.ep)) + 70


def _cost_lines(p, trace, y: float) -> list:
    c = trace.a2a.dispatch
    busiest = float(c.bytes_sent.max())
    lines = [f"scaled to {p.cost_tokens} tokens/rank × {p.hidden} × {p.dtype}:",
             f"busiest rank sends {human_bytes(busiest)} per all-to-all",
             f"NVLink {num(c.nvlink_us)} µs · InfiniBand {num(c.infiniband_us)} µs",
             f"{p.gpus_per_node} GPUs a node: {num(c.time_us)} µs; combine "
             f"{num(trace.a2a.combine.time_us)} µs"]
    return [Text(20, y + 22 * k, line, size=15, cls="muted" if k == 0 else "ink",
                 weight=700 if k == 2 else 0) for k, line in enumerate(lines)]


def _ep_frame4(p, trace, cols: _Columns) -> list:
    items: list = [Rect(0, COVER_TOP, WIDTH, HEIGHT - COVER_TOP, cls="panel-bg")]
    items += _matrix(p, trace.dispatch, f"dispatch: {p.ep} × {p.ep} rows sent", "token's rank",
                     "expert's rank")
    items += _cost_lines(p, trace, _cost_top(p))
    items.append(Text(COL_X0, 66, "rows each rank receives: token · expert, then its vector",
                      size=15, cls="muted"))
    items += _column_headers(p, cols, lambda r, per: (
        f"rank {r} · E{r * per}–{(r + 1) * per - 1}" if per > 1 else f"rank {r} · E{r}",
        f"rank {r}", f"r{r}", ""))
    items += _rows_frame(p, trace, cols, outputs=False)
    return items


def _ep_frame5(p, trace, cols: _Columns) -> list:
    rows = trace.run.rank_rows
    busiest = int(rows.max())
    items: list = [Rect(COL_X0 - 4, 50, COL_X1 - COL_X0 + 8, 22, cls="panel-bg"),
                   Text(COL_X0, 66, "each rank's experts run on what it received: outputs",
                        size=15, cls="muted")]
    items += _column_headers(p, cols, lambda r, per: (
        f"rank {r}: {int(rows[r])} rows" + (" — busiest" if rows[r] == busiest else ""),
        f"rank {r}: {int(rows[r])}", f"{int(rows[r])}", ""))
    items += _rows_frame(p, trace, cols, outputs=True)
    for k, r in enumerate(cols.ranks):
        w = cols.w * rows[r] / max(busiest, 1)
        fill = rank_colour(r, p.ep)
        items.append(Rect(cols.x[k], COL_Y1 - 8, cols.w, 14, cls="blank"))
        items.append(Rect(cols.x[k], COL_Y1 - 8, w, 14, fill,
                          tip=f"rank {r} computes {int(rows[r])} rows"))
    items.append(Text(COL_X0, COL_Y1 + 24, f"compute time follows the busiest rank: "
                                           f"{num(rows.max() / max(rows.mean(), 1e-12))}× the mean",
                      weight=700))
    return items


def _ep_frame6(p, trace, cols: _Columns) -> list:
    items: list = _matrix(p, trace.dispatch.T, "combine: the same rows back, dispatchᵀ",
                          "expert's rank", "token's rank")
    items += _cost_lines(p, trace, _cost_top(p))
    items += [Rect(COL_X0 - 6, 50, COL_X1 - COL_X0 + 12, HEIGHT - 50, cls="panel-bg"),
              Text(COL_X0, 66, "results back on each token's rank: expert · token",
                   size=15, cls="muted")]
    items += _column_headers(p, cols, lambda r, per: (f"rank {r}: its tokens' results",
                                                       f"rank {r}", f"r{r}", ""))
    experts_per = p.experts // p.ep
    listed = {home: _returned(trace, home, p.ep, cols.rows) for home in cols.ranks}
    shown_of = {h: rows[:cols.rows if total <= cols.rows else cols.rows - 1]
                for h, (rows, total) in listed.items()}
    values = {h: _expert_rows(trace, shown) for h, shown in shown_of.items()}
    scale = max((_scale(v) for v in values.values()), default=1.0)
    for k, home in enumerate(cols.ranks):
        total, shown = listed[home][1], shown_of[home]
        by_dst: dict[int, list] = defaultdict(list)
        for i, row in enumerate(shown):
            by_dst[row[0]].append((i, row))
        for dst, group in by_dst.items():
            boxes: dict[str, list[str]] = defaultdict(list)
            texts = []
            for i, (_, t, slot, e) in group:
                y = COL_Y0 + 36 + i * cols.rh
                boxes[rank_colour(e // experts_per, p.ep)].append(
                    f"M{coord(cols.x[k])},{coord(y + 2)}h5v{coord(cols.rh - 4)}h-5z")
                texts.append(Text(cols.x[k] + 9, y + cols.rh - 5, f"E{e}·t{t}"))
                if cols.strip:
                    _strip(boxes, values[home][i], cols.x[k] + cols.w - cols.strip * cols.sw - 2,
                           y, cols, scale)
            dx = (cols.x[cols.ranks.index(dst)] - cols.x[k]) if (dst != home and dst in cols.ranks) else 0.0
            items.append(_batch(boxes, texts, dx=dx))
        if total > len(shown):
            items.append(Text(cols.x[k] + 9, COL_Y0 + 36 + len(shown) * cols.rh + cols.rh - 5,
                              f"+ {total - len(shown)} more rows", cls="muted"))
    return items


def _ep_frame7(p, trace, cols: _Columns) -> list:
    """Each token's output y_t = Σ w·expert(x_t), listed by token."""
    r, d = trace.routing, trace.drops
    items: list = [Rect(COL_X0 - 6, 50, COL_X1 - COL_X0 + 12, HEIGHT - 50, cls="panel-bg"),
                   Text(COL_X0, 66, "y_t = Σ w · expert(x_t) over the kept experts", size=15,
                        cls="muted")]
    rh = 22.0
    n = min(p.tokens, int((COL_Y1 - COL_Y0) // rh))
    per_rank = p.tokens // p.ep
    strip = min(p.token_width, STRIP_VALUES)
    sw = min(14.0, 220 / strip)
    boxes: dict[str, list[str]] = defaultdict(list)
    texts = []
    out = trace.run.output
    scale = _scale(out[:n, :strip])
    for t in range(n):
        y = COL_Y0 + t * rh
        boxes[rank_colour(t // per_rank, p.ep)].append(
            f"M{coord(COL_X0)},{coord(y + 3)}h6v{coord(rh - 6)}h-6z")
        terms = []
        for slot in range(p.top_k):
            e = int(r.experts[t, slot])
            kept = bool(d.kept[t, slot])
            terms.append(f"{_prob(float(r.weights[t, slot]))}·E{e}" if kept else f"E{e} dropped")
        shown = terms[:3] + (["…"] if len(terms) > 3 else [])
        body = " + ".join(shown) if any(d.kept[t]) else "all dropped: residual only, 0"
        texts.append(Text(COL_X0 + 12, y + rh - 6, f"t{t} = {body}",
                          cls="ink" if any(d.kept[t]) else "bad-text"))
        if not any(d.kept[t]):
            continue
        for i in range(strip):
            v = float(out[t, i])
            _cells(boxes, COL_X1 - strip * sw + i * sw, y + 3, sw - 0.6, rh - 6,
                   value_fill((v / scale + 1.0) / 2.0))
    items.append(_batch(boxes, texts))
    if p.tokens > n:
        items.append(Text(COL_X0 + 12, COL_Y0 + n * rh + rh - 6,
                          f"+ {p.tokens - n} more tokens", cls="muted"))
    items.append(Text(COL_X0, COL_Y1 + 24, f"expert-parallel vs dense layer: max |difference| "
                                           f"{trace.run.max_abs_error:.2g}", weight=700))
    return items


STAGES = ("tokens and router logits", "softmax over the experts",
          "top-k choice and gate weights", "capacity and drops",
          "dispatch all-to-all", "the experts compute", "combine all-to-all",
          "weighted sum: the output")
"""a step is a stage of one MoE layer's forward pass: the header and the player name it"""
HEADERS = tuple(f"Stage {k} of {len(STAGES) - 1} · {s}" if k else f"Before routing · {s}"
                for k, s in enumerate(STAGES))
UNITS = tuple(f"MoE layer stage {k} of {len(STAGES) - 1}: {s}" if k else f"before routing: {s}"
              for k, s in enumerate(STAGES))


def build_deck(trace) -> MoeDeck:
    p = trace.params
    tab, bins, cols = _table(p), _bins(p, trace), _columns(p, trace)
    frames = [
        FrameView(0, HEADERS[0], tuple(_table_frame0(p, trace, tab) + _bin_preview(p, trace, bins))),
        FrameView(1, HEADERS[1], tuple(_table_frame1(p, trace, tab))),
        FrameView(2, HEADERS[2], tuple(_table_frame2(p, trace, tab) + _bin_frame(p, trace, bins, False)
                                       + _arrow_slots(p, trace, bins)),
                  _arrows(p, trace, tab, bins)),
        FrameView(3, HEADERS[3], tuple(_bin_frame(p, trace, bins, True))),
        FrameView(4, HEADERS[4], tuple(_ep_frame4(p, trace, cols))),
        FrameView(5, HEADERS[5], tuple(_ep_frame5(p, trace, cols))),
        FrameView(6, HEADERS[6], tuple(_ep_frame6(p, trace, cols))),
        FrameView(7, HEADERS[7], tuple(_ep_frame7(p, trace, cols))),
    ]
    frames = [replace(f, unit=UNITS[f.index]) for f in frames]
    return MoeDeck(WIDTH, HEIGHT, deck_title(p), tuple(frames))
