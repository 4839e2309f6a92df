"""The player's frames for a timed pipeline schedule, and a caption for each that says who
runs what, what it waited for, and what every rank holds.

Frame 0 is the moment before anything runs; then one frame per moment some pass starts (beyond
:data:`MAX_FRAMES` moments, per run of consecutive moments); the last frame is the makespan,
with the bubble compared to the paper's formula when it applies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.pipeline.orders import SCHEDULE_KINDS
from app.sim.pipeline.schedules import KIND_NAMES, Schedule, decode
from app.humanize import sig4

MAX_FRAMES = 200
"""More moments than this and each frame covers a run of consecutive moments."""
EPS = 1e-9



@dataclass(frozen=True)
class PipelineFrame:
    step: int
    time: float
    """the time cursor"""
    phase: str
    caption: str
    lo: int
    hi: int
    """the passes that start in this frame: ``trace.by_start[lo:hi]``"""


def make_frames(p, schedule, flat, links, line, held, by_start, paper) -> list[PipelineFrame]:
    """Frame 0 before anything runs; one frame per moment some pass starts (or, beyond
    MAX_FRAMES moments, per run of consecutive moments); a last frame at the makespan."""
    starts = line.start[by_start]
    rounded = np.round(starts, 9)                 # sorted, as starts are: unique = first of runs
    moments = rounded[np.concatenate(([True], rounded[1:] != rounded[:-1]))]
    # np.array_split(moments, groups)'s edges: the first size % groups have one moment more
    size = moments.size
    groups = np.arange(min(MAX_FRAMES, size) + 1)
    edges = groups * (size // groups[-1]) + np.minimum(groups, size % groups[-1])
    cursors, firsts = moments[edges[1:] - 1], moments[edges[:-1]]
    bounds = np.searchsorted(starts, cursors + EPS, side="right")
    backward = flat.kind != 0
    first_backward = float(np.min(line.start, where=backward, initial=np.inf))
    last_forward = float(np.max(line.start, where=~backward, initial=0.0))
    title = SCHEDULE_KINDS[p.schedule].title
    frames = [PipelineFrame(0, 0.0, "before", _intro(p, schedule, title), 0, 0)]
    context = _Context(p, schedule, flat, links, line, held, cursors, starts)
    lo = 0
    for k, (t0, t, hi) in enumerate(zip(firsts.tolist(), cursors.tolist(), bounds.tolist()),
                                    start=1):
        phase = ("warm-up" if t < first_backward - EPS else
                 "cool-down" if t > last_forward + EPS else "steady state")
        frames.append(PipelineFrame(k, t, phase, context.moment(k - 1, t0, t, by_start[lo:hi]),
                                    lo, hi))
        lo = hi
    frames.append(PipelineFrame(len(frames), line.makespan, "done", context.summary(title, paper),
                                lo, lo))
    return frames


def _intro(p, schedule: Schedule, title: str) -> str:
    v = schedule.chunks
    where = ("each rank holds one stage" if v == 1 else
             f"rank r holds stages r and {2 * p.stages - 1} − r (a V)" if schedule.style == "v"
             else f"rank r holds stages r, r + {p.stages}, … ({v} chunks)")
    split = ("; each backward is split into I (gradient for the inputs, which the previous stage "
             "waits for) and W (gradient for the weights, which nobody waits for)"
             if SCHEDULE_KINDS[p.schedule].splits_backward else "")
    per_chunk = (f", so {sig4(p.t_f / v)} and {sig4((p.t_b + p.t_w) / v)} per chunk" if v > 1
                 else "")
    comm = (f" Every send between ranks takes t_comm = {sig4(p.t_comm)}." if p.t_comm
            else " Sends between ranks are free (t_comm = 0), as in the papers' formulas.")
    return (f"Before: {title} on {p.stages} rank{'s' if p.stages > 1 else ''} with "
            f"{p.microbatches} micro-batch{'es' if p.microbatches > 1 else ''}; {where}{split}. "
            f"A forward takes t_f = {sig4(p.t_f)}, a backward t_b + t_w = {sig4(p.t_b + p.t_w)} "
            f"for a rank's layers{per_chunk}.{comm}")


class _Context:
    """What captions need, computed once per trace for every cursor position at once."""

    def __init__(self, p, schedule, flat, links, line, held, cursors: np.ndarray,
                 starts: np.ndarray):
        self.p, self.schedule, self.flat, self.links, self.line, self.held = (
            p, schedule, flat, links, line, held)
        self.firsts = set(flat.offsets[:-1][np.diff(flat.offsets) > 0].tolist())
        """each rank's first pass"""
        weights = np.flatnonzero(flat.kind == 3)
        _, first_w = np.unique(flat.rank[weights], return_index=True)
        self.first_of_kind = set(weights[first_w].tolist())         # each rank's first W
        at = cursors + EPS
        # activations held by each rank at each cursor: (ranks, cursors)
        self.held_at = np.stack([h[np.maximum(np.searchsorted(t, at, side="right") - 1, 0)]
                                 for t, h in zip(held.times, held.held)]) \
            if held.times else np.zeros((0, cursors.size), dtype=int)
        # ranks computing at each cursor: the pass that started last before it still runs
        busy = np.zeros(cursors.size, dtype=int)
        for a, b in zip(flat.offsets[:-1], flat.offsets[1:]):
            i = np.searchsorted(line.start[a:b], at, side="right") - 1
            busy += (i >= 0) & (line.end[a:b][np.maximum(i, 0)] > at)
        self.busy = busy.tolist()
        # rank-time computed before each cursor: Σ over passes of clip(t − start, 0, length)
        s, e = starts, np.sort(line.end)
        cs, ce = np.concatenate(([0.0], np.cumsum(s))), np.concatenate(([0.0], np.cumsum(e)))
        ns, ne = np.searchsorted(s, cursors, side="right"), np.searchsorted(e, cursors, side="right")
        self.used = ((ns * cursors - cs[ns]) - (ne * cursors - ce[ne])).tolist()
        # the rank holding most activations at each cursor (the first of equals), and how many
        self.top = self.held_at.argmax(axis=0).tolist() if held.times else []
        self.top_held = self.held_at[self.top, np.arange(cursors.size)].tolist() \
            if held.times else []
        # captions read a few passes' values each: .item() gives Python numbers, cheaper to
        # format than numpy scalars (and no list of every pass is built)
        self._rank, self._kind, self._ids = flat.rank.item, flat.kind.item, flat.ids.item
        self._start, self._end = line.start.item, line.end.item
        self._source, self._remote = links.source.item, links.remote.item

    def name(self, k: int) -> str:
        return str(decode(self._ids(k), self.schedule.microbatches))

    def describe(self, k: int) -> str:
        m = self.schedule.microbatches
        r, kind = self._rank(k), self._kind(k)
        a = decode(self._ids(k), m)
        first = k in self.firsts
        wait = self._start(k) - (0.0 if first else self._end(k - 1))
        src = self._source(k)
        what = (f"rank {r} runs {a} ({KIND_NAMES[a.kind]} of micro-batch {a.microbatch}, "
                f"stage {a.stage})")
        if k in self.first_of_kind:
            what += " — W waits for no other rank, so it can fill time that would be idle"
        if wait > EPS:
            idle = (f"its first pass, at t = {sig4(self._start(k))}" if first
                    else f"after {sig4(wait)} idle")
            if src >= 0 and self._remote(k):
                data = "activation" if kind == 0 else "gradient"
                comm = ", + t_comm" if self.p.t_comm else ""
                return (f"{what}, {idle}: it waited for the {data} from rank "
                        f"{self._rank(src)} ({self.name(src)} ended at "
                        f"{sig4(self._end(src))}{comm})")
            return f"{what}, {idle}"
        if first:
            return what
        return f"{what}, straight after {self.name(k - 1)}"

    def moment(self, j: int, t0: float, t: float, starting: np.ndarray) -> str:
        """What starts between t0 and t (one moment: t0 = t), and the state at t."""
        ranks = self.schedule.ranks
        parts = [self.describe(k) for k in starting[:3].tolist()]
        if starting.size > 3:
            more = starting.size - 3
            parts.append(f"and {more:,} more pass{'es' if more > 1 else ''} start"
                         f"{'' if t0 == t else ' in this stretch'}")
        when = f"t = {sig4(t)}" if t0 == t else f"t = {sig4(t0)} … {sig4(t)}"
        text = f"{when}: " + "; ".join(parts) + "."
        idle = ranks - self.busy[j]
        if idle:
            text += f" {idle} of {ranks} rank{'s' if ranks > 1 else ''} idle at t = {sig4(t)} (bubble)."
        if ranks <= 8:
            text += (" Activations held: " + " · ".join(f"r{r} {h}" for r, h in
                                                        enumerate(self.held_at[:, j].tolist()))
                     + ".")
        else:
            text += (f" Rank-time used so far: {self.used[j] / (ranks * t):.1%}. Most activations "
                     f"held: rank {self.top[j]}, {self.top_held[j]} micro-batch-chunks."
                     if t > 0 else "")
        return text

    def summary(self, title: str, paper) -> str:
        p, line = self.p, self.line
        per_rank = p.microbatches * (p.t_f + p.t_b + p.t_w)
        text = (f"Done at t = {sig4(line.makespan)}. Every rank computed "
                f"m·(t_f + t_b + t_w) = {sig4(per_rank)}; the rest of p × makespan is bubble: "
                f"{line.bubble_fraction:.1%} of all rank-time. Peak activations: rank 0 holds "
                f"{self.held.peak[0]} micro-batch-chunk{'s' if self.held.peak[0] != 1 else ''}"
                f"{f', rank {p.stages - 1} {self.held.peak[-1]}' if p.stages > 1 else ''}.")
        f = paper
        if f is not None:
            if f.applies:
                text += (f" The paper's {f.text}: {f.worked} = {f.fraction:.1%} "
                         f"{'✓ equal' if abs(f.fraction - line.bubble_fraction) < 1e-9 else '≠'}.")
            else:
                text += (f" {title}'s formula {f.text} would give {f.fraction:.1%}; it is exact "
                         f"only when {f.condition}.")
        return text

