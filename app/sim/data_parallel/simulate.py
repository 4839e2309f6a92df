"""Chapter 4, data parallelism: DataParallel, DistributedDataParallel and FSDP, on a real-sized
model's step timeline and on the tiny model trained for real.

``simulate(params)`` builds one training step of the chosen preset on ``dp`` GPUs as a timeline
(:mod:`app.sim.data_parallel.step_timeline`: DDP's bucketed all-reduce overlapping backward, FSDP's gathers
with or without prefetch, DataParallel's GPU 0 doing the rest alone) and cuts it into frames at
the moments something starts or ends, so the player grows the timeline step by step. The tiny
MLP is trained for ``steps`` steps under all three (:mod:`app.sim.data_parallel.training`): their
parameters agree to rounding (the additions happen in different orders), and each rank's bytes
per step are counted from the schedules. DDP's buckets of the tiny model are those torch builds:
one bucket in the first step, rebuilt in gradient-ready order from the second.
References: Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel
Training" (VLDB; buckets, overlap, the bucket-size trade-off); Zhao et al. 2023, "PyTorch FSDP"
(VLDB; sharding, prefetch); PyTorch's DataParallel documentation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from app.sim.data_parallel import buckets as ddp_buckets

from app.sim.data_parallel import fsdp_timeline

from app.sim.data_parallel import step_timeline
from app.sim.collectives.cost import BYTES_PER_ELEMENT, Links
from app.sim.data_parallel.training import Training, train
from app.sim.mesh import local_rank, node_of
from app.catalog.models import PRESETS
from app.sim.tiny_mlp import TinyMLP
from app.sim.timeline import Span
from app.sim.trace import Frame, plain

if TYPE_CHECKING:
    from app.sim.data_parallel.params import DataParallelParams

MODES = ("dp", "ddp", "fsdp")
ALGORITHM = {"dp": "dp", "ddp": "ddp", "fsdp": "zero3"}
MAX_FRAMES = 24
SWEEP_MB = tuple(2.0 ** k for k in range(-1, 12, 2))       # ½ MiB, 2 MiB … 2 GiB
TINY_ELEMENT_BYTES = 8                                      # the tiny model trains in float64


@dataclass(frozen=True)
class Moment:
    """A frame: the timeline up to ``t_us``."""

    t_us: float
    started: tuple[Span, ...]
    ended: tuple[Span, ...]


@dataclass(frozen=True)
class DataParallelTrace:
    params: DataParallelParams
    timeline: step_timeline.StepTimeline
    moments: tuple[Moment, ...]
    frames: tuple[Frame, ...]
    tiny: dict[str, Training]                     # mode → training of the tiny model
    tiny_buckets: tuple[tuple[tuple[int, ...], ...], ...]
    sweep: tuple[tuple[float, float, float], ...]  # (bucket MiB, step µs, exposed µs)
    comparison: step_timeline.StepTimeline | None    # FSDP: the other prefetch; DP: DDP

    @property
    def training(self) -> Training:
        return self.tiny[self.params.mode]

    def torchrun(self) -> dict:
        p = self.params
        per_node = min(p.dp, p.gpus_per_node)
        nodes = -(-p.dp // per_node)
        return {"nodes": nodes, "nproc_per_node": per_node, "world_size": p.dp,
                "uneven": p.dp % per_node != 0,
                "ranks": [{"rank": r, "node": node_of(r, per_node),
                           "local_rank": local_rank(r, per_node)} for r in range(p.dp)]}

    def to_dict(self) -> dict:
        p, t = self.params, self.timeline
        ddp = self.tiny["ddp"].final_params
        return {
            "mode": p.mode, "dp": p.dp, "preset": p.preset, "steps": p.steps, "seed": p.seed,
            "final_params": plain(self.training.final_params),
            "max_difference_from_ddp": {m: float(np.abs(tr.final_params - ddp).max())
                                        for m, tr in self.tiny.items()},
            "sent_elements_per_step": plain(self.training.sent),
            "tiny_buckets": [[list(b) for b in step] for step in self.tiny_buckets],
            "step_us": t.step_us, "compute_us": t.compute_us, "comm_us": t.comm_us,
            "exposed_comm_us": t.exposed_comm_us, "hidden_fraction": t.hidden_fraction,
            "peak_gathered_elements": t.peak_gathered_elements,
            "buckets": [{"index": b.index, "tensors": list(b.tensors), "elements": b.elements,
                         "bytes": b.bytes} for b in t.buckets],
            "bucket_sweep": [{"bucket_mb": mb, "step_us": step, "exposed_comm_us": exposed}
                             for mb, step, exposed in self.sweep],
            "spans": [s.to_dict() for s in t.spans],
            "torchrun": self.torchrun(),
            "frames": [{"step": f.step, "caption": f.caption, "t_us": m.t_us}
                       for f, m in zip(self.frames, self.moments)],
        }


def workload(p: DataParallelParams) -> step_timeline.Workload:
    links = Links(p.alpha_us, p.intra_node_gbs, p.inter_node_gbs, p.gpus_per_node)
    return step_timeline.Workload(PRESETS[p.preset], p.micro_batch, p.gpu_tflops, p.dp, links,
                                  BYTES_PER_ELEMENT[p.dtype])


def tiny_buckets(model: TinyMLP, steps: int, bucket_mb: float | None):
    """DDP's buckets of the tiny model in each step (tensor indices, in bucket order)."""
    first = ddp_buckets.buckets(model.tensor_sizes(), TINY_ELEMENT_BYTES, bucket_mb, True)
    later = ddp_buckets.buckets(model.tensor_sizes(), TINY_ELEMENT_BYTES, bucket_mb)
    return tuple(tuple(b.tensors for b in (first if k == 0 else later)) for k in range(steps))


