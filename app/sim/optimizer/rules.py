"""The update rules of torch.optim's SGD, momentum, Adam and AdamW, one formula per function,
in float64 (the scene rounds each result to fp32 where torch stores it; the exercises of chapter
3 compute with them by hand).

    L2 weight decay      g ← g + λw                           (SGD, Adam)
    decoupled decay      w ← w·(1 − ηλ)                       (AdamW; Loshchilov & Hutter 2019)
    momentum buffer      b ← μb + g, b = g at the first step  (torch's SGD momentum)
    first moment         m ← β₁m + (1 − β₁)g
    second moment        v ← β₂v + (1 − β₂)g²
    bias correction      1 − βᵗ                               (Kingma & Ba 2015, Algorithm 1)
    Adam step            Δ = (η / (1 − β₁ᵗ)) · m / (√v / √(1 − β₂ᵗ) + ε)   (torch's order:
                         ε is added after √v̂, so this is η·m̂/(√v̂ + ε))
"""

from __future__ import annotations

import numpy as np


def l2_decay(g, w, weight_decay: float):
    return g + weight_decay * w


def decoupled_decay(w, lr: float, weight_decay: float):
    return w * (1.0 - lr * weight_decay)


def momentum_buffer(buffer, g, momentum: float):
    """The new buffer; ``buffer`` None at the first step (torch sets b = g)."""
    return g if buffer is None else momentum * buffer + g


def first_moment(m, g, beta1: float):
    return beta1 * m + (1 - beta1) * g


def second_moment(v, g, beta2: float):
    return beta2 * v + (1 - beta2) * g * g


def bias_correction(beta: float, step: int) -> float:
    return 1 - beta ** step


def adam_step(m, v, step: int, lr: float, beta1: float, beta2: float, eps: float):
    """What Adam subtracts from w at ``step`` (1-based), given the moments after that step."""
    return (lr / bias_correction(beta1, step)) * m / (
        np.sqrt(v) / np.sqrt(bias_correction(beta2, step)) + eps)
