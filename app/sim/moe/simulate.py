"""Chapter 10: one mixture-of-experts layer, routed, dropped, dispatched and combined for real.

``simulate(params) -> MoeTrace``: the seeded tokens are scored by the router
(:mod:`app.sim.moe.router`), each expert takes at most ``capacity`` assignments from each
rank (:mod:`app.sim.moe.capacity`), the load-balancing and z losses are evaluated and a few
steps of router training show what each balancing method does to the load
(:mod:`app.sim.moe.losses`), and the kept assignments travel to their experts' ranks and back
with the real token vectors (:mod:`app.sim.moe.dispatch`). Semantics: DESIGN.md, ``/api/moe``
(Megatron-LM's conventions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.collectives import cost
from app.sim.moe import captions
from app.sim.moe.captions import MoeFrame
from app.sim.moe.capacity import Drops, apply_capacity, rank_capacity
from app.sim.moe.dispatch import (ExpertParallelRun, LayerA2A, dispatch_matrix, imbalance,
                                  layer_cost, run_expert_parallel)
from app.sim.moe.losses import METHODS, Training, assignment_share, aux_loss, train_router, z_loss
from app.sim.moe.params import MoeParams
from app.sim.moe.router import MoeInputs, Routing, make_inputs, route, router_logits


@dataclass(frozen=True)
class MoeTrace:
    params: MoeParams
    inputs: MoeInputs
    logits: np.ndarray          # (T, E)
    routing: Routing
    drops: Drops
    dispatch: np.ndarray        # (ep, ep)
    run: ExpertParallelRun
    aux_loss: float
    z_loss: float
    a2a: LayerA2A               # dispatch and combine of the cost model's tokens
    training: tuple[Training, ...]
    frames: tuple[MoeFrame, ...]

    @property
    def capacity(self) -> int | None:
        return self.drops.capacity

    @property
    def expert_tokens(self) -> np.ndarray:
        return self.drops.expert_tokens

    def to_dict(self) -> dict:
        """The JSON contract of ``/api/moe`` (DESIGN.md), plus what the page and deck draw."""
        p, r, d = self.params, self.routing, self.drops
        return {
            "tokens": p.tokens, "experts": p.experts, "top_k": p.top_k, "ep": p.ep,
            "logits": self.logits.tolist(),
            "topk": [{"token": t, "experts": r.experts[t].tolist(),
                      "weights": r.weights[t].tolist(), "kept": d.kept[t].tolist()}
                     for t in range(p.tokens)],
            "capacity": d.capacity,
            "expert_tokens": d.expert_tokens.tolist(),
            "dropped": [{"token": t, "expert": e} for t, e in d.dropped],
            "aux_loss": self.aux_loss,
            "z_loss": self.z_loss,
            "dispatch": self.dispatch.tolist(),
            "frames": [f.to_dict() for f in self.frames],
            # beyond the contract
            "assignment_share": assignment_share(r.experts, p.experts).tolist(),
            "mean_probs": r.probs.mean(axis=0).tolist(),
            "load": d.load.tolist(), "kept_load": d.kept_load.tolist(),
            "x": self.inputs.x.tolist(), "output": self.run.output.tolist(),
            "max_abs_error": self.run.max_abs_error,
            "rank_rows": self.run.rank_rows.tolist(), "imbalance": imbalance(self.run.rank_rows),
            # dispatch + combine (the transpose): a rank's row and column, the busiest of each
            "cost": {"bytes_per_rank_per_layer": self.a2a.bytes_per_rank.tolist(),
                     "all_to_all_bytes": self.a2a.dispatch.bytes_sent.tolist(),
                     "combine_bytes": self.a2a.combine.bytes_sent.tolist(),
                     "time_us": self.a2a.time_us, "nvlink_us": self.a2a.nvlink_us,
                     "infiniband_us": self.a2a.infiniband_us,
                     "dispatch_us": self.a2a.dispatch.time_us,
                     "combine_us": self.a2a.combine.time_us},
            "training": [t.to_dict() for t in self.training],
        }


def simulate(p: MoeParams) -> MoeTrace:
    # 1. tokens, router logits, top-k choice
    inputs = make_inputs(p.tokens, p.experts, p.token_width, p.seed)
    logits = router_logits(inputs, p.skew)
    routing = route(logits, p.top_k, p.router)
    # 2. capacity per expert per rank, drops
    capacity = rank_capacity(p.tokens, p.ep, p.top_k, p.experts, p.capacity_factor)
    drops = apply_capacity(routing.experts, routing.weights, p.experts, p.ep, capacity,
                           p.drop_policy)
    # 3. losses, and a few steps of each balancing method
    aux = aux_loss(logits, routing.experts, p.aux_loss_coeff)
    zl = z_loss(logits, p.z_loss_coeff)
    fixed = np.broadcast_to(p.skew * inputs.bias, logits.shape)
    training = tuple(train_router(inputs.x, inputs.w_router, fixed, p.top_k, p.router, m,
                                  p.router_steps, p.router_lr, p.bias_rate) for m in METHODS)
    # 4. dispatch, experts, combine
    matrix = dispatch_matrix(routing.experts, drops.kept, p.experts, p.ep)
    run = run_expert_parallel(inputs.x, inputs.w_in, inputs.w_out, routing.experts,
                              routing.weights, drops.kept, p.ep)
    links = cost.Links(p.alpha_us, p.intra_node_gbs, p.inter_node_gbs, p.gpus_per_node)
    row_bytes = p.hidden * cost.BYTES_PER_ELEMENT[p.dtype] * p.cost_tokens / (p.tokens // p.ep)
    a2a = layer_cost(matrix, row_bytes, links)
    frames = captions.frames(p, logits, routing, drops, matrix, run, aux, zl, a2a)
    return MoeTrace(p, inputs, logits, routing, drops, matrix, run, aux, zl, a2a, training,
                    frames)