def simulate(p: DataParallelParams) -> DataParallelTrace:
    w = workload(p)
    other = None
    if p.mode == "ddp":
        timeline = step_timeline.ddp(w, ddp_buckets.cap_mb(p))
        # each size passed as bucket_cap_mb, this run's as it is set (perhaps left unset)
        sweep = tuple((mb, *step_timeline.ddp_summary(
            w, ddp_buckets.cap_mb(p) if mb == p.bucket_mb else mb))
            for mb in sorted(set(SWEEP_MB) | {p.bucket_mb}))
    elif p.mode == "fsdp":
        timeline = fsdp_timeline.fsdp(w, p.prefetch)
        other = fsdp_timeline.fsdp(w, not p.prefetch)
        sweep = ()
    else:
        timeline = step_timeline.data_parallel(w, drawn_gpus=8)
        other = step_timeline.ddp(w, None)   # DDP(model) as is
        sweep = ()
    model = TinyMLP(p.mlp_layers, p.mlp_width)
    buckets = tiny_buckets(model, p.steps, ddp_buckets.cap_mb(p))
    tiny = {mode: train(model, ALGORITHM[mode], p.dp, p.micro_batch, p.steps, p.seed,
                        buckets if mode == "ddp" else ()) for mode in MODES}
    moments = _moments(timeline)
    frames = tuple(Frame(k, _caption(p, timeline, moments, k), (), "timeline")
                   for k in range(len(moments)))
    return DataParallelTrace(p, timeline, moments, frames, tiny, buckets, sweep, other)


TOL = 1e-6
"""The moments' times are task ends rounded to 1e-6 µs: a task belongs to the moment of its
rounded end (it used to fall into the next one, leaving a moment with nothing finished)."""


def _moments(t: step_timeline.StepTimeline) -> tuple[Moment, ...]:
    """Frame times: 0, then the ends of tasks worth a step (compute phases, collectives), at
    most MAX_FRAMES, always including the end of the step."""
    ends = sorted({round(s.end_us, 6) for s in t.spans if s.end_us > s.start_us})
    if len(ends) > MAX_FRAMES - 1:
        picks = np.linspace(0, len(ends) - 1, MAX_FRAMES - 1).round().astype(int)
        ends = [ends[i] for i in sorted(set(picks.tolist()))]
    times = [0.0] + ends
    out = []
    tol = TOL
    for k, t_us in enumerate(times):
        before = times[k - 1] + tol if k else -1.0
        started = tuple(s for s in t.spans if before < s.start_us <= t_us + tol
                        or (k == 0 and s.start_us == 0))
        ended = tuple(s for s in t.spans if before < s.end_us <= t_us + tol
                      and s.end_us > s.start_us)
        out.append(Moment(t_us, started if k else (), ended))
    return tuple(out)


