"""Pipeline parallelism: a schedule of forward and backward passes over p ranks, timed, with its
bubble, activation memory and the sends between stages.

``simulate(params)`` builds the schedule's order (:mod:`app.sim.pipeline_schedules`), checks it,
finds its sends and times it (:mod:`app.sim.pipeline_passes`), and cuts the timeline into frames
for the player: one per moment some pass starts (at most :data:`MAX_FRAMES`, else even slices
of time), each with a caption that says who runs what and why they waited.

The bubble is idle rank-time over p · makespan. With free communication the papers' formulas
hold exactly, and each trace says whether its own configuration is one where they do:

* GPipe and 1F1B: (p − 1)/(m + p − 1) of the total — PTD-P's (p − 1)/m of the ideal time
  (Narayanan et al. 2021, §2.2.1; GPipe, Huang et al. 2019), for any t_f, t_b, t_w.
* Interleaved 1F1B: (p − 1)/(v·m + p − 1) (PTD-P §2.2.2), when p divides m.
* ZB-H1: (p − 1)(t_f + t_b − t_w) of idle time per rank (Qi et al. 2023, Table 2), when m ≥ p
  and t_w ≤ t_f, t_b.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import numpy as np
import orjson

from app.sim.pipeline_json import trace_json
from app.sim.pipeline_passes import (Flat, Links, Memory, Timeline, Times, communication,
                                     memory, timeline, validate)
from app.sim.pipeline_schedules import (KIND_NAMES, KINDS, SCHEDULE_KINDS, Schedule, build,
                                        decode, infeasible)

MAX_FRAMES = 200
"""More moments than this and each frame covers a run of consecutive moments."""
EPS = 1e-9


class PipelineQuery(Protocol):
    """What :func:`simulate` reads (``app.routes.pipeline.PipelineParams`` provides it)."""

    schedule: str
    stages: int
    microbatches: int
    chunks: int
    t_f: float
    t_b: float
    t_w: float
    t_comm: float


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


@dataclass(frozen=True)
class Formula:
    """A paper's bubble, evaluated on these parameters."""

    text: str
    worked: str
    fraction: float
    """the bubble fraction it predicts"""
    applies: bool
    condition: str
    source: str

    def to_dict(self) -> dict:
        return {"text": self.text, "worked": self.worked, "bubble_fraction": self.fraction,
                "applies": self.applies, "condition": self.condition, "source": self.source}


def num(x: float) -> str:
    """A time or size for captions: 3, 4.5, 0.3333."""
    return f"{x:.4g}"


def formula(p: PipelineQuery) -> Formula | None:
    s, m, v = p.stages, p.microbatches, p.chunks
    free = p.t_comm == 0
    if p.schedule in ("gpipe", "1f1b"):
        return Formula("(p − 1)/(m + p − 1)", f"({s} − 1)/({m} + {s} − 1) = {s - 1}/{m + s - 1}",
                       (s - 1) / (m + s - 1), free, "communication is free (t_comm = 0)",
                       "PTD-P (Narayanan et al. 2021) §2.2.1; GPipe (Huang et al. 2019)")
    if p.schedule == "interleaved_1f1b":
        return Formula("(p − 1)/(v·m + p − 1)",
                       f"({s} − 1)/({v}·{m} + {s} − 1) = {s - 1}/{v * m + s - 1}",
                       (s - 1) / (v * m + s - 1), free and m % s == 0,
                       "t_comm = 0 and p divides m", "PTD-P (Narayanan et al. 2021) §2.2.2")
    if p.schedule == "zb_h1":
        idle = (s - 1) * (p.t_f + p.t_b - p.t_w)
        busy = m * (p.t_f + p.t_b + p.t_w)
        return Formula("(p − 1)(t_f + t_b − t_w) idle per rank",
                       f"({s} − 1)({num(p.t_f)} + {num(p.t_b)} − {num(p.t_w)}) = {num(idle)} "
                       f"of {num(idle + busy)}",
                       idle / (idle + busy) if idle + busy > 0 else 0.0,
                       free and m >= s and p.t_w <= min(p.t_f, p.t_b),
                       "t_comm = 0, m ≥ p and t_w ≤ t_f, t_b",
                       "Zero Bubble (Qi et al. 2023) Table 2")
    return None


