"""``/train``: one training step of a 5D mix, rank by rank, as the cost model predicts it — and
what the real run (workers/train) is compared with.

The trace holds the layout (app.sim.parallelism: the same groups the workers build), the events
of one step (app.sim.train.program, timed on the calibrated machine) of each stage's first rank,
whose timeline the stage's other ranks share (every rank's are made from them), the split
of the step into compute, exposed communication and bubble (split.py), memory per rank
(memory.py), the same step predicted on a GPU node for comparison, and the player's frames.
``to_dict()`` is DESIGN.md's ``/api/train`` contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter

from app.sim.parallelism.layout import GROUP_KINDS, Layout
from app.sim.train.cost import Machine
from app.sim.train.frames import TrainFrame, make_frames
from app.sim.train.memory import RankMemory, per_rank
from app.sim.train.model import Shape, param_count
from app.sim.train.params import GPU, TrainParams
from app.sim.train.program import ELEMENT_BYTES, program_step, stage_ranks
from app.sim.train.split import mean_split, predicted_split

SPLIT_KEYS = ("step_s", "compute_s", "comm_exposed_s", "bubble_s")


CONTRACT_META = ("group", "microbatch", "stage", "bytes", "peer")
"""What an event says of its task besides rank, lane, kind and times (where the task has it)."""


def events_of(step, static: dict[str, tuple] | None = None, *,
              every_rank: bool = True) -> list[dict]:
    """The contract's events from the scheduled tasks (zero-length compute left out), for every
    rank: a rank whose timeline is another's (``step.alike``) gets that one's events, its
    pipeline's peers for the sends (``every_rank=False``: the scheduled ranks' alone, unsorted —
    enough for the split). ``static``: each task's rank, lane, kind and
    :data:`CONTRACT_META`, by name — the same for every machine a step is timed on, so
    :func:`predict` makes it once."""
    static = static or _static_fields(step.meta)
    timed: dict[int, list[dict]] = {}
    for s in step.spans:
        rank, lane, kind, meta = static[s.name]
        if s.end_us - s.start_us <= 0 and lane == "compute":
            continue
        timed.setdefault(rank, []).append(
            {"rank": rank, "lane": lane, "kind": kind, "start_s": s.start_us * 1e-6,
             "dur_s": (s.end_us - s.start_us) * 1e-6, **meta})
    out = [e for ranks in step.alike for e in timed.get(ranks[0], [])]
    return all_ranks(out, step.alike, step.pipelines) if every_rank else out


def _static_fields(meta: dict) -> dict[str, tuple]:
    return {name: (job.rank, job.lane, job.kind,
                   {k: job.meta[k] for k in CONTRACT_META if k in job.meta})
            for name, job in meta.items()}


def predict(p: TrainParams, *machines: Machine) -> list[tuple[list[dict], list[dict], float]]:
    """(events, each rank's split, step time) of one step of ``p`` on each machine. The events
    are the scheduled ranks' (each stage's first: ``step.alike``), by start and rank on the
    first machine — :func:`all_ranks` gives the other ranks theirs; the splits are every
    rank's."""
    out, static = [], None
    for k, step in enumerate(program_step(p, machines)):
        static = static or _static_fields(step.meta)
        events = events_of(step, static, every_rank=False)
        if k == 0:
            events.sort(key=itemgetter("start_s", "rank"))
        out.append((events, predicted_split(events, p.world, step.makespan, step.alike),
                    step.makespan))
    return out


def all_ranks(lead: list[dict] | tuple[dict, ...], alike: tuple[tuple[int, ...], ...],
               pipelines: dict[int, tuple[int, ...]]) -> list[dict]:
    """Every rank's events, by start and rank, from the stages' first ranks' (``lead``): a
    stage's other ranks have the same, their pipeline's peers for the sends."""
    first = {ranks[0]: ranks for ranks in alike}
    mine: dict[int, list[dict]] = {r: [] for r in first}
    for e in lead:
        mine[e["rank"]].append(e)
    out = []
    for r, ranks in first.items():
        out += mine[r]
        stage_of = {peer: k for k, peer in enumerate(pipelines[r])}
        for rank in ranks[1:]:
            pipeline = pipelines[rank]
            out += [{**e, "rank": rank, **({"peer": pipeline[stage_of[e["peer"]]]}
                                            if "peer" in e else {})} for e in mine[r]]
    out.sort(key=itemgetter("start_s", "rank"))
    return out


