"""Comparing a real run of chapter 4's tiny model (workers/zero.py) with the simulation.

On top of :func:`app.scenes.zero.check.compare_training` (parameters within 1e-6 of the simulation's,
every rank's bytes exactly as predicted), DDP runs are checked for their buckets: the buckets
torch's DDP built for the tiny model in each step (seen by a comm hook) must be the simulation's,
and torch's own bucketing function, applied to the real model's tensors, must cut them into the
simulation's buckets.
"""

from __future__ import annotations

from app.sim.collectives.cost import BYTES_PER_ELEMENT
from app.sim.data_parallel.simulate import ALGORITHM
from app.sim.tiny_mlp import TinyMLP
from app.jobs.runner import Check, Verdict
from app.scenes.zero.check import compare_training


def compare(params, trace, report: dict) -> Verdict:
    problems = []
    if params.mode == "ddp":
        tiny = [[[_size(trace, t) for t in bucket] for bucket in step] for step in trace.tiny_buckets]
        if report.get("buckets") != tiny:
            problems.append(f"torch's DDP built buckets {report.get('buckets')} (tensor sizes per "
                            f"step), the simulation {tiny}")
        expected = [list(b.tensors) for b in trace.timeline.buckets]
        got = report.get("scenario_buckets")
        if got != expected:
            problems.append(f"torch's bucketing cut {params.preset}'s gradients into "
                            f"{len(got or [])} buckets, the simulation into {len(expected)}")
    verdict = compare_training(trace.training, report, problems)
    if params.mode == "ddp" and not problems:
        verdict = Verdict(verdict.passed, verdict.max_abs_diff,
                          verdict.detail + f" DDP built the simulation's buckets, and torch's "
                          f"bucketing cuts {params.preset} into the same {len(trace.timeline.buckets)}.",
                          verdict.report)
    return verdict


def _size(trace, tensor: int) -> int:
    p = trace.params
    return TinyMLP(p.mlp_layers, p.mlp_width).tensor_sizes()[tensor]


def worker_argv(p) -> list[str]:
    """workers/zero.py's command line for chapter 4's ``p`` (DDP: its buckets too)."""
    args = ["--algorithm", ALGORITHM[p.mode], "--steps", str(p.steps), "--seed", str(p.seed),
            "--mlp-layers", str(p.mlp_layers), "--mlp-width", str(p.mlp_width),
            "--micro-batch", str(p.micro_batch)]
    if p.mode == "ddp":
        cap = p.bucket_cap_mb   # None: DDP(model) with bucket_cap_mb unset
        args += ["--bucket-mb", repr(p.bucket_mb), "--scenario-buckets",
                 f"{p.preset},{BYTES_PER_ELEMENT[p.dtype]},{'' if cap is None else repr(cap)}"]
        if p.explicit_cap:
            args += ["--explicit-cap"]
    return args


CHECK = Check(worker="workers/zero.py", world=lambda p: p.dp, args=worker_argv, compare=compare)