@dataclass(frozen=True, eq=False)
class PipelineTrace:
    params: PipelineQuery
    schedule: Schedule
    flat: Flat
    links: Links
    line: Timeline
    memory: Memory
    by_start: np.ndarray
    """dense action indices in order of start time"""
    frames: tuple[PipelineFrame, ...]
    formula: Formula | None

    @property
    def makespan(self) -> float:
        return self.line.makespan

    @property
    def bubble_fraction(self) -> float:
        return self.line.bubble_fraction

    @property
    def peak_activations(self) -> list[int]:
        return list(self.memory.peak)

    def rank_stages(self) -> list[list[int]]:
        """The stages each rank holds, in model order."""
        owner = self.schedule.rank_of_stage
        return [np.flatnonzero(owner == r).tolist() for r in range(self.schedule.ranks)]

    def _fields(self) -> dict:
        p, line = self.params, self.line
        return {
            "schedule": p.schedule, "stages": p.stages, "microbatches": p.microbatches,
            "chunks": p.chunks, "t_f": p.t_f, "t_b": p.t_b, "t_w": p.t_w, "t_comm": p.t_comm,
            "makespan": line.makespan,
            "bubble_fraction": line.bubble_fraction,
            "peak_activations": self.peak_activations,
            "busy": line.busy,
            "idle": line.makespan - line.busy,
            "sends": self.links.sends,
            "formula": None if self.formula is None else self.formula.to_dict(),
            "frames": [{"step": f.step, "time": f.time, "phase": f.phase, "caption": f.caption}
                       for f in self.frames],
            "memory": [{"rank": r, "times": t, "held": h}
                       for r, (t, h) in enumerate(zip(self.memory.times, self.memory.held))],
        }

    def to_dict(self) -> dict:
        """The JSON contract of ``/api/pipeline`` (DESIGN.md) as plain data."""
        flat, line = self.flat, self.line
        start, end = np.round(line.start, 9).tolist(), np.round(line.end, 9).tolist()
        ranks = []
        for r, (a, b) in enumerate(zip(flat.offsets[:-1], flat.offsets[1:])):
            ranks.append({"rank": r, "stages": self.rank_stages()[r], "actions": [
                {"action": str(decode(flat.ids[k], self.schedule.microbatches)),
                 "stage": int(flat.stage[k]), "kind": KINDS[flat.kind[k]],
                 "microbatch": int(flat.microbatch[k]), "start": start[k], "end": end[k]}
                for k in range(a, b)]})
        return {"ranks": ranks, **orjson.loads(orjson.dumps(
            self._fields(), option=orjson.OPT_SERIALIZE_NUMPY))}

    def to_json(self) -> bytes:
        """``to_dict()`` as JSON bytes, fast for 10⁵ actions (see app.sim.pipeline_json)."""
        flat, line = self.flat, self.line
        rest = orjson.dumps(self._fields(), option=orjson.OPT_SERIALIZE_NUMPY)
        return trace_json(self.rank_stages(), flat.offsets, flat.stage, flat.kind,
                          flat.microbatch, np.round(line.start, 9), np.round(line.end, 9), rest)


def simulate(p: PipelineQuery) -> PipelineTrace:
    schedule = build(p.schedule, p.stages, p.microbatches, p.chunks)
    flat = validate(schedule)
    links = communication(schedule, flat)
    line = timeline(schedule, Times(p.t_f, p.t_b, p.t_w, p.t_comm), flat, links)
    held = memory(flat, line)
    by_start = np.argsort(line.start, kind="stable")
    frames = _frames(p, schedule, flat, links, line, held, by_start)
    return PipelineTrace(p, schedule, flat, links, line, held, by_start, tuple(frames),
                         formula(p))


