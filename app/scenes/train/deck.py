"""The /train deck as drawable geometry: one training step, rank by rank, time to the right.

Every rank has a block of rows: its compute (F and B passes per micro-batch, R where a block is
recomputed, the optimizer) and under it one thin row per kind of group it communicates in
(tp, cp, ep, pp, dp — only the kinds the layout has). Compute takes the pass colours of the
pipeline scene (app/draw/palette.py PASS, odd micro-batches a shade darker, the micro-batch as
the label); communication takes its group kind's colour, the one /parallelism gives that axis
(DESIGN principle 15: no rank colours here — ranks are numbered). Where a rank's compute row is
empty it is marked: hatched where a message holds it (communication nothing hides), dotted
where it waits for another stage (the bubble).

Frame k holds what begins between step k − 1's moment and its own (frame 0: every task faint,
what is about to happen), with the time cursor and header shown only while it is current. A
standalone SVG of frame k is the deck cut after layer k. :mod:`app.scenes.train.deck_svg`
writes the markup.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.draw.fmt import human_time_us
from app.draw.palette import PASS, mix, text_on
from app.draw.plot import linear_ticks
from app.scenes.parallelism.deck import AXIS_COLOURS
from app.scenes.pipeline.deck_layers import pass_fill
from app.sim.train.split import COMM_LANES

WIDTH, HEIGHT = 1280, 720
LEFT, RIGHT = 150.0, 1160.0
TOP, BOTTOM = 70.0, 612.0
COMM_ORDER = ("tp", "cp", "ep", "pp", "dp")
LANE_COLOURS = {lane: AXIS_COLOURS[lane] for lane in COMM_ORDER}
LANE_WORDS = {"tp": "TP", "cp": "CP ring", "ep": "EP all-to-all", "pp": "PP send",
              "dp": "DP / norm"}
OPTIMIZER = "#DDCC77"
RECOMPUTE = mix(PASS["F"], "#ffffff", 0.45)
MIN_LABEL = 30.0
"""A pass's label is written when the pass is at least this many units wide."""


@dataclass(frozen=True)
class Rect:
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
class FrameView:
    index: int
    header: str
    unit: str
    cursor: float
    rects: tuple[Rect, ...]
    labels: tuple[Label, ...]
    bubbles: tuple[Rect, ...]
    exposed: tuple[Rect, ...]


@dataclass(frozen=True)
class RankRow:
    rank: int
    y: float
    h: float
    compute_y: float
    compute_h: float
    label: str
    coords: str
    font: float
    side: str
    lanes: tuple[tuple[str, float, float], ...]
    """(lane, y, height) of its communication rows"""


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    title: str
    rows: tuple[RankRow, ...]
    ticks: tuple[tuple[float, str], ...]
    frames: tuple[FrameView, ...]
    ghost: tuple[tuple[str, tuple[Rect, ...]], ...]
    legend: tuple[tuple[str, str, str, float, float], ...]
    """(kind, fill or class, text, x, y)"""
    lane_note: str


def x_of(t: float, step_s: float) -> float:
    return LEFT + (RIGHT - LEFT) * (t / step_s if step_s else 0.0)


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


def _rows(trace) -> tuple[RankRow, ...]:
    p, layout = trace.params, trace.layout
    world = p.world
    lanes = lanes_of(p)
    block = min(150.0, (BOTTOM - TOP) / world)
    gap = block * 0.1
    comm_h = (block - gap) * (0.5 if lanes else 0.0)
    compute_h = block - gap - comm_h
    font = 18.0 if block >= 56 else 16.0
    rows = []
    for r in range(world):
        y = TOP + r * block
        c = layout.coords(r)
        coords = " ".join(f"{n}{c[n]}" for n in ("tp", "cp", "dp", "pp") if getattr(p, n) > 1)
        if p.moe and p.ep > 1:
            coords += f" ep{c['ep']}"
        lane_h = comm_h / len(lanes) if lanes else 0.0
        rows.append(RankRow(r, round(y, 1), round(block, 1), round(y, 1), round(compute_h, 1),
                            f"rank {r}", coords if block >= 56 else "", font,
                            f"{trace.rank_split[r]['bubble_s'] / trace.step_s:.0%} idle"
                            if trace.step_s else "",
                            tuple((lane, round(y + compute_h + k * lane_h + 1, 1),
                                   round(max(lane_h - 1.5, 1.5), 1))
                                  for k, lane in enumerate(lanes))))
    return tuple(rows)


def _fill(e: dict, m: int) -> str:
    if e["lane"] != "compute":
        return LANE_COLOURS[e["lane"]]
    if e["kind"] == "optimizer":
        return OPTIMIZER
    if e["kind"] == "R":
        return RECOMPUTE
    return pass_fill(e["kind"], e.get("microbatch", 0), m)


def _rect(e: dict, row: RankRow, step_s: float, m: int) -> Rect:
    x0, x1 = x_of(e["start_s"], step_s), x_of(e["start_s"] + e["dur_s"], step_s)
    if e["lane"] == "compute":
        y, h = row.compute_y, row.compute_h
    else:
        _, y, h = next(lane for lane in row.lanes if lane[0] == e["lane"])
    return Rect(round(x0, 2), y, round(max(x1 - x0, 0.7), 2), h, _fill(e, m))


