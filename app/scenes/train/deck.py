"""The /train deck as drawable geometry: one training step, rank by rank, time to the right.

Every rank has a block of rows: its compute (F and B passes per micro-batch, R where a block is
recomputed, the optimizer) and under it its messages, a row per kind of group it communicates in
(tp, cp, ep, pp, dp — only the kinds the layout has) or one row for all. Compute takes the pass colours of the
pipeline scene (app/draw/palette.py PASS, odd micro-batches a shade darker, the micro-batch as
the label); communication takes its group kind's colour, the one /parallelism gives that axis
(DESIGN principle 15: no rank colours here — ranks are numbered). Where a rank's compute row is
empty it is marked: hatched where a message holds it (communication nothing hides), dotted
where it waits for another stage (the bubble).

The deck is laid out for its box (docs/legibility.md; the lanes and time axis follow
/pipeline's): the rank labels' column and the idle shares' column are as wide as their texts,
the time axis takes the rest, each rank's block shares the height. The communication rows
are a rank's lower part: a row per kind where each is tall enough (:data:`LANE_MIN`), else one
row where every message shows in its kind's colour. A pass's label shows where it fits at
the small size; the rank's coordinates where its block has room for a second line; a rank's
name on every rank, or every second or fourth where blocks are short.

Frame k holds what begins between step k − 1's moment and its own (frame 0: every task faint,
what is about to happen), with the time cursor and header shown only while it is current. A
standalone SVG of frame k is the deck cut after layer k. :mod:`app.scenes.train.deck_svg`
writes the markup.
"""

from __future__ import annotations

import hashlib
import math
from operator import itemgetter
from dataclasses import dataclass
from typing import NamedTuple

from app.draw.box import Box
from app.draw.layout import Spots, heading, legend_rows, text_box
from app.draw.palette import PASS, mix, text_on
from app.draw.plot import linear_ticks
from app.draw.text import fits, text_width
from app.humanize import human_time_us
from app.scenes.parallelism.deck_geometry import AXIS_COLOURS
from app.scenes.pipeline.deck_layers import TimeAxis, pass_fill
from app.sim.train.split import COMM_LANES

MIN_WIDTH, MIN_HEIGHT = 560, 320
"""The smallest box the timeline is laid out for: a narrower frame (a phone) scrolls it."""
COMM_ORDER = ("tp", "cp", "ep", "pp", "dp")
LANE_COLOURS = {lane: AXIS_COLOURS[lane] for lane in COMM_ORDER}
LANE_WORDS = {"tp": "TP", "cp": "CP ring", "ep": "EP all-to-all", "pp": "PP send",
              "dp": "DP / norm"}
OPTIMIZER = "#DDCC77"
RECOMPUTE = mix(PASS["F"], "#ffffff", 0.45)
LANE_SHARE = 0.45
"""The communication rows' share of a rank's block."""
LANE_MIN = 0.75
"""A kind's communication row of its own is at least this many small sizes tall; else the
rank's messages share one row, each in its kind's colour (they hardly ever overlap: under
0.05 % of the message time in the default and large states)."""
BLOCK_MIN = 9.0
"""A rank's block is at least this tall (a deck of 16 ranks in a short box is drawn taller,
and its frame scales it)."""


class Rect(NamedTuple):
    """A pass, a message or a gap on a rank's row (a tuple: a step makes thousands)."""
    x: float
    y: float
    w: float
    h: float
    fill: str


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    size: float
    ink: str


@dataclass(frozen=True)
class Part:
    """What one rank draws in a frame: its passes and messages, their labels, its idle
    stretches. Only the first rank of each stage has parts; the other ranks of its stage share
    its timeline (app.sim.train.program) and are drawn as copies of it (:attr:`Deck.copies`)."""
    rank: int
    rects: tuple[Rect, ...]
    labels: tuple[Label, ...]
    bubbles: tuple[Rect, ...]
    exposed: tuple[Rect, ...]


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    unit: str
    cursor: float
    parts: tuple[Part, ...]

    @property
    def labels(self) -> tuple[Label, ...]:
        return tuple(t for part in self.parts for t in part.labels)


