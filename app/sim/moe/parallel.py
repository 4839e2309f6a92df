"""EP × DP × TP × PP for MoE models: parameters and optimizer states per GPU, expert-TP against
attention-TP, and training FLOPs per token, active against total.

Megatron-LM's layout (``--expert-model-parallel-size``, ``--expert-tensor-parallel-size``;
"MoE Parallel Folding", Liu et al. 2024): the dense part of the model (attention, norms,
routers, shared experts, dense MLPs, embeddings) is split over tp × pp and replicated over dp;
the routed experts are split over ep × etp × pp and replicated over the expert-data-parallel
size ``edp = tp·dp / (ep·etp)``, so that both parts use the same world = tp·pp·dp GPUs (EP is
carved out of DP·TP). With etp = tp the experts are tensor-parallel like attention; with
etp = 1 each expert stays whole and EP can grow instead.

Bytes follow the ZeRO paper as app.sim.memory.model_states does (mixed-precision Adam 2 + 2 + 12 bytes
per parameter); ZeRO stage ≥ 1 (Megatron's distributed optimizer) shards the dense part's
optimizer states over dp and the experts' over edp.

FLOPs per token: 6 per active parameter for a training step (2 forward, 4 backward; Kaplan et
al. 2020), counting every matrix a token passes through — the input embedding is a lookup and
is left out, the output layer is counted — and leaving out attention's score products. A dense
model with the same total parameters would spend 6 per parameter of the total.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.memory.model_states import ModelStates, per_gpu
from app.sim.moe.presets import MoeModel


@dataclass(frozen=True)
class MoeLayout:
    tp: int
    pp: int
    dp: int
    ep: int
    etp: int

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def edp(self) -> int:
        """Expert-data-parallel size: the replicas of each expert shard."""
        return self.tp * self.dp // (self.ep * self.etp)


def check_layout(model: MoeModel, layout: MoeLayout) -> str | None:
    """Why ``layout`` cannot hold ``model``, with the numbers; None when it can."""
    if model.experts % layout.ep:
        return f"ep ({layout.ep}) must divide experts ({model.experts})"
    if (layout.tp * layout.dp) % (layout.ep * layout.etp):
        return (f"ep × etp ({layout.ep} × {layout.etp}) must divide tp × dp ({layout.tp} × "
                f"{layout.dp})")
    if layout.pp > model.layers:       # uneven stages are allowed (DeepSeek-V3: 61 layers, PP 16)
        return f"pp ({layout.pp}) must be at most layers ({model.layers})"
    return None


@dataclass(frozen=True)
class GpuShare:
    dense_params: float         # parameters of the dense part on one GPU
    expert_params: float        # parameters of routed experts on one GPU
    dense: ModelStates          # bytes
    experts: ModelStates        # bytes

    @property
    def params(self) -> float:
        return self.dense_params + self.expert_params

    @property
    def total_bytes(self) -> float:
        return self.dense.total + self.experts.total


def per_gpu_share(model: MoeModel, layout: MoeLayout, zero: int = 1,
                  optimizer: str = "adam", precision: str = "mixed") -> GpuShare:
    """Parameters and model-state bytes on one GPU (pipeline stages split evenly)."""
    problem = check_layout(model, layout)
    if problem:
        raise ValueError(problem)
    t, p = layout, layout.pp
    dense = per_gpu(model.dense_total, dp=t.dp, tp=t.tp, pp=p, zero=zero, optimizer=optimizer,
                    precision=precision)
    experts = per_gpu(model.routed_expert_total, dp=t.edp, tp=t.ep * t.etp, pp=p, zero=zero,
                      optimizer=optimizer, precision=precision)
    return GpuShare(model.dense_total / (t.tp * p), model.routed_expert_total / (t.ep * t.etp * p),
                    dense, experts)


def expert_tp_choices(model: MoeModel, tp: int, pp: int, dp: int, ep: int, zero: int = 1
                      ) -> dict[str, GpuShare]:
    """The same GPUs with experts tensor-parallel like attention (etp = tp) and with whole
    experts (etp = 1)."""
    out = {}
    for name, etp in (("expert_tp", tp), ("whole_experts", 1)):
        layout = MoeLayout(tp, pp, dp, ep, etp)
        if check_layout(model, layout) is None:
            out[name] = per_gpu_share(model, layout, zero)
    return out


@dataclass(frozen=True)
class TokenFlops:
    active: float               # training FLOPs per token of the MoE model
    dense_equivalent: float     # … of a dense model with all its parameters active

    @property
    def ratio(self) -> float:
        return self.dense_equivalent / self.active


def training_flops_per_token(model: MoeModel) -> TokenFlops:
    """6 · (parameters a token multiplies by), active against total."""
    lookup = model.vocab * model.hidden          # the input embedding is a lookup
    return TokenFlops(6.0 * (model.active_params - lookup), 6.0 * (model.total_params - lookup))
