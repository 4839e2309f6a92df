"""Real runs of torch.distributed.pipelining on gloo: the orders each rank executed equal the
simulation's, and loss and gradients equal the unpipelined model's."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from app.sim.pipeline.params import PipelineParams  # noqa: E402
from app.sim.pipeline.simulate import simulate  # noqa: E402
from app.scenes.pipeline.check import compare  # noqa: E402
from tests.workers.launch import job_over_http  # noqa: E402

pytestmark = pytest.mark.workers


def run(client, query: str, timeout: float = 120.0) -> dict:
    r = client.post(f"/api/verify/pipeline?{query}")
    assert r.status_code == 202, r.text
    return job_over_http(client, r.json()["job"], timeout)


@pytest.mark.parametrize("query", [
    "schedule=gpipe&stages=2&microbatches=3",
    "schedule=1f1b&stages=4&microbatches=6",
    "schedule=interleaved_1f1b&stages=3&microbatches=5&chunks=3",
    "schedule=zbv&stages=2&microbatches=3",
])
def test_real_run_matches_the_simulation(client, query):
    state = run(client, query)
    assert state["status"] == "passed", state["detail"]
    assert state["backend"] == "gloo"
    assert state["max_abs_diff"] <= 1e-12
    rows = state["report"]["table"]["rows"]
    assert all(row[2] == "✓ same" for row in rows)


def test_compare_fails_when_an_order_differs():
    """The check is not a formality: a report whose rank 1 ran two passes swapped fails."""
    params = PipelineParams(schedule="1f1b", stages=2, microbatches=3)
    trace = simulate(params)
    orders = [[str(a) for a in o] for o in trace.schedule.orders]
    grads = [[[0.5, 0.25]], [[1.0]]]
    report = {"orders": orders, "grads": grads, "reference_grads": grads, "loss": 1.0,
              "reference_loss": 1.0, "torch_class": "Schedule1F1B", "world": 2}
    assert compare(params, trace, report).passed
    swapped = [orders[0], [orders[1][1], orders[1][0], *orders[1][2:]]]
    verdict = compare(params, trace, {**report, "orders": swapped})
    assert not verdict.passed and "1 rank(s) ran a different order" in verdict.detail
    off = compare(params, trace, {**report, "grads": [[[0.5, 0.25 + 1e-6]], [[1.0]]]})
    assert not off.passed and off.max_abs_diff == pytest.approx(1e-6)