CURVE_MICROBATCHES = tuple(2 ** k for k in range(11))
"""m = 1, 2, 4, … 1024: the points of the bubble-against-m plot"""
CURVE_PASSES = 2048
"""a point is simulated when stages × chunks × m is at most this (bounded work per plot)"""


@dataclass(frozen=True)
class Curve:
    schedule: str
    chunks: int
    microbatches: tuple[int, ...]
    bubble: tuple[float, ...]


@lru_cache(maxsize=32)
def bubble_curves(ranks: int, interleaved_chunks: int, times: Times) -> tuple[Curve, ...]:
    """Bubble fraction against m for every schedule, each point a full simulation."""
    curves = []
    for name, kind in SCHEDULE_KINDS.items():
        v = kind.chunks or interleaved_chunks
        ms, bubbles = [], []
        for m in CURVE_MICROBATCHES:
            if infeasible(name, ranks, m, v) is not None and m > ranks:
                m = round(m / ranks) * ranks       # interleaved: a whole number of rounds
            if ranks * v * m > CURVE_PASSES:
                break
            if infeasible(name, ranks, m, v) is None and (not ms or m > ms[-1]):
                ms.append(m)
                bubbles.append(timeline(build(name, ranks, m, v), times).bubble_fraction)
        curves.append(Curve(name, v, tuple(ms), tuple(bubbles)))
    return tuple(curves)


# --- frames and captions -----------------------------------------------------------------------

