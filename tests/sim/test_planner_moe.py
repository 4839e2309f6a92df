"""The planner's MoE and attention realism against independent references: routing simulated
token by token (node-limited and not), the published active-parameter counts, the H800's and
FP8's data-sheet numbers, FlashAttention's and MLA's activation sizes from their papers'
shapes, DualPipe's memory rule."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.params import ParamsError, parse
from app.sim.planner.cost import Cluster
from app.sim.planner.hardware import GPU_SPECS
from app.sim.planner.memory import layer_bytes
from app.sim.planner.moe_cost import all_to_all_s
from app.sim.planner.params import PlannerParams
from app.sim.planner.search import Pins, search


def routed_ib_copies(experts, top_k, ep, per_node, node_limit, tokens=20000, seed=0):
    """Mean inter-node copies of one token's hidden vector, routing simulated: uniform
    affinities; node-limited routing keeps the ``node_limit`` nodes whose k/M best experts
    score highest (DeepSeek-V3 §2.1.2), then the top-k experts among them, and sends a token
    once to each remote node it uses (§3.2.2); plain routing sends a copy per remote
    assignment."""
    rng = np.random.default_rng(seed)
    per_rank = experts // ep
    node_of_expert = np.arange(experts) // per_rank // per_node
    nodes = ep // per_node
    home = rng.integers(0, nodes, tokens)                       # the token's own node
    scores = rng.random((tokens, experts))
    if node_limit is not None:
        best = top_k // node_limit
        node_score = np.stack([np.sort(scores[:, node_of_expert == n], axis=1)[:, -best:]
                               .sum(axis=1) for n in range(nodes)], axis=1)
        keep = np.argsort(-node_score, axis=1)[:, :node_limit]
        allowed = (node_of_expert[None, :, None] == keep[:, None, :]).any(axis=2)
        scores = np.where(allowed, scores, -1.0)
    chosen = np.argsort(-scores, axis=1)[:, :top_k]
    dest = node_of_expert[chosen]                               # (tokens, k)
    remote = dest != home[:, None]
    if node_limit is None:
        return remote.sum(axis=1).mean()
    return np.mean([len(set(d[r])) for d, r in zip(dest, remote)])


@pytest.mark.parametrize("node_limit", [None, 4, 2])
def test_all_to_all_bytes_match_routing_simulated(node_limit):
    """DeepSeek-V3's EP 64 over 8 nodes, 256 experts, top-8: the inter-node bytes the cost
    model charges against the copies a simulated router sends."""
    experts, top_k, ep, per_node, hidden = 256, 8, 64, 8, 7168
    want = routed_ib_copies(experts, top_k, ep, per_node, node_limit)
    gpu = GPU_SPECS["h800-80"]
    # NVLink so fast and latency zero that the time is the InfiniBand bytes alone
    cluster = Cluster(gpu, 2048, per_node, nvlink_gbs=1e12, ib_gbs=50.0, nvlink_alpha_us=0.0,
                      ib_alpha_us=0.0, node_limit=node_limit)
    tokens = 4096.0
    t = all_to_all_s(cluster, tokens, top_k, hidden, 2, np.array(1.0), np.array(1.0),
                     np.array(float(ep)))
    copies = float(t) * 50e9 * 0.8 / (tokens * hidden * 2)
    assert copies == pytest.approx(want, rel=0.03)
    if node_limit is not None:
        assert copies < routed_ib_copies(experts, top_k, ep, per_node, None)


def test_active_parameters_are_the_published_ones():
    """Shared experts on every token, top-k routed ones: DeepSeek-V3 37B of 671B active
    (DeepSeek-AI 2024, Table 1 of the report), Mixtral 12.9B of 46.7B (Jiang et al. 2024)."""
    for preset, active, total in (("deepseek-v3", 37e9, 671e9), ("mixtral-8x7b", 12.9e9, 46.7e9)):
        m = PlannerParams(preset=preset).plan_model()
        assert m.layers * m.active_layer_params + m.embedding_params == pytest.approx(active,
                                                                                     rel=0.03)
        assert m.total_params == pytest.approx(total, rel=0.01)


def test_h800_and_fp8_are_the_data_sheets():
    h800, h100 = GPU_SPECS["h800-80"], GPU_SPECS["h100-80"]
    assert (h800.peak_tflops, h800.fp8_tflops, h800.hbm_tbs, h800.capacity) == \
        (h100.peak_tflops, 1979, h100.hbm_tbs, h100.capacity)
    assert h800.nvlink_gbs == 200 and h100.nvlink_gbs == 450       # 400 / 900 GB/s both ways
    assert PlannerParams(gpu="h800-80", intra_node_gbs=200).cluster().nvlink_gbs == 200
    with pytest.raises(ParamsError) as error:
        parse(PlannerParams, {"gpu": "a100-80", "gemm_dtype": "fp8"})
    assert error.value.problems[0].param == "gemm_dtype"


def test_fp8_speeds_the_matmuls_not_the_mfu_peak():
    """A compute-bound dense mix: FP8 GEMMs (twice the tensor-core peak) shorten the step, and
    MFU stays counted over the dense BF16 peak (the contract)."""
    base = dict(preset="llama3-70b", gpus=64, global_batch=64, seq=4096, tp=8, pp=1, dp=8,
                zero=1, micro_batch=1, recompute="selective")
    bf16, fp8 = (search(p.plan_model(), p.cluster(), p.global_batch, p.pins(), listed=1).best
                 for p in (PlannerParams(**base), PlannerParams(**base, gemm_dtype="fp8")))
    assert fp8.step_s < 0.85 * bf16.step_s
    assert fp8.mfu == pytest.approx(bf16.mfu * bf16.step_s / fp8.step_s, rel=1e-9)


@pytest.mark.parametrize("preset,seq,tp", [("gpt3-175b", 2048, 8), ("llama3-8b", 8192, 1),
                                           ("llama3-70b", 4096, 4)])
def test_flash_attention_keeps_no_scores(preset, seq, tp):
    """Korthikanti et al. 2022 Table 2's score terms — 5·a·s²·b/t bytes a layer with dropout
    (softmax output 2, mask 1, dropout output 2), 2·a·s²·b/t without (Llama) — are what
    FlashAttention does not keep (Dao et al. 2022 §3.1)."""
    m = PlannerParams(preset=preset, seq=seq).plan_model()
    flash, stored = (layer_bytes(replace(m, attention=a), seq, tp, "none")
                     for a in ("flash", "materialized"))
    per_score = 5 if m.family == "gpt" else 2
    assert stored - flash == pytest.approx(per_score * m.heads * seq * seq / tp, rel=1e-9)


def test_mla_keeps_its_own_widths():
    """DeepSeek-V3's MLA (HF config: 128 heads, q/k 128 + 64, v 128; latents 1,536 + 512 +
    64): with every activation kept a layer stores Q, K, V at their widths, not h; selective
    recomputation (the up-projections recomputed, §3.3.2) keeps the latents instead."""
    m = PlannerParams(preset="deepseek-v3").plan_model()
    plain = replace(m, qk_head_dim=0, v_head_dim=0, latent_dim=0)
    s, h = 4096, 7168
    q_k_v = 128 * (192 + 192 + 128)
    assert layer_bytes(m, s, 1, "none") - layer_bytes(plain, s, 1, "none") == \
        pytest.approx(2 * s * (q_k_v - 3 * h), rel=1e-9)
    assert layer_bytes(m, s, 1, "selective") - layer_bytes(plain, s, 1, "selective") == \
        pytest.approx(2 * s * (1536 + 512 + 64 - 3 * h), rel=1e-9)
    assert layer_bytes(m, s, 1, "full") == layer_bytes(plain, s, 1, "full")


def test_dualpipe_holds_two_chunks_and_hides_the_all_to_alls():
    """DualPipe (DeepSeek-AI 2024 §3.2.1, its Table 2): twice the parameters and their states
    a rank, p + 1 micro-batches of activations (1F1B: p); the all-to-alls hide behind the
    other micro-batch's compute."""
    base = dict(preset="mixtral-8x7b", gpus=64, global_batch=256, seq=4096, tp=1, pp=4,
                dp=16, ep=8, zero=1, micro_batch=1, recompute="full", gpus_per_node=2)
    one, dual = (search(p.plan_model(), p.cluster(), p.global_batch, p.pins(), listed=1).best
                 for p in (PlannerParams(**base, schedule="1f1b"),
                           PlannerParams(**base, schedule="dualpipe")))
    assert dual.schedule == "dualpipe" and one.schedule == "1f1b"
    assert dual.memory["states"] == pytest.approx(2 * one.memory["states"], rel=1e-9)
    layer = layer_bytes(PlannerParams(preset="mixtral-8x7b", seq=4096).plan_model(), 4096, 1,
                        "full")
    assert dual.memory["activations"] == pytest.approx(layer * 8 * 5, rel=1e-9)  # 8 layers
    assert one.memory["activations"] < layer * 8 * 4 * 1.0000001
    assert one.budget["ep"] > 0.05 * one.step_s
    assert dual.budget["ep"] < 0.2 * one.budget["ep"]


def test_dualpipe_is_searched_for_moe_only():
    dense = PlannerParams(preset="llama3-8b", gpus=32, global_batch=64, seq=4096)
    plan = search(dense.plan_model(), dense.cluster(), 64, dense.pins(), listed=400)
    assert all(c.schedule != "dualpipe" for c in plan.candidates)
    pinned = search(dense.plan_model(), dense.cluster(), 64, Pins(schedule="dualpipe"),
                    listed=50)
    assert pinned.candidates and all(c.schedule == "dualpipe" and c.pp % 2 == 0
                                     for c in pinned.candidates)