def _merged(rects: list[Rect]) -> list[Rect]:
    """Neighbouring rects of one row and colour that touch within a unit, as one."""
    out: list[Rect] = []
    for r in sorted(rects, key=lambda r: (r.y, r.fill, r.x)):
        last = out[-1] if out else None
        if last and last.y == r.y and last.fill == r.fill and r.x - (last.x + last.w) <= 1.0:
            out[-1] = Rect(last.x, last.y, round(max(last.w, r.x + r.w - last.x), 2), last.h,
                           last.fill)
        else:
            out.append(r)
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
    for a, b in idle:
        cuts = [(max(a, c0), min(b, c1)) for c0, c1 in comm if c1 > a and c0 < b]
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


def build_deck(trace, upto: int | None = None) -> Deck:
    p, step_s, m = trace.params, trace.step_s, trace.params.microbatches
    rows = _rows(trace)
    frames_in = trace.frames if upto is None else trace.frames[:upto + 1]
    times = [f.time_s for f in trace.frames]
    by_frame: list[list[dict]] = [[] for _ in trace.frames]
    for e in trace.events:
        by_frame[_frame_of(e["start_s"], times)].append(e)
    marks: list[tuple[list, list]] = [([], []) for _ in trace.frames]
    per_rank: list[list[dict]] = [[] for _ in range(p.world)]
    for e in trace.events:
        per_rank[e["rank"]].append(e)
    for r, mine in enumerate(per_rank):
        exposed, bubble = _gaps(mine, step_s)
        row = rows[r]
        for which, spans in ((0, exposed), (1, bubble)):
            for a, b in spans:
                x0, x1 = x_of(a, step_s), x_of(b, step_s)
                if x1 - x0 >= 0.8:
                    marks[_frame_of(a, times)][which].append(
                        Rect(round(x0, 2), row.compute_y, round(x1 - x0, 2), row.compute_h, ""))
    frames = []
    for f in frames_in:
        events = by_frame[f.step] if f.step else []
        rects = _merged([_rect(e, rows[e["rank"]], step_s, m) for e in events])
        header = ("Before the step" if f.step == 0 else
                  f"Done · t = {human_time_us(f.time_s * 1e6)}" if f.phase == "done" else
                  f"t = {human_time_us(f.time_s * 1e6)} · {f.label or f.phase}")
        frames.append(FrameView(f.step, header, f.unit, round(x_of(f.time_s, step_s), 1),
                                tuple(rects), _labels(events, rows, step_s),
                                tuple(marks[f.step][1]) if f.step else (),
                                tuple(marks[f.step][0]) if f.step else ()))
    ticks = tuple((round(x_of(t, step_s), 1), human_time_us(t * 1e6))
                  for t in linear_ticks(0, step_s, 7) if t <= step_s * 1.0001)
    all_rects = [_rect(e, rows[e["rank"]], step_s, m) for e in trace.events]
    ghost = {}
    for r in _merged(all_rects):
        ghost.setdefault(r.fill, []).append(r)
    lanes = lanes_of(p)
    note = ("rows under each rank: " + ", ".join(LANE_WORDS[l] for l in lanes)) if lanes else ""
    return Deck(WIDTH, HEIGHT, deck_title(p), rows, ticks, tuple(frames),
                tuple((k, tuple(v)) for k, v in ghost.items()), _legend(p, trace), note)


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


def _labels(events: list[dict], rows, step_s: float) -> tuple[Label, ...]:
    """One label per pass (rank, F/B, micro-batch) wide enough to carry it."""
    extent: dict[tuple, list[float]] = {}
    fills: dict[tuple, str] = {}
    for e in events:
        if e["lane"] == "compute" and e["kind"] in ("F", "B", "R"):
            key = (e["rank"], e["kind"], e.get("microbatch", 0))
            lo, hi = extent.get(key, [e["start_s"], e["start_s"] + e["dur_s"]])
            extent[key] = [min(lo, e["start_s"]), max(hi, e["start_s"] + e["dur_s"])]
            fills[key] = _fill(e, 10**6)
    out = []
    for (rank, kind, mb), (lo, hi) in extent.items():
        x0, x1 = x_of(lo, step_s), x_of(hi, step_s)
        row = rows[rank]
        size = 16.0 if row.compute_h >= 22 else 14.0
        if x1 - x0 >= MIN_LABEL and row.compute_h >= 14:
            out.append(Label(round((x0 + x1) / 2, 1), round(row.compute_y + row.compute_h / 2, 1),
                             f"{kind}{mb}", size, text_on(fills[(rank, kind, mb)])))
    return tuple(out)


def _legend(p, trace) -> tuple[tuple[str, str, str, float, float], ...]:
    kinds = {e["kind"] for e in trace.events if e["lane"] == "compute"}
    items = [("F", pass_fill("F", 0, 2), "F forward"), ("B", pass_fill("B", 0, 2), "B backward")]
    if "R" in kinds:
        items.append(("R", RECOMPUTE, "R recomputed"))
    items.append(("optimizer", OPTIMIZER, "optimizer"))
    items += [(lane, LANE_COLOURS[lane], LANE_WORDS[lane]) for lane in lanes_of(p)]
    items += [("exposed", "class:tr-exposed", "comm not hidden"),
              ("bubble", "class:tr-bubble", "bubble")]
    out, x, y = [], 22.0, HEIGHT - 44.0
    for kind, fill, text in items:
        width = 34 + len(text) * 9.4 + 14
        if x + width > WIDTH - 10:
            x, y = 22.0, y + 26
        out.append((kind, fill, text, round(x, 1), y))
        x += width
    return tuple(out)