@dataclass(frozen=True)
class RankRow:
    rank: int
    y: float
    h: float
    compute_y: float
    compute_h: float
    label: str
    coords: str
    side: str
    lanes: tuple[tuple[str, float, float], ...]
    """(lane, y, height) of its communication rows (one row, lane "comm", when they share it)"""


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    box: Box
    """the box asked for (the deck's ``data-box``); width × height is what it was laid out in"""
    title: str
    title_lines: tuple[tuple[float, float, str], ...]
    header: tuple[float, float, float]
    """x, baseline and size of the step's header"""
    rows: tuple[RankRow, ...]
    axis: TimeAxis
    axis_y: float
    grid_top: float
    bottom: float
    ticks: tuple[tuple[float, str], ...]
    frames: tuple[FrameView, ...]
    ghost: tuple[tuple[int, tuple[tuple[str, tuple[Rect, ...]], ...]], ...]
    """frame 0's faint marks of the whole step: (rank, ((fill, rects), …)) of each stage's first
    rank"""
    copies: tuple[tuple[int, tuple[float, ...]], ...]
    """(rank, offsets): each stage's first rank and how far down the other ranks of its stage
    are, whose blocks are drawn as copies of its own"""
    uid: str
    """names the deck's parts for their copies (``<use href>``): the same for the same
    drawing, different for another"""
    legend: tuple[tuple[str, str, str, float, float], ...]
    """(kind, fill or class, text, x, y): y is the swatch's top"""
    swatch: float
    text: float
    small: float
    side_x: float


def deck_title(p) -> str:
    sizes = " ".join(f"{n}{getattr(p, n)}" for n in ("tp", "cp", "pp", "dp", "ep")
                     if getattr(p, n) > 1) or "1 rank"
    return (f"One step · {sizes} · {p.microbatches} micro-batches · "
            f"{'GPipe' if p.schedule == 'gpipe' else '1F1B'}"
            + (" · ZeRO-1" if p.zero else ""))


def lanes_of(p) -> tuple[str, ...]:
    present = {"tp": p.tp > 1, "cp": p.cp > 1, "ep": p.ep > 1 and p.moe, "pp": p.pp > 1,
               "dp": p.world > 1}
    return tuple(lane for lane in COMM_ORDER if present[lane])


@dataclass(frozen=True)
class Blocks:
    """The vertical layout of the ranks' blocks: each ``h`` tall from ``top``; within one, the
    compute row ``compute_h`` tall and under it the communication rows, ``lane_h`` each."""

    top: float
    h: float
    compute_h: float
    lane_h: float
    lanes: tuple[str, ...]
    """the rows under compute: the kinds, or ("comm",) when they share one"""


def blocks(p, top: float, bottom: float, small: float) -> Blocks:
    kinds = lanes_of(p)
    h = max(BLOCK_MIN, min(small * 9, (bottom - top) / p.world))
    inner = h * 0.88
    comm = inner * LANE_SHARE if kinds else 0.0
    per = comm / len(kinds) if kinds else 0.0
    apart = per >= small * LANE_MIN
    lanes = kinds if apart else ("comm",) if kinds else ()
    lane_h = per if apart else comm
    return Blocks(top, h, inner - comm, lane_h, lanes)


def _rows(trace, b: Blocks, text: float, small: float) -> tuple[RankRow, ...]:
    p, layout = trace.params, trace.layout
    named = b.h >= text * 1.25
    every = next((e for e in (1, 2, 4, 8) if e * b.h >= text * 1.25), 16)
    coords_shown = b.h >= text * 1.3 + small * 1.35 + 4
    rows = []
    top = round(b.top, 1)
    lane_tops = [round(b.top + b.compute_h + k * b.lane_h + 1, 1) for k in range(len(b.lanes))]
    lane_h = round(max(b.lane_h - 1.5, 1.5), 1)
    for r in range(p.world):
        # each block is the first one moved down by a whole offset (to 0.1 unit), so that a
        # rank drawn as a copy of another's block (deck_svg) lands exactly on its own rows
        off = round(r * b.h, 1)
        y = round(top + off, 1)
        c = layout.coords(r)
        coords = " ".join(f"{n}{c[n]}" for n in ("tp", "cp", "dp", "pp") if getattr(p, n) > 1)
        if p.moe and p.ep > 1:
            coords += f" ep{c['ep']}"
        rows.append(RankRow(r, y, round(b.h, 1), y, round(b.compute_h, 1),
                            ((f"rank {r}" if named else str(r)) if r % every == 0 else ""),
                            coords if coords_shown else "",
                            f"{trace.rank_split[r]['bubble_s'] / trace.step_s:.0%} idle"
                            if trace.step_s and b.h >= small * 1.15 else "",
                            tuple((lane, round(t + off, 1), lane_h)
                                  for lane, t in zip(b.lanes, lane_tops))))
    return tuple(rows)


