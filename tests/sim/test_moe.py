"""Chapter 10's MoE layer against independent references: plain-Python routing, capacity and
dropping written as loops, the losses from their formulas, a per-token output loop, and
Megatron's published capacity number."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from app.params import ParamsError, parse
from app.sim.moe import MoeParams, simulate
from app.sim.moe.capacity import WEIGHT_GRID, get_capacity, rank_capacity
from app.sim.moe.dispatch import all_to_all_cost, expert_mlp
from app.sim.moe.losses import aux_loss_grad, z_loss_grad
from app.sim.moe.router import make_inputs, route, router_logits, softmax
from app.sim.collectives import cost
CASES = [
    dict(),
    dict(tokens=12, experts=6, top_k=1, ep=3, skew=0.0),
    dict(tokens=20, experts=12, top_k=3, ep=4, capacity_factor=1.25, drop_policy="position",
         router="topk_softmax", skew=0.0),
    dict(tokens=15, experts=9, top_k=2, ep=3, capacity_factor=0.0),
    dict(tokens=21, experts=7, top_k=7, ep=7, capacity_factor=0.5, seed=3, skew=3.0),
    dict(tokens=33, experts=5, top_k=2, ep=1, capacity_factor=1.5, router="topk_softmax",
         drop_policy="probs", skew=0.0, token_width=3, seed=11),
    dict(tokens=24, experts=8, top_k=1, ep=2, router="topk_softmax", capacity_factor=1.0),
    dict(tokens=64, experts=16, top_k=4, ep=8, capacity_factor=0.75, skew=5.0, token_width=5, seed=7),
]
IDS = [",".join(f"{k}={v}" for k, v in c.items()) or "defaults" for c in CASES]


def reference_routing(p: MoeParams):
    """Loops: each token's experts by (−logit, index), weights from math.exp."""
    logits = router_logits(make_inputs(p.tokens, p.experts, p.token_width, p.seed), p.skew)
    experts, weights = [], []
    for row in logits.tolist():
        chosen = sorted(range(p.experts), key=lambda e: (-row[e], e))[:p.top_k]
        if p.router == "softmax_topk":
            z = sum(math.exp(v) for v in row)
            w = [math.exp(row[e]) / z for e in chosen]
        else:
            z = sum(math.exp(row[e]) for e in chosen)
            w = [math.exp(row[e]) / z for e in chosen]
        experts.append(chosen)
        weights.append(w)
    return logits, experts, weights


