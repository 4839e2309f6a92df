"""Step time of every candidate: compute, communication by kind, the bubble (chapters 2–10).

Per micro-batch and pipeline stage, this GPU (T = b·s/cp tokens):

1. GEMMs: each of a layer's matmuls (QKV, output projection, MLP in and out, experts) is a
   roofline: max(2·M·K·N / (e_gemm·peak), 2·(MK + KN + MN) bytes / (e_hbm·HBM)) — a GEMM is
   compute-bound unless it is thin, and e_gemm is the measured large-GEMM fraction of peak
   (:mod:`app.sim.planner.hardware`). Forward once, backward twice (data and weight
   gradients), full recomputation one more forward.
2. Attention core: causal flash attention, 2·b·s²·h/(tp·cp) FLOPs a forward (half of the
   unmasked 4bs²h), at e_attention·peak; ×3 for forward and backward, +1 with selective or full
   recomputation. Before FlashAttention (Dao et al. 2022), as in PTD-P's runs (``attention =
   "materialized"``): per head two batched GEMMs of inner size h/a over the unmasked s × s
   scores, as rooflines, and the scores through HBM for softmax and dropout
   (:data:`SOFTMAX_DROPOUT_BYTES`) — the term that makes small hidden sizes slower: a·s²
   against a layer's 24·s·h² GEMM FLOPs is 20× larger at h = 2,304 than at 25,600.
3. Element-wise work (norms, residuals, activations, dropout, rotary): ≈ 20 sbh + 4 s·b·ffn
   element reads and writes a forward in 16 bit (÷t under sequence parallelism), at HBM speed.
4. Tensor parallelism with sequence parallelism: two all-gathers and two reduce-scatters of
   T·h 16-bit values per layer and pass (the volume of two all-reduces), forward, backward and
   recomputed forward; NVLink if tp ≤ GPUs per node, else InfiniBand; not overlapped.
5. Context parallelism (Llama 3's all-gather of K/V): all-gather K and V of the whole sequence
   forward, reduce-scatter their gradients backward; exposed.
6. Expert parallelism (:mod:`app.sim.planner.moe_cost`): dispatch and combine all-to-alls of
   T·k·h values, forward and backward, per message on NVLink or InfiniBand, node-limited
   routing deduplicating the inter-node bytes, hidden behind the other micro-batch under
   DualPipe — whose communication kernels take 20 of the GPU's 132 SMs from the GEMMs while
   they run (DeepSeek-V3 §3.2.2), so an MoE layer's compute then runs at 112/132 of its pace.
7. Pipeline: bubble (p−1)/v · t_microbatch (1F1B: (p−1)(t_f + t_b), interleaved ÷ v;
   Narayanan et al. 2021); activations sent point-to-point, exposed only while filling.
8. Data parallelism over dp·cp ranks (16-bit gradients and parameters):
   ZeRO 0 (DDP) all-reduce, hidden behind the last micro-batch's backward as far as it lasts
   (Li et al. 2020, PyTorch DDP's bucketed overlap); ZeRO 1 (Megatron-LM's distributed
   optimizer) reduce-scatter once a step behind the last backward and all-gather of the
   updated parameters behind the first forward. ZeRO 2 (DeepSpeed stage 2 with gradient
   accumulation reduces every micro-batch: DeepSpeed's ZeRO docs, ``overlap_comm``,
   ``reduce_bucket_size``): each layer's gradients reduce-scattered after its backward, hidden
   by the next layer's backward, the very last one exposed. ZeRO 3 (Rajbhandari et al. 2019
   §7.2.2: parameters all-gathered for forward and again for backward, gradients
   reduce-scattered — 3Ψ a step against DDP's 2Ψ; DeepSpeed stage 3 and PyTorch FSDP, Zhao et
   al. 2023's communication optimizations (backward and forward prefetch), do it layer by
   layer, every micro-batch, and prefetch the next layer's gather one layer ahead): a layer's
   forward costs max(compute, gather) and its backward max(compute, gather + reduce-scatter).
   FSDP's count (PyTorch FSDP2, what torchtitan runs): the gather before a layer's backward
   also serves its recomputed forward under full recomputation (DeepSpeed's stage 3 gathers
   once more there, its checkpointed forward running the layer's pre-forward hook again). The
   first gather of the forward and of the backward and the last reduce-scatter have no compute
   beside them and are exposed.
9. Optimizer step: reads and writes 16 bytes per local parameter (÷ dp with ZeRO ≥ 1) at HBM speed.

Collectives follow the α–β model of chapter 2 for rings (Thakur, Rabenseifner and Gropp
2005, "Optimization of collective communication operations in MPICH", §4: ring all-gather
(n−1)α + (n−1)/n · nβ) with nccl-tests' bus factors (nccl-tests doc/PERFORMANCE.md): all-reduce
2(n−1)α + 2(n−1)/n · S/B, all-gather and reduce-scatter (n−1)α + (n−1)/n · S/B, all-to-all
(n−1)α + (n−1)/n · S/B; B is the link's rate × NCCL's efficiency. The ring's n−1 latency steps,
not a tree's log n: NCCL runs all-gather and reduce-scatter as rings only, so ZeRO-3's gathers
over 768 ranks pay 767 α each (7.7 ms at 10 µs). Links by placement in
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
from app.sim.planner.moe_cost import ep_layer_s, exposed_ep, overlap_slowdown

ELEMENTWISE_SBH = 20


@dataclass(frozen=True)
class Cluster:
    """The GPUs and links, and how the software runs on them."""

    gpu: GpuSpec
    gpus: int
    gpus_per_node: int = 8
    nvlink_gbs: float = 450.0
    ib_gbs: float = 50.0
    nvlink_alpha_us: float = 5.0
    ib_alpha_us: float = 10.0
    grad_overlap: bool = True        # DP gradient reduction overlapped with backward
    gemm_dtype: str = "bf16"         # bf16 | fp8 (the layers' matmuls; attention stays bf16)
    node_limit: int | None = None    # MoE: a token goes to at most this many nodes


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
    if model.moe:
        # attention projections (MLA's down- and up-projections as one GEMM of their size);
        # MLP: the routed experts on their tokens, the shared experts and the dense MLPs of
        # the first layers on every token
        attn = model.projection_params
        t = _gemm(tokens, h, attn / h / tp, peak, hbm, e)
        local_experts = model.experts / ep
        per_expert = tokens * ep * model.top_k / model.experts
        f = model.expert_ffn
        experts = local_experts * (_gemm(per_expert, h, 2 * f / tp, peak, hbm, e)
                                   + _gemm(per_expert, f / tp, h, peak, hbm, e))
        frac = model.moe_layers / model.layers
        rest = max(0.0, model.layer_params - attn - 2 * h) / h   # shared experts, dense MLP
        dense = _gemm(tokens, h, rest / tp, peak, hbm, e)
        return t + frac * experts + dense
    t = _gemm(tokens, h, (h + 2 * kv) / tp, peak, hbm, e) + _gemm(tokens, h / tp, h, peak, hbm, e)
    f = model.ffn * (2 if model.gated else 1)
    return t + _gemm(tokens, h, f / tp, peak, hbm, e) + _gemm(tokens, model.ffn / tp, h, peak,
                                                                 hbm, e)


SOFTMAX_DROPOUT_BYTES = (9, 11)
"""Bytes per attention score moved outside the two batched GEMMs when the scores are
materialized (Megatron-LM's fused scale-mask-softmax, then dropout): forward softmax reads and
writes 16-bit scores (4), dropout reads them, writes its output and a 1-byte mask (5); backward
dropout reads the gradient and the mask and writes (5), softmax reads the gradient and its
output and writes (6). These are the tensors of Korthikanti et al. 2022, Table 2's 5as²b term
(softmax output 2, mask 1, dropout output 2 bytes per score)."""


def materialized_attention(model: PlanModel, b, rows, s, tp, peak, hbm, e):
    """Attention without FlashAttention, as PTD-P's Megatron-LM (2021) ran it: per head the
    scores QKᵀ (rows × s) and the context P·V are batched GEMMs of inner size d = h/a (unmasked:
    the mask is applied after), and the scores go through HBM for softmax and dropout
    (:data:`SOFTMAX_DROPOUT_BYTES`). Forward and backward seconds of one layer on this GPU."""
    heads = b * model.heads / tp
    d = model.hidden / model.heads
    bmm = heads * (_gemm(rows, d, s, peak, hbm, e) + _gemm(rows, s, d, peak, hbm, e))
    scores = heads * rows * s
    fwd, bwd = SOFTMAX_DROPOUT_BYTES
    return bmm + fwd * scores / hbm, 2 * bmm + bwd * scores / hbm


def _layer_terms(model: PlanModel, cluster: Cluster, tp, cp, ep, b, rc, dual) -> dict:
    """Steps 1–6 for one layer and one micro-batch: what depends on (tp, cp, ep, b,
    recompute, DualPipe) only."""
    gpu = cluster.gpu
    peak, hbm = gpu.peak_tflops * 1e12, gpu.hbm_tbs * 1e12 * HBM_EFFICIENCY
    mm_peak = (gpu.fp8_tflops if cluster.gemm_dtype == "fp8" else gpu.peak_tflops) * 1e12
    h, s, V = model.hidden, model.seq, model.vocab
    full, selective = rc == 2, rc == 1
    T = b * s / cp
    # 1–3. compute of one layer, one micro-batch: forward, backward, recomputation
    gemm_f = layer_gemm_time(model, T, tp, ep, mm_peak, hbm, gpu.gemm)
    rc_attn = np.where(full | selective, 1, 0)          # attention recomputed in backward
    if model.attention == "materialized":
        attn_f, attn_b = materialized_attention(model, b, s / cp, s, tp, peak, hbm, gpu.gemm)
        attn_total = attn_f * (1 + rc_attn) + attn_b
    else:
        d_qk, d_v = model.head_dims                     # causal: half the s² pairs
        attn_f = b * s * s / cp * model.heads * (d_qk + d_v) / tp / (gpu.attention * peak)
        attn_total = attn_f * (3 + rc_attn)
    shard = np.where(tp > 1, tp, 1)
    elem_f = (ELEMENTWISE_SBH * T * h / shard + 4 * T * model.ffn / tp) * 2 / hbm
    layer_compute = (gemm_f * np.where(full, 4, 3) + attn_total
                     + elem_f * np.where(full, 4, 3))
    head_f = _gemm(T, h, V / tp, peak, hbm, gpu.gemm)   # output layer (last stage), no recompute
    # 4. TP: two all-reduce volumes per layer and pass
    bw, a = _link(cluster, tp)
    passes = np.where(full, 3, 2)
    tp_layer = 2 * passes * _coll("all_reduce", T * h * 2, tp, bw, a)
    # 5. CP: all-gather K/V (whole sequence, kv heads ÷ tp), reduce-scatter their gradients
    bw, a = _link(cluster, tp * cp)
    kv_bytes = 2 * b * s * model.kv_dim / tp * 2
    cp_fwd = _coll("all_gather", kv_bytes, cp, bw, a)
    cp_layer = np.where(full, 2, 1) * cp_fwd + _coll("reduce_scatter", kv_bytes, cp, bw, a)
    # 6. EP: dispatch + combine forward and backward (+ forward again with full recompute),
    #    hidden behind the other micro-batch's compute under DualPipe (moe_cost)
    ep_fwd, ep_all = ep_layer_s(model, cluster, T, tp, cp, ep, full)
    if model.moe:
        layer_compute = layer_compute * np.where(dual & (ep > 1), overlap_slowdown(model), 1.0)
    ep_layer = exposed_ep(ep_all, layer_compute + tp_layer + cp_layer, dual)
    return {"gemm_f": gemm_f, "attn_f": attn_f, "elem_f": elem_f, "layer_compute": layer_compute,
            "head_f": head_f, "tp_layer": tp_layer, "passes": passes, "cp_fwd": cp_fwd,
            "cp_layer": cp_layer, "ep_fwd": ep_fwd, "ep_layer": ep_layer}


def step_costs(model: PlanModel, cluster: Cluster, global_batch: int, g) -> dict:
    gpu = cluster.gpu
    peak, hbm = gpu.peak_tflops * 1e12, gpu.hbm_tbs * 1e12 * HBM_EFFICIENCY
    tp, cp, pp, dp, ep, v, z, b, m, rc = (g[k].astype(float) for k in
                                          ("tp", "cp", "pp", "dp", "ep", "v", "zero", "b", "m",
                                           "rc"))
    dual = g["dual"].astype(bool) if "dual" in g else np.zeros(tp.shape, dtype=bool)
    L, h, s, V = model.layers, model.hidden, model.seq, model.vocab
    full, selective = rc == 2, rc == 1
    T = b * s / cp
    shard = np.where(tp > 1, tp, 1)
    terms = _layer_terms(model, cluster, tp, cp, ep, b, rc, dual)        # 1–6
    gemm_f, attn_f, elem_f, layer_compute, head_f = (terms[k] for k in (
        "gemm_f", "attn_f", "elem_f", "layer_compute", "head_f"))
    tp_layer, passes, cp_fwd, cp_layer, ep_fwd, ep_layer = (terms[k] for k in (
        "tp_layer", "passes", "cp_fwd", "cp_layer", "ep_fwd", "ep_layer"))
    # 7. the stage: the busiest of ⌈L/p⌉ layers and the last stage's remainder + output layer
    per_stage = np.ceil(L / pp)
    last_layers = L - (pp - 1) * per_stage
    layer_all = layer_compute + tp_layer + cp_layer + ep_layer
    head = 3 * head_f
    stage_t = np.where(pp > 1, np.maximum(per_stage * layer_all, last_layers * layer_all + head),
                       L * layer_all + head)
    busy = np.where(pp > 1, np.maximum(per_stage, last_layers), L)
    compute_mb = np.where(pp > 1, np.maximum(per_stage * layer_compute,
                                             last_layers * layer_compute + 3 * head_f),
                          L * layer_compute + 3 * head_f)
    # bubble: 1F1B (p−1)(F + B), interleaved ÷ v (Narayanan et al. 2021); DualPipe
    # (p/2 − 1)(F&B + B − 3W) (DeepSeek-AI 2024, Table 2), W the weight-gradient GEMMs
    fwd_share = (gemm_f + attn_f + elem_f) / np.maximum(layer_compute, 1e-30)
    stage_b = stage_t * (1 - fwd_share)
    stage_w = busy * gemm_f
    bubble = np.where(dual, np.maximum(0.0, pp / 2 - 1) * (stage_t + stage_b - 3 * stage_w),
                      (pp - 1) / v * stage_t)
    bw, a = _link(cluster, tp * cp * dp * pp)
    p2p = T * h * 2 / shard / (bw * 1e9 * NCCL_EFFICIENCY) + a * 1e-6
    pp_t = np.where(pp > 1, 2 * (pp - 1) * p2p, 0.0)
    # 8. DP / ZeRO over dp·cp ranks, 16-bit gradients and parameters
    nd = dp * cp
    local = model.dense_params / (tp * pp) + model.routed_params / (ep * tp * pp)
    bw, a = _link(cluster, tp * cp * dp)
    grads = 2 * local
    ar = _coll("all_reduce", grads, nd, bw, a)
    rs = _coll("reduce_scatter", grads, nd, bw, a)
    ag = _coll("all_gather", grads, nd, bw, a)
    overlap = 1.0 if cluster.grad_overlap else 0.0     # 0: the reductions follow the backward
    bwd_window = stage_t * 2 / 3 * overlap
    fwd_window = stage_t / 3 * overlap
    # one layer's forward and backward (recomputation included) on this GPU: the compute that
    # hides the next layer's gather or the previous layer's reduce-scatter
    layer_fwd = gemm_f + attn_f + elem_f + tp_layer / passes + cp_fwd + ep_fwd
    layer_bwd = layer_all - layer_fwd
    layer_bytes = grads / busy                          # one layer's 16-bit parameters (÷ tp, ep)
    ag_l = _coll("all_gather", layer_bytes, nd, bw, a)
    rs_l = _coll("reduce_scatter", layer_bytes, nd, bw, a)
    # ZeRO-2 (DeepSpeed): gradients reduce-scattered every micro-batch, layer by layer as their
    # backward ends, hidden by the next layer's backward (or the next micro-batch's forward);
    # the last micro-batch's last layer has nothing after it
    zero2 = (m * busy * np.maximum(0, rs_l - layer_bwd) + rs_l
             + np.maximum(0, ag - fwd_window))
    # ZeRO-3 (DeepSpeed stage 3, FSDP): every micro-batch gathers each layer before its forward
    # and again before its backward (and before its recomputed forward with full
    # recomputation), then reduce-scatters its gradients; prefetching one layer ahead hides a
    # layer's traffic behind the neighbouring layer's compute, so a layer costs
    # max(compute, traffic) and the first gather of each pass is exposed
    bwd_traffic = ag_l + rs_l
    zero3 = m * (ag_l + busy * np.maximum(0, ag_l - layer_fwd)
                 + ag_l + busy * np.maximum(0, bwd_traffic - layer_bwd) + rs_l)
    dp_t = np.select(
        [z == 0, z == 1, z == 2],
        [np.maximum(0, ar - bwd_window),
         np.maximum(0, rs - bwd_window) + np.maximum(0, ag - fwd_window),
         zero2],
        zero3)
    # 9. optimizer step (DualPipe: each rank updates its two chunks)
    copies = np.where(dual, 2, 1)
    opt = 2 * 16 * local * copies / np.where(z >= 1, nd, 1) / hbm
    step = m * stage_t + bubble + pp_t + dp_t + opt
    parts = {"compute": m * compute_mb,
             "tp": m * busy * tp_layer, "cp": m * busy * cp_layer,
             "ep": m * busy * ep_layer if model.moe else 0.0 * tp,
             "pp": pp_t, "dp": dp_t, "bubble": bubble, "optimizer": opt}
    # FLOPs: model (Narayanan et al. 2021's count, unmasked attention) and executed
    tokens = global_batch * s
    attn_model = 6 * L * s * model.heads * sum(model.head_dims)   # 12·L·s·h for MHA
    model_flops = tokens * (6 * L * model.active_layer_params + attn_model + 6 * h * V)
    recompute = tokens * np.where(full, 2 * L * model.active_layer_params + attn_model / 3,
                                  np.where(selective, attn_model / 3, 0.0))
    world = cluster.gpus
    kinds = ("compute", "tp", "cp", "ep", "pp", "dp", "bubble")
    stack = np.stack([np.broadcast_to(parts[k], step.shape) for k in kinds])
    bound = np.asarray(kinds)[np.argmax(stack, axis=0)]
    return {**{k: np.broadcast_to(vv, step.shape).astype(float) for k, vv in parts.items()},
            "step": step, "tokens_per_s": tokens / step,
            "tflops": (model_flops + recompute) / step / world / 1e12,
            "mfu": model_flops / step / world / peak, "bound": bound}
