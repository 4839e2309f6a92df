"""Comparing a real expert-parallel MoE layer (workers/moe.py) with the simulation.

The worker routes, drops, dispatches and combines with torch.distributed on ``ep`` ranks and
reports the routing (experts, gate weights, kept assignments, drops), the per-expert counts,
its dispatch matrix (the split sizes it exchanged), the losses reduced over the ranks, the
layer's output and the same layer computed densely in one process. The check passes when the
routing, drops, counts and dispatch matrix are exactly the simulation's, the gate weights and
losses agree to float64 rounding, and the output agrees with both the simulation and the dense
layer to 1e-6.
"""

from __future__ import annotations

import numpy as np

from app.jobs.runner import Check, Verdict

OUTPUT_TOLERANCE = 1e-6
NUMBER_TOLERANCE = 1e-12
MAX_RANKS = 8


def unsupported(params) -> tuple[str, str] | None:
    if params.ep < 2:
        return "ep", "a real expert-parallel run needs ep ≥ 2 ranks (got 1)"
    if params.ep > MAX_RANKS:
        return "ep", f"real runs on this server use at most {MAX_RANKS} ranks (got ep {params.ep})"
    return None


def _diff(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return float("inf")
    return float(np.abs(a - b).max(initial=0.0))


def compare(params, trace, report: dict) -> Verdict:
    r, d = trace.routing, trace.drops
    problems = []
    if report.get("world") != params.ep:
        problems.append(f"the job ran {report.get('world')} ranks, the simulation ep {params.ep}")
    exact = {
        "chosen experts": (report["experts"], r.experts.tolist()),
        "kept assignments": (report["kept"], d.kept.tolist()),
        "dropped": ([tuple(x) for x in report["dropped"]], list(d.dropped)),
        "expert_tokens": (report["expert_tokens"], d.expert_tokens.tolist()),
        "dispatch matrix": (report["dispatch"], trace.dispatch.tolist()),
        "capacity": (report["capacity"], d.capacity),
    }
    rows = []
    for name, (got, want) in exact.items():
        same = (sorted(got) == sorted(want)) if name == "dropped" else got == want
        rows.append([name, "✓ same" if same else "✗ differs"])
        if not same:
            problems.append(f"{name} differ")
    numbers = {
        "gate weights": _diff(report["weights"], r.weights),
        "aux_loss": abs(report["aux_loss"] - trace.aux_loss),
        "z_loss": abs(report["z_loss"] - trace.z_loss),
    }
    outputs = {
        "output vs simulation": _diff(report["output"], trace.run.output),
        "output vs dense torch layer": _diff(report["output"], report["dense_output"]),
    }
    for name, value in numbers.items():
        rows.append([name, f"{value:.2g}"])
        if not value <= NUMBER_TOLERANCE:
            problems.append(f"{name} differ by {value:.3g} (tolerance {NUMBER_TOLERANCE:g})")
    for name, value in outputs.items():
        rows.append([name, f"{value:.2g}"])
        if not value <= OUTPUT_TOLERANCE:
            problems.append(f"{name} differs by {value:.3g} (tolerance {OUTPUT_TOLERANCE:g})")
    worst = max([*numbers.values(), *outputs.values()])
    passed = not problems
    detail = (f"{report.get('world')} ranks exchanged with {report.get('exchange')}: routing, "
              f"drops, counts and the dispatch matrix "
              f"{'match the simulation exactly' if passed or worst <= OUTPUT_TOLERANCE else 'were compared'}; "
              f"the output differs by at most {worst:.2g}.")
    if problems:
        detail += " " + "; ".join(problems) + "."
    return Verdict(passed, float(f"{worst:.3g}"), detail, {
        "table": {"caption": "The real run against the simulation",
                  "header": ["quantity", "difference"], "rows": rows},
        "rows_computed": report.get("rows_computed")})




def worker_argv(p) -> list[str]:
    """The worker's command line for ``p``: one option per field it runs (workers/moe.py
    builds the same options from the params model)."""
    return [word for name in ('tokens', 'experts', 'top_k', 'capacity_factor', 'drop_policy', 'router', 'aux_loss_coeff', 'z_loss_coeff', 'skew', 'token_width', 'seed')
            for word in ("--" + name.replace("_", "-"), _text(getattr(p, name)))]


def _text(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


CHECK = Check(
    worker="workers/moe.py",
    world=lambda p: p.ep,
    args=worker_argv,
    compare=compare,
    unsupported=unsupported,
)
