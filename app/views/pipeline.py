"""The pipeline scene as drawable geometry: one lane per rank, time to the right.

Drawn as layers for ``static/js/player.js``: frame k holds what began in it — the passes that
started, the idle stretches (bubbles) that began, the sends that left, the activation memory
since the previous frame — and, shown only while it is current, the time cursor and arrows from
each starting pass to the pass it waited for. A standalone SVG of frame k is the deck cut after
layer k.

Passes are coloured by micro-batch (Okabe–Ito up to 8, then viridis) and told apart by kind:
F solid, B darker, I darker and hatched, W lighter with a dashed edge. When a timeline cannot be
drawn legibly (more than :data:`DRAW_RANKS` ranks or :data:`DRAW_PASSES` passes) each lane
becomes a strip of time slices, each a stacked bar of what the rank did in the slice (blue
forward, vermillion backward, green weight gradients); the empty part of a lane is idle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.pipeline import EPS, PipelineTrace, num
from app.sim.pipeline_schedules import KIND_NAMES, KINDS, SCHEDULE_KINDS, decode
from app.views.geometry import Point, arrow
from app.views.palette import mix, rank_colour, text_on
from app.views.plot import linear_ticks

WIDTH, HEIGHT = 1280, 720
LEFT, RIGHT = 175.0, 1168.0          # the time axis
TOP, BOTTOM = 100.0, 648.0           # the lanes
SIDE = 1222.0                        # centre of the right-hand column (idle · peak)
DRAW_RANKS, DRAW_PASSES = 32, 2048
TITLED_PASSES = 640
"""passes carry a tooltip when there are at most this many (page weight)"""
SLICES = 240
SUMMARY_COLOURS = {"F": "#0072B2", "back": "#D55E00", "W": "#009E73"}


@dataclass(frozen=True)
class Block:
    x: float
    y: float
    w: float
    h: float
    fill: str
    ink: str
    kind: str
    label: str
    font: float
    title: str
    index: int
    deps: str
    """dense indices of the passes whose output this one reads (for the hover arrows)"""


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str = ""
    opacity: float = 1.0


@dataclass(frozen=True)
class Arrow:
    d: str
    head: str


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    cursor: float
    cursor_label: str
    pill: float
    """x of the cursor's label, kept inside the deck"""
    veil: float
    """summarised timelines: width of the veil over what lies after the cursor"""
    blocks: tuple[Block, ...]
    idle: tuple[Rect, ...]
    memory: tuple[Rect, ...]
    slices: tuple[Rect, ...]
    sends: tuple[str, ...]
    arrows: tuple[Arrow, ...]
    outlines: tuple[Rect, ...]


@dataclass(frozen=True)
class Lane:
    rank: int
    y: float
    h: float
    label: str
    font: float
    side: str
    stages: str


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    title: str
    drawn: bool
    lanes: tuple[Lane, ...]
    ticks: tuple[tuple[float, str], ...]
    frames: tuple[FrameView, ...]
    legend: tuple[tuple[str, str, str, float], ...]
    """(kind, fill, text, x)"""
    note: str
    side_header: str
    ghost: tuple[Rect, ...]
    """where each rank will be busy, faint, so frame 0 already shows the schedule's shape"""
    left: float = LEFT
    right: float = RIGHT


def x_of(t: float, makespan: float) -> float:
    return LEFT + (RIGHT - LEFT) * t / makespan if makespan else LEFT


def pass_fill(kind: str, microbatch: int, m: int) -> str:
    colour = rank_colour(microbatch, m)
    if kind in "BI":
        return mix(colour, "#000000", 0.35)
    if kind == "W":
        return mix(colour, "#ffffff", 0.5)
    return colour


