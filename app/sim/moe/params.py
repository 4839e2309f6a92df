"""The parameters of chapter 10's mixture-of-experts scene (``/moe``, ``/api/moe``).

One MoE layer routes ``tokens`` seeded token vectors of width ``token_width`` over ``experts``
small MLP experts placed on ``ep`` expert-parallel ranks; every number is computed for real, so
the sizes are bounded (:data:`MAX_CELLS`). The cost-panel fields — ``hidden`` (the model's width,
as in every scene), ``cost_tokens``, ``dtype`` and the network group — scale the same routing up
to a real model's all-to-all.

Before the parameter groups the token width was called ``hidden`` and the model's ``cost_hidden``:
a query with ``cost_hidden`` is redirected to the new names (:data:`RENAMED`).

Names and meanings follow DESIGN.md's ``/api/moe`` contract and Megatron-LM's MoE options
(``--moe-router-topk``, ``--moe-expert-capacity-factor``, ``--moe-token-drop-policy``,
``--moe-aux-loss-coeff``, ``--moe-z-loss-coeff``, ``--expert-model-parallel-size``).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from app.param_groups import HiddenField, NetworkGroup
from app.params import (DTYPE_TEXTS, Control, Dtype, Invalid, Renamed, Seed, Tokens,
                        multiples_near, suggest)

MAX_CELLS = 131072
"""Bound on the numbers a trace carries in JSON: logits (T·E), token vectors and outputs
(2·T·token_width), top-k lists (2·T·k). About 2.5 MB of JSON at most; the simulation itself stays
well under 100 ms."""

MAX_DENSE_WORK = 2**22
"""Bound on tokens · experts · token_width², the work of the dense reference (every expert on
every token: 4·T·E·token_width² multiply-adds, about 10 ms at the bound on one core)."""

MAX_EXPERT_WEIGHTS = 2_500_000
"""Bound on the experts' weights (E · 2 · token_width · 2·token_width, float64: 20 MB)."""

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
TokenWidth = Annotated[int, Field(ge=1, le=64,
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


RENAMED = Renamed({"hidden": "token_width", "cost_hidden": "hidden"})
"""The names this scene's query had before the parameter groups."""


class MoeParams(NetworkGroup):
    """The routed layer computed for real (tokens, experts, router, capacity, ep, token_width)
    and its all-to-all at a real model's scale (hidden, cost_tokens, dtype, the network group)."""

    renamed: ClassVar[Renamed] = RENAMED

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
    token_width: Annotated[TokenWidth, Control("Token width",
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
    # hidden size of the model whose all-to-all is timed: the dispatched activations' width
    hidden: HiddenField = 4096
    # tokens per rank per micro-batch in that model
    cost_tokens: Annotated[Tokens, Control("Tokens per rank", kind="number",
        help="Per micro-batch, the routing above scaled to them.")] = 4096
    # element type of the dispatched activations
    dtype: Annotated[Dtype, Control("Element type", kind="choice", widget="select", options=DTYPE_TEXTS)] = "bf16"

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
        cells = (self.tokens * self.experts + 2 * self.tokens * self.token_width
                 + 2 * self.tokens * self.top_k)
        if cells > MAX_CELLS:
            raise Invalid("tokens", f"tokens × (experts + 2·token_width + 2·top_k) "
                                    f"({self.tokens} × "
                                    f"{self.experts + 2 * self.token_width + 2 * self.top_k} = "
                                    f"{cells:,}) must be at most {MAX_CELLS:,} — use fewer "
                                    f"tokens, experts or a smaller token_width")
        weights = self.experts * 4 * self.token_width ** 2
        if weights > MAX_EXPERT_WEIGHTS:
            raise Invalid("token_width", f"experts × 4·token_width² ({self.experts} × "
                                         f"{4 * self.token_width ** 2} = {weights:,}) must be at "
                                         f"most {MAX_EXPERT_WEIGHTS:,} expert weights — use a "
                                         f"smaller token_width")
        work = self.tokens * self.experts * self.token_width ** 2
        if work > MAX_DENSE_WORK:
            raise Invalid("token_width", f"tokens × experts × token_width² ({self.tokens} × "
                                         f"{self.experts} × {self.token_width}² = {work:,}) must "
                                         f"be at most {MAX_DENSE_WORK:,} (the dense reference runs "
                                         f"every expert on every token) — use a smaller "
                                         f"token_width")
        return self
