"""Comparing a real pipelined training step (workers/pipeline.py) with the simulation.

The worker runs torch.distributed.pipelining's own schedule class on a small float64 MLP and
reports, per rank, the order in which the schedule called into its stages, plus the loss and
every gradient of the pipelined step and of the same model run whole. The check passes when
each rank's recorded order is exactly the simulation's order for that rank, and loss and
gradients agree with the unpipelined model to float64 rounding.
"""

from __future__ import annotations

from app.sim.pipeline.schedules import format_order
from app.jobs.runner import Check, Verdict

TOLERANCE = 1e-12
MAX_MICROBATCHES = 64
TORCH_CLASS = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
               "interleaved_1f1b": "ScheduleInterleaved1F1B", "zbv": "ScheduleZBVZeroBubble",
               "dualpipev": "ScheduleDualPipeV"}


def unsupported(params) -> tuple[str, str] | None:
    """Why these parameters cannot run for real here, as (parameter, message)."""
    if params.schedule not in TORCH_CLASS:
        return "schedule", (f"torch 2.13 has no {params.schedule} schedule class to run; the "
                            f"real run covers {', '.join(TORCH_CLASS)}")
    if params.schedule == "1f1b" and params.microbatches < params.stages:
        return "microbatches", (f"torch's Schedule1F1B needs microbatches ≥ stages (got "
                                f"{params.microbatches} < {params.stages}); Megatron's 1F1B, "
                                f"simulated here, does not")
    if params.microbatches > MAX_MICROBATCHES:
        return "microbatches", (f"real runs on this server are limited to {MAX_MICROBATCHES} "
                                f"micro-batches (got {params.microbatches})")
    return None


def compare(params, trace, report: dict) -> Verdict:
    expected = [[str(a) for a in order] for order in trace.schedule.orders]
    recorded = report["orders"]
    rows, mismatched = [], 0
    for r, (want, got) in enumerate(zip(expected, recorded)):
        first = next((k for k, (a, b) in enumerate(zip(want, got)) if a != b),
                     None if len(want) == len(got) else min(len(want), len(got)))
        if first is not None:
            mismatched += 1
        rows.append({"rank": r, "actions": len(got), "same": first is None,
                     "first_difference": None if first is None else first,
                     "simulated": format_order(trace.schedule.orders[r][first:first + 6])
                     if first is not None else "",
                     "recorded": " ".join(got[first:first + 6]) if first is not None else ""})
    if len(recorded) != len(expected):
        mismatched += 1
    grad_diff = 0.0
    per_stage = []
    for s, (got, want) in enumerate(zip(report["grads"], report["reference_grads"])):
        diff = max((abs(a - b) for g, w in zip(got, want) for a, b in zip(g, w)), default=0.0)
        per_stage.append(diff)
        grad_diff = max(grad_diff, diff)
    loss_diff = abs(report["loss"] - report["reference_loss"])
    worst = max(grad_diff, loss_diff)
    passed = mismatched == 0 and worst <= TOLERANCE
    detail = (f"torch's {report['torch_class']} on {report['world']} ranks: "
              f"{'every rank ran exactly the simulated order' if not mismatched else f'{mismatched} rank(s) ran a different order'}"
              f"; loss {report['loss']:.12g} vs {report['reference_loss']:.12g} unpipelined, "
              f"gradients of {len(per_stage)} stages differ by at most {grad_diff:.2g} "
              f"(float64; tolerance {TOLERANCE:g}).")
    return Verdict(passed, float(f"{worst:.3g}"), detail, {
        "table": {
            "caption": "Order each rank executed, against the simulation",
            "header": ["rank", "actions run", "order", "first difference"],
            "rows": [[row["rank"], row["actions"], "✓ same" if row["same"] else "✗ differs",
                      "" if row["same"] else f"at #{row['first_difference']}: ran "
                      f"{row['recorded']} — simulated {row['simulated']}"] for row in rows]},
        "stage_grad_diff": per_stage, "step_us": report.get("step_us")})


def worker_argv(p) -> list[str]:
    """workers/pipeline.py's command line for ``p``."""
    return ["--schedule", p.schedule, "--microbatches", str(p.microbatches),
            "--chunks", str(p.chunks)]


CHECK = Check(
    worker="workers/pipeline.py",
    world=lambda p: p.stages,
    args=worker_argv,
    compare=compare,
    unsupported=unsupported,
)