def build_deck(trace: PipelineTrace, upto: int | None = None) -> Deck:
    """Every frame of ``trace`` (or frames 0…``upto`` for a standalone export)."""
    p = trace.params
    flat, line = trace.flat, trace.line
    ranks, makespan = p.stages, line.makespan
    drawn = ranks <= DRAW_RANKS and flat.ids.size <= DRAW_PASSES
    lane_h = min(140.0, (BOTTOM - TOP) / ranks)
    band = lane_h * (0.56 if lane_h >= 44 else 0.8)
    mem_h = lane_h * 0.28 if drawn and lane_h >= 44 else 0.0
    lane_y = [TOP + r * lane_h for r in range(ranks)]
    last = len(trace.frames) - 1 if upto is None else upto
    cursors = np.array([f.time for f in trace.frames])
    frame_of = lambda t: np.minimum(np.searchsorted(cursors[1:], np.asarray(t) - EPS, side="left") + 1,
                                    len(cursors) - 1)

    layers: list[dict[str, list]] = [{"blocks": [], "idle": [], "memory": [], "slices": [],
                                      "sends": []} for _ in trace.frames]
    if drawn:
        _blocks(trace, layers, lane_y, band, makespan)
        _memory(trace, layers, lane_y, band, mem_h, makespan, frame_of)
        _sends(trace, layers, lane_y, band, makespan, frame_of)
        _idle(trace, layers, lane_y, band, makespan, frame_of)
    else:
        _slices(trace, layers, lane_y, band, makespan)

    frames = []
    for f in trace.frames[:last + 1]:
        starting = trace.by_start[f.lo:f.hi]
        arrows, outlines = (_current(trace, starting, lane_y, band, makespan)
                            if drawn and f.hi - f.lo <= 64 else ((), ()))
        header = "Before the first pass" if f.step == 0 else (
            f"Done · t = {num(f.time)}" if f.phase == "done" else f"t = {num(f.time)} · {f.phase}")
        layer = layers[f.step]
        cursor = x_of(f.time, makespan)
        frames.append(FrameView(f.step, header, round(cursor, 1), f"t = {num(f.time)}",
                                round(min(max(cursor, LEFT + 40), RIGHT + 40), 1),
                                0.0 if drawn else round(RIGHT - cursor, 1),
                                tuple(layer["blocks"]), tuple(layer["idle"]),
                                tuple(layer["memory"]), tuple(layer["slices"]),
                                tuple(layer["sends"]), arrows, outlines))

    font = min(18.0, max(14.0, lane_h * 0.36))
    every = 1 if lane_h >= 14 else 4 if lane_h >= 5 else 8
    stages = trace.rank_stages()
    lanes = tuple(Lane(r, round(lane_y[r], 1), round(lane_h, 1),
                       (f"rank {r}" if lane_h >= 14 else str(r)) if r % every == 0 else "", font,
                       (f"{1 - line.busy[r] / makespan:.0%} · {trace.memory.peak[r]}"
                        if lane_h >= 14 else ""),
                       _stages_label(stages[r]) if lane_h >= 44 else "")
                  for r in range(ranks))
    kind = SCHEDULE_KINDS[p.schedule]
    chunks = f" × {p.chunks} chunks" if p.chunks > 1 else ""
    title = (f"{kind.title} · {ranks} rank{'s' if ranks > 1 else ''}{chunks} · "
             f"{p.microbatches} micro-batch{'es' if p.microbatches > 1 else ''}")
    note = "" if drawn else (f"{flat.ids.size:,} passes on {ranks} ranks: each lane shows, per "
                             f"slice of time, how much of it the rank spent on each kind of pass")
    ticks = tuple((round(x_of(t, makespan), 1), num(t)) for t in linear_ticks(0, makespan, 8)
                  if t <= makespan + EPS)
    return Deck(WIDTH, HEIGHT, title, drawn, lanes, ticks, tuple(frames),
                _legend(trace, drawn, mem_h > 0), note, "idle · peak" if lane_h >= 14 else "",
                _ghost(trace, lane_y, band, makespan) if drawn else ())


def _stages_label(stages: list[int]) -> str:
    if len(stages) == 1:
        return f"stage {stages[0]}"
    shown = stages if len(stages) <= 2 else [stages[0], stages[1], "…", stages[-1]]
    return "stages " + ", ".join(map(str, shown))


def _ghost(trace, lane_y, band, makespan) -> tuple[Rect, ...]:
    """Each rank's busy stretches (back-to-back passes merged)."""
    flat, line = trace.flat, trace.line
    out = []
    for r, (a, b) in enumerate(zip(flat.offsets[:-1], flat.offsets[1:])):
        starts, ends = line.start[a:b], line.end[a:b]
        breaks = np.flatnonzero(starts[1:] - ends[:-1] > EPS) + 1
        for s, e in zip(np.concatenate(([0], breaks)).tolist(),
                        np.concatenate((breaks, [b - a])).tolist()):
            x0, x1 = x_of(starts[s], makespan), x_of(ends[e - 1], makespan)
            out.append(Rect(round(x0, 2), round(lane_y[r] + 3, 1), round(x1 - x0, 2),
                            round(band - 3, 1)))
    return tuple(out)


