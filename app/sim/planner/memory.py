"""Chapter 1's memory ledger (:mod:`app.sim.memory.ledger`) over the whole candidate grid.

The same terms as the ledger, as arrays: model states per ZeRO (Rajbhandari et al. 2019,
Table 1: 2Ψ + 2Ψ + 12Ψ split over t·p, then optimizer / gradients / parameters over the
data-parallel ranks by stage), activations per layer from Korthikanti et al. 2022 Table 2
(:func:`app.sim.memory.activations.per_layer_bytes`, called once per (tp, cp, recompute) with
b = 1: they are linear in b) with sequence parallelism whenever tp > 1, the first stage holding
p micro-batches of its layers under 1F1B (× (1 + (p−1)/(pv)) interleaved), the last stage the
output layer's inputs and fp32 logits, and the ledger's buffers (1 GiB context, the logits'
gradient, ZeRO-3's two gathered layers and one layer's gradient, two 25 MiB buckets). With cp = 1 and a dense model the peak
equals :func:`app.sim.memory.ledger.ledger`'s (a test checks it). CP splits the sequence:
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
        shape = model.layer_shape(model.seq // cp, 1)
        out[keys == key] = per_layer_bytes(shape, tp, tp > 1, RECOMPUTES[rc])
    return out


def peak_bytes(model: PlanModel, g, gpu: GpuSpec) -> dict[str, np.ndarray]:
    tp, cp, pp, dp, ep, v, z, b = (g[k].astype(float) for k in
                                   ("tp", "cp", "pp", "dp", "ep", "v", "zero", "b"))
    L, h, V = model.layers, model.hidden, model.vocab
    # 1. model states: Ψ over t·p, then ZeRO over the data-parallel ranks (dp·cp)
    nd = dp * cp
    dense = model.dense_params / (tp * pp)
    expert = model.routed_params / (ep * tp * pp)
    nde = np.maximum(1.0, nd / ep)

    def states(local, n):
        return (2 * local / np.where(z >= 3, n, 1) + 2 * local / np.where(z >= 2, n, 1)
                + 12 * local / np.where(z >= 1, n, 1))

    st = states(dense, nd) + (states(expert, nde) if model.moe else 0.0)
    # 2. activations: first stage p micro-batches in flight of ⌈L/p⌉ layers, last stage one
    per_layer = _per_layer_table(model, g) * b
    per_stage = np.ceil(L / pp)
    last_layers = L - (pp - 1) * per_stage
    in_flight = np.where(v > 1, pp * (1 + (pp - 1) / (pp * v)), pp)
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