def _fill(e: dict, m: int) -> str:
    if e["lane"] != "compute":
        return LANE_COLOURS[e["lane"]]
    if e["kind"] == "optimizer":
        return OPTIMIZER
    if e["kind"] == "R":
        return RECOMPUTE
    return pass_fill(e["kind"], e.get("microbatch", 0), m)


def _places(row: RankRow) -> dict[str, tuple[float, float]]:
    """(y, height) on ``row`` of compute and of each lane of messages ("comm": all of them)."""
    return {"compute": (row.compute_y, row.compute_h), **{lane: (y, h) for lane, y, h in row.lanes}}


def _rects(events, rows: tuple[RankRow, ...], axis: TimeAxis, m: int) -> list[Rect]:
    """Each event's rect on its rank's row. The ranks of a stage share one timeline
    (app.sim.train.program), so an event's x, width and fill are worked out once for all the
    ranks that have it."""
    places = [_places(row) for row in rows]
    across: dict[tuple, tuple[float, float, str]] = {}
    out = []
    for e in events:
        key = (e["start_s"], e["dur_s"], e["lane"], e["kind"], e.get("microbatch", 0))
        x = across.get(key)
        if x is None:
            x0, x1 = axis.x(e["start_s"]), axis.x(e["start_s"] + e["dur_s"])
            x = across[key] = (round(x0, 2), round(max(x1 - x0, 0.7), 2), _fill(e, m))
        mine = places[e["rank"]]
        y, h = mine.get(e["lane"]) or mine["comm"]
        out.append(Rect(x[0], y, x[1], h, x[2]))
    return out


BY_ROW = itemgetter(1, 4, 0)
"""A rect's (y, fill, x): by row, then colour, then left to right."""


def _merged(rects: list[Rect]) -> list[Rect]:
    """Neighbouring rects of one row and colour that touch within a unit, as one."""
    out: list[Rect] = []
    last = None
    for r in sorted(rects, key=BY_ROW):
        if last and last.y == r.y and last.fill == r.fill and r.x - (last.x + last.w) <= 1.0:
            if r.x + r.w - last.x > last.w:
                last = out[-1] = Rect(last.x, last.y, round(r.x + r.w - last.x, 2), last.h,
                                      last.fill)
        else:
            out.append(r)
            last = r
    return out


def _gaps(rank_events: list[dict], step_s: float) -> tuple[list, list]:
    """A rank's idle compute stretches: (held by communication, waiting) as (start, end)."""
    busy = sorted((e["start_s"], e["start_s"] + e["dur_s"]) for e in rank_events
                  if e["lane"] == "compute")
    comm = sorted((e["start_s"], e["start_s"] + e["dur_s"]) for e in rank_events
                  if e["lane"] in COMM_LANES)
    idle, t = [], 0.0
    for a, b in busy:
        if a > t:
            idle.append((t, a))
        t = max(t, b)
    if t < step_s:
        idle.append((t, step_s))
    exposed, bubble = [], []
    near, k = [], 0     # the messages that may cut this stretch or a later one, by start
    for a, b in idle:
        while k < len(comm) and comm[k][0] < b:
            near.append(comm[k])
            k += 1
        near = [c for c in near if c[1] > a]        # ended before a: before every later one
        cuts = [(max(a, c0), min(b, c1)) for c0, c1 in near if c0 < b]
        t = a
        for c0, c1 in cuts:
            if c0 > t:
                bubble.append((t, c0))
            if c1 > max(t, c0):
                exposed.append((max(t, c0), c1))
            t = max(t, c1)
        if t < b:
            bubble.append((t, b))
    return exposed, bubble


