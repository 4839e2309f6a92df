"""Comparing a real training run (workers/zero.py) with the simulation, for chapters 4 and 5.

The worker trains the tiny model twice on gloo (or NCCL): with torch's own implementation (DDP,
ZeroRedundancyOptimizer, FSDP2, or one process on the whole batch for DataParallel) and with the
hand-written algorithm the scene draws, counting the bytes each rank hands to
torch.distributed. The run passes when both final parameter vectors are within 1e-6 (relative to
the largest parameter) of the simulation's on every rank, and every rank sent exactly the bytes
the simulation predicts in every step (elements × 8, float64).
"""

from __future__ import annotations

import numpy as np

from app.jobs.runner import Check, Verdict

TOLERANCE = 1e-6


def relative_diff(got, expected: np.ndarray) -> float:
    got = np.asarray(got, dtype=float)
    if got.shape != expected.shape:
        return float("inf")
    return float(np.abs(got - expected).max(initial=0.0) / max(np.abs(expected).max(initial=0.0),
                                                                1e-12))


def compare_training(training, report: dict, extra: list[str] | None = None) -> Verdict:
    """The part every data-parallel scene checks: parameters and bytes."""
    expected = training.final_params
    problems = list(extra or [])
    torch_diff = max(relative_diff(p, expected) for p in report["torch_params"])
    replay_diff = max(relative_diff(p, expected) for p in report["replay_params"])
    predicted = training.sent * report.get("element_bytes", 8)            # (steps, ranks)
    sent = np.asarray(report["sent_bytes"], dtype=np.int64)
    if sent.shape != predicted.shape:
        problems.append(f"the worker reported {sent.shape} byte counts, expected "
                        f"{predicted.shape} (steps × ranks)")
        table = []
    else:
        table = (sent - predicted).tolist()
        wrong = np.argwhere(sent != predicted)
        if len(wrong):
            k, r = wrong[0]
            problems.append(f"rank {r} sent {sent[k, r]} bytes in step {k + 1}, the simulation "
                            f"predicts {predicted[k, r]}")
    for name, diff in (("torch's run", torch_diff), ("the hand-written run", replay_diff)):
        if not diff <= TOLERANCE:
            problems.append(f"{name} ends {diff:.3g} (relative) from the simulation's parameters, "
                            f"more than {TOLERANCE:g}")
    busiest = int(predicted[-1].max()) if predicted.size else 0
    detail = (f"{report.get('torch_impl', 'torch')} ends {torch_diff:.2g} from the simulation's "
              f"parameters (relative), the hand-written run {replay_diff:.2g}; "
              f"{'every rank sent exactly the predicted bytes' if not len(table) or not np.any(table) else 'byte counts differ'}"
              f" (busiest rank: {busiest} bytes in the last step).")
    if problems:
        detail += " " + "; ".join(problems)
    return Verdict(not problems, max(torch_diff, replay_diff), detail,
                   {"diff_table": table, "timing": None,
                    "diff_label": "Bytes each rank sent minus the bytes predicted, per step"})


def compare(params, trace, report: dict) -> Verdict:
    return compare_training(trace.training, report)


def worker_argv(p) -> list[str]:
    """workers/zero.py's command line for ``p`` (the hand-written algorithm: zero<stage>)."""
    return ["--algorithm", f"zero{p.stage}", "--steps", str(p.steps), "--seed", str(p.seed),
            "--mlp-layers", str(p.mlp_layers), "--mlp-width", str(p.mlp_width),
            "--micro-batch", str(p.micro_batch)]


CHECK = Check(worker="workers/zero.py", world=lambda p: p.dp, args=worker_argv, compare=compare)
