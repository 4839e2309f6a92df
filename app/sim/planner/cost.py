"""Step time of every candidate: compute, communication by kind, the bubble (chapters 2–10).

Per micro-batch and pipeline stage, this GPU (T = b·s/cp tokens):

1. GEMMs: each of a layer's matmuls (QKV, output projection, MLP in and out, experts) is a
   roofline: max(2·M·K·N / (e_gemm·peak), 2·(MK + KN + MN) bytes / (e_hbm·HBM)) — a GEMM is
   compute-bound unless it is thin, and e_gemm is the measured large-GEMM fraction of peak
   (:mod:`app.sim.planner.hardware`). Forward once, backward twice (data and weight
   gradients), full recomputation one more forward.
2. Attention core: causal flash attention, 2·b·s²·h/(tp·cp) FLOPs a forward (half of the
   unmasked 4bs²h), at e_attention·peak; ×3 for forward and backward, +1 with selective or full
   recomputation.
3. Element-wise work (norms, residuals, activations, dropout, rotary): ≈ 20 sbh + 4 s·b·ffn
   element reads and writes a forward in 16 bit (÷t under sequence parallelism), at HBM speed.
4. Tensor parallelism with sequence parallelism: two all-gathers and two reduce-scatters of
   T·h 16-bit values per layer and pass (the volume of two all-reduces), forward, backward and
   recomputed forward; NVLink if tp ≤ GPUs per node, else InfiniBand; not overlapped.
5. Context parallelism (Llama 3's all-gather of K/V): all-gather K and V of the whole sequence
   forward, reduce-scatter their gradients backward; exposed.
6. Expert parallelism: dispatch and combine all-to-alls of T·k·h values, forward and backward.
7. Pipeline: bubble (p−1)/v · t_microbatch (1F1B: (p−1)(t_f + t_b), interleaved ÷ v;
   Narayanan et al. 2021); activations sent point-to-point, exposed only while filling.
8. Data parallelism over dp·cp ranks (16-bit gradients): ZeRO 0 all-reduce, ZeRO 1–2
   reduce-scatter + all-gather, hidden behind the last micro-batch's backward (and next forward)
   as far as it lasts; ZeRO-3 gathers parameters twice and reduce-scatters gradients every
   micro-batch, overlapped with that micro-batch's compute.
9. Optimizer step: reads and writes 16 bytes per local parameter (÷ dp with ZeRO ≥ 1) at HBM speed.

Collectives follow the α–β model of chapter 2 with nccl-tests' bus factors: all-reduce
2(n−1)α + 2(n−1)/n · S/B, all-gather and reduce-scatter (n−1)α + (n−1)/n · S/B, all-to-all
(n−1)α + (n−1)/n · S/B; B is the link's rate × NCCL's efficiency. Links by placement in
Megatron-LM's order tp-cp-ep-dp-pp (rank r on node r // gpus_per_node): a group crosses nodes
when the product of its axis and the faster ones exceeds the node.

Left out: kernel-launch gaps, stragglers and failures, data loading, optimizer-step overlap,
TP-communication overlap (Transformer Engine's userbuffers), network congestion and topology
beyond one NIC per GPU, load imbalance between experts, FP8.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.planner.hardware import HBM_EFFICIENCY, NCCL_EFFICIENCY, GpuSpec
from app.sim.planner.model import PlanModel

ELEMENTWISE_SBH = 20


@dataclass(frozen=True)
class Cluster:
    gpu: GpuSpec
    gpus: int
    gpus_per_node: int = 8
    nvlink_gbs: float = 450.0
    ib_gbs: float = 50.0
    nvlink_alpha_us: float = 5.0
    ib_alpha_us: float = 10.0


def _coll(kind: str, size, n, gbs, alpha_us):
    """α–β time of one collective of ``size`` bytes (the whole tensor) over n ranks."""
    n = np.asarray(n, dtype=float)
    bw = gbs * 1e9 * NCCL_EFFICIENCY
    frac = (n - 1) / np.maximum(n, 1)
    if kind == "all_reduce":
        t = 2 * (n - 1) * alpha_us * 1e-6 + 2 * frac * size / bw
    else:                                        # all_gather, reduce_scatter, all_to_all
        t = (n - 1) * alpha_us * 1e-6 + frac * size / bw
    return np.where(n > 1, t, 0.0)


def _link(cluster: Cluster, span):
    """(bandwidth, α) for a group whose ranks span ``span`` consecutive ranks."""
    cross = span > cluster.gpus_per_node
    return (np.where(cross, cluster.ib_gbs, cluster.nvlink_gbs),
            np.where(cross, cluster.ib_alpha_us, cluster.nvlink_alpha_us))


def _gemm(M, K, N, peak, hbm, e):
    flops = 2 * M * K * N
    return np.maximum(flops / (e * peak), 2 * (M * K + K * N + M * N) / hbm)


def layer_gemm_time(model: PlanModel, tokens, tp, ep, peak, hbm, e):
    """One forward of one layer's matmuls on this GPU (seconds)."""
    h, kv = model.hidden, model.kv_dim
    t = _gemm(tokens, h, (h + 2 * kv) / tp, peak, hbm, e) + _gemm(tokens, h / tp, h, peak, hbm, e)
    if model.moe:
        # attention's other projections are in layer_params; MLP: routed experts + shared
        local_experts = model.experts / ep
        per_expert = tokens * ep * model.top_k / model.experts
        f = model.expert_ffn
        experts = local_experts * (_gemm(per_expert, h, 2 * f / tp, peak, hbm, e)
                                   + _gemm(per_expert, f / tp, h, peak, hbm, e))
        frac = model.moe_layers / model.layers
        rest = max(0.0, model.layer_params - 2 * h * (h + kv) - 2 * h) / h  # shared/dense MLP
        dense = _gemm(tokens, h, rest / tp, peak, hbm, e)
        return t + frac * experts + dense
    f = model.ffn * (2 if model.gated else 1)
    return t + _gemm(tokens, h, f / tp, peak, hbm, e) + _gemm(tokens, model.ffn / tp, h, peak,
                                                                 hbm, e)


