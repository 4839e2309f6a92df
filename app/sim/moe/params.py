"""The parameters of chapter 10's mixture-of-experts scene (``/moe``, ``/api/moe``).

One MoE layer routes ``tokens`` seeded token vectors of width ``hidden`` over ``experts`` small
MLP experts placed on ``ep`` expert-parallel ranks; every number is computed for real, so the
sizes are bounded (:data:`MAX_CELLS`). The cost-panel fields (``cost_hidden``, ``cost_tokens``,
``dtype`` and the links) scale the same routing up to a real model's all-to-all.

Names and meanings follow DESIGN.md's ``/api/moe`` contract and Megatron-LM's MoE options
(``--moe-router-topk``, ``--moe-expert-capacity-factor``, ``--moe-token-drop-policy``,
``--moe-aux-loss-coeff``, ``--moe-z-loss-coeff``, ``--expert-model-parallel-size``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from app.params import (AlphaUs, Dtype, GpusPerNode, Hidden, InterNodeGBs, IntraNodeGBs,
                        Invalid, SceneParams, Seed, Tokens, multiples_near, suggest)

MAX_CELLS = 131072
"""Bound on the numbers a trace carries in JSON: logits (T·E), token vectors and outputs
(2·T·hidden), top-k lists (2·T·k). About 2.5 MB of JSON at most; the simulation itself stays
well under 100 ms."""

MAX_DENSE_WORK = 2**22
"""Bound on tokens · experts · hidden², the work of the dense reference (every expert on every
token: 4·T·E·hidden² multiply-adds, about 10 ms at the bound on one core)."""

MAX_EXPERT_WEIGHTS = 2_500_000
"""Bound on the experts' weights (E · 2 · hidden · 2·hidden, float64: 20 MB)."""

RoutedTokens = Annotated[int, Field(ge=1, le=4096,
                                    description="tokens routed through the layer (T)")]
Experts = Annotated[int, Field(ge=2, le=256, description="routed experts (E)")]
TopK = Annotated[int, Field(ge=1, le=16, description="experts each token is sent to (k)")]
CapacityFactor = Annotated[float, Field(ge=0, le=16,
                                        description="expert capacity factor (0: dropless)")]
Ep = Annotated[int, Field(ge=1, le=64, description="expert-parallel size")]
LossCoeff = Annotated[float, Field(ge=0, le=1, description="coefficient of a router loss")]
Skew = Annotated[float, Field(ge=0, le=8,
                              description="how strongly the seeded router prefers the first "
                                          "experts (0: not at all)")]
TokenHidden = Annotated[int, Field(ge=1, le=64,
                                   description="width of the token vectors routed for real")]
RouterSteps = Annotated[int, Field(ge=0, le=32,
                                   description="router training steps shown per balancing method")]
RouterLr = Annotated[float, Field(gt=0, le=100,
                                  description="learning rate of the router training steps")]
BiasRate = Annotated[float, Field(ge=0, le=1,
                                  description="γ: bias update speed of auxiliary-loss-free "
                                              "balancing (DeepSeek-V3 used 0.001)")]
DropPolicy = Literal["probs", "position"]
RouterKind = Literal["softmax_topk", "topk_softmax"]


class MoeParams(SceneParams):
    tokens: RoutedTokens = 16             # T: tokens routed through the layer (all ranks together)
    experts: Experts = 8                  # E: routed experts
    top_k: TopK = 2                       # k: experts per token
    capacity_factor: CapacityFactor = 1.0  # expert capacity = ceil((T/ep)·k/E · cf); 0: dropless
    drop_policy: DropPolicy = "probs"     # over capacity, drop the lowest-probability or the latest
    router: RouterKind = "softmax_topk"   # softmax then top-k (Switch, DeepSeek) or top-k then softmax (Mixtral)
    ep: Ep = 2                            # expert-parallel ranks (divides experts and tokens)
    aux_loss_coeff: LossCoeff = 0.01      # load-balancing loss coefficient (Megatron's default 0.01 … 0.0)
    z_loss_coeff: LossCoeff = 0.001       # router z-loss coefficient (ST-MoE used 0.001)
    skew: Skew = 1.0                      # added skew·bias_e to the logits, bias falling from +1 to −1
    hidden: TokenHidden = 8               # width of the token vectors and the experts' input
    seed: Seed = 0                        # seed of the tokens, the router and the experts
    router_steps: RouterSteps = 8         # training steps of the router shown per balancing method
    router_lr: RouterLr = 2.0             # learning rate of those steps (on the losses at coefficient 1)
    bias_rate: BiasRate = 0.1             # γ of the aux-loss-free bias update
    cost_hidden: Hidden = 4096            # hidden size of the model whose all-to-all is timed
    cost_tokens: Tokens = 4096            # tokens per rank per micro-batch in that model
    dtype: Dtype = "bf16"                 # element type of the dispatched activations
    alpha_us: AlphaUs = 5.0               # α: latency of one message
    intra_node_gbs: IntraNodeGBs = 300.0  # β⁻¹ inside a node (NVLink)
    inter_node_gbs: InterNodeGBs = 50.0   # β⁻¹ between nodes (InfiniBand)
    gpus_per_node: GpusPerNode = 8        # ranks per node

    @model_validator(mode="after")
    def _consistent(self) -> MoeParams:
        if self.top_k > self.experts:
            raise Invalid("top_k", f"top_k ({self.top_k}) must be at most experts "
                                   f"({self.experts})")
        if self.ep > self.experts or self.experts % self.ep:
            raise Invalid("ep", f"ep ({self.ep}) must divide experts ({self.experts})")
        if self.tokens % self.ep:
            raise Invalid("tokens", f"ep ({self.ep}) must divide tokens ({self.tokens})"
                                    f"{suggest(self, 'tokens', multiples_near(self.tokens, self.ep, 4096))}")
        cells = (self.tokens * self.experts + 2 * self.tokens * self.hidden
                 + 2 * self.tokens * self.top_k)
        if cells > MAX_CELLS:
            raise Invalid("tokens", f"tokens × (experts + 2·hidden + 2·top_k) ({self.tokens} × "
                                    f"{self.experts + 2 * self.hidden + 2 * self.top_k} = "
                                    f"{cells:,}) must be at most {MAX_CELLS:,} — use fewer "
                                    f"tokens, experts or a smaller hidden")
        weights = self.experts * 4 * self.hidden ** 2
        if weights > MAX_EXPERT_WEIGHTS:
            raise Invalid("hidden", f"experts × 4·hidden² ({self.experts} × "
                                    f"{4 * self.hidden ** 2} = {weights:,}) must be at most "
                                    f"{MAX_EXPERT_WEIGHTS:,} expert weights — use a smaller "
                                    f"hidden")
        work = self.tokens * self.experts * self.hidden ** 2
        if work > MAX_DENSE_WORK:
            raise Invalid("hidden", f"tokens × experts × hidden² ({self.tokens} × "
                                    f"{self.experts} × {self.hidden}² = {work:,}) must be at "
                                    f"most {MAX_DENSE_WORK:,} (the dense reference runs every "
                                    f"expert on every token) — use a smaller hidden")
        return self
