"""The pieces of the pipeline deck, layer by layer (see :mod:`app.views.pipeline`): passes,
idle stretches, held activations, sends, the summarised strips, the faint busy shape, and the
arrows of the current frame."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.pipeline_captions import EPS, num
from app.sim.pipeline_schedules import KIND_NAMES, decode
from app.views.geometry import Point, arrow
from app.views.palette import mix, rank_colour, text_on

LEFT, RIGHT = 175.0, 1168.0          # the time axis
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


def x_of(t: float, makespan: float) -> float:
    return LEFT + (RIGHT - LEFT) * t / makespan if makespan else LEFT


def pass_fill(kind: str, microbatch: int, m: int) -> str:
    colour = rank_colour(microbatch, m)
    if kind in "BI":
        return mix(colour, "#000000", 0.35)
    if kind == "W":
        return mix(colour, "#ffffff", 0.5)
    return colour


def stages_label(stages: list[int]) -> str:
    if len(stages) == 1:
        return f"stage {stages[0]}"
    shown = stages if len(stages) <= 2 else [stages[0], stages[1], "…", stages[-1]]
    return "stages " + ", ".join(map(str, shown))


def ghost(trace, lane_y, band, makespan) -> tuple[Rect, ...]:
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


def blocks(trace, layers, lane_y, band, makespan) -> None:
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


def idle_stretches(trace):
    """Idle stretches: (rank, start, end), including before the first and after the last pass."""
    flat, line = trace.flat, trace.line
    out = []
    for r, (a, b) in enumerate(zip(flat.offsets[:-1], flat.offsets[1:])):
        starts = np.concatenate((line.start[a:b], [line.makespan]))
        ends = np.concatenate(([0.0], line.end[a:b]))
        gap = starts - ends > EPS
        out += [(r, s, e) for s, e in zip(ends[gap].tolist(), starts[gap].tolist())]
    return out


def idle(trace, layers, lane_y, band, makespan, frame_of) -> None:
    gaps = idle_stretches(trace)
    frames = frame_of([g[1] for g in gaps]) if gaps else []
    for (r, s, e), k in zip(gaps, np.atleast_1d(frames).tolist()):
        x0, x1 = x_of(s, makespan), x_of(e, makespan)
        layers[k]["idle"].append(Rect(round(x0, 2), round(lane_y[r] + 3, 1), round(x1 - x0, 2),
                                      round(band - 3, 1)))


def memory(trace, layers, lane_y, band, mem_h, makespan, frame_of) -> None:
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


def sends(trace, layers, lane_y, band, makespan, frame_of) -> None:
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


def slices(trace, layers, lane_y, band, makespan) -> None:
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


def current(trace, starting, lane_y, band, makespan):
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
