"""The MoE deck's right half in frames 0–3, laid out for the box (:mod:`.deck_parts`): the
experts' bins, grouped by the expert-parallel rank that holds them, one sub-column per sending
rank — empty with the capacity line to come (0), the assignments arriving as slots in the order
the drop policy keeps them, with the top-k arrows of the first tokens (2), the capacity line and
the dropped slots above it, or the padding of a dropless layer (3).

A slot carries its token's number where it holds one at the small size; beyond
:data:`SUB_COLUMNS` sub-columns the bins become bars (one per expert, all ranks together) with a
count scale.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace

from app.draw.fmt import coord
from app.draw.palette import rank_colour, text_on
from app.draw.shapes import Arrow, Path, Rect, Text
from app.draw.text import fits, text_width
from app.scenes.moe.deck_parts import Lay, batch, cells, note
from app.scenes.moe.deck_router import Table, prob
from app.sim.moe.capacity import WEIGHT_GRID

SUB_COLUMNS = 64
"""at most this many (expert, sending rank) bins; beyond, one bar per expert"""
ARROW_SLOTS = 8
"""top-k arrows drawn for the first tokens, up to this many; token 0's carry its gate weights"""


@dataclass(frozen=True)
class Bins:
    per_rank: bool             # one sub-column per (expert, sending rank), else per expert
    unit: float                # height of one assignment
    slots: bool                # each assignment its own box
    size: float                # … with its token number at this size (0: none)
    expert_x: tuple[float, ...]
    expert_w: float
    sub_w: float
    top: int                   # the scale's largest count
    x0: float
    x1: float
    y0: float
    y1: float


def policy_order(p, trace) -> dict[tuple[int, int], list[tuple[int, int]]]:
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