@dataclass(frozen=True)
class TrainTrace:
    params: TrainParams
    lead_events: tuple[dict, ...]
    """the events of each stage's first rank, by start and rank: a stage's ranks share one
    timeline (app.sim.train.program), so the deck and the player's captions read these, and
    every rank's (:attr:`events`, the contract's) are made from them when asked for"""
    rank_split: tuple[dict, ...]
    step_s: float
    gpu_step_s: float
    gpu_split: dict
    memory: tuple[RankMemory, ...]
    frames: tuple[TrainFrame, ...]

    @cached_property
    def layout(self) -> Layout:
        return Layout.of(self.params.layout_params())

    @cached_property
    def alike(self) -> tuple[tuple[int, ...], ...]:
        """The ranks that share one timeline (a stage's: app.sim.train.program)."""
        return stage_ranks(self.layout)

    @property
    def events(self) -> tuple[dict, ...]:
        """Every rank's events, by start and rank (the contract's ``events``), made anew each
        time: kept beside the trace, they would hold four times its bytes where the caches do
        not count them (app/caches.py sizes a trace when it is kept)."""
        layout = self.layout
        pipelines = {r: layout.group_of(r, "pp") for r in range(layout.world)}
        return tuple(all_ranks(self.lead_events, self.alike, pipelines))

    @property
    def predicted(self) -> dict:
        return mean_split(list(self.rank_split))

    @property
    def calibration(self) -> dict:
        p = self.params
        return {"gflops": p.gflops, "kernel_us": p.kernel_us, "alpha_us": p.alpha_us,
                "link_gbs": p.link_gbs}

    @property
    def param_count(self) -> int:
        return param_count(Shape.of(self.params))

    def to_dict(self) -> dict:
        p, layout = self.params, self.layout
        return {
            "world": p.world,
            "ranks": layout.rank_rows(),
            "groups": {k: [list(g) for g in layout.groups(k)] for k in GROUP_KINDS},
            "events": list(self.events),
            "predicted": self.predicted,
            "predicted_per_rank": list(self.rank_split),
            "calibration": self.calibration,
            "gpu": {"calibration": GPU, "predicted": self.gpu_split},
            "param_count": self.param_count,
            "tokens_per_step": p.batch * p.seq,
            "bytes_per_element": ELEMENT_BYTES[p.dtype],
            "memory": [m.to_dict() for m in self.memory],
            "frames": [f.to_dict() for f in self.frames],
        }


def intro(p: TrainParams, step_s: float) -> str:
    sizes = " · ".join(f"{n} {getattr(p, n)}" for n in ("tp", "cp", "pp", "dp", "ep")
                       if getattr(p, n) > 1) or "one rank"
    moe = f", {p.experts} experts top-{p.top_k}" if p.moe else ""
    return (f"One step of a {p.layers}-block GPT (hidden {p.hidden}{moe}) on "
            f"{p.world} rank{'s' if p.world > 1 else ''}: {sizes}, {p.microbatches} "
            f"micro-batch{'es' if p.microbatches > 1 else ''} per replica, "
            f"{'GPipe' if p.schedule == 'gpipe' else '1F1B'}. Per rank: compute (F forward, "
            f"B backward) over its messages, coloured by group; faint marks are to come. "
            f"Predicted: {step_s * 1e3:.3g} ms.")


def simulate(p: TrainParams) -> TrainTrace:
    (events, rows, step_s), (_, gpu_rows, gpu_step) = predict(p, Machine.of(p), Machine(**GPU))
    split = mean_split(rows)
    frames = make_frames(p, events, stage_ranks(Layout.of(p.layout_params())), step_s, split,
                         intro(p, step_s))
    return TrainTrace(p, tuple(events), tuple(rows), step_s, gpu_step, mean_split(gpu_rows),
                      per_rank(p), frames)