def _frames(p, schedule, flat, links, line, held, by_start) -> list[PipelineFrame]:
    """Frame 0 before anything runs; one frame per moment some pass starts (or, beyond
    MAX_FRAMES moments, per run of consecutive moments); a last frame at the makespan."""
    starts = line.start[by_start]
    moments = np.unique(np.round(starts, 9))
    groups = np.array_split(moments, min(MAX_FRAMES, moments.size))
    cursors = np.array([g[-1] for g in groups])
    firsts = np.array([g[0] for g in groups])
    bounds = np.searchsorted(starts, cursors + EPS, side="right")
    backward = flat.kind != 0
    first_backward = float(line.start[backward].min(initial=np.inf))
    last_forward = float(line.start[~backward].max(initial=0.0))
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
    frames.append(PipelineFrame(len(frames), line.makespan, "done", context.summary(title),
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
    per_chunk = (f", so {num(p.t_f / v)} and {num((p.t_b + p.t_w) / v)} per chunk" if v > 1
                 else "")
    comm = (f" Every send between ranks takes t_comm = {num(p.t_comm)}." if p.t_comm
            else " Sends between ranks are free (t_comm = 0), as in the papers' formulas.")
    return (f"Before: {title} on {p.stages} rank{'s' if p.stages > 1 else ''} with "
            f"{p.microbatches} micro-batch{'es' if p.microbatches > 1 else ''}; {where}{split}. "
            f"A forward takes t_f = {num(p.t_f)}, a backward t_b + t_w = {num(p.t_b + p.t_w)} "
            f"for a rank's layers{per_chunk}.{comm}")


class _Context:
    """What captions need, computed once per trace for every cursor position at once."""

    def __init__(self, p, schedule, flat, links, line, held, cursors: np.ndarray,
                 starts: np.ndarray):
        self.p, self.schedule, self.flat, self.links, self.line, self.held = (
            p, schedule, flat, links, line, held)
        first = np.zeros(flat.ids.size, dtype=bool)
        first[flat.offsets[:-1][np.diff(flat.offsets) > 0]] = True
        self.first = first
        self.previous_end = np.where(first, 0.0, np.concatenate(([0.0], line.end[:-1])))
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
        self.busy = busy
        # rank-time computed before each cursor: Σ over passes of clip(t − start, 0, length)
        s, e = starts, np.sort(line.end)
        cs, ce = np.concatenate(([0.0], np.cumsum(s))), np.concatenate(([0.0], np.cumsum(e)))
        ns, ne = np.searchsorted(s, cursors, side="right"), np.searchsorted(e, cursors, side="right")
        self.used = (ns * cursors - cs[ns]) - (ne * cursors - ce[ne])

    def name(self, k: int) -> str:
        return str(decode(self.flat.ids[k], self.schedule.microbatches))

    def describe(self, k: int) -> str:
        flat, line, m = self.flat, self.line, self.schedule.microbatches
        r, kind = int(flat.rank[k]), int(flat.kind[k])
        a = decode(flat.ids[k], m)
        wait = line.start[k] - self.previous_end[k]
        src = int(self.links.source[k])
        what = (f"rank {r} runs {a} ({KIND_NAMES[a.kind]} of micro-batch {a.microbatch}, "
                f"stage {a.stage})")
        if k in self.first_of_kind:
            what += " — W waits for no other rank, so it can fill time that would be idle"
        if wait > EPS:
            idle = (f"its first pass, at t = {num(line.start[k])}" if self.first[k]
                    else f"after {num(wait)} idle")
            if src >= 0 and self.links.remote[k]:
                data = "activation" if kind == 0 else "gradient"
                comm = ", + t_comm" if self.p.t_comm else ""
                return (f"{what}, {idle}: it waited for the {data} from rank "
                        f"{int(flat.rank[src])} ({self.name(src)} ended at "
                        f"{num(line.end[src])}{comm})")
            return f"{what}, {idle}"
        if self.first[k]:
            return what
        return f"{what}, straight after {self.name(k - 1)}"

    def moment(self, j: int, t0: float, t: float, starting: np.ndarray) -> str:
        """What starts between t0 and t (one moment: t0 = t), and the state at t."""
        ranks = self.schedule.ranks
        parts = [self.describe(int(k)) for k in starting[:3]]
        if starting.size > 3:
            more = starting.size - 3
            parts.append(f"and {more:,} more pass{'es' if more > 1 else ''} start"
                         f"{'' if t0 == t else ' in this stretch'}")
        when = f"t = {num(t)}" if t0 == t else f"t = {num(t0)} … {num(t)}"
        text = f"{when}: " + "; ".join(parts) + "."
        idle = ranks - int(self.busy[j])
        if idle:
            text += f" {idle} of {ranks} rank{'s' if ranks > 1 else ''} idle at t = {num(t)} (bubble)."
        held = self.held_at[:, j]
        if ranks <= 8:
            text += (" Activations held: " + " · ".join(f"r{r} {h}" for r, h in
                                                        enumerate(held.tolist())) + ".")
        else:
            top = int(np.argmax(held))
            text += (f" Rank-time used so far: {self.used[j] / (ranks * t):.1%}. Most activations "
                     f"held: rank {top}, {held[top]} micro-batch-chunks." if t > 0 else "")
        return text

    def summary(self, title: str) -> str:
        p, line = self.p, self.line
        per_rank = p.microbatches * (p.t_f + p.t_b + p.t_w)
        text = (f"Done at t = {num(line.makespan)}. Every rank computed "
                f"m·(t_f + t_b + t_w) = {num(per_rank)}; the rest of p × makespan is bubble: "
                f"{line.bubble_fraction:.1%} of all rank-time. Peak activations: rank 0 holds "
                f"{self.held.peak[0]} micro-batch-chunk{'s' if self.held.peak[0] != 1 else ''}"
                f"{f', rank {p.stages - 1} {self.held.peak[-1]}' if p.stages > 1 else ''}.")
        f = formula(p)
        if f is not None:
            if f.applies:
                text += (f" The paper's {f.text}: {f.worked} = {f.fraction:.1%} "
                         f"{'✓ equal' if abs(f.fraction - line.bubble_fraction) < 1e-9 else '≠'}.")
            else:
                text += (f" {title}'s formula {f.text} would give {f.fraction:.1%}; it is exact "
                         f"only when {f.condition}.")
        return text

