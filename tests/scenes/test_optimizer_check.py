"""The optimizer scene's check of a real run (app/scenes/optimizer/check.py) against reports that
agree and that do not."""

from __future__ import annotations

import numpy as np
import pytest

from app.params import parse
from app.scenes.optimizer.check import TOLERANCE, compare
from app.sim.memory import model_states
from app.sim.optimizer.params import OptimizerParams
from app.sim.optimizer.simulate import simulate


def params(**query) -> OptimizerParams:
    return parse(OptimizerParams, {k: str(v) for k, v in query.items()})


# --- the check of a real run ---------------------------------------------------------------

def fake_report(p, trace, world: int, nudge: float = 0.0) -> dict:
    """What workers/optimizer.py reports when torch.optim agrees exactly (``nudge``: an error
    added to rank 1's parameters after the last step)."""
    slices = np.array_split(np.arange(p.size), world)
    k = model_states.optimizer_state_bytes(p.optimizer, p.precision)
    ranks = []
    for r, s in enumerate(slices):
        lo, hi = int(s[0]), int(s[-1]) + 1
        history = [{"params": snap.params[lo:hi].tolist(),
                    "states": {n: v[lo:hi].tolist() for n, v in snap.states.items()}}
                   for snap in trace.history[1:]]
        if r == 1 and nudge:
            history[-1]["params"][0] += nudge
        ranks.append({"bounds": [lo, hi], "history": history, "state_bytes": int(k * (hi - lo)),
                      "model_params": trace.history[-1].model_params.tolist()})
    reference = [{"params": s.params.tolist(), "model_params": s.model_params.tolist(),
                  "states": {n: v.tolist() for n, v in s.states.items()}}
                 for s in trace.history[1:]]
    return {"backend": "gloo", "world": world, "ranks": ranks, "reference": reference}


@pytest.mark.parametrize("size,world", [(6, 4), (7, 4), (5, 3), (2, 2)])
def test_check_passes_an_agreeing_report(size, world):
    p = params(optimizer="adamw", precision="mixed", size=size, steps=3)
    trace = simulate(p)
    verdict = compare(p, trace, fake_report(p, trace, world))
    assert verdict.passed, verdict.detail
    assert verdict.max_abs_diff == 0
    assert len(verdict.report["diff_table"]) == p.steps
    assert len(verdict.report["diff_table"][0]) == world


def test_check_fails_a_disagreeing_report():
    p = params(optimizer="adam", precision="fp32", size=7, steps=2)
    trace = simulate(p)
    verdict = compare(p, trace, fake_report(p, trace, 4, nudge=1e-4))
    assert not verdict.passed
    assert verdict.report["diff_table"][-1][1] > TOLERANCE


def test_check_fails_wrong_state_bytes():
    p = params(optimizer="momentum", precision="fp32", size=4, steps=2)
    trace = simulate(p)
    report = fake_report(p, trace, 2)
    report["ranks"][0]["state_bytes"] += 4
    verdict = compare(p, trace, report)
    assert not verdict.passed and "state bytes" in verdict.detail
