"""Comparing a real torch.optim run (workers/optimizer.py) with the optimizer simulation.

The worker shards the optimizer over its ranks as ZeRO stage 1 does and reports, for every rank
and step, its slice of the fp32 parameters and torch.optim's states, plus an unsharded run on
rank 0 and the bytes each rank's optimizer state takes. Each tensor is compared with the trace
relative to the largest magnitude that tensor reaches during the run (an fp32 kernel and the
simulation round differently, by about one fp32 ulp of the values involved; relative to a value
that has shrunk towards 0 — a gradient average near the minimum — that ulp would look large).
The run passes at a relative difference of at most 1e-6.
"""

from __future__ import annotations

import numpy as np

from app.sim.memory import model_states
from app.jobs.runner import Check, Verdict

TOLERANCE = 1e-6
STATE_NAMES = ("momentum_buffer", "exp_avg", "exp_avg_sq")


def _scales(trace) -> dict[str, float]:
    """The largest magnitude each tensor reaches in the simulation (never 0)."""
    out = {"params": max(float(np.abs(s.params).max()) for s in trace.history)}
    for name in STATE_NAMES:
        values = [np.abs(s.states[name]).max() for s in trace.history if name in s.states]
        if values:
            out[name] = max(float(max(values)), np.finfo(np.float32).tiny)
    return {k: max(v, np.finfo(np.float32).tiny) for k, v in out.items()}


def _diff(got, expected) -> float:
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        return float("inf")
    return float(np.abs(got - expected).max(initial=0.0))


def compare(params, trace, report: dict) -> Verdict:
    problems: list[str] = []
    scales = _scales(trace)
    steps = params.steps
    ranks = report["ranks"]
    table = [[0.0] * len(ranks) for _ in range(steps)]
    worst_abs = worst_rel = 0.0

    def note(t: int, r: int | None, name: str, got, expected) -> float:
        nonlocal worst_abs, worst_rel
        d = _diff(got, expected)
        if d == float("inf"):
            problems.append(f"{name} has the wrong length" + (f" on rank {r}" if r is not None
                                                             else ""))
        rel = d / scales[name]
        worst_abs, worst_rel = max(worst_abs, d), max(worst_rel, rel)
        if r is not None:
            table[t][r] = max(table[t][r], rel)
        return rel

    # 1. every rank's slice, after every step
    covered = []
    for r, rank in enumerate(ranks):
        lo, hi = rank["bounds"]
        covered.extend(range(lo, hi))
        if len(rank["history"]) != steps:
            problems.append(f"rank {r} ran {len(rank['history'])} steps, the simulation {steps}")
        for t, entry in enumerate(rank["history"][:steps]):
            sim = trace.history[t + 1]
            note(t, r, "params", entry["params"], sim.params[lo:hi])
            for name in STATE_NAMES:
                if name in sim.states:
                    note(t, r, name, entry["states"].get(name, []), sim.states[name][lo:hi])
        note(steps - 1, r, "params", rank["model_params"], trace.history[-1].model_params)
    if sorted(covered) != list(range(params.size)):
        problems.append("the ranks' slices do not cover the parameters exactly once")
    sharded = worst_rel
    # 2. the unsharded reference on rank 0
    unsharded = 0.0
    reference = report.get("reference") or []
    if len(reference) != steps:
        problems.append(f"the unsharded reference ran {len(reference)} steps, not {steps}")
    for t, entry in enumerate(reference[:steps]):
        sim = trace.history[t + 1]
        diffs = [note(t, None, "params", entry["params"], sim.params),
                 note(t, None, "params", entry["model_params"], sim.model_params)]
        diffs += [note(t, None, name, entry["states"].get(name, []), sim.states[name])
                  for name in STATE_NAMES if name in sim.states]
        unsharded = max(unsharded, *diffs)
    # 3. optimizer-state bytes each rank measured: K × its slice (ZeRO-1)
    k = model_states.optimizer_state_bytes(params.optimizer, params.precision)
    measured = [rank["state_bytes"] for rank in ranks]
    expected = [int(k * (rank["bounds"][1] - rank["bounds"][0])) for rank in ranks]
    if measured != expected:
        problems.append(f"optimizer state bytes per rank {measured}, expected K × slice = "
                        f"{expected}")

    passed = worst_rel <= TOLERANCE and not problems
    name = {"sgd": "SGD", "momentum": "SGD(momentum)", "adam": "Adam",
            "adamw": "AdamW"}[params.optimizer]
    detail = (f"torch.optim.{name} with its state sharded over {len(ranks)} ranks (ZeRO-1): "
              f"parameters and states after each of {steps} steps differ from the simulation "
              f"by at most {sharded:.2g} relative; the unsharded torch.optim on rank 0 by at "
              f"most {unsharded:.2g} (tolerance {TOLERANCE:g}). Optimizer state measured per "
              f"rank: {', '.join(f'{b} B' for b in measured)} = K × slice with K = {k:g} "
              f"bytes per parameter.")
    if problems:
        detail += " " + "; ".join(problems)
    rounded = [[float(f"{d:.2g}") for d in row] for row in table]
    return Verdict(passed, float(f"{worst_abs:.3g}"), detail,
                   {"diff_table": rounded, "tolerance": TOLERANCE, "state_bytes": measured})


def worker_argv(p) -> list[str]:
    """workers/optimizer.py's command line for ``p`` (floats as repr: exact round trips)."""
    return ["--optimizer", p.optimizer, "--precision", p.precision,
            "--size", str(p.size), "--steps", str(p.steps), "--lr", repr(p.lr),
            "--momentum", repr(p.momentum), "--beta1", repr(p.beta1),
            "--beta2", repr(p.beta2), "--eps", repr(p.eps),
            "--weight-decay", repr(p.weight_decay), "--seed", str(p.seed)]


CHECK = Check(
    worker="workers/optimizer.py",
    world=lambda p: min(4, p.size),
    args=worker_argv,
    compare=compare,
)
