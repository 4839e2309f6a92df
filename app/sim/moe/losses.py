"""Router losses and what they do to the load: the load-balancing (auxiliary) loss, the router
z-loss, and DeepSeek-V3's auxiliary-loss-free bias update.

* Load-balancing loss (Switch Transformer, Fedus et al. 2021, eq. 4; Megatron-LM
  ``switch_load_balancing_loss_func``): ``aux = α · E · Σᵢ fᵢ · Pᵢ`` where fᵢ is the share of
  the T·k assignments that chose expert i (before any dropping; a count, so no gradient flows
  through it) and Pᵢ the mean over tokens of softmax(logits)ᵢ over all E experts. Its minimum,
  α, is reached by a uniform router. Hugging Face's Mixtral ``load_balancing_loss_func``
  divides the counts by T instead of T·k (fᵢ sums to k, not 1), so it is k× this one.
* Router z-loss (ST-MoE, Zoph et al. 2022, eq. 5): ``z = β · mean_t logsumexp(logits_t)²``,
  which keeps logits small (bf16 round-off in the exponentials) and does not balance anything.
* Auxiliary-loss-free balancing (DeepSeek-V3 technical report, 2024, §2.1.2): a bias bᵢ is
  added to the scores for the top-k *choice* only; after each step bᵢ ← bᵢ + γ·sign(mean load −
  loadᵢ), so overloaded experts become less attractive. The gate weights never see bᵢ.

:func:`train_router` runs a few steps of each on the scene's seeded tokens and returns the load
histogram after every step: the gradient methods update ``W_router`` by plain gradient descent
on the loss at coefficient 1 (the coefficient only rescales the learning rate); the skew of the
logits is part of the fixed input and has to be fought, not removed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.moe.router import logsumexp, softmax, top_experts

METHODS = ("none", "aux_loss", "z_loss", "aux_free_bias")


def assignment_share(experts: np.ndarray, num_experts: int) -> np.ndarray:
    """fᵢ: share of the T·k assignments that chose expert i."""
    return np.bincount(experts.reshape(-1), minlength=num_experts) / experts.size


def aux_loss(logits: np.ndarray, experts: np.ndarray, coeff: float) -> float:
    """coeff · E · Σᵢ fᵢ · Pᵢ (Megatron-LM's switch_load_balancing_loss_func)."""
    num_experts = logits.shape[1]
    f = assignment_share(experts, num_experts)
    p = softmax(logits).mean(axis=0)
    return float(coeff * num_experts * np.dot(f, p))


def z_loss(logits: np.ndarray, coeff: float) -> float:
    """coeff · mean over tokens of logsumexp(logits)² (ST-MoE's router z-loss)."""
    return float(coeff * np.mean(logsumexp(logits) ** 2))


def aux_loss_grad(logits: np.ndarray, experts: np.ndarray) -> np.ndarray:
    """∂(E · Σᵢ fᵢPᵢ)/∂logits, (T, E): E/T · p_tj · (f_j − Σᵢ fᵢ p_ti) (f held fixed)."""
    tokens, num_experts = logits.shape
    p = softmax(logits)
    f = assignment_share(experts, num_experts)
    return num_experts / tokens * p * (f[None, :] - (p @ f)[:, None])


def z_loss_grad(logits: np.ndarray) -> np.ndarray:
    """∂(mean_t lse_t²)/∂logits, (T, E): 2 · lse_t · p_tj / T."""
    return 2.0 * logsumexp(logits)[:, None] * softmax(logits) / logits.shape[0]


def max_violation(load: np.ndarray) -> float:
    """DeepSeek-V3's MaxVio: (max load − mean load) / mean load."""
    mean = load.mean()
    return float((load.max() - mean) / mean) if mean > 0 else 0.0


@dataclass(frozen=True)
class Training:
    method: str
    loads: np.ndarray          # (steps + 1, E) assignments per expert, before each step and after the last
    max_violation: tuple[float, ...]
    aux_loss: tuple[float, ...]   # at coefficient 1
    z_loss: tuple[float, ...]     # at coefficient 1
    bias: np.ndarray           # (E,) the final selection bias (aux_free_bias; else zeros)

    def to_dict(self) -> dict:
        return {"method": self.method, "loads": self.loads.tolist(),
                "max_violation": list(self.max_violation), "aux_loss": list(self.aux_loss),
                "z_loss": list(self.z_loss), "bias": self.bias.tolist()}


TRAIN_TOKENS = 1024
TRAIN_CELLS = 16384
"""Router training uses the first min(T, TRAIN_TOKENS, TRAIN_CELLS // E) tokens, which keeps
32 steps of four methods within the scene's time budget at any accepted size."""


def train_router(x: np.ndarray, w_router: np.ndarray, fixed_logits: np.ndarray, top_k: int,
                 router: str, method: str, steps: int, lr: float, bias_rate: float) -> Training:
    """``steps`` steps of ``method`` on logits = x · W + fixed_logits (the skew), on the first
    tokens :data:`TRAIN_CELLS` allows."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    used = max(1, min(TRAIN_TOKENS, TRAIN_CELLS // w_router.shape[1]))
    x, fixed_logits = x[:used], fixed_logits[:used]
    tokens, num_experts = fixed_logits.shape
    w = w_router.copy()
    bias = np.zeros(num_experts)
    loads, vio, aux, zl = [], [], [], []
    for step in range(steps + 1):
        logits = x @ w + fixed_logits
        scores = logits + bias[None, :] if method == "aux_free_bias" else logits
        chosen = top_experts(scores, top_k)                               # as route() chooses
        load = np.bincount(chosen.reshape(-1), minlength=num_experts)
        m = logits.max(axis=-1, keepdims=True)
        e = np.exp(logits - m)
        total = e.sum(axis=-1, keepdims=True)
        p = e / total                                                     # softmax (T, E)
        lse = (m + np.log(total))[:, 0]
        f = load / chosen.size
        loads.append(load)
        vio.append(max_violation(load))
        aux.append(float(num_experts * np.dot(f, p.mean(axis=0))))
        zl.append(float(np.mean(lse ** 2)))
        if step == steps or method == "none":
            continue
        if method == "aux_loss":        # aux_loss_grad, with p reused
            w -= lr * x.T @ (num_experts / tokens * p * (f[None, :] - (p @ f)[:, None]))
        elif method == "z_loss":        # z_loss_grad
            w -= lr * x.T @ (2.0 * lse[:, None] * p / tokens)
        elif method == "aux_free_bias":
            bias += bias_rate * np.sign(load.mean() - load)
    return Training(method, np.array(loads), tuple(vio), tuple(aux), tuple(zl), bias)
