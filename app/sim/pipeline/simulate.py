"""Pipeline parallelism: a schedule of forward and backward passes over p ranks, timed, with its
bubble, activation memory and the sends between stages.

``simulate(params)`` builds the schedule's order (:mod:`app.sim.pipeline.schedules`), checks it,
finds its sends and times it (:mod:`app.sim.pipeline.passes`), and cuts the timeline into frames
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

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import orjson

from app.caches import TRACES, memoised
from app.sim.pipeline.captions import PipelineFrame, make_frames
from app.humanize import sig4
from app.sim.pipeline.to_json import trace_json
from app.sim.pipeline.passes import (Flat, Links, Memory, Timeline, Times, communication,
                                     memory, timeline, validate)
from app.sim.pipeline.orders import SCHEDULE_KINDS, build, infeasible
from app.sim.pipeline.schedules import KINDS, Schedule, decode

if TYPE_CHECKING:
    from app.sim.pipeline.params import PipelineParams


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


def formula(p: PipelineParams) -> Formula | None:
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
                       f"({s} − 1)({sig4(p.t_f)} + {sig4(p.t_b)} − {sig4(p.t_w)}) = {sig4(idle)} "
                       f"of {sig4(idle + busy)}",
                       idle / (idle + busy) if idle + busy > 0 else 0.0,
                       free and m >= s and p.t_w <= min(p.t_f, p.t_b),
                       "t_comm = 0, m ≥ p and t_w ≤ t_f, t_b",
                       "Zero Bubble (Qi et al. 2023) Table 2")
    return None


COMPACT_PASSES = 16384
"""Beyond this many passes /api/pipeline gives each rank's actions in the compact form
(PipelineTrace._compact_dict): the full records would pass 5 MB."""

_WHOLE = re.compile(r"\.0(?=,|$)")  # a time orjson wrote with a trailing .0


@dataclass(frozen=True, eq=False)
class PipelineTrace:
    params: PipelineParams
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

    @property
    def compact(self) -> bool:
        """Whether the JSON gives each rank's passes in the compact form (more than
        :data:`COMPACT_PASSES` passes): a full action record is ~90 bytes, so 196,608 passes
        (zb_h1, p = 64, m = 1024) would make 18 MB."""
        return self.flat.ids.size > COMPACT_PASSES

    def durations(self) -> dict[str, float] | None:
        """Each kind's pass duration when every pass of a kind lasts the same (it does: times
        are per kind and per chunk; communication delays starts, not passes); else None."""
        span = np.round(self.line.end - self.line.start, 9)
        out = {}
        for k in np.unique(self.flat.kind).tolist():
            values = np.unique(span[self.flat.kind == k])
            if values.size != 1:
                return None
            out[KINDS[k]] = float(values[0])
        return out

    def _compact_dict(self) -> dict:
        """Beyond COMPACT_PASSES passes: each rank's ``actions`` is a list of strings
        ``"2F0@13.5"`` — the action in torch.distributed.pipelining's compact form (global stage,
        kind, micro-batch; it parses back, app.sim.pipeline.schedules) and its start time; its
        end is start + ``durations[kind]`` (``"2F0@13.5-14.5"`` when a kind's passes differ);
        times to 8 significant digits of the makespan. ``memory`` gives each rank's peak only."""
        flat, line = self.flat, self.line
        durations = self.durations()
        # "2F0@13.5": orjson writes the times (shortest round-trip form), the labels are
        # joined from cached pieces — an f-string per pass with float formatting is seconds
        names = [str(i) for i in range(max(int(flat.stage.max()), int(flat.microbatch.max())) + 1)]
        heads = [names[st] + kind for st in range(int(flat.stage.max()) + 1) for kind in KINDS]
        tail = [names[mb] + "@" for mb in range(int(flat.microbatch.max()) + 1)]

        # 8 significant digits of the makespan: far finer than a pass, and bounded in length
        decimals = max(0, 8 - len(str(int(line.makespan))))

        def times(values: np.ndarray) -> list[str]:
            text = orjson.dumps(np.round(values, decimals),
                                option=orjson.OPT_SERIALIZE_NUMPY).decode()
            return _WHOLE.sub("", text[1:-1]).split(",")  # "13.0" → "13", in one pass

        # joined as object arrays: numpy's loop makes the 10⁵ concatenations
        head = np.array(heads, dtype=object)[flat.stage.astype(np.int64) * len(KINDS) + flat.kind]
        label = (head + np.array(tail, dtype=object)[flat.microbatch]
                 + np.array(times(line.start), dtype=object)).tolist()
        if durations is None:
            label = [a + "-" + e for a, e in zip(label, times(line.end))]
        stages = self.rank_stages()
        ranks = [{"rank": r, "stages": stages[r], "actions": label[a:b]}
                 for r, (a, b) in enumerate(zip(flat.offsets[:-1].tolist(),
                                                flat.offsets[1:].tolist()))]
        fields = self._fields()
        # the activation-memory step functions (two breakpoints a pass, 2.8 MB here) are
        # summarised to each rank's peak; the full form carries them
        fields["memory"] = [{"rank": r, "peak": int(peak)}
                            for r, peak in enumerate(self.memory.peak)]
        return {"ranks": ranks, "actions_form": "compact", "durations": durations,
                **orjson.loads(orjson.dumps(fields, option=orjson.OPT_SERIALIZE_NUMPY))}

    def to_dict(self) -> dict:
        """The JSON contract of ``/api/pipeline`` (DESIGN.md) as plain data."""
        if self.compact:
            return self._compact_dict()
        flat, line = self.flat, self.line
        start, end = np.round(line.start, 9).tolist(), np.round(line.end, 9).tolist()
        ranks = []
        for r, (a, b) in enumerate(zip(flat.offsets[:-1], flat.offsets[1:])):
            ranks.append({"rank": r, "stages": self.rank_stages()[r], "actions": [
                {"action": str(decode(flat.ids[k], self.schedule.microbatches)),
                 "stage": int(flat.stage[k]), "kind": KINDS[flat.kind[k]],
                 "microbatch": int(flat.microbatch[k]), "start": start[k], "end": end[k]}
                for k in range(a, b)]})
        return {"ranks": ranks, "actions_form": "full", **orjson.loads(orjson.dumps(
            self._fields(), option=orjson.OPT_SERIALIZE_NUMPY))}

    def to_json(self) -> bytes:
        """``to_dict()`` as JSON bytes, fast for 10⁵ actions (see app.sim.pipeline.to_json)."""
        if self.compact:
            return orjson.dumps(self._compact_dict())
        flat, line = self.flat, self.line
        rest = orjson.dumps({"actions_form": "full", **self._fields()},
                            option=orjson.OPT_SERIALIZE_NUMPY)
        return trace_json(self.rank_stages(), flat.offsets, flat.stage, flat.kind,
                          flat.microbatch, np.round(line.start, 9), np.round(line.end, 9), rest)


def simulate(p: PipelineParams) -> PipelineTrace:
    schedule = build(p.schedule, p.stages, p.microbatches, p.chunks)
    flat = validate(schedule)
    links = communication(schedule, flat)
    line = timeline(schedule, Times(p.t_f, p.t_b, p.t_w, p.t_comm), flat, links)
    held = memory(flat, line)
    by_start = np.argsort(line.start, kind="stable")
    paper = formula(p)
    frames = make_frames(p, schedule, flat, links, line, held, by_start, paper)
    return PipelineTrace(p, schedule, flat, links, line, held, by_start, tuple(frames), paper)


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
    """Bubble fraction against m for every schedule, each point a full simulation: the timing
    pass of the point's schedule with ``times``. The order of every schedule's passes is built
    from (schedule, ranks, m, chunks) alone — no schedule here reorders its passes by their
    durations — so the schedules, their dense form and their links are kept per (ranks,
    chunks) (:func:`curve_schedules`) and a move of t_f, t_b, t_w or t_comm only re-times them."""
    return tuple(Curve(name, v, ms, tuple(
        timeline(schedule, times, flat, links, method="worklist").bubble_fraction
        for schedule, flat, links in points))
        for name, v, ms, points in curve_schedules(ranks, interleaved_chunks))


@memoised(TRACES)
def curve_schedules(ranks: int, interleaved_chunks: int) -> tuple:
    """Per schedule: (name, chunks, the m of its points, per point (schedule, flat, links))."""
    out = []
    for name, kind in SCHEDULE_KINDS.items():
        v = kind.chunks or interleaved_chunks
        ms, points = [], []
        for m in CURVE_MICROBATCHES:
            if infeasible(name, ranks, m, v) is not None and m > ranks:
                m = round(m / ranks) * ranks       # interleaved: a whole number of rounds
            if ranks * v * m > CURVE_PASSES:
                break
            if infeasible(name, ranks, m, v) is None and (not ms or m > ms[-1]):
                ms.append(m)
                # a point is small (CURVE_PASSES): one rank at a time beats numpy rounds
                schedule = build(name, ranks, m, v)
                flat = Flat.of(schedule)
                points.append((schedule, flat, communication(schedule, flat)))
        out.append((name, v, tuple(ms), tuple(points)))
    return tuple(out)