def _blocks(trace, layers, lane_y, band, makespan) -> None:
    flat, line, m = trace.flat, trace.line, trace.params.microbatches
    chunks = trace.params.chunks
    dense = np.full(trace.schedule.stages * 4 * m, -1)
    dense[flat.ids] = np.arange(flat.ids.size)
    own_forward = np.where(np.isin(flat.kind, (1, 2)), dense[flat.stage * 4 * m + flat.microbatch], -1)
    for f in trace.frames:
        for k in trace.by_start[f.lo:f.hi].tolist():
            r = int(flat.rank[k])
            a = decode(flat.ids[k], m)
            x0, x1 = x_of(line.start[k], makespan), x_of(line.end[k], makespan)
            fill = pass_fill(a.kind, a.microbatch, m)
            font = min(16.0, band * 0.5)
            label = ""
            for text in ((f"{a.stage}{a.kind}{a.microbatch}", f"{a.kind}{a.microbatch}")
                         if chunks > 1 else (f"{a.kind}{a.microbatch}",)):
                if font >= 13 and len(text) * font * 0.62 + 6 <= x1 - x0:
                    label = text
                    break
            title = (f"{a}: stage {a.stage} {KIND_NAMES[a.kind]}, micro-batch {a.microbatch} · "
                     f"rank {r} · t = {num(line.start[k])} → {num(line.end[k])}"
                     if flat.ids.size <= TITLED_PASSES else "")
            deps = {int(trace.links.source[k]), int(own_forward[k])} - {-1}
            layers[f.step]["blocks"].append(Block(
                round(x0, 2), round(lane_y[r] + 3, 1), round(max(x1 - x0, 0.8), 2),
                round(band - 3, 1), fill, text_on(fill), a.kind, label, round(font, 1), title, k,
                " ".join(map(str, sorted(deps)))))


def _gaps(trace):
    """Idle stretches: (rank, start, end), including before the first and after the last pass."""
    flat, line = trace.flat, trace.line
    out = []
    for r, (a, b) in enumerate(zip(flat.offsets[:-1], flat.offsets[1:])):
        starts = np.concatenate((line.start[a:b], [line.makespan]))
        ends = np.concatenate(([0.0], line.end[a:b]))
        gap = starts - ends > EPS
        out += [(r, s, e) for s, e in zip(ends[gap].tolist(), starts[gap].tolist())]
    return out


def _idle(trace, layers, lane_y, band, makespan, frame_of) -> None:
    gaps = _gaps(trace)
    frames = frame_of([g[1] for g in gaps]) if gaps else []
    for (r, s, e), k in zip(gaps, np.atleast_1d(frames).tolist()):
        x0, x1 = x_of(s, makespan), x_of(e, makespan)
        layers[k]["idle"].append(Rect(round(x0, 2), round(lane_y[r] + 3, 1), round(x1 - x0, 2),
                                      round(band - 3, 1)))


def _memory(trace, layers, lane_y, band, mem_h, makespan, frame_of) -> None:
    """Each rank's held activations as a step area under its passes, cut at the frames'
    cursors so that frame k draws it up to its own cursor."""
    if not mem_h:
        return
    top = max(max(trace.memory.peak), 1)
    cursors = np.array([f.time for f in trace.frames[1:]])
    for r, (times, held) in enumerate(zip(trace.memory.times, trace.memory.held)):
        cuts = np.union1d(times, cursors)
        values = held[np.maximum(np.searchsorted(times, cuts + EPS, side="right") - 1, 0)]
        ends = np.concatenate((cuts[1:], [makespan]))
        base = lane_y[r] + band + 2 + mem_h
        keep = (values > 0) & (ends - cuts > EPS)
        for t0, t1, h, k in zip(cuts[keep].tolist(), ends[keep].tolist(), values[keep].tolist(),
                                np.atleast_1d(frame_of(ends[keep])).tolist()):
            height = mem_h * h / top
            x0 = x_of(t0, makespan)
            layers[k]["memory"].append(Rect(round(x0, 2), round(base - height, 1),
                                            round(x_of(t1, makespan) - x0, 2), round(height, 1)))


def _sends(trace, layers, lane_y, band, makespan, frame_of) -> None:
    p, line, flat, links = trace.params, trace.line, trace.flat, trace.links
    if not p.t_comm:
        return
    consumers = np.flatnonzero(links.remote)
    if consumers.size > 1500:
        return
    producers = links.source[consumers]
    for c, s, k in zip(consumers.tolist(), producers.tolist(),
                       np.atleast_1d(frame_of(line.end[producers])).tolist()):
        rs, rc = int(flat.rank[s]), int(flat.rank[c])
        down = rc > rs
        y0 = lane_y[rs] + (band if down else 3)
        y1 = lane_y[rc] + (3 if down else band)
        x0 = x_of(line.end[s], makespan)
        x1 = x_of(line.end[s] + p.t_comm, makespan)
        layers[k]["sends"].append(f"M{x0:.1f},{y0:.1f} L{x1:.1f},{y1:.1f}")