def step_costs(model: PlanModel, cluster: Cluster, global_batch: int, g) -> dict:
    gpu = cluster.gpu
    peak, hbm = gpu.peak_tflops * 1e12, gpu.hbm_tbs * 1e12 * HBM_EFFICIENCY
    tp, cp, pp, dp, ep, v, z, b, m, rc = (g[k].astype(float) for k in
                                          ("tp", "cp", "pp", "dp", "ep", "v", "zero", "b", "m",
                                           "rc"))
    L, h, s, V = model.layers, model.hidden, model.seq, model.vocab
    full, selective = rc == 2, rc == 1
    T = b * s / cp
    gpn = cluster.gpus_per_node
    # 1–3. compute of one layer, one micro-batch: forward, backward, recomputation
    gemm_f = layer_gemm_time(model, T, tp, ep, peak, hbm, gpu.gemm)
    attn_f = 2 * b * s * s / cp * h / tp / (gpu.attention * peak)
    shard = np.where(tp > 1, tp, 1)
    elem_f = (ELEMENTWISE_SBH * T * h / shard + 4 * T * model.ffn / tp) * 2 / hbm
    layer_compute = (gemm_f * np.where(full, 4, 3) + attn_f * np.where(full | selective, 4, 3)
                     + elem_f * np.where(full, 4, 3))
    head_f = _gemm(T, h, V / tp, peak, hbm, gpu.gemm)   # output layer (last stage), no recompute
    # 4. TP: two all-reduce volumes per layer and pass
    bw, a = _link(cluster, tp)
    passes = np.where(full, 3, 2)
    tp_layer = 2 * passes * _coll("all_reduce", T * h * 2, tp, bw, a)
    # 5. CP: all-gather K/V (whole sequence, kv heads ÷ tp), reduce-scatter their gradients
    bw, a = _link(cluster, tp * cp)
    kv_bytes = 2 * b * s * model.kv_dim / tp * 2
    cp_layer = np.where(full, 2, 1) * _coll("all_gather", kv_bytes, cp, bw, a) + \
        _coll("reduce_scatter", kv_bytes, cp, bw, a)
    # 6. EP: dispatch + combine forward and backward (+ forward again with full recompute)
    bw, a = _link(cluster, tp * ep)
    ep_layer = (model.moe_layers / L) * 2 * np.where(full, 3, 2) * \
        _coll("all_to_all", T * model.top_k * h * 2, ep, bw, a) if model.moe else 0.0 * tp
    # 7. the stage: the busiest of ⌈L/p⌉ layers and the last stage's remainder + output layer
    per_stage = np.ceil(L / pp)
    last_layers = L - (pp - 1) * per_stage
    layer_all = layer_compute + tp_layer + cp_layer + ep_layer
    head = 3 * head_f + 2 * _coll("all_reduce", T * h * 2, tp, *_link(cluster, tp)) * 0
    stage_t = np.where(pp > 1, np.maximum(per_stage * layer_all, last_layers * layer_all + head),
                       L * layer_all + head)
    busy = np.where(pp > 1, np.maximum(per_stage, last_layers), L)
    compute_mb = np.where(pp > 1, np.maximum(per_stage * layer_compute,
                                             last_layers * layer_compute + 3 * head_f),
                          L * layer_compute + 3 * head_f)
    bubble = (pp - 1) / v * stage_t
    bw, a = _link(cluster, tp * cp * dp * pp)
    p2p = T * h * 2 / shard / (bw * 1e9 * NCCL_EFFICIENCY) + a * 1e-6
    pp_t = np.where(pp > 1, 2 * (pp - 1) * p2p, 0.0)
    # 8. DP / ZeRO over dp·cp ranks, 16-bit gradients
    nd = dp * cp
    local = model.dense_params / (tp * pp) + model.routed_params / (ep * tp * pp)
    bw, a = _link(cluster, tp * cp * dp)
    grads = 2 * local
    ar = _coll("all_reduce", grads, nd, bw, a)
    rs = _coll("reduce_scatter", grads, nd, bw, a)
    ag = _coll("all_gather", grads, nd, bw, a)
    bwd_window = stage_t * 2 / 3
    fwd_window = stage_t / 3
    dp_t = np.select(
        [z == 0, z <= 2],
        [np.maximum(0, ar - bwd_window),
         np.maximum(0, rs - bwd_window) + np.maximum(0, ag - fwd_window)],
        m * np.maximum(0, 2 * ag + rs - stage_t))
    # 9. optimizer step
    opt = 2 * 16 * local / np.where(z >= 1, nd, 1) / hbm
    step = m * stage_t + bubble + pp_t + dp_t + opt
    parts = {"compute": m * compute_mb,
             "tp": m * busy * tp_layer, "cp": m * busy * cp_layer,
             "ep": m * busy * ep_layer if model.moe else 0.0 * tp,
             "pp": pp_t, "dp": dp_t, "bubble": bubble, "optimizer": opt}
    # FLOPs: model (Narayanan et al. 2021's count, unmasked attention) and executed
    tokens = global_batch * s
    model_flops = tokens * (6 * L * model.active_layer_params + 12 * L * s * h + 6 * h * V)
    recompute = tokens * np.where(full, 2 * L * model.active_layer_params + 4 * L * s * h,
                                  np.where(selective, 4 * L * s * h, 0.0))
    world = cluster.gpus
    kinds = ("compute", "tp", "cp", "ep", "pp", "dp", "bubble")
    stack = np.stack([np.broadcast_to(parts[k], step.shape) for k in kinds])
    bound = np.asarray(kinds)[np.argmax(stack, axis=0)]
    return {**{k: np.broadcast_to(vv, step.shape).astype(float) for k, vv in parts.items()},
            "step": step, "tokens_per_s": tokens / step,
            "tflops": (model_flops + recompute) / step / world / 1e12,
            "mfu": model_flops / step / world / peak, "bound": bound}
