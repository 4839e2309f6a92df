"""The data-parallel scene as drawable geometry: one step's timeline that grows frame by frame,
laid out for the deck's box (docs/legibility.md; the lanes and time axis follow /pipeline's).

Frame k holds the pieces of every bar that lie between the previous frame's time and its own
(so frames 0…k show the timeline up to t_k), the bars' labels once they are complete, a cursor
at t_k (``only-current``), and a strip that says where things stand at t_k: DDP's buckets
(waiting, filling, queued, all-reducing, reduced), or the parameters FSDP holds gathered
(:mod:`app.scenes.data_parallel.deck_strip`). The lane names' column and DataParallel's
busy-share column are as wide as their texts at the box's sizes; the time axis takes the
rest. A bar's label shows where it fits at the small size; a strip's number where it fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.draw.box import Box
from app.draw.lanes import KIND_COLOURS, Bar, lane_chart
from app.draw.layout import LINE, heading, legend_rows
from app.draw.plot import linear_ticks
from app.draw.shapes import Label
from app.draw.text import fits, text_width
from app.humanize import human_bytes, human_time_us
from app.draw.plot import line_chart
from app.scenes.data_parallel.deck_strip import (BucketClock, Piece, Strip, bucket_strip,
                                                 gathered_strip, note_texts, strip_legend)
from app.scenes.pipeline.deck_layers import TimeAxis
from app.sim.data_parallel.simulate import DataParallelTrace

__all__ = ["BucketClock", "Deck", "FrameView", "build_deck", "deck_title", "panels"]

MIN_WIDTH, MIN_HEIGHT = 560, 320
"""The smallest box the timeline is laid out for: a narrower frame (a phone) scrolls it."""
LANE_NAMES = {"compute": "GPU compute", "comm": "NCCL stream", "links": "copies / NCCL"}
STRIP_NAMES = {"ddp": "buckets", "fsdp": "gathered"}
STRIP_SHARE = {"ddp": 0.9, "fsdp": 1.2, "dp": 0.0}
"""The strip's height against a lane's."""


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    pieces: tuple[Piece, ...]
    texts: tuple[Label, ...]
    cursor: float
    cursor_label: str
    label_x: float
    """x of the cursor's label, kept inside the deck"""
    note: Label | None
    unit: str = ""
    """what the step is, for the player's position text: a time (t = 12.3 ms of 26 ms)"""


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    box: Box
    """the box asked for (the deck's ``data-box``); width × height is what it was laid out in"""
    title: str
    title_lines: tuple[tuple[float, float, str], ...]
    """(x, baseline, text) of each line of the title, right-aligned"""
    header: tuple[float, float, float]
    """x, baseline and size of the step's header"""
    lane_names: tuple[Label, ...]
    axis: TimeAxis
    axis_y: float
    """the baseline of the time ticks; the grid runs from ``grid_top`` to ``lanes_bottom``"""
    grid_top: float
    lanes_bottom: float
    ticks: tuple[tuple[float, str], ...]
    cursor_y: float
    """the baseline of the cursor's label, under the lanes"""
    strip: Strip | None
    strip_title: Label | None
    frames: tuple[FrameView, ...]
    legend: tuple[tuple[float, float, str, str], ...]
    """(x, y, paint, text): y is the swatch's top; paint a colour, "" an outline, class:name"""
    swatch: float
    utilisation: tuple[Label, ...]
    small: float
    text: float