def build_deck(trace, box: Box, upto: int | None = None) -> Deck:
    """Every frame of ``trace`` (or frames 0…``upto`` for a standalone export), laid out for
    ``box``: the header and title on top, the time ticks under them, a block per rank between
    the rank labels (left) and each rank's idle share (right), the legend's rows below."""
    p, step_s, m = trace.params, trace.step_s, trace.params.microbatches
    area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
    width, height = area.width, area.height
    pad, text, small = area.pad, area.text, area.small
    frames_in = trace.frames if upto is None else trace.frames[:upto + 1]
    title = deck_title(p)
    headers = [_header(f) for f in frames_in]
    top = heading(area, headers, title)
    axis_y = round(top.top + small * 0.9, 1)
    grid_top = round(axis_y + small * 0.45, 1)
    rows_top = grid_top + small * 0.3
    items = _legend_items(p, trace)
    legend = legend_rows(area, [t for _, _, t in items])
    b = blocks(p, rows_top, legend.top - pad * 0.6, small)
    if rows_top + b.h * p.world > legend.top - pad * 0.6:   # drawn taller: its frame scales it
        height = math.ceil(height + rows_top + b.h * p.world - (legend.top - pad * 0.6))
        legend = legend_rows(area, [t for _, _, t in items], bottom=height)
    probe = _rows(trace, b, text, small)
    left = pad + max([text_width(r.label, text, bold=True) for r in probe]
                     + [text_width(r.coords, small) for r in probe]) + small * 0.8
    side_w = max([text_width(r.side, small) for r in probe] or [0.0])
    tick_w = text_width(human_time_us(step_s * 1e6) + "0", small)
    right = width - pad - max(tick_w / 2, side_w + small * 0.8 if side_w else 0.0)
    axis = TimeAxis(round(left, 1), round(right, 1), step_s)
    rows = probe
    bottom = round(rows_top + b.h * p.world, 1)

    times = [f.time_s for f in trace.frames]
    events = trace.lead_events                          # each stage's first rank's
    by_frame: list[list[int]] = [[] for _ in trace.frames]
    frame_at: dict[float, int] = {}                     # a stage's passes start alike
    for i, e in enumerate(events):
        t = e["start_s"]
        k = frame_at.get(t)
        if k is None:
            k = frame_at[t] = _frame_of(t, times)
        by_frame[k].append(i)
    drawn = _rects(events, rows, axis, m)
    leaders = [ranks[0] for ranks in trace.alike]
    marks: dict[tuple[int, int], tuple[list, list]] = {}   # (frame, rank): (exposed, bubble)
    per_rank: dict[int, list[dict]] = {r: [] for r in leaders}
    for e in events:
        per_rank[e["rank"]].append(e)
    for r in leaders:
        row = rows[r]
        for which, spans in enumerate(_gaps(per_rank[r], step_s)):
            for a, z in spans:
                x0, x1 = axis.x(a), axis.x(z)
                if x1 - x0 >= 0.8:
                    marks.setdefault((_frame_of(a, times), r), ([], []))[which].append(
                        Rect(round(x0, 2), row.compute_y, round(x1 - x0, 2), row.compute_h, ""))
    frames = []
    for f, header in zip(frames_in, headers):
        mine: dict[int, list[int]] = {}
        for i in (by_frame[f.step] if f.step else ()):
            mine.setdefault(events[i]["rank"], []).append(i)
        parts = []
        for r in leaders:
            exposed, bubble = marks.get((f.step, r), ((), ())) if f.step else ((), ())
            ours = mine.get(r, [])
            if not (ours or exposed or bubble):
                continue
            parts.append(Part(r, tuple(_merged([drawn[i] for i in ours])),
                              _labels([events[i] for i in ours], rows, axis, small),
                              tuple(bubble), tuple(exposed)))
        frames.append(FrameView(f.step, header, f.unit, round(axis.x(f.time_s), 1),
                                tuple(parts)))
    count = max(2, min(8, int((right - left) / (tick_w + small * 2))))
    ticks = tuple((round(axis.x(t), 1), human_time_us(t * 1e6))
                  for t in linear_ticks(0, step_s, count) if t <= step_s * 1.0001)
    ghost: dict[int, dict[str, list[Rect]]] = {r: {} for r in leaders}
    for i, r in enumerate(drawn):
        ghost[events[i]["rank"]].setdefault(r.fill, []).append(r)
    ghosts = tuple((r, tuple((fill, tuple(_merged(rs))) for fill, rs in ghost[r].items()))
                   for r in leaders if ghost[r])
    copies = tuple((ranks[0], tuple(round(rows[r].y - rows[ranks[0]].y, 1) for r in ranks[1:]))
                   for ranks in trace.alike)
    placed = tuple((kind, fill, t, x, y) for (kind, fill, t), (x, y) in zip(items, legend.at))
    uid = "tr" + hashlib.blake2s(repr((p, box, upto)).encode(), digest_size=5).hexdigest()
    return Deck(width, height, box, title, top.title, (top.header_x, top.header_y, area.head),
                rows, axis, axis_y, grid_top, bottom, ticks, tuple(frames), ghosts, copies, uid,
                placed, legend.swatch, text, small, round(right + small * 0.8, 1))


