"""Comparing a real context-parallel run (workers/context_parallel.py) with the simulation.

The worker reports, for every rank, the tokens it holds, its rows of the attention output
(float64) and the elements it sent, counted at its send calls; and, from rank 0, torch's own
scaled_dot_product_attention over the whole sequence. The run passes when

    * every rank holds the tokens the scene's layout gives it, and (ring, hybrid) computes in
      the ring steps the simulation computes in — skipping the same blocks,
    * its output rows equal the simulation's to 1e-9 (absolute; both sides are float64),
    * torch's reference equals the simulation's output to 1e-9 — so the real run, the
      simulation and torch all agree,
    * every rank sent exactly the elements of the formula (app.sim.context_parallel.volumes),
      which are also what the simulation's transfers add up to.
"""

from __future__ import annotations

import numpy as np

from app.sim.context_parallel.params import STAGE_FIELDS as STAGE
from app.sim.context_parallel.volumes import elements_sent
from app.jobs.runner import Check, Verdict

TOLERANCE = 1e-9


def _diff(got, want: np.ndarray) -> float:
    got = np.asarray(got, dtype=float)
    if got.shape != want.shape:
        return float("inf")
    return float(np.abs(got - want).max(initial=0.0))


def compare(params, trace, report: dict) -> Verdict:
    ranks = report.get("ranks") or []
    problems: list[str] = []
    if len(ranks) != params.cp:
        problems.append(f"the job ran {len(ranks)} ranks, the scene has cp = {params.cp}")
    stage = params.stage()
    for name in STAGE:
        if name in report and report[name] != stage[name]:
            problems.append(f"the job ran {name} = {report[name]!r}, the scene has "
                            f"{stage[name]!r}")
    formula = elements_sent(params.method, params.cp, params.example_tokens, params.heads, params.kv_heads,
                            params.head_dim, params.ulysses)
    output_row, sent_row, worst = [], [], 0.0
    for r, got in enumerate(ranks[:params.cp]):
        want_tokens = list(trace.ranks[r].tokens)
        if list(got.get("tokens", [])) != want_tokens:
            problems.append(f"rank {r} held tokens {got.get('tokens')}, the layout gives "
                            f"{want_tokens}")
        diff = _diff(got.get("output"), trace.output[want_tokens])
        if not np.isfinite(diff):
            problems.append(f"rank {r}: output has shape {np.shape(got.get('output'))}, the "
                            f"simulation {trace.output[want_tokens].shape}")
        worst = max(worst, diff)
        output_row.append(float(f"{min(diff, 1.0):.2g}"))
        if params.method in ("ring", "hybrid") and params.ring_size > 1:
            want_steps = [s for s, f in enumerate(f for f in trace.frames if f.phase == "ring")
                          if f.source.unmasked[r] > 0]     # RankFrame.computed, unbuilt
            if got.get("computed_steps") != want_steps:
                problems.append(f"rank {r} computed in ring steps {got.get('computed_steps')}, "
                                f"the simulation in {want_steps} (the others are skipped: "
                                f"their block lies above the causal diagonal)")
        sent = got.get("elements_sent")
        sent_row.append(sent)
        if sent != formula or sent != trace.ranks[r].elements_sent:
            problems.append(f"rank {r} sent {sent} elements; the formula gives {formula:,} and "
                            f"the simulation's transfers {trace.ranks[r].elements_sent:,}")
    torch_diff = _diff(report.get("reference"), trace.output)
    if not np.isfinite(torch_diff):
        problems.append("the report has no reference output of the right shape")
    worst_all = max(worst, torch_diff)
    passed = worst_all <= TOLERANCE and not problems
    detail = (f"Every rank's output rows agree with the simulation to {worst:.2g} and torch's "
              f"scaled_dot_product_attention with the simulation to {torch_diff:.2g} "
              f"(tolerance {TOLERANCE:g}); ")
    if not any(" sent " in p for p in problems):
        detail += f"every rank sent the predicted {formula:,} elements ({trace.elements_formula})."
    if problems:
        detail += " " + "; ".join(problems[:4])
    return Verdict(passed, float(f"{worst_all:.3g}"), detail,
                   {"diff_table": [output_row, [float(torch_diff)] * len(output_row)],
                    "row_labels": ["output vs simulation", "torch vs simulation"],
                    "elements_sent": sent_row, "elements_predicted": formula,
                    "tolerance": TOLERANCE, "timing": None})


def worker_argv(p) -> list[str]:
    """workers/context_parallel.py's command line for ``p``: one option per field of STAGE, as
    workers.common.add_fields reads them (a bool as ``true`` / ``false``); cp is the world."""
    args: list[str] = []
    for name, value in p.stage().items():
        args += [f"--{name.replace('_', '-')}",
                 ("true" if value else "false") if isinstance(value, bool) else str(value)]
    return args


worker_args = worker_argv
"""The name the worker tests import."""


CHECK = Check(worker="workers/context_parallel.py", world=lambda p: p.cp, args=worker_argv,
              compare=compare)
