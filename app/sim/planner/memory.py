"""Chapter 1's memory ledger (:mod:`app.sim.memory.ledger`) over the whole candidate grid.

The same terms as the ledger, as arrays: model states per ZeRO (Rajbhandari et al. 2019,
Table 1: 2Ψ + 2Ψ + 12Ψ split over t·p, then optimizer / gradients / parameters over the
data-parallel ranks by stage), activations per layer from Korthikanti et al. 2022 Table 2
(:func:`app.sim.memory.activations.per_layer_bytes`, called once per (tp, cp, recompute) with
b = 1: they are linear in b) with sequence parallelism whenever tp > 1, the first stage holding
p micro-batches of its layers under 1F1B (× (1 + (p−1)/(pv)) interleaved, p + 1 and twice the
parameters under DualPipe), the last stage the
output layer's inputs and fp32 logits, and the ledger's buffers (1 GiB context, the logits'
gradient, ZeRO-3's two gathered layers and one layer's gradient, two 25 MiB buckets). With cp = 1 and a dense model the peak
equals :func:`app.sim.memory.ledger.ledger`'s with attention materialised as in Korthikanti et
al. (a test checks it); FlashAttention, MLA and MoE change a layer's terms (:func:`layer_bytes`). CP splits the sequence:
every activation is that of s/cp tokens. MoE: experts are split over ep·tp·pp, their states
over the expert-data-parallel ranks dp·cp/ep.
"""

from __future__ import annotations

from math import ceil

import numpy as np

from app.sim.memory.activations import per_layer_bytes
from app.sim.memory.ledger import BUCKET_BYTES, CONTEXT_BYTES
from app.sim.planner.hardware import GpuSpec
from app.sim.planner.model import PlanModel

RECOMPUTES = ("none", "selective", "full")


def _per_layer_table(model: PlanModel, g) -> np.ndarray:
    """Activation bytes of one layer, one sequence (b = 1), per candidate."""
    out = np.empty(len(g["tp"]))
    keys = g["tp"] * 10**6 + g["cp"] * 10 + g["rc"]
    for key in np.unique(keys):
        tp, cp, rc = int(key // 10**6), int(key % 10**6 // 10), int(key % 10)
        out[keys == key] = layer_bytes(model, model.seq // cp, tp, RECOMPUTES[rc])
    return out


def layer_bytes(model: PlanModel, seq: int, tp: int, recompute: str) -> float:
    """What one layer keeps for backward, one sequence of ``seq`` tokens on this GPU.

    Korthikanti et al. 2022's terms (:func:`app.sim.memory.activations.per_layer_bytes`, with
    sequence parallelism whenever tp > 1), and where the planner's models differ from GPT-3:

    * FlashAttention (Dao et al. 2022 §3.1) never stores the a·s² scores, softmax or dropout
      mask: it recomputes them in its backward from the output and a logsumexp per row, so
      with flash attention no recomputation keeps what selective recomputation keeps;
    * MLA (DeepSeek-AI 2024 §2.1.1): queries and keys are a·(128 + 64) wide and values a·128,
      not h; selective recomputation (DeepSeek-V3 §3.3.2 recomputes the up-projections) keeps
      the compressed latents (1,536 + 512 + 64 per token) instead of Q, K and V;
    * MoE layers keep each token's k dispatched copies (the experts' input) and their k
      outputs before the weighted sum (2·k·sbh more than a dense MLP's input).
    """
    stored = "selective" if model.attention == "flash" and recompute == "none" else recompute
    shape = model.layer_shape(seq, 1)
    out = per_layer_bytes(shape, tp, tp > 1, stored)
    if recompute == "full":
        return out
    sb, e, h, kv = seq, 2, model.hidden, model.kv_dim
    if model.latent_dim:
        d_qk, d_v = model.head_dims
        qkv = model.heads * (2 * d_qk + d_v)
        kept = model.latent_dim if recompute == "selective" else qkv
        out += e * sb * (kept - h - 2 * kv) / tp
    if model.moe:
        out += 2 * model.top_k * e * sb * h / tp * model.moe_layers / model.layers
    return out


def peak_bytes(model: PlanModel, g, gpu: GpuSpec) -> dict[str, np.ndarray]:
    tp, cp, pp, dp, ep, v, z, b = (g[k].astype(float) for k in
                                   ("tp", "cp", "pp", "dp", "ep", "v", "zero", "b"))
    dual = g["dual"].astype(bool) if "dual" in g else np.zeros(tp.shape, dtype=bool)
    L, h, V = model.layers, model.hidden, model.vocab
    # 1. model states: Ψ over t·p, then ZeRO over the data-parallel ranks (dp·cp)
    nd = dp * cp
    dense = model.dense_params / (tp * pp)
    expert = model.routed_params / (ep * tp * pp)
    nde = np.maximum(1.0, nd / ep)

    def states(local, n):
        return (2 * local / np.where(z >= 3, n, 1) + 2 * local / np.where(z >= 2, n, 1)
                + 12 * local / np.where(z >= 1, n, 1))

    # DualPipe keeps two chunks a rank: twice the parameters and their states (DeepSeek-V3
    # §3.2.1; "2× parameters" in its Table 2)
    st = (states(dense, nd) + (states(expert, nde) if model.moe else 0.0)) * np.where(dual, 2, 1)
    # 2. activations: first stage p micro-batches in flight of ⌈L/p⌉ layers, last stage one
    per_layer = _per_layer_table(model, g) * b
    per_stage = np.ceil(L / pp)
    last_layers = L - (pp - 1) * per_stage
    in_flight = np.where(dual, pp + 1, np.where(v > 1, pp * (1 + (pp - 1) / (pp * v)), pp))
    tokens = model.seq * b / cp                       # s·b on this GPU
    shard = np.where(tp > 1, tp, 1)                   # sequence parallelism
    gpt = model.family == "gpt"
    first = per_layer * per_stage * in_flight + (tokens * h / shard * pp if gpt else 0.0)
    head = 2 * tokens * h / shard * 2 + 4 * tokens * V / tp
    logits_grad = 2 * tokens * V / tp
    last = per_layer * last_layers + head
    only = per_layer * L + (tokens * h / shard if gpt else 0.0) + head
    # 3. buffers
    # ZeRO-3: two gathered layers (this one and the prefetched next) + one layer's gradient
    zero3 = np.where((z == 3) & (nd > 1), (2 * 2 + 2) * model.zero3_unit(tp, ep), 0.0)
    buckets = np.where(nd > 1, 2 * BUCKET_BYTES, 0.0)
    common = CONTEXT_BYTES + zero3 + buckets
    first_peak = st + first + common
    last_peak = st + last + logits_grad + common
    only_peak = st + only + logits_grad + common
    multi = pp > 1
    peak = np.where(multi, np.maximum(first_peak, last_peak), only_peak)
    acts = np.where(multi, np.where(first_peak >= last_peak, first, last), only)
    return {"peak": peak, "states": st, "activations": acts, "buffers": peak - st - acts,
            "fits": peak <= gpu.capacity}


def stage_layers(model: PlanModel, pp: int) -> tuple[int, int]:
    """Layers on the busiest stage and on the last one (Llama 3 style uneven split)."""
    per = ceil(model.layers / pp)
    return per, model.layers - (pp - 1) * per