def _slices(trace, layers, lane_y, band, makespan) -> None:
    """Each rank's time cut into SLICES slices, each a stacked bar of the shares spent on F,
    B|I and W (in eighths; the empty rest is idle); neighbours within an eighth merge. They all
    sit in layer 0: frames veil what lies after their cursor instead."""
    flat, line = trace.flat, trace.line
    edges = np.linspace(0, makespan, SLICES + 1)
    groups = {"F": flat.kind == 0, "back": (flat.kind == 1) | (flat.kind == 2), "W": flat.kind == 3}
    width = (RIGHT - LEFT) / SLICES
    for r, (a, b) in enumerate(zip(flat.offsets[:-1], flat.offsets[1:])):
        eighths = []
        for mask in groups.values():
            starts, ends = line.start[a:b][mask[a:b]], line.end[a:b][mask[a:b]]
            done = np.concatenate(([0.0], np.cumsum(ends - starts)))
            i = np.searchsorted(ends, edges, side="right")     # passes finished by each edge
            running = np.maximum(0.0, edges - starts[np.minimum(i, starts.size - 1)]) \
                if starts.size else np.zeros_like(edges)
            used = done[i] + np.where(i < starts.size, running, 0.0)
            eighths.append(np.rint(np.diff(used) / np.diff(edges) * 8).astype(int))
        keys = list(zip(*(e.tolist() for e in eighths)))
        first = 0
        for j in range(1, SLICES + 1):   # merge while every share stays within an eighth
            if j < SLICES and all(abs(a - b) <= 1 for a, b in zip(keys[j], keys[first])):
                continue
            # a stacked bar: forward at the bottom, then backward, then W; empty = idle
            x, w = round(LEFT + first * width, 2), round((j - first) * width, 2)
            bottom = lane_y[r] + band
            for name, share in zip(SUMMARY_COLOURS, keys[first]):
                if share:
                    h = (band - 1) * min(share, 8) / 8
                    bottom -= h
                    layers[0]["slices"].append(Rect(x, round(bottom, 1), w, round(h, 1),
                                                    SUMMARY_COLOURS[name]))
            first = j


def _current(trace, starting, lane_y, band, makespan):
    """Arrows from each starting pass to the pass whose output it waited for, and outlines."""
    flat, line, links = trace.flat, trace.line, trace.links
    arrows, outlines = [], []
    for k in starting.tolist():
        r = int(flat.rank[k])
        x0, x1 = x_of(line.start[k], makespan), x_of(line.end[k], makespan)
        outlines.append(Rect(round(x0, 2), round(lane_y[r] + 3, 1), round(max(x1 - x0, 0.8), 2),
                             round(band - 3, 1)))
        s = int(links.source[k])
        if s >= 0 and links.remote[k]:
            rs = int(flat.rank[s])
            a = arrow(Point(x_of(line.end[s], makespan), lane_y[rs] + band / 2),
                      Point(x0, lane_y[r] + band / 2), 0.18, 2, 2, head=10)
            arrows.append(Arrow(a.d, a.head))
    return tuple(arrows), tuple(outlines)


def _legend(trace, drawn: bool, memory: bool) -> tuple[tuple[str, str, str, float], ...]:
    kinds = sorted({KINDS[k] for k in np.unique(trace.flat.kind).tolist()}, key=KINDS.index)
    if drawn:
        short = {"F": "F forward", "B": "B backward", "I": "I backward (inputs)",
                 "W": "W backward (weights)"}
        items = [(k, pass_fill(k, 4, 8), short[k]) for k in kinds]
        items.append(("mb", "", "colour = micro-batch"))
    else:
        items = [("F", SUMMARY_COLOURS["F"], "forward"),
                 ("B", SUMMARY_COLOURS["back"], "backward" + (" (B or I)" if "I" in kinds else ""))]
        if "W" in kinds:
            items.append(("W", SUMMARY_COLOURS["W"], "weight gradients"))
    items.append(("idle", "", "idle" if drawn else "empty: idle (bubble)"))
    if memory:
        items.append(("mem", "", "activations held"))
    if drawn and trace.params.t_comm:
        items.append(("send", "", "send"))
    out, x = [], 22.0
    for kind, fill, text in items:
        out.append((kind, fill, text, x))
        x += 28 + len(text) * 7.8 + 20
    return tuple(out)