def reference_drops(p: MoeParams, experts, weights):
    """Per rank, per expert: sort the group by the policy, keep the first `capacity`."""
    per_rank = p.tokens // p.ep
    cap = None if p.capacity_factor == 0 else math.ceil(per_rank * p.top_k / p.experts
                                                         * p.capacity_factor - 1e-9)
    dropped = []
    for r in range(p.ep):
        for e in range(p.experts):
            group = [(t, weights[t][s]) for t in range(r * per_rank, (r + 1) * per_rank)
                     for s in range(p.top_k) if experts[t][s] == e]
            if p.drop_policy == "probs":
                group.sort(key=lambda tw: (-round(tw[1] * WEIGHT_GRID), tw[0]))
            if cap is not None:
                dropped += sorted((t, e) for t, _ in group[cap:])
    return cap, dropped


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_routing_drops_losses_and_output_match_loops(case):
    p = MoeParams(**case)
    trace = simulate(p)
    logits, experts, weights = reference_routing(p)
    assert trace.routing.experts.tolist() == experts
    np.testing.assert_allclose(trace.routing.weights, weights, rtol=0, atol=1e-14)
    cap, dropped = reference_drops(p, experts, weights)
    assert trace.capacity == cap
    assert list(trace.drops.dropped) == dropped
    dropped_set = set(dropped)
    kept = [(t, e) for t in range(p.tokens) for e in experts[t] if (t, e) not in dropped_set]
    assert trace.expert_tokens.tolist() == [sum(1 for _, e in kept if e == x)
                                            for x in range(p.experts)]
    # dispatch: token t on rank t // (T/ep), expert e on rank e // (E/ep)
    matrix = np.zeros((p.ep, p.ep), dtype=int)
    for t, e in kept:
        matrix[t // (p.tokens // p.ep), e // (p.experts // p.ep)] += 1
    assert trace.dispatch.tolist() == matrix.tolist()
    # losses from their formulas, in loops
    probs = [[math.exp(v) / sum(math.exp(u) for u in row) for v in row] for row in logits.tolist()]
    f = [sum(row.count(i) for row in experts) / (p.tokens * p.top_k) for i in range(p.experts)]
    P = [sum(row[i] for row in probs) / p.tokens for i in range(p.experts)]
    assert trace.aux_loss == pytest.approx(p.aux_loss_coeff * p.experts *
                                           sum(a * b for a, b in zip(f, P)), rel=1e-12, abs=0)
    lse = [math.log(sum(math.exp(v) for v in row)) for row in logits.tolist()]
    assert trace.z_loss == pytest.approx(p.z_loss_coeff * sum(v * v for v in lse) / p.tokens,
                                         rel=1e-12, abs=0)
    # output token by token
    inp = trace.inputs
    y = np.zeros_like(inp.x)
    for t, e in kept:
        w = weights[t][experts[t].index(e)]
        y[t] += w * expert_mlp(inp.x[t:t + 1], inp.w_in[e], inp.w_out[e])[0]
    np.testing.assert_allclose(trace.run.output, y, rtol=0, atol=1e-12)
    assert trace.run.max_abs_error < 1e-12


def test_megatron_published_capacity():
    assert get_capacity(4096, 64, 1.25) == 80          # REFERENCES.md, Megatron get_capacity
    assert rank_capacity(8192, 2, 1, 64, 1.25) == 80   # 4096 tokens a rank, top-1
    assert rank_capacity(16, 2, 2, 8, 0) is None       # dropless


@pytest.mark.parametrize("tokens,ep,k,experts,cf,expected", [
    (16, 2, 2, 8, 1.0, 2), (12, 3, 1, 6, 1.0, 1), (20, 4, 3, 12, 1.25, 2),
    (21, 7, 7, 7, 0.5, 2), (33, 1, 2, 5, 1.5, 20), (64, 8, 4, 16, 0.75, 2)])
def test_capacity_table(tokens, ep, k, experts, cf, expected):
    assert rank_capacity(tokens, ep, k, experts, cf) == expected


def test_ties_go_to_the_lower_expert_index():
    logits = np.array([[1.0, 2.0, 2.0, 0.0, 2.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    for router in ("softmax_topk", "topk_softmax"):
        r = route(logits, 3, router)
        assert r.experts.tolist() == [[1, 2, 4], [0, 1, 2]]
    # torch.topk on CPU does not promise this order (documented in router.py)


def test_ties_in_the_seeded_router_happen_and_are_ordered():
    p = MoeParams(tokens=64, experts=8, top_k=3, ep=2, skew=0.0)
    logits = simulate(p).logits
    ties = sum(len(set(row)) < len(row) for row in logits.tolist())
    assert ties > 0
    assert simulate(p).routing.experts.tolist() == reference_routing(p)[1]


def test_position_drops_the_latest_and_probs_the_weakest():
    base = dict(tokens=16, experts=4, top_k=1, ep=1, capacity_factor=0.25, skew=4.0)
    pos = simulate(MoeParams(**base, drop_policy="position"))
    cap = pos.capacity
    for e in range(4):
        chose = [t for t in range(16) if pos.routing.experts[t, 0] == e]
        assert [t for t, x in pos.drops.dropped if x == e] == chose[cap:]
    pr = simulate(MoeParams(**base, drop_policy="probs"))
    for e in range(4):
        kept_w = [pr.routing.weights[t, 0] for t in range(16)
                  if pr.routing.experts[t, 0] == e and pr.drops.kept[t, 0]]
        gone_w = [pr.routing.weights[t, 0] for t, x in pr.drops.dropped if x == e]
        assert not gone_w or min(kept_w) >= max(gone_w)


def test_hf_mixtral_loss_is_k_times_megatrons():
    p = MoeParams(tokens=32, experts=8, top_k=2, ep=2, aux_loss_coeff=1.0)
    trace = simulate(p)
    onehot = np.zeros((p.tokens, p.top_k, p.experts))          # HF load_balancing_loss_func
    for t in range(p.tokens):
        for s in range(p.top_k):
            onehot[t, s, trace.routing.experts[t, s]] = 1
    tokens_per_expert = onehot.mean(axis=0)                    # (k, E)
    router_prob = softmax(trace.logits).mean(axis=0)           # (E,)
    hf = p.experts * np.sum(tokens_per_expert * router_prob[None, :])
    assert hf == pytest.approx(p.top_k * trace.aux_loss, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 5])
def test_loss_gradients_against_finite_differences(seed):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((7, 5))
    experts = route(logits, 2, "softmax_topk").experts
    f = np.bincount(experts.reshape(-1), minlength=5) / experts.size

    def aux(z):
        return 5 * np.dot(f, softmax(z).mean(axis=0))

    def zl(z):
        m = z.max(axis=1)
        return np.mean((m + np.log(np.exp(z - m[:, None]).sum(axis=1))) ** 2)

    for fn, grad in ((aux, aux_loss_grad(logits, experts)), (zl, z_loss_grad(logits))):
        numeric = np.zeros_like(logits)
        for i in np.ndindex(logits.shape):
            step = np.zeros_like(logits)
            step[i] = 1e-6
            numeric[i] = (fn(logits + step) - fn(logits - step)) / 2e-6
        np.testing.assert_allclose(grad, numeric, atol=1e-8)


def test_balancing_methods_flatten_the_skewed_load():
    trace = simulate(MoeParams(tokens=256, experts=8, top_k=2, ep=2, skew=1.5,
                               router_steps=16, bias_rate=0.2))
    by = {t.method: t for t in trace.training}
    start = by["none"].max_violation[0]
    assert by["none"].max_violation[-1] == start
    assert by["aux_loss"].max_violation[-1] < 0.5 * start
    assert by["aux_free_bias"].max_violation[-1] < 0.5 * start
    assert all(int(load.sum()) == 256 * 2 for load in by["aux_loss"].loads)
    # overloaded expert 0 is made less attractive, the starved last one more
    assert by["aux_free_bias"].bias[0] < 0 < by["aux_free_bias"].bias[-1]


def test_all_to_all_cost_by_hand():
    matrix = np.array([[3, 1, 0], [2, 5, 4], [0, 6, 1]])
    links = cost.Links(alpha_us=2.0, intra_node_gbs=100.0, inter_node_gbs=10.0, gpus_per_node=2)
    c = all_to_all_cost(matrix, 1000.0, links)
    assert c.bytes_sent.tolist() == [1000.0, 6000.0, 6000.0]
    # rank 1 → 0 in node (2 µs + 2000/1e5), rank 1 → 2 crosses (2 + 4000/1e4); rank 2 → 1 crosses
    by_rank = [2 + 1000 / 1e5, 2 + 2000 / 1e5 + 2 + 4000 / 1e4, 2 + 6000 / 1e4]
    assert c.time_us == pytest.approx(max(by_rank))
    assert c.nvlink_us == pytest.approx(max(2 + 0.01, 4 + 6000 / 1e5, 2 + 0.06))
    assert c.infiniband_us == pytest.approx(max(2 + 0.1, 4 + 0.6, 2 + 0.6))


def test_json_contract_and_frames():
    trace = simulate(MoeParams())
    d = json.loads(json.dumps(trace.to_dict()))
    for key in ("logits", "topk", "capacity", "expert_tokens", "dropped", "aux_loss",
                "z_loss", "dispatch", "frames"):
        assert key in d
    assert len(d["logits"]) == 16 and len(d["logits"][0]) == 8
    assert set(d["topk"][0]) >= {"token", "experts", "weights"}
    assert d["dropped"] and set(d["dropped"][0]) == {"token", "expert"}
    phases = [f["phase"] for f in d["frames"]]
    assert phases == ["tokens", "softmax", "topk", "capacity", "dispatch", "experts", "combine",
                      "output"]
    assert all(f["caption"] for f in d["frames"])
    assert str(d["capacity"]) in d["frames"][3]["caption"]
    sent = sum(t["elements"] for t in d["frames"][4]["transfers"])
    assert sent == (np.sum(d["dispatch"]) - np.trace(d["dispatch"])) * 8


@pytest.mark.parametrize("case", [
    dict(tokens=4096, experts=16, token_width=4, top_k=4, ep=16, router_steps=32),
    dict(tokens=256, experts=256, token_width=8, top_k=8, ep=64, router_steps=32),
    dict(tokens=64, experts=16, token_width=64, top_k=16, ep=16, router_steps=32)])
def test_largest_accepted_traces_stay_small(case):
    text = json.dumps(simulate(MoeParams(**case)).to_dict())
    assert len(text) < 5e6


@pytest.mark.parametrize("query,param,message", [
    ({"ep": "3"}, "ep", "ep (3) must divide experts (8)"),
    ({"top_k": "9"}, "top_k", "top_k (9) must be at most experts (8)"),
    ({"tokens": "15"}, "tokens", "ep (2) must divide tokens (15) — try tokens 14 or 16"),
    ({"tokens": "4096", "experts": "64"}, "tokens", "must be at most 131,072"),
    ({"token_width": "64", "tokens": "256", "experts": "16"}, "token_width", "must be at most 4,194,304"),
    ({"experts": "300"}, "experts", "experts must be an integer from 2 to 256"),
    ({"capacity_factor": "-1"}, "capacity_factor", "capacity_factor must be a number from 0 to 16"),
    ({"router": "sigmoid"}, "router", "router must be one of softmax_topk, topk_softmax"),
])
def test_bad_input_messages(query, param, message):
    with pytest.raises(ParamsError) as error:
        parse(MoeParams, query)
    problem = error.value.problems[0]
    assert problem.param == param and message in problem.message
