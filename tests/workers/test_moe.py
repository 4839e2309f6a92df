"""Real runs of one MoE layer on 2–4 gloo ranks: routing, drops, the dispatch matrix and the
losses equal the simulation's, the output equals the simulation's and a dense layer's, and the
losses equal a direct torch implementation of Megatron-LM's switch_load_balancing_loss_func
and z-loss."""

from __future__ import annotations

import pytest

from app.sim.moe import MoeParams, simulate
from app.scenes.moe.check import CHECK, compare, unsupported
from tests.workers.launch import torchrun

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.workers
F = torch.nn.functional

RUNS = [
    (dict(ep=2), False),
    (dict(tokens=20, experts=12, top_k=3, ep=4, capacity_factor=1.25, drop_policy="position",
          router="topk_softmax", skew=0.0, seed=4), False),
    (dict(tokens=15, experts=9, top_k=2, ep=3, capacity_factor=0.5, skew=2.0, token_width=5,
          seed=9), True),   # the isend/irecv path
]


def megatron_losses(logits, top_k: int, aux_coeff: float, z_coeff: float):
    """Megatron-LM's switch_load_balancing_loss_func and z_loss_func, written out in torch."""
    num_tokens, num_experts = logits.shape
    probs = torch.softmax(logits, dim=-1)
    top = torch.topk(logits, top_k, dim=-1).indices      # the set, not the order, matters here
    routing_map = torch.zeros_like(logits, dtype=torch.bool).scatter(1, top, True)
    tokens_per_expert = routing_map.sum(dim=0)
    aggregated = probs.sum(dim=0)
    aux = torch.sum(aggregated * tokens_per_expert) * (
        num_experts * aux_coeff / (top_k * num_tokens * num_tokens))
    z = torch.mean(torch.square(torch.logsumexp(logits, dim=-1))) * z_coeff
    return float(aux), float(z)


@pytest.mark.parametrize("case,p2p", RUNS, ids=["ep2", "ep4-position-topk_softmax", "ep3-p2p"])
def test_real_run_matches_the_simulation(tmp_path, case, p2p):
    params = MoeParams(**case)
    trace = simulate(params)
    assert unsupported(params) is None
    args = CHECK.args(params) + (["--p2p"] if p2p else [])
    report, _ = torchrun(CHECK.worker, CHECK.world(params), args, tmp_path / "report.json")
    verdict = compare(params, trace, report)
    assert verdict.passed, verdict.detail
    assert verdict.max_abs_diff <= 1e-12
    assert report["exchange"] == ("isend/irecv" if p2p else "all_to_all_single")
    aux, z = megatron_losses(torch.tensor(trace.logits), params.top_k, params.aux_loss_coeff,
                             params.z_loss_coeff)
    assert report["aux_loss"] == pytest.approx(aux, rel=1e-12)
    assert report["z_loss"] == pytest.approx(z, rel=1e-12)
    # a report that disagrees fails
    wrong = {**report, "dispatch": [[d + 1 for d in row] for row in report["dispatch"]]}
    assert not compare(params, trace, wrong).passed
    off = {**report, "output": [[v + 1e-3 for v in row] for row in report["output"]]}
    assert not compare(params, trace, off).passed


def test_unsupported():
    assert unsupported(MoeParams(ep=1))[0] == "ep"
    assert unsupported(MoeParams(ep=16, experts=16))[0] == "ep"