def build_deck(trace: DataParallelTrace, box: Box, upto: int | None = None) -> Deck:
    """Every frame of ``trace`` (or frames 0…``upto`` for a standalone export), laid out for
    ``box``: the header and title on top, the time ticks under them, a lane per stream between
    the lane names (left) and, for DataParallel, each GPU's busy share (right); the cursor's
    label under the lanes, then the strip with its title, the frame's note and the legend."""
    p, t = trace.params, trace.timeline
    area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
    width, height = area.width, area.height
    pad, text, small = area.pad, area.text, area.small
    last = len(trace.moments) - 1 if upto is None else upto
    end = human_time_us(trace.moments[-1].t_us)
    clock = BucketClock(trace) if p.mode == "ddp" else None

    title = deck_title(p, trace)
    headers = [_header(k, trace.moments[k].t_us, end) for k in range(last + 1)]
    top = heading(area, headers, title)
    axis_y = round(top.top + small * 0.9, 1)
    grid_top = round(axis_y + small * 0.45, 1)
    lanes_top = grid_top + small * 0.3

    # the legend: the timeline's kinds, then the strip's states
    items = []
    for kind in dict.fromkeys(s.kind for s in t.spans if s.end_us > s.start_us):
        colour, name = KIND_COLOURS.get(kind, ("#777777", kind))
        if name not in [n for _, n in items]:
            items.append((colour, name))
    kinds = items

    # the vertical budget: lanes and strip share what the fixed rows leave
    lanes = (tuple(f"GPU {g}" for g in range(min(p.dp, 8))) + ("links",) if p.mode == "dp"
             else ("compute", "comm"))
    # where the box is short (large type) the strip's title goes first, then the frame's
    # note, then the strip itself: the lanes keep room for their names
    options = ([(True, True, STRIP_SHARE[p.mode]), (False, True, STRIP_SHARE[p.mode]),
                (False, False, STRIP_SHARE[p.mode])] if STRIP_SHARE[p.mode] else []) + [
        (False, True, 0.0), (False, False, 0.0)]
    cursor_row = small * 1.6
    least = text * 1.6 if len(lanes) < 4 else text * 0.9
    for titled, noted, share in options:
        items = kinds + (strip_legend(p.mode) if share else [])
        legend = legend_rows(area, [n for _, n in items])
        strip_head = (small * LINE + small * 0.5 if titled else small * 0.6) if share else 0.0
        note_row = text * 1.5 if noted else 0.0
        room = legend.top - pad * 0.4 - note_row - strip_head - cursor_row - lanes_top
        lane_h = min(text * 8, room / (len(lanes) + share))
        if lane_h >= least:
            break
    else:   # even so too short: the deck is drawn taller (its frame then scales it down)
        height = math.ceil(height + (least - lane_h) * len(lanes))
        legend = legend_rows(area, [n for _, n in items], bottom=height)
        lane_h = least
    strip_h = round(min(text * 7, lane_h * share), 1)
    lanes_bottom = lanes_top + lane_h * len(lanes)
    cursor_y = round(lanes_bottom + small * 1.15, 1)
    strip_top = round(lanes_bottom + cursor_row + strip_head, 1)
    note_y = round((strip_top + strip_h if share else lanes_bottom + cursor_row) + text * 1.2, 1)
    every = next((e for e in (1, 2, 4) if e * lane_h >= text * 1.2), 8)

    # the columns: lane names on the left, DataParallel's busy shares on the right
    names = [LANE_NAMES.get(n, n) for n in lanes] + ([STRIP_NAMES[p.mode]] if share else [])
    left = pad + max(text_width(n, text) for n in names) + small * 0.8
    busy = ([f"{sum(s.duration_us for s in t.spans if s.lane == n) / t.step_us:.0%} busy"
             for n in lanes if n.startswith("GPU")] if p.mode == "dp" else [])
    tick_w = text_width(end + "0", small)
    right = width - pad - max(tick_w / 2, max((text_width(b, text, bold=True) + small
                                              for b in busy), default=0.0))
    axis = TimeAxis(round(left, 1), round(right, 1), t.step_us or 1.0)
    band = lane_h - 8            # lane_chart's rows are 8 units apart
    label_fit = _bar_label(small, band)
    chart = lane_chart(t.spans, lanes, width=right + 20, left=left, row_h=band, top=lanes_top,
                       end_us=t.step_us, fit=label_fit)
    lane_names = tuple(Label(round(left - small * 0.8, 1), round(y, 1), LANE_NAMES.get(n, n),
                             size=text, anchor="end")
                       for k, (y, n) in enumerate(chart.lanes) if k % every == 0)
    strip = (Strip(axis.left, axis.right, strip_top, strip_h, small, text, p.mode == "ddp")
             if share else None)
    if strip:
        lane_names += (Label(round(left - small * 0.8, 1), round(strip_top + strip_h / 2, 1),
                             STRIP_NAMES[p.mode], size=text, anchor="end"),)
    utilisation = tuple(Label(round(right + small, 1), round(y, 1), b, size=text, anchor="start")
                        for k, ((y, _), b) in enumerate(zip(chart.lanes, busy)) if k % every == 0)
    strip_title = _strip_title(trace, axis.left, width - pad - axis.left,
                               round(strip_top - small * 0.5, 1), text, small) if titled and share else None

    cursor_w = text_width(end, small, bold=True)
    frames = []
    for k in range(last + 1):
        lo = trace.moments[k - 1].t_us if k else 0.0
        hi = trace.moments[k].t_us
        pieces, texts = _bar_pieces(chart.bars, axis.x(lo), axis.x(hi), small)
        if k == 0:   # what is about to happen: every span to come, dashed ("empty": not yet)
            pieces = tuple(Piece(round(b.x, 2), b.y, round(max(b.w, 0.6), 2), b.h, "", "empty")
                           for b in chart.bars)
        strip_parts: tuple = ((), ())
        if p.mode == "ddp" and strip:
            strip_parts = bucket_strip(trace, clock, lo, hi, k == 0, strip)
        elif p.mode == "fsdp" and strip:
            strip_parts = gathered_strip(trace, lo, hi, strip, axis.x)
        note = next((n for n in note_texts(trace, clock, hi)
                     if fits(n, text, width - pad - axis.left, bold=True)), "") if noted else ""
        cursor = axis.x(hi)
        frames.append(FrameView(
            k, headers[k], pieces + strip_parts[0], texts + strip_parts[1], round(cursor, 1),
            human_time_us(hi),
            round(min(max(cursor, pad + cursor_w / 2), width - pad - cursor_w / 2), 1),
            Label(axis.left, note_y, note, anchor="start", size=text) if note else None,
            "t = 0, before the step" if k == 0 else f"t = {human_time_us(hi)} of {end}"))
    count = max(2, min(8, int((right - left) / (tick_w + small * 2))))
    ticks = tuple((round(axis.x(v), 1), human_time_us(v))
                  for v in linear_ticks(0, t.step_us, count) if v <= t.step_us * (1 + 1e-9))
    placed = tuple((x, y, paint, name) for (paint, name), (x, y) in zip(items, legend.at))
    return Deck(width, height, box, title, top.title, (top.header_x, top.header_y, area.head),
                lane_names, axis, axis_y, grid_top, round(lanes_bottom, 1), ticks, cursor_y,
                strip, strip_title, tuple(frames), placed, legend.swatch, utilisation, small,
                text)


