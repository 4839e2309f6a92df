"""Model-state memory: parameters, gradients and optimizer states per GPU, and how ZeRO shards
them (Rajbhandari et al. 2019, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", §3 and Table 1).

With Ψ parameters, mixed-precision Adam keeps 2Ψ bytes of fp16 parameters, 2Ψ of fp16 gradients
and KΨ of optimizer states (fp32 master parameters, momentum and variance: K = 12). Over N_d
data-parallel ranks:

    baseline        (2 + 2 + K)Ψ
    P_os   (ZeRO-1) 2Ψ + 2Ψ + KΨ/N_d
    P_os+g (ZeRO-2) 2Ψ + (2 + K)Ψ/N_d
    P_os+g+p (ZeRO-3) (2 + 2 + K)Ψ/N_d

Tensor and pipeline parallelism split every state evenly over tp·pp first. In fp32 training the
parameters and gradients are 4 bytes each and Adam keeps only momentum and variance (8 bytes).

DeepSpeed's own estimator (``estimate_zero2_model_states_mem_needs``) counts fp32 gradients in
the optimizer partition: 18 bytes/parameter in all, ZeRO-2 per GPU 2Ψ + 18Ψ/N, ZeRO-3
4·largest_layer + 18Ψ/N (``deepspeed_convention`` below).
"""

from __future__ import annotations

from dataclasses import dataclass

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "adafactor", "adam8bit")
PRECISIONS = ("fp32", "mixed")


def optimizer_state_parts(optimizer: str, precision: str) -> tuple[tuple[str, int], ...]:
    """What the optimizer keeps per parameter, as (name, bytes) pairs — the parts of K.

    SGD keeps nothing; momentum one fp32 buffer (4); Adam and AdamW two (8). Mixed precision
    adds the fp32 master parameters (4) the optimizer updates. Adafactor keeps factored second
    moments (≈ 0 per parameter for large matrices, counted as 0 here) and no first moment by
    default; 8-bit Adam keeps two 1-byte states (Dettmers et al. 2022) (2)."""
    states = {"sgd": (), "momentum": (("momentum", 4),),
              "adam": (("momentum m", 4), ("variance v", 4)),
              "adamw": (("momentum m", 4), ("variance v", 4)),
              "adafactor": (), "adam8bit": (("momentum m (8-bit)", 1), ("variance v (8-bit)", 1))}
    if optimizer not in states:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    master = (("fp32 master weights", 4),) if precision == "mixed" else ()
    return master + states[optimizer]


def optimizer_state_bytes(optimizer: str, precision: str) -> float:
    """K: optimizer-state bytes per parameter (fp32 master copy included in mixed precision),
    the sum of :func:`optimizer_state_parts`."""
    return sum(size for _, size in optimizer_state_parts(optimizer, precision))


def param_bytes(precision: str) -> int:
    return 2 if precision == "mixed" else 4


def grad_bytes(precision: str) -> int:
    return 2 if precision == "mixed" else 4


@dataclass(frozen=True)
class ModelStates:
    params: float
    grads: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer


def per_gpu(psi: float, *, dp: int = 1, tp: int = 1, pp: int = 1, zero: int = 0,
            optimizer: str = "adam", precision: str = "mixed") -> ModelStates:
    """Model-state bytes on one GPU (ZeRO Table 1, after an even tp·pp split)."""
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {zero}")
    local = psi / (tp * pp)
    k = optimizer_state_bytes(optimizer, precision)
    params = param_bytes(precision) * local / (dp if zero >= 3 else 1)
    grads = grad_bytes(precision) * local / (dp if zero >= 2 else 1)
    states = k * local / (dp if zero >= 1 else 1)
    return ModelStates(params, grads, states)


def deepspeed_convention(psi: float, dp: int, zero: int, largest_layer: float = 0.0) -> float:
    """Bytes per GPU by DeepSpeed's estimator, which partitions 18 bytes per parameter (fp32
    gradients beside master weights, momentum and variance) instead of the paper's 12 + 2:
    ZeRO-2 2Ψ + 18Ψ/N; ZeRO-3 4·largest_layer + 18Ψ/N (REFERENCES.md)."""
    if zero == 3:
        return 4 * largest_layer + 18 * psi / dp
    if zero == 2:
        return 2 * psi + 18 * psi / dp
    raise ValueError(f"DeepSpeed's estimator covers ZeRO-2 and ZeRO-3, not stage {zero}")
