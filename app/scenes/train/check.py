"""Judging a real run of the training framework (workers/train/train.py) against one process,
and its measured step against the cost model.

The worker trains the layout and, on rank 0, the same model, data and seed in one process; its
report carries both runs' losses, every tensor's largest difference once gathered to full
size, how far the replicas of a tensor drift apart, each rank's timeline of one step, and the
machine it measured. Passed: in float64 every step's loss and every final tensor agree with
the one-process run to ≤ 1e-9 relative (DESIGN.md; float32 to ≤ 1e-3, the difference shown).

Predicted against measured: the scene's cost model is run again with the calibration the
worker measured (its matmul rate, per-op cost, α and β), and its step split — compute,
communication nothing hid, bubble — is set beside the one measured by the same rules
(app.sim.train.split). The ratio says how well a model of this machine describes it; the
page's own prediction (its calibration fields) and a GPU node's say how far this is from a
cluster.
"""

from __future__ import annotations

from pydantic import ValidationError

from app.export.trace import chrome_trace
from app.jobs.runner import Check, Verdict
from app.sim.train.params import MACHINE_FIELDS, RUN_FIELDS
from app.sim.train.split import mean_split, measured_split

TOLERANCE = {"float64": 1e-9, "float32": 1e-3}
SPLIT = ("step_s", "compute_s", "comm_exposed_s", "bubble_s")


def worker_argv(p) -> list[str]:
    """workers/train/train.py's command line for ``p`` (every field it takes, explicitly)."""
    out = []
    for name in RUN_FIELDS:
        value = getattr(p, name)
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            if value:
                out.append(flag)
            continue
        out += [flag, str(value)]
    return out


def calibrated(p, calibration: dict):
    """``p`` with the machine the run measured in place of the page's (unchanged if a
    measurement falls outside the fields' ranges)."""
    update = {k: float(calibration[k]) for k in MACHINE_FIELDS if k in calibration}
    try:
        return type(p).model_validate({**p.model_dump(), **update})
    except ValidationError:
        return p


def measured(report: dict, world: int) -> tuple[dict, list[dict]]:
    """The recorded step's split, per rank and averaged (the last step's time per rank)."""
    steps = [row[-1] for row in report["step_s"]]
    rows = measured_split(report["events"], world, steps)
    return mean_split(rows), rows


def compare(params, trace, report: dict) -> Verdict:
    from app.sim.train.simulate import simulate      # here: the page's trace is already made
    tol = TOLERANCE[params.dtype]
    loss_diff = float(report["max_rel_loss_diff"])
    param_diff = max(t["max_abs_diff"] / t["max_abs"] if t["max_abs"] else t["max_abs_diff"]
                     for t in report["tensors"])
    spread = float(report.get("replica_spread", 0.0))
    aux = params.aux_loss_coeff > 0 and params.moe
    aux_diff = float(report.get("max_rel_aux_loss_diff", 0.0)) if aux else 0.0
    passed = loss_diff <= tol and param_diff <= tol and spread <= tol and aux_diff <= tol
    world = report["world"]
    split, rows = measured(report, world)
    machine = report.get("calibration", {})
    again = simulate(calibrated(params, machine)) if machine else trace
    predicted = again.predicted
    ratio = split["step_s"] / predicted["step_s"] if predicted["step_s"] else None
    nodes = report.get("nodes", 1)
    detail = (f"{params.steps} step{'s' if params.steps > 1 else ''} of {world} ranks"
              f"{f' on {nodes} launchers' if nodes > 1 else ''} against one process, "
              f"{params.dtype}: losses agree to {loss_diff:.1e} relative"
              + (f" (the load-balancing loss to {aux_diff:.1e})" if aux else "") +
              f", the final "
              f"parameters (gathered to full tensors) to {param_diff:.1e} "
              f"(tolerance {tol:g}); replicas of a tensor differ by at most {spread:.1e}. "
              f"Measured step {split['step_s'] * 1e3:.3g} ms; the cost model with this "
              f"machine's calibration predicts {predicted['step_s'] * 1e3:.3g} ms"
              + (f" (measured / predicted = {ratio:.2f})." if ratio else "."))
    losses = report["losses"]
    reference = report["reference_losses"]
    table = {"caption": "Loss per step: the layout against one process",
             "header": ["step", "loss (layout)", "loss (one process)", "relative difference"],
             "rows": [[k + 1, f"{a:.12f}", f"{b:.12f}", f"{abs(a - b) / abs(b):.1e}"]
                      for k, (a, b) in enumerate(zip(losses, reference))]}
    if aux:
        table["header"] += ["load-balancing loss (layout)", "(one process)"]
        for row, a, b in zip(table["rows"], report["aux_losses"], report["reference_aux_losses"]):
            row += [f"{a:.12f}", f"{b:.12f}"]
    split_rows = [[name, *(f"{part[k] * 1e3:.3g} ms" for k in SPLIT)]
                  for name, part in (("measured", split), ("predicted, this machine", predicted),
                                     ("predicted, page's machine", trace.predicted),
                                     ("predicted, an H100 node", trace.gpu_split))]
    notes = [f"Calibration measured by the run (median of its ranks): "
             f"{machine.get('gflops', 0):.3g} GFLOP/s per rank, {machine.get('kernel_us', 0):.3g} µs "
             f"per op, α = {machine.get('alpha_us', 0):.3g} µs, β = "
             f"{machine.get('link_gbs', 0):.3g} GB/s." if machine else "",
             f"An H100 node would take about {trace.gpu_step_s * 1e6:.0f} µs for this step: "
             f"{split['step_s'] / trace.gpu_step_s:,.0f}× faster than measured here — a 2-core "
             f"CPU runs this tiny model's thousand small ops at PyTorch's dispatch speed and "
             f"its messages through the kernel's loopback."
             if trace.gpu_step_s else ""]
    fields = {"losses": losses, "reference_losses": reference,
              "max_rel_loss_diff": loss_diff, "max_rel_param_diff": param_diff,
              "replica_spread": spread, "measured": split, "measured_per_rank": rows,
              "predicted": predicted, "predicted_page": trace.predicted,
              "predicted_gpu": trace.gpu_split, "calibration": machine,
              "measured_over_predicted": ratio, "nodes": nodes,
              **({"aux_losses": report["aux_losses"],
                  "reference_aux_losses": report["reference_aux_losses"],
                  "max_rel_aux_loss_diff": aux_diff} if aux else {})}
    return Verdict(passed, float(f"{max(loss_diff, param_diff):.3g}"), detail, {
        "table": table, "notes": [n for n in notes if n],
        "tables": [{"caption": "One step, measured and predicted (mean over the ranks)",
                    "header": ["", "step", "compute", "comm exposed", "bubble"],
                    "rows": split_rows}],
        "max_diff_text": f"{max(loss_diff, param_diff):.1e} relative"},
        fields=fields, trace=chrome_trace(report["events"]))


def unsupported(p) -> tuple[str, str] | None:
    return None


CHECK = Check(
    worker="workers/train/train.py",
    world=lambda p: p.world,
    args=worker_argv,
    compare=compare,
    unsupported=unsupported,
    nodes=lambda p: p.nodes,
)