def _header(k: int, t_us: float, end: str) -> str:
    # the header says the time alone: "event k of N" was a second count beside the player's
    # step, and ran into the title
    return "Before the step · t = 0" if k == 0 else f"t = {human_time_us(t_us)} of {end}"


def _bar_label(small: float, band: float):
    """A bar's label: its name at the small size where the bar is tall and wide enough, else
    none (the hover tells)."""
    tall = band >= small * 1.35

    def fit(name: str, w: float) -> str:
        return name if tall and fits(name, small, w - small * 0.7) else ""
    return fit


def _strip_title(trace, x: float, room: float, y: float, text: float, small: float):
    """The strip's title: the longest of its wordings that fits, at the label size or else
    the small one."""
    p, t = trace.params, trace.timeline
    peak = f"{t.peak_gathered_elements / 1e6:.1f} M"
    wordings = {"ddp": ("DDP's buckets, in the order backward fills them (width = bytes)",
                        "in the order backward fills them (width = bytes)", "width = bytes"),
                "fsdp": (f"parameters held gathered beyond this rank's shard (peak {peak})",
                         f"held gathered beyond the shard (peak {peak})", f"peak {peak}")}
    for wording in wordings[p.mode]:
        for size in (text, small):
            if fits(wording, size, room, bold=True):
                return Label(x, y, wording, anchor="start", size=size)
    return None


def deck_title(p, trace: DataParallelTrace) -> str:
    n = len(trace.timeline.buckets)
    return {"dp": f"DataParallel · {p.dp} GPUs · {p.preset}",
            "ddp": f"DDP · {p.dp} ranks · {p.preset} · {n} buckets ≤ {p.bucket_mb:g} MiB"
                   f"{' (first ≤ 1 MiB)' if p.bucket_cap_mb is None else ''}",
            "fsdp": f"FSDP · {p.dp} ranks · prefetch {'on' if p.prefetch else 'off'} · "
                    f"{p.preset}"}[p.mode]


def _bar_pieces(bars: tuple[Bar, ...], x0: float, x1: float, small: float):
    """The parts of the bars between x0 and x1, and the labels of bars that end there."""
    pieces, texts = [], []
    for b in bars:
        a, z = max(b.x, x0), min(b.x + b.w, x1)
        if z > a:
            pieces.append(Piece(round(a, 2), b.y, round(max(z - a, 0.6), 2), b.h, b.fill))
        if b.label and x0 + 0.01 < b.x + b.w <= x1 + 0.01:
            texts.append(Label(round(b.x + small * 0.35, 1), round(b.y + b.h / 2, 1), b.label,
                               colour=b.ink, anchor="start", size=small))
    return tuple(pieces), tuple(texts)


# --- panels -----------------------------------------------------------------------------------

def panels(trace: DataParallelTrace) -> dict:
    p = trace.params
    ddp = trace.tiny["ddp"].final_params
    out = {"human_bytes": human_bytes,
           "differences": {m: float(abs(tr.final_params - ddp).max()) for m, tr in trace.tiny.items()}}
    if trace.sweep:
        sizes = [mb * 2 ** 20 for mb, _, _ in trace.sweep]
        out["sweep_chart"] = line_chart(
            [("step time", sizes, [step for _, step, _ in trace.sweep]),
             ("not hidden", sizes, [exposed for _, _, exposed in trace.sweep])],
            x_label="bucket size (bucket_cap_mb)", y_label="time", x_log=True, y_log=False,
            title=f"DDP step time against bucket size · {p.preset} on {p.dp} ranks",
            x_format=human_bytes, y_format=human_time_us, x_tick_base=4,
            markers=([(p.bucket_mb * 2 ** 20, "this run = DDP's default")]
                     if p.bucket_cap_mb is None
                     else [(p.bucket_mb * 2 ** 20, "this run"), (25 * 2 ** 20, "DDP's default")]),
            width=1100, height=380)
    return out