def bins(p, trace, lay: Lay) -> Bins:
    E, ep, small = p.experts, p.ep, lay.small
    d = trace.drops
    per_rank = E * ep <= SUB_COLUMNS
    x0, x1 = lay.split, lay.width - lay.pad
    # the gaps between the ranks' groups take at most a quarter of the width
    gap = min(lay.pad * 0.8, (x1 - x0) * 0.25 / max(ep - 1, 1)) if ep <= 16 and E <= 64 else 0.0
    inner = 3.0 if E <= 64 else 0.6
    counts = d.load if per_rank else d.load.sum(axis=0, keepdims=True)
    cap = d.capacity if d.capacity is not None else 0
    top = max(int(counts.max()), cap * (1 if per_rank else ep), 1)
    y0, y1 = lay.body + small * 1.7, lay.bottom - small * 3.6
    unit = (y1 - y0) / top
    for ticks in (False, True):
        if ticks:
            x0 = lay.split + text_width(str(top), small) + small * 0.8
        expert_w = (x1 - x0 - gap * (ep - 1)) / E
        sub = (expert_w - inner) / (ep if per_rank else 1)
        slots = per_rank and unit >= 12 and sub >= 8
        if slots:
            break
    slot_h = min(unit, lay.text * 1.9)
    size = (small if slots and slot_h - 2 >= small * 1.2 and fits(str(p.tokens - 1), small, sub - 4)
            else 0.0)
    xs = tuple(x0 + e * expert_w + (e // (E // ep)) * gap for e in range(E))
    return Bins(per_rank, slot_h if slots else unit, slots, size, xs,
                expert_w, sub, top, x0, x1, y0, y1)


def bin_frame(p, trace, lay: Lay, bins: Bins, capacity_frame: bool) -> list:
    """Frame 2 (every assignment arriving) or 3 (capacity line, dropped slots / padding)."""
    d, E, ep = trace.drops, p.experts, p.ep
    items: list = []
    boxes: dict[str, list[str]] = defaultdict(list)
    texts: list[Text] = []
    if not capacity_frame:
        items += note(lay, bins.x0, bins.x1, (
            "expert bins: assignments from each rank, by expert", "expert bins, by expert"),
            cover=True)
        items += bin_axes(p, lay, bins)
    order = policy_order(p, trace) if bins.slots else {}
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
                    y = bins.y1 - (place + 1) * bins.unit
                    fill = "url(#drop-hatch)" if capacity_frame else colour
                    cells(boxes, x + 1, y + 1, bins.sub_w - 2, bins.unit - 2, fill)
                    if bins.size:
                        ink = "#000000" if capacity_frame else text_on(colour)
                        texts.append(Text(x + bins.sub_w / 2, y + bins.unit / 2 + bins.size * 0.35,
                                          str(t), size=bins.size, cls="", anchor="middle",
                                          fill=ink, weight=700 if capacity_frame else 0))
            elif not capacity_frame and load:
                cells(boxes, x + 0.5, bins.y1 - load * bins.unit, max(bins.sub_w - 1, 0.8),
                      load * bins.unit, colour)
            elif capacity_frame and load > kept:
                cells(boxes, x + 0.5, bins.y1 - load * bins.unit, max(bins.sub_w - 1, 0.8),
                      (load - kept) * bins.unit, "url(#drop-hatch)")
            if capacity_frame and cap is None and bins.per_rank:
                top = int(d.load.max())
                if load < top:
                    items.append(Rect(x + 1, bins.y1 - top * bins.unit, bins.sub_w - 2,
                                      (top - load) * bins.unit, cls="pad"))
    items.append(batch(boxes, texts))
    if capacity_frame:
        if cap is None:
            top = int(d.load.max() if bins.per_rank else d.load.sum(axis=0).max())
            y = bins.y1 - top * bins.unit
            items = note(lay, bins.x0, bins.x1, (
                f"dropless: nothing dropped; static shapes pad every bin to the busiest ({top})",
                f"dropless: bins padded to the busiest ({top})", "dropless"), cover=True) + items
            items.append(Path(f"M{coord(bins.x0)},{coord(y)}H{coord(bins.x1)}", cls="limit"))
        else:
            line = cap if bins.per_rank else cap * ep
            y = bins.y1 - line * bins.unit
            what = f"capacity {cap} per expert per rank" + ("" if bins.per_rank else
                                                            f" (× {ep} ranks = {line})")
            items = note(lay, bins.x0, bins.x1, (
                f"{what}; hatched: {len(d.dropped)} dropped",
                f"capacity {line}; hatched: {len(d.dropped)} dropped",
                f"{len(d.dropped)} dropped"), cover=True) + items
            items.append(Path(f"M{coord(bins.x0 - 4)},{coord(y)}H{coord(bins.x1 + 4)}",
                              cls="limit-halo"))
            items.append(Path(f"M{coord(bins.x0 - 4)},{coord(y)}H{coord(bins.x1 + 4)}",
                              cls="limit"))
    return items


def bin_axes(p, lay: Lay, bins: Bins) -> list:
    E, ep, small = p.experts, p.ep, lay.small
    per_ep = E // ep
    y1 = bins.y1
    items: list = [Path(f"M{coord(bins.x0 - 4)},{coord(y1)}H{coord(bins.x1 + 4)}", cls="axis")]
    step = max(1, math.ceil((text_width(f"E{E - 1}", small) + small * 0.6) / bins.expert_w))
    items += [Text(bins.expert_x[e] + bins.expert_w / 2 - 1.5, y1 + small * 1.4, f"E{e}",
                   size=small, anchor="middle", cls="muted") for e in range(0, E, step)]
    groups = ep if ep <= 16 else 0
    for r in range(groups):
        x0 = bins.expert_x[r * per_ep]
        x1 = bins.expert_x[(r + 1) * per_ep - 1] + bins.expert_w - 3
        items.append(Rect(x0, y1 + small * 1.8, max(x1 - x0, 1.0), 5, rank_colour(r, ep),
                          tip=f"rank {r}"))
        label = next((t for t in (f"rank {r}", str(r)) if fits(t, small, x1 - x0)), "")
        if label:
            items.append(Text((x0 + x1) / 2, y1 + small * 3.3, label, size=small,
                              anchor="middle"))
    if groups == 0:
        items.append(Text(bins.x0, y1 + small * 3.3, f"{ep} ranks × {per_ep} experts each",
                          size=small, cls="muted"))
    # a count scale on the left of the bars (slots are counted by eye)
    span = bins.y1 - bins.y0
    ticks = ([] if bins.slots else sorted({0, bins.top // 2, bins.top}) if span / 2 >= small * 1.2
             else [0, bins.top] if span >= small * 1.2 else [bins.top])
    for v in ticks:
        y = y1 - v * bins.unit
        items.append(Text(bins.x0 - small * 0.6, y + small * 0.35, str(v), size=small,
                          anchor="end", cls="muted"))
    return items


def bin_preview(p, trace, lay: Lay, bins: Bins) -> list:
    """Step 0, while it is current: the empty expert bins of step 2, grouped by rank, the
    capacity line of step 3 dashed, and what will fill them: the deck's right half says what is
    about to happen instead of staying empty."""
    cap = trace.drops.capacity
    k, small = p.top_k, lay.small
    items = note(lay, bins.x0, bins.x1, (
        f"next: each token's top-{k} expert{'s' if k > 1 else ''} fill these bins",
        f"next: top-{k} fill these bins"))
    items += bin_axes(p, lay, bins)
    if cap is not None:
        line = cap if bins.per_rank else cap * p.ep
        y = bins.y1 - line * bins.unit
        items.append(Path(f"M{coord(bins.x0 - 4)},{coord(y)}H{coord(bins.x1 + 4)}", cls="limit"))
        words = f"capacity: {line} per expert" + (" from each rank" if bins.per_rank else "")
        above = y - small * 0.6
        if above - small * 0.8 < lay.body:     # no room above the line: under it
            above = y + small * 1.2
        if fits(words, small, bins.x1 - bins.x0):
            items.append(Text(bins.x0, above, words, size=small, cls="muted"))
    return [replace(item, cls=f"{item.cls} only-current".strip()) for item in items]


def arrows(p, trace, lay: Lay, tab: Table, bins: Bins) -> tuple[tuple[Arrow, ...],
                                                                 tuple[Text, ...]]:
    """Top-k arrows of the first tokens, from their row into the column of their slot, and
    token 0's gate weights stacked beside the arrows' start. Each leaves its row level and
    drops onto the top of the slot's column, its head on the column's topmost box; the deck
    draws the arrows under the bins (so no line runs through a slot's number), their numbers
    over every line, and outlines the slot each arrow stands for (:func:`arrow_slots`)."""
    if not bins.slots:
        return (), ()
    r, per_rank, small = trace.routing, p.tokens // p.ep, lay.small
    order = policy_order(p, trace)
    out, labels = [], []
    head = 9.0
    for t in range(arrow_tokens(p, tab)):
        for slot in range(p.top_k):
            e, s = int(r.experts[t, slot]), t // per_rank
            x = bins.expert_x[e] + (s + 0.5) * bins.sub_w
            top = bins.y1 - len(order[(s, e)]) * bins.unit - 1
            sx, sy = tab.x1 + 6, tab.y(t) + tab.rh / 2
            cy = min(sy, top - 40)
            d = (f"M{coord(sx)},{coord(sy)} Q{coord(x)},{coord(cy)} "
                 f"{coord(x)},{coord(top - head)}")
            tip = f"{coord(x)},{coord(top)} {coord(x - head / 2)},{coord(top - head)} " \
                  f"{coord(x + head / 2)},{coord(top - head)}"
            out.append(Arrow(d, tip, rank_colour(s, p.ep)))
            if t == 0 and slot < 4:
                lx = sx + text_width("0.00", small, bold=True) / 2 + small * 0.9
                labels.append(Text(lx, sy - small * 0.25 + small * 1.05 * slot,
                                   prob(float(r.weights[t, slot])), size=small,
                                   cls="ink halo-bg", anchor="middle", weight=700))
    return tuple(out), tuple(labels)


def arrow_tokens(p, tab: Table) -> int:
    """How many of the first tokens get arrows."""
    return min(tab.rows, max(1, ARROW_SLOTS // p.top_k) if p.top_k <= 2 else 1)


def arrow_slots(p, trace, tab: Table, bins: Bins) -> list:
    """The slots the arrows stand for, outlined while their step is current."""
    if not bins.slots:
        return []
    r, per_rank = trace.routing, p.tokens // p.ep
    order = policy_order(p, trace)
    place = {ts: k for items in order.values() for k, ts in enumerate(items)}
    out = []
    for t in range(arrow_tokens(p, tab)):
        for slot in range(p.top_k):
            e, s = int(r.experts[t, slot]), t // per_rank
            x = bins.expert_x[e] + s * bins.sub_w
            y = bins.y1 - (place[(t, slot)] + 1) * bins.unit
            out.append(Rect(x + 1, y + 1, bins.sub_w - 2, bins.unit - 2,
                            cls="only-current changed-box"))
    return out