def _header(f) -> str:
    return ("Before the step" if f.step == 0 else
            f"Done · t = {human_time_us(f.time_s * 1e6)}" if f.phase == "done" else
            f"t = {human_time_us(f.time_s * 1e6)} · {f.label or f.phase}")


def _frame_of(t: float, times: list[float]) -> int:
    """The step whose window (previous moment, its moment] holds ``t`` (frame 1 from 0)."""
    lo, hi = 1, len(times) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if times[mid] + 1e-12 >= t:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _labels(events: list[dict], rows, axis: TimeAxis, small: float) -> tuple[Label, ...]:
    """One label per pass (rank, F/B, micro-batch), at the small size, where it fits."""
    extent: dict[tuple, list[float]] = {}
    fills: dict[tuple, str] = {}
    for e in events:
        if e["lane"] == "compute" and e["kind"] in ("F", "B", "R"):
            key = (e["rank"], e["kind"], e.get("microbatch", 0))
            lo, hi = extent.get(key, [e["start_s"], e["start_s"] + e["dur_s"]])
            extent[key] = [min(lo, e["start_s"]), max(hi, e["start_s"] + e["dur_s"])]
            fills[key] = _fill(e, 10**6)
    out = []
    spots = Spots()    # a recomputed block's passes interleave with its backward's: one label
    for (rank, kind, mb), (lo, hi) in sorted(extent.items(), key=lambda kv: kv[0][1] == "R"):
        x0, x1 = axis.x(lo), axis.x(hi)
        row = rows[rank]
        label = f"{kind}{mb}"
        x, y = round((x0 + x1) / 2, 1), round(row.compute_y + round(row.compute_h / 2, 1), 1)
        if (row.compute_h >= small * 1.2 and fits(label, small, x1 - x0 - small * 0.4, bold=True)
                and spots.take(text_box(x, y + small * 0.35, label, small, "middle", True))):
            out.append(Label(x, y, label, small, text_on(fills[(rank, kind, mb)])))
    return tuple(out)


def _legend_items(p, trace) -> list[tuple[str, str, str]]:
    """(kind, fill or class, text) of each legend item."""
    kinds = {e["kind"] for e in trace.lead_events if e["lane"] == "compute"}
    items = [("F", pass_fill("F", 0, 2), "F forward"), ("B", pass_fill("B", 0, 2), "B backward")]
    if "R" in kinds:
        items.append(("R", RECOMPUTE, "R recomputed"))
    items.append(("optimizer", OPTIMIZER, "optimizer"))
    items += [(lane, LANE_COLOURS[lane], LANE_WORDS[lane]) for lane in lanes_of(p)]
    items += [("exposed", "class:tr-exposed", "comm not hidden"),
              ("bubble", "class:tr-bubble", "bubble")]
    return items
