"""Comparing a real collective run (workers/collective.py) with the simulation.

The worker reports, per rank: the output of torch.distributed's own collective, and its work
buffer after every step of the algorithm replayed with real sends and receives. Both are
compared with the trace — the first with the final outputs, the second frame by frame on every
element the simulation says is filled. Inputs are small integers, so every difference must be 0.
"""

from __future__ import annotations

import numpy as np

from app.sim.collectives import cost
from app.jobs.runner import Check, Verdict


def compare(params, trace, report: dict) -> Verdict:
    """``report``: the worker's whole report (its first case) or one of its ``cases``."""
    case = report["cases"][0] if "cases" in report else report
    world = params.world
    problems = []
    if report.get("world", world) != world:
        problems.append(f"the job ran {report['world']} ranks, the simulation {world}")
    # 1. torch's collective against the simulation's outputs
    op_diff = 0.0
    for r in range(world):
        expected = trace.outputs[r]
        got = case["torch_output"][r]
        if expected is None:
            continue
        got = np.asarray(got, dtype=float)
        if got.shape != expected.shape:
            problems.append(f"rank {r}: torch returned {got.size} elements, expected "
                            f"{expected.size}")
            op_diff = float("inf")
            continue
        op_diff = max(op_diff, float(np.abs(got - expected).max(initial=0.0)))
    # 2. the replayed algorithm, step by step, against every frame
    replay = case["replay"]  # [step][rank][element]
    steps = len(trace.frames) - 1
    if len(replay) != steps:
        problems.append(f"the worker ran {len(replay)} steps, the simulation {steps}")
    table = []
    for k, step_buffers in enumerate(replay[:steps], start=1):
        got = np.asarray(step_buffers, dtype=float)  # (world, buffer_len)
        mask = trace.filled[k]
        diff = np.where(mask, np.abs(got - trace.values[k]), 0.0).max(axis=1)
        table.append([_number(d) for d in diff])
    replay_diff = max((max(row) for row in table), default=0.0)
    worst = max(op_diff, replay_diff)
    timing = case.get("timing")
    if timing:
        links = cost.Links(params.alpha_us, params.intra_node_gbs, params.inter_node_gbs,
                           params.gpus_per_node)
        size = params.count * cost.BYTES_PER_ELEMENT[params.dtype]
        timing = {**timing, "op": params.op,
                  "estimate_us": cost.time_us(cost.step_costs(trace.schedule, links),
                                              params.alpha_us, size)}
    passed = worst == 0 and not problems
    detail = (f"torch.distributed.{_torch_name(params.op)} differs by at most {_number(op_diff)}; "
              f"the send/recv replay of {params.algorithm} differs by at most "
              f"{_number(replay_diff)} over {len(table)} steps × {world} ranks.")
    if problems:
        detail += " " + "; ".join(problems)
    return Verdict(passed, _number(worst), detail, {"diff_table": table, "timing": timing})


def _number(value: float) -> float:
    value = float(value)
    return int(value) if value.is_integer() else value


def _torch_name(op: str) -> str:
    return {"reduce_scatter": "reduce_scatter_single", "all_gather": "all_gather_single",
            "all_to_all": "all_to_all_single"}.get(op, op)


def torch_call(op: str, root: int) -> str:
    """The torch.distributed call with the semantics the scene shows."""
    return {
        "all_reduce": "dist.all_reduce(t)  # t: count elements, summed in place",
        "reduce_scatter": "dist.reduce_scatter_single(out, t)  # out: count/world elements "
                          "(reduce_scatter_tensor before torch 2.13)",
        "all_gather": "dist.all_gather_single(out, t)  # t: count/world, out: count "
                      "(all_gather_into_tensor before torch 2.13)",
        "broadcast": f"dist.broadcast(t, src={root})",
        "reduce": f"dist.reduce(t, dst={root})",
        "all_to_all": "dist.all_to_all_single(out, t)  # block r of t goes to rank r",
    }[op]


def worker_argv(p) -> list[str]:
    """workers/collective.py's command line for ``p``."""
    return ["--op", p.op, "--algorithm", p.algorithm, "--count", str(p.count),
            "--seed", str(p.seed), "--root", str(p.root)]


CHECK = Check(
    worker="workers/collective.py",
    world=lambda p: p.world,
    args=worker_argv,
    compare=compare,
)
