"""The pieces of the pipeline deck, layer by layer (see :mod:`app.scenes.pipeline.deck`): passes,
idle stretches, held activations, sends, the summarised strips, the faint busy shape, and the
arrows of the current frame.

Everything but the passes is drawn as few paths: the idle stretches, the held activations and
the sends that begin in a frame are one path each (a subpath per stretch, one step outline per
rank), the busy shape and the summarised strips one path per colour. A pass stays an element
of its own: it carries its hover text and what it depends on (static/js/pipeline.js).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from app.draw.palette import PASS, mix, text_on
from app.draw.text import text_width
from app.humanize import sig4
from app.sim.pipeline.captions import EPS
from app.sim.pipeline.schedules import KIND_NAMES, KINDS

TITLED_PASSES = 640
"""passes carry a tooltip when there are at most this many (page weight)"""
SLICES = 240
SUMMARY_COLOURS = {"F": PASS["F"], "back": PASS["B"], "W": PASS["W"]}


@dataclass(frozen=True)
class Block:
    x: float
    w: float
    y: float
    fill: str
    ink: str
    kind: str
    label: str
    title: str
    index: int
    deps: str
    """dense indices of the passes whose output this one reads (for the hover arrows)"""


@dataclass(frozen=True)
class Arrow:
    d: str
    head: str


@dataclass(frozen=True)
class TimeAxis:
    """Time 0 … ``makespan`` drawn from x = ``left`` to ``right``."""

    left: float
    right: float
    makespan: float

    def x(self, t: float) -> float:
        return (self.left + (self.right - self.left) * t / self.makespan if self.makespan
                else self.left)

    def xs(self, t) -> np.ndarray:
        return (self.left + (self.right - self.left) * np.asarray(t) / self.makespan
                if self.makespan else np.full(np.shape(t), self.left))


@lru_cache(maxsize=4096)
def pass_fill(kind: str, microbatch: int, m: int) -> str:
    """A pass's fill: its kind's colour (palette.PASS; I is B's, hatched), a shade darker
    for odd micro-batches so neighbouring passes part; the micro-batch is the pass's label —
    micro-batches never take rank colours (DESIGN principle 15)."""
    colour = PASS["B" if kind in "BI" else kind]
    return mix(colour, "#000000", 0.22) if microbatch % 2 else colour


ink_on = lru_cache(maxsize=4096)(text_on)


def stages_label(stages: list[int]) -> str:
    if len(stages) == 1:
        return f"stage {stages[0]}"
    shown = stages if len(stages) <= 2 else [stages[0], stages[1], "…", stages[-1]]
    return "stages " + ", ".join(map(str, shown))


def rects_path(x0, x1, y, h) -> str:
    """Rectangles [x0, x1] × [y, y + h] as the subpaths of one path (arrays or lists)."""
    return "".join(f"M{a:.2f} {b:.1f}H{c:.2f}v{d:.1f}H{a:.2f}z"
                   for a, b, c, d in zip(np.asarray(x0).tolist(), np.asarray(y).tolist(),
                                         np.asarray(x1).tolist(), np.asarray(h).tolist()))


def blocks(trace, lane_y, band, axis: TimeAxis, font: float) -> list[Block]:
    """Every pass, in order of start (frame f's are ``[f.lo:f.hi]``), labelled at ``font``
    (0: no labels) where the label fits."""
    flat, line, m = trace.flat, trace.line, trace.params.microbatches
    chunks = trace.params.chunks
    order = trace.by_start
    dense = np.full(trace.schedule.stages * 4 * m, -1)
    dense[flat.ids] = np.arange(flat.ids.size)
    own_forward = np.where(np.isin(flat.kind, (1, 2)), dense[flat.stage * 4 * m + flat.microbatch], -1)
    source = trace.links.source
    x0 = axis.xs(line.start[order])
    x1 = axis.xs(line.end[order])
    room = (x1 - x0 - font * 0.4).tolist() if font else [0.0] * order.size
    titled = flat.ids.size <= TITLED_PASSES
    lane_top = [round(y + 3, 1) for y in lane_y]
    out = []
    for k, a, b, fits, rank, stage, kind, mb, s, own in zip(
            order.tolist(), x0.tolist(), x1.tolist(), room, flat.rank[order].tolist(),
            flat.stage[order].tolist(), flat.kind[order].tolist(),
            flat.microbatch[order].tolist(), source[order].tolist(),
            own_forward[order].tolist()):
        kind = KINDS[kind]
        fill = pass_fill(kind, mb, m)
        short = f"{kind}{mb}"
        longer = f"{stage}{short}"
        label = (longer if chunks > 1 and text_width(longer, font, True) <= fits
                 else short if text_width(short, font, True) <= fits else "")
        title = (f"{stage}{short}: stage {stage} {KIND_NAMES[kind]}, micro-batch {mb} · "
                 f"rank {rank} · t = {sig4(line.start[k])} → {sig4(line.end[k])}"
                 if titled else "")
        deps = (f"{min(s, own)} {max(s, own)}" if s >= 0 and own >= 0 and s != own
                else str(max(s, own)) if max(s, own) >= 0 else "")
        out.append(Block(round(a, 2), round(max(b - a, 0.8), 2), lane_top[rank], fill,
                         ink_on(fill), kind, label, title, k, deps))
    return out


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


def idle(trace, layers, lane_y, band, axis: TimeAxis, frame_of) -> None:
    """Each frame's idle stretches (those that begin in it) as one path."""
    gaps = idle_stretches(trace)
    if not gaps:
        return
    r, s, e = (np.array(v) for v in zip(*gaps))
    frames = np.atleast_1d(frame_of(s))
    y = np.asarray(lane_y)[r] + 3
    for k in np.unique(frames).tolist():
        pick = frames == k
        layers[k]["idle"] = rects_path(axis.xs(s[pick]), axis.xs(e[pick]),
                                       y[pick], np.full(pick.sum(), band - 3))


def memory(trace, layers, lane_y, band, mem_h, axis: TimeAxis, frame_of) -> None:
    """Each rank's held activations as a step area under its passes, cut at the frames'
    cursors so that frame k draws it up to its own cursor: one outline per rank and frame."""
    if not mem_h:
        return
    top = max(max(trace.memory.peak), 1)
    makespan = axis.makespan
    cursors = np.array([f.time for f in trace.frames[1:]])
    pieces: dict[int, list[str]] = {}
    for r, (times, held) in enumerate(zip(trace.memory.times, trace.memory.held)):
        cuts = np.union1d(times, cursors)
        values = held[np.maximum(np.searchsorted(times, cuts + EPS, side="right") - 1, 0)]
        ends = np.concatenate((cuts[1:], [makespan]))
        base = round(lane_y[r] + band + 2 + mem_h, 1)
        keep = (values > 0) & (ends - cuts > EPS)
        if not keep.any():
            continue
        frames = np.atleast_1d(frame_of(ends[keep]))
        x0, x1 = axis.xs(cuts[keep]), axis.xs(ends[keep])
        tops = base - mem_h * values[keep] / top
        # a run of touching steps in one frame is one outline
        run = np.concatenate(([True], (frames[1:] != frames[:-1]) | (x0[1:] - x1[:-1] > 0.01)))
        starts = np.flatnonzero(run).tolist() + [frames.size]
        for i, j in zip(starts[:-1], starts[1:]):
            steps = "".join(f"V{t:.1f}H{b:.2f}" for t, b in zip(tops[i:j].tolist(),
                                                                x1[i:j].tolist()))
            pieces.setdefault(int(frames[i]), []).append(f"M{x0[i]:.2f} {base}{steps}V{base}z")
    for k, parts in pieces.items():
        layers[k]["memory"] = "".join(parts)


def sends(trace, layers, lane_y, band, axis: TimeAxis, frame_of) -> None:
    """Each frame's sends (those that leave in it) as one path of straight lines."""
    p, line, flat, links = trace.params, trace.line, trace.flat, trace.links
    if not p.t_comm:
        return
    consumers = np.flatnonzero(links.remote)
    if consumers.size == 0 or consumers.size > 1500:
        return
    producers = links.source[consumers]
    rs, rc = flat.rank[producers], flat.rank[consumers]
    down = rc > rs
    ly = np.asarray(lane_y)
    y0 = ly[rs] + np.where(down, band, 3)
    y1 = ly[rc] + np.where(down, 3, band)
    x0 = axis.xs(line.end[producers])
    x1 = axis.xs(line.end[producers] + p.t_comm)
    frames = np.atleast_1d(frame_of(line.end[producers]))
    for k in np.unique(frames).tolist():
        pick = frames == k
        layers[k]["sends"] = "".join(
            f"M{a:.1f},{b:.1f}L{c:.1f},{d:.1f}" for a, b, c, d in zip(
                x0[pick].tolist(), y0[pick].tolist(), x1[pick].tolist(), y1[pick].tolist()))


def slices(trace, lane_y, band, axis: TimeAxis) -> dict[str, str]:
    """Each rank's time cut into SLICES slices, each a stacked bar of the shares spent on F,
    B|I and W (in eighths; the empty rest is idle); neighbours within an eighth merge. One path
    per colour; they all sit in layer 0: frames veil what lies after their cursor instead."""
    flat, line = trace.flat, trace.line
    edges = np.linspace(0, axis.makespan, SLICES + 1)
    groups = {"F": flat.kind == 0, "back": (flat.kind == 1) | (flat.kind == 2), "W": flat.kind == 3}
    width = (axis.right - axis.left) / SLICES
    parts: dict[str, list[str]] = {name: [] for name in SUMMARY_COLOURS}
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
            x, x_end = axis.left + first * width, axis.left + j * width
            bottom = lane_y[r] + band
            for name, share in zip(SUMMARY_COLOURS, keys[first]):
                if share:
                    h = (band - 1) * min(share, 8) / 8
                    bottom -= h
                    parts[name].append(f"M{x:.2f} {bottom:.1f}H{x_end:.2f}v{h:.1f}H{x:.2f}z")
            first = j
    return {SUMMARY_COLOURS[name]: "".join(d) for name, d in parts.items() if d}


def _towards(px, py, cx, cy, distance):
    dx, dy = cx - px, cy - py
    length = np.hypot(dx, dy)
    length[length == 0] = 1.0
    return px + dx / length * distance, py + dy / length * distance


def arrows(trace, lane_y, band, axis: TimeAxis) -> list[Arrow | None]:
    """For every pass in order of start: the arrow from the pass whose output it waited for on
    another rank (None: it waited for nobody).
    The arrows are :func:`app.draw.geometry.arrow`'s curves (bend 0.18, 2 px gaps, a 10 px
    head), computed for every pass at once."""
    flat, line, links = trace.flat, trace.line, trace.links
    order = trace.by_start
    ly = np.asarray(lane_y)
    x0 = axis.xs(line.start[order])
    source = links.source[order]
    remote = (source >= 0) & links.remote[order]
    out: list[Arrow | None] = [None] * order.size
    pick = np.flatnonzero(remote)
    if pick.size:
        s = source[pick]
        px, py = axis.xs(line.end[s]), ly[flat.rank[s]] + band / 2
        qx, qy = x0[pick], ly[flat.rank[order[pick]]] + band / 2
        cx, cy = (px + qx) / 2 + 0.18 * (qy - py), (py + qy) / 2 - 0.18 * (qx - px)
        sx, sy = _towards(px, py, cx, cy, 2)
        tx, ty = _towards(qx, qy, cx, cy, 2)
        bx, by = _towards(tx, ty, cx, cy, 10)
        ux, uy = (tx - bx) / 10, (ty - by) / 10
        columns = [v.tolist() for v in (sx, sy, cx, cy, bx, by, tx, ty, bx - uy * 5, by + ux * 5,
                                        bx + uy * 5, by - ux * 5)]
        for i, (a, b, c, d, e, f, g, h, j, k, l, m) in zip(pick.tolist(), zip(*columns)):
            out[i] = Arrow(f"M{a:.1f},{b:.1f} Q{c:.1f},{d:.1f} {e:.1f},{f:.1f}",
                              f"{g:.1f},{h:.1f} {j:.1f},{k:.1f} {l:.1f},{m:.1f}")
    return out
