"""Expert parallelism in the planner's step time: the dispatch and combine all-to-alls of one
MoE layer, with and without node-limited routing, and what DualPipe hides of them.

A rank of an EP group holds T = b·s/cp tokens of a micro-batch; each goes to its top-k routed
experts, spread evenly over the ep ranks (balanced routing — the load imbalance a real router
leaves is not modelled). The EP group's ranks follow Megatron-LM's order tp-cp-ep-dp-pp, so
peers are tp·cp ranks apart and g = gpus_per_node / (tp·cp) of them (at least 1, at most ep)
share a node; the group spans ep / g nodes.

1. Plain all-to-all (Megatron-LM's ``MoEAlltoAllTokenDispatcher`` over NCCL): a rank sends its
   T·k token copies of h elements, (g − 1)/ep of them to peers in its node over NVLink and
   (ep − g)/ep to other nodes over InfiniBand, one message after another (the per-message α–β
   model of /moe, :func:`app.sim.collectives.cost.pairwise_time_us`):
   (g − 1)·α_nv + (ep − g)·α_ib + bytes_nv/B_nv + bytes_ib/B_ib.
2. Node-limited routing (DeepSeek-V3 §2.1.2 and §3.2.2): a token is sent to at most M nodes,
   once per node over InfiniBand (to the GPU of the same index there), and forwarded inside
   the node over NVLink to the GPUs of its experts; the two run at once. Inter-node bytes per
   token are h·M·(n − 1)/n (the token's own node is one of the M with probability M/n), the
   NVLink forwarding T·k·h·(g − 1)/g; the all-to-all lasts max(IB, NVLink) + the latencies.
3. Element sizes: the dispatch carries FP8 activations when the GEMMs run in FP8 (DeepSeek-V3
   §3.3.4 quantises before dispatching), else BF16; the combine and every backward all-to-all
   carry BF16. A layer's forward has a dispatch and a combine, its backward the two reversed,
   full recomputation one more forward.
4. Overlap: with DualPipe (DeepSeek-V3 §3.2.1) a forward chunk of one micro-batch and a
   backward chunk of another run together, so each one's all-to-alls hide behind the other's
   compute: a layer exposes max(0, all-to-alls − its compute). The overlap is not free: the
   communication kernels take 20 of the GPU's 132 SMs while they run (§3.2.2), so the layer's
   compute runs at 112/132 of its pace (:func:`overlap_slowdown`). 1F1B and interleaved 1F1B
   expose the all-to-alls whole (Megatron-LM runs them on the compute stream).
"""

from __future__ import annotations

import numpy as np

from app.sim.planner.hardware import NCCL_EFFICIENCY


def ep_layout(cluster, tp, cp, ep):
    """(g, nodes): EP peers per node and nodes an EP group spans, per candidate."""
    g = np.clip(cluster.gpus_per_node // np.maximum(tp * cp, 1), 1, ep)
    return g, np.maximum(1.0, ep / g)


def all_to_all_s(cluster, tokens, top_k, hidden, elem_bytes, tp, cp, ep):
    """Seconds of one all-to-all (dispatch or combine) of one MoE layer on one rank."""
    g, nodes = ep_layout(cluster, tp, cp, ep)
    nv = cluster.nvlink_gbs * 1e9 * NCCL_EFFICIENCY
    ib = cluster.ib_gbs * 1e9 * NCCL_EFFICIENCY
    copies = tokens * top_k * hidden * elem_bytes          # a rank's token copies, bytes
    alpha = ((g - 1) * cluster.nvlink_alpha_us + (ep - g) * cluster.ib_alpha_us) * 1e-6
    if cluster.node_limit is None:
        t = alpha + copies * (g - 1) / ep / nv + copies * (ep - g) / ep / ib
    else:
        m = np.minimum(cluster.node_limit, nodes)
        ib_bytes = tokens * hidden * elem_bytes * m * (nodes - 1) / nodes
        nv_bytes = copies * (g - 1) / g
        alpha = ((g - 1) * cluster.nvlink_alpha_us + (nodes - 1) * cluster.ib_alpha_us) * 1e-6
        t = alpha + np.maximum(ib_bytes / ib, nv_bytes / nv)
    return np.where(ep > 1, t, 0.0)


def ep_layer_s(model, cluster, tokens, tp, cp, ep, full):
    """All-to-all seconds of one layer (averaged over the model's layers: only MoE layers
    have them), one micro-batch: (forward, every pass)."""
    if not model.moe:
        return 0.0 * tp, 0.0 * tp
    share = model.moe_layers / model.layers
    dispatch_bytes = 1 if cluster.gemm_dtype == "fp8" else 2
    args = (tokens, model.top_k, model.hidden)
    fwd = (all_to_all_s(cluster, *args, dispatch_bytes, tp, cp, ep)
           + all_to_all_s(cluster, *args, 2, tp, cp, ep))
    bwd = 2 * all_to_all_s(cluster, *args, 2, tp, cp, ep)
    return share * fwd, share * (fwd * np.where(full, 2, 1) + bwd)


COMM_SMS, GPU_SMS = 20, 132
"""DeepSeek-V3 §3.2.2: its all-to-all kernels, overlapped with computation, run on 20 of the
H800's 132 SMs; the GEMMs get the other 112 while they run."""


def overlap_slowdown(model) -> float:
    """How much longer a layer's compute takes, averaged over the layers, when its all-to-alls
    run beside it on their own SMs: the MoE layers run at 112/132 of their pace."""
    share = model.moe_layers / model.layers
    return 1 - share + share * GPU_SMS / (GPU_SMS - COMM_SMS)


def exposed_ep(ep_total, compute, dual):
    """What a layer's all-to-alls add to its time: all of them, or with DualPipe what the
    overlapped chunk's compute does not cover."""
    return np.where(dual, np.maximum(0.0, ep_total - compute), ep_total)