def _caption(p, t: step_timeline.StepTimeline, moments, k: int) -> str:
    from app.draw.fmt import human_time_us
    m = moments[k]
    if k == 0:
        intro = {
            "dp": f"torch.nn.DataParallel: one process drives {p.dp} GPUs of one machine. GPU 0 "
                  f"holds the model and the batch; every step it replicates the parameters, "
                  f"scatters the inputs, gathers the outputs, computes the loss, and alone runs "
                  f"the optimizer.",
            "ddp": f"DistributedDataParallel on {p.dp} ranks, one process each: every rank keeps "
                   f"its replica, runs forward and backward on its own {p.micro_batch} "
                   f"sequence{'s' if p.micro_batch > 1 else ''}, and all-reduces gradients in "
                   f"{len(t.buckets)} bucket{'s' if len(t.buckets) != 1 else ''} while "
                   f"backward is still running — {ddp_buckets.describe(ddp_buckets.cap_mb(p))}.",
            "fsdp": f"FSDP (ZeRO-3) on {p.dp} ranks: each rank stores 1/{p.dp} of every layer; a "
                    f"layer is all-gathered just before it computes and freed after, its "
                    f"gradients reduce-scattered; prefetch {'on' if p.prefetch else 'off'}.",
        }[p.mode]
        return (f"Before the step. {intro} The whole step will take "
                f"{human_time_us(t.step_us)}.")
    start = moments[k - 1].t_us
    head = f"{human_time_us(start)} → {human_time_us(m.t_us)}: "
    compute = [s for s in t.spans if s.kind in COMPUTE]

    def beside(c):          # was a computation running when communication c ended?
        return any(s.start_us < c.end_us < s.end_us for s in compute)
    comm_ended = [s for s in m.ended if s.kind not in COMPUTE]
    hidden = [s for s in comm_ended if beside(s)]
    exposed = [s for s in comm_ended if not beside(s)]
    parts = [text for text in (
        _describe([s for s in m.ended if s.kind in COMPUTE], "finished"),
        _describe(hidden, "finished") + (" behind the computation (hidden)" if hidden else ""),
        _describe(exposed, "finished") + (" with no computation beside it: the ranks waited "
                                          "(exposed)" if exposed and p.mode != "dp" else ""),
        _describe([s for s in m.started if s.kind not in COMPUTE and s not in m.ended],
                  "started"))
        if text]
    def runs(s):
        return s.start_us < m.t_us - TOL and m.t_us + TOL < s.end_us
    waiting = [s for s in t.spans if s.kind not in COMPUTE and runs(s)]
    if waiting:
        parts.append(_describe(waiting, "running") + " (overlapping the computation)"
                     if any(runs(s) for s in compute) else _describe(waiting, "running"))
    if not parts:      # nothing ended (a sampled moment): say what is running then
        running = [s for s in t.spans if runs(s)]
        parts.append(_describe(running, "still running") or "idle")
    text = head + "; ".join(parts) + "."
    if k == len(moments) - 1:
        text += (f" Step done in {human_time_us(t.step_us)}: computing {human_time_us(t.compute_us)}"
                 f", communicating {human_time_us(t.comm_us)}, of which "
                 f"{human_time_us(t.exposed_comm_us)} is not hidden behind computation "
                 f"({t.hidden_fraction:.0%} hidden).")
    return text


COMPUTE = ("forward", "backward", "optimizer", "loss")
WORDS = {"forward": "forward", "backward": "backward", "optimizer": "the optimizer step",
         "loss": "the loss", "all_reduce": "all-reduce", "all_gather": "all-gather",
         "reduce_scatter": "reduce-scatter", "broadcast": "broadcast", "reduce": "reduce",
         "scatter": "scatter", "gather": "gather"}


def _what(span: Span) -> str:
    """What a task works on, in a word: "layer 11", "bucket 3", "the head", "GPU 2"."""
    if span.name.startswith("bucket "):
        return span.name
    found = re.search(r"(layer|GPU) (\d+)", span.name)
    if found:
        return f"{found[1]} {found[2]}"
    if "root" in span.name or "head" in span.name or "embeddings" in span.name:
        return "the embeddings and head"
    return ""


def _describe(spans, verb: str) -> str:
    """"finished backward of layers 11–9; all-reduce of buckets 0–2" from a list of tasks."""
    by_kind: dict[str, list[str]] = {}
    for s in spans:
        items = by_kind.setdefault(s.kind, [])
        what = _what(s)
        if what and what not in items:
            items.append(what)
    parts = []
    for kind, items in by_kind.items():
        word = WORDS.get(kind, kind)
        if items and kind != "optimizer":
            parts.append(f"{word} of {_span_of(items)}")
        else:                                  # DataParallel's one-off tasks say what they do
            parts.append(next(s.detail for s in spans if s.kind == kind) or word)
    return f"{verb} " + ", ".join(parts) if parts else ""


def _span_of(items: list[str]) -> str:
    """["layer 11", "layer 10", "layer 9"] → "layers 11–9"."""
    if len(items) == 1:
        return items[0]
    noun = items[0].split()[0]
    numbered = [i.split()[-1] for i in items if i.split()[0] == noun]
    extra = [i for i in items if i.split()[0] != noun]
    text = f"{noun}s {numbered[0]}–{numbered[-1]}" if len(numbered) > 1 else items[0]
    return text + "".join(f" and {e}" for e in extra)


