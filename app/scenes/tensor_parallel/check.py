"""Comparing a real tensor-parallel run (workers/tensor_parallel.py) with the simulation.

For every rank the worker reports what it holds when forward ends, the gradients of its weight
shards, the gradient of its input (or of its rows of it), and every collective it called. Each
number must equal the simulation's to 1e-5 relative (the largest difference over the largest
value of that tensor), and the collectives must be the ones the scene predicts — the same op,
pass and number of elements, in the same order.
"""

from __future__ import annotations

import numpy as np

from app.sim.tensor_parallel.ops import split
from app.jobs.runner import Check, Verdict

RELATIVE_TOLERANCE = 1e-5
GRAD_LABELS = {"W": "dW", "A": "dA", "B": "dB", "W_qkv": "dW_qkv", "W_o": "dW_o", "E": "dE",
               "gamma": "dγ", "beta": "dβ"}


def expected(params, trace) -> list[tuple[str, list[np.ndarray | None]]]:
    """(label, per-rank array) of everything a rank reports, from the trace."""
    r = trace.result
    tp, sp = params.tp, params.sequence_parallel
    rows = [("output", list(r.shard_results))]
    for name in r.shard_grads[0]:
        rows.append((GRAD_LABELS[name], [g[name] for g in r.shard_grads]))
    if r.input_grad is not None:
        # column, mlp and attention keep their input's rows under SP; the row block's input
        # gradient is all-gathered on every rank
        if sp and params.block != "row":
            rows.append(("input gradient", split(r.input_grad, tp, 0)))
        else:
            rows.append(("input gradient", [r.input_grad] * tp))
    return rows


def _relative(got, want: np.ndarray) -> tuple[float, float]:
    """(relative, absolute) difference; inf when the shapes differ."""
    got = np.asarray(got, dtype=float)
    if got.shape != want.shape:
        return float("inf"), float("inf")
    diff = float(np.abs(got - want).max(initial=0.0))
    scale = max(float(np.abs(want).max(initial=0.0)), 1e-12)
    return diff / scale, diff


def compare(params, trace, report: dict) -> Verdict:
    ranks = report["ranks"]
    problems = []
    if len(ranks) != params.tp:
        problems.append(f"the job ran {len(ranks)} ranks, the scene has tp = {params.tp}")
    table, labels, worst_rel, worst_abs = [], [], 0.0, 0.0
    for label, per_rank in expected(params, trace):
        row = []
        for rank, want in enumerate(per_rank[:len(ranks)]):
            got = (ranks[rank]["output"] if label == "output" else
                   ranks[rank]["input_grad"] if label == "input gradient" else
                   ranks[rank]["grads"].get(_weight_of(label)))
            if got is None:
                problems.append(f"rank {rank} reported no {label}")
                row.append(1.0)               # shown as a 100% difference
                continue
            rel, diff = _relative(got, np.asarray(want, dtype=float))
            if not np.isfinite(rel):
                problems.append(f"rank {rank}: {label} has shape {np.shape(got)}, the "
                                f"simulation {np.shape(want)}")
            row.append(float(f"{min(rel, 1.0):.2g}"))
            worst_rel, worst_abs = max(worst_rel, rel), max(worst_abs, diff)
        table.append(row)
        labels.append(label)
    predicted = [(c.op, c.pass_, c.elements, c.reduce_op) for c in trace.comm]
    for rank, result in enumerate(ranks):
        called = [(c["op"], c["pass"], c["elements"], c["reduce_op"]) for c in result["comm"]]
        if called != predicted:
            problems.append(f"rank {rank} called {_describe(called)}; the scene predicts "
                            f"{_describe(predicted)}")
    passed = worst_rel <= RELATIVE_TOLERANCE and not problems
    detail = (f"Outputs and gradients agree to {worst_rel:.2g} relative "
              f"(tolerance {RELATIVE_TOLERANCE:g}); ")
    if not any("called" in p for p in problems):
        detail += (f"every rank called the {len(predicted)} predicted collectives, with the "
                   f"predicted sizes" if predicted else "no collectives, as predicted for one rank")
        detail += f" ({_describe(predicted)})." if predicted else "."
    if problems:
        detail += " " + "; ".join(problems[:4])
    detail += " Rows of the table: " + ", ".join(f"{k} {label}" for k, label in
                                                 enumerate(labels, start=1)) + "."
    return Verdict(passed, float(f"{worst_abs:.3g}"), detail,
                   {"diff_table": table, "row_labels": labels,
                    "tolerance": RELATIVE_TOLERANCE, "timing": None})


def _weight_of(label: str) -> str:
    return {v: k for k, v in GRAD_LABELS.items()}[label]


def _describe(calls) -> str:
    names = {"all_reduce": "all-reduce", "all_gather": "all-gather",
             "reduce_scatter": "reduce-scatter"}
    return ", ".join(f"{names.get(op, op)}{' (max)' if red == 'max' else ''} "
                     f"{'fwd' if pass_ == 'forward' else 'bwd'} {n}"
                     for op, pass_, n, red in calls) or "none"


def worker_argv(p) -> list[str]:
    """workers/tensor_parallel.py's command line for ``p``."""
    args = ["--block", p.block, "--tokens", str(p.tokens), "--hidden", str(p.hidden),
            "--ffn", str(p.ffn), "--heads", str(p.heads), "--vocab", str(p.vocab),
            "--seed", str(p.seed)]
    return args + (["--sequence-parallel"] if p.sequence_parallel else [])


CHECK = Check(worker="workers/tensor_parallel.py", world=lambda p: p.tp, args=worker_argv,
              compare=compare)
