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

from app.params import (DTYPE_TEXTS, AlphaUs, Control, Dtype, GpusPerNode, Hidden,
                        InterNodeGBs, IntraNodeGBs, Invalid, SceneParams, Seed, Tokens, multiples_near,
                        suggest)

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
    # T: tokens routed through the layer (all ranks together)
    tokens: Annotated[RoutedTokens, Control("Tokens T", kind="number",
        help="Routed through the layer, all ranks together (a multiple of ep).")] = 16
    # E: routed experts
    experts: Annotated[Experts, Control("Experts E", kind="choice", widget="select",
                                     options=(2, 4, 6, 8, 12, 16, 32, 60, 64, 128, 256),
                                     help="From 2 to 256.")] = 8
    # k: experts per token
    top_k: Annotated[TopK, Control("Experts per token k", bounds=(1, 16),
        help="1: Switch Transformer; 2: Mixtral, GShard; 8: DeepSeek-V3.")] = 2
    # expert capacity = ceil((T/ep)·k/E · cf); 0: dropless
    capacity_factor: Annotated[CapacityFactor, Control("Capacity factor", bounds=(0, 16), step=0.25,
        help="capacity = ⌈(T/ep)·k/E · factor⌉ per expert per rank; 0: dropless.")] = 1.0
    # over capacity, drop the lowest-probability or the latest
    drop_policy: Annotated[DropPolicy, Control(
        "Over capacity, drop", kind="choice",
        options={"probs": "lowest probability", "position": "latest tokens"},
        help="Megatron-LM's --moe-token-drop-policy.")] = "probs"
    # softmax then top-k (Switch, DeepSeek) or top-k then softmax (Mixtral)
    router: Annotated[RouterKind, Control(
        "Gate weights", kind="choice",
        options={"softmax_topk": "softmax → top-k", "topk_softmax": "top-k → softmax"},
        help="Softmax over all experts, keep the k largest (Switch, DeepSeek); or keep the k "
             "largest logits and softmax over them (Mixtral: weights sum to 1).")] = "softmax_topk"
    # expert-parallel ranks (divides experts and tokens)
    ep: Annotated[Ep, Control("Expert-parallel ranks ep", kind="choice", widget="select",
                           options=(1, 2, 3, 4, 8, 16, 32, 64),
                           help="Must divide the experts and the tokens.")] = 2
    # load-balancing loss coefficient (Megatron's default 0.01 … 0.0)
    aux_loss_coeff: Annotated[LossCoeff, Control("Load-balancing coefficient α", kind="number", step=0.001,
        help="Megatron's --moe-aux-loss-coeff.")] = 0.01
    # router z-loss coefficient (ST-MoE used 0.001)
    z_loss_coeff: Annotated[LossCoeff, Control("Router z-loss coefficient β", kind="number", step=0.0001,
        help="ST-MoE used 0.001.")] = 0.001
    # added skew·bias_e to the logits, bias falling from +1 to −1
    skew: Annotated[Skew, Control("Router skew", bounds=(0, 8), step=0.25,
        help="Adds skew · b to the logits, b falling from +1 (expert 0) to −1 (the last): the router prefers the first experts.")] = 1.0
    # width of the token vectors and the experts' input
    hidden: Annotated[TokenHidden, Control("Token width",
        help="Numbers per token vector, routed and computed for real.")] = 8
    # seed of the tokens, the router and the experts
    seed: Annotated[Seed, Control("Seed", kind="number")] = 0
    # training steps of the router shown per balancing method
    router_steps: Annotated[RouterSteps, Control("Training steps", bounds=(0, 32),
        help="Steps of router training shown per balancing method.")] = 8
    # learning rate of those steps (on the losses at coefficient 1)
    router_lr: Annotated[RouterLr, Control("Learning rate", kind="number", bounds=(0.001, 100), step=0.001,
        help="Of the router's gradient steps.")] = 2.0
    # γ of the aux-loss-free bias update
    bias_rate: Annotated[BiasRate, Control("Bias update speed γ", bounds=(0, 1), step=0.01,
        help="Auxiliary-loss-free balancing (DeepSeek-V3 used 0.001).")] = 0.1
    # hidden size of the model whose all-to-all is timed
    cost_hidden: Annotated[Hidden, Control("Model hidden size", kind="number",
        help="Width of the dispatched activations.")] = 4096
    # tokens per rank per micro-batch in that model
    cost_tokens: Annotated[Tokens, Control("Tokens per rank", kind="number",
        help="Per micro-batch, the routing above scaled to them.")] = 4096
    # element type of the dispatched activations
    dtype: Annotated[Dtype, Control("Element type", kind="choice", widget="select", options=DTYPE_TEXTS)] = "bf16"
    # α: latency of one message
    alpha_us: Annotated[AlphaUs, Control("Latency α (µs)", kind="number", step=0.5)] = 5.0
    # β⁻¹ inside a node (NVLink)
    intra_node_gbs: Annotated[IntraNodeGBs, Control("NVLink (GB/s)", kind="number", step=0.1)] = 300.0
    # β⁻¹ between nodes (InfiniBand)
    inter_node_gbs: Annotated[InterNodeGBs, Control("InfiniBand (GB/s)", kind="number", step=0.1)] = 50.0
    # ranks per node
    gpus_per_node: Annotated[GpusPerNode, Control("GPUs per node", kind="choice", widget="select",
                                          options=(1, 2, 4, 8, 16, 32, 64))] = 8

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
