"""The tiny model that chapters 4 and 5 train for real: an MLP small enough to print every number.

``layers`` fully connected layers of ``width`` → ``width`` (``torch.nn.Linear``: y = x Wᵀ + b),
tanh between them, none after the last; the loss is the mean squared error over the micro-batch,
``((out − y)²).mean()``. Everything is float64, so sums taken in a different order (a ring
versus a tree, torch versus numpy) agree to ~1e-16, far inside the 1e-6 tolerance of the real
runs. Parameters, data and Adam are seeded and deterministic; ``workers/zero.py`` loads the same
values into torch modules.

Tensors are listed in forward order, as ``model.parameters()`` yields them: layer 0's weight
(width × width, row-major) and bias, then layer 1's, … A layer's tensors flattened one after the
other form that layer's *unit*: what FSDP wraps and ZeRO-3 gathers as one piece.

Adam follows ``torch.optim.Adam`` (Kingma & Ba 2015 with PyTorch's bias-correction order):
m ← m + (g − m)(1 − β₁); v ← β₂v + (1 − β₂)g²; p ← p − lr/(1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + ε).
It is elementwise, which is why ZeRO may cut it into shards without changing a single bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LR, BETA1, BETA2, EPS = 0.05, 0.9, 0.999, 1e-8
"""Adam's settings for every run of the tiny model (a large lr, so a few steps visibly move it)."""


@dataclass(frozen=True)
class TinyMLP:
    layers: int
    width: int

    @property
    def tensor_shapes(self) -> tuple[tuple[int, ...], ...]:
        """Shapes in forward order: (W₀, b₀, W₁, b₁, …)."""
        return tuple(s for _ in range(self.layers) for s in ((self.width, self.width),
                                                              (self.width,)))

    @property
    def unit_size(self) -> int:
        """Parameters of one layer: weight and bias."""
        return self.width * self.width + self.width

    @property
    def param_count(self) -> int:
        return self.layers * self.unit_size

    def tensor_names(self) -> tuple[str, ...]:
        return tuple(f"{l}.{kind}" for l in range(self.layers) for kind in ("weight", "bias"))

    def tensor_sizes(self) -> tuple[int, ...]:
        return tuple(int(np.prod(s)) for s in self.tensor_shapes)


def init_params(model: TinyMLP, seed: int) -> np.ndarray:
    """The flat parameter vector (forward order), drawn like torch's default Linear init:
    uniform in ±1/√width."""
    bound = 1.0 / np.sqrt(model.width)
    rng = np.random.default_rng([seed, 0xC0FFEE])
    return rng.uniform(-bound, bound, size=model.param_count)


def batch(model: TinyMLP, seed: int, step: int, dp: int, micro_batch: int):
    """Step ``step``'s global batch, cut into each rank's micro-batch:
    ``(x, y)``, each shaped (dp, micro_batch, width). Rank r gets rows r·b … (r+1)·b − 1."""
    rng = np.random.default_rng([seed, step, 0xDA7A])
    x = rng.standard_normal((dp * micro_batch, model.width))
    y = np.tanh(x[:, ::-1] * 1.5) * 0.8                   # a smooth target the MLP can learn
    shape = (dp, micro_batch, model.width)
    return x.reshape(shape), y.reshape(shape)


def unflatten(model: TinyMLP, flat: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(W_l, b_l)] views of the flat vector."""
    w, out = model.width, []
    for l in range(model.layers):
        lo = l * model.unit_size
        out.append((flat[lo:lo + w * w].reshape(w, w), flat[lo + w * w:lo + model.unit_size]))
    return out


def forward_backward(model: TinyMLP, flat: np.ndarray, x: np.ndarray, y: np.ndarray):
    """Each rank's loss and gradient of its own micro-batch, all ranks at once.

    x, y: (ranks, b, width). Returns (losses (ranks,), grads (ranks, param_count))."""
    layers = unflatten(model, flat)
    ranks, b, w = x.shape
    h = x.reshape(ranks * b, w)                           # every rank's rows, one matrix
    acts = [h]                                            # input of each layer
    for l, (weight, bias) in enumerate(layers):
        h = h @ weight.T + bias                           # (ranks·b, w)
        if l < model.layers - 1:
            h = np.tanh(h)
            acts.append(h)
    diff = h - y.reshape(ranks * b, w)
    losses = (diff ** 2).reshape(ranks, b * w).mean(axis=1)
    grads = np.empty((ranks, model.param_count))
    dz = 2.0 * diff / (b * w)                             # ∂(rank's loss)/∂out, (ranks·b, w)
    for l in range(model.layers - 1, -1, -1):
        lo = l * model.unit_size
        per_rank_dz = dz.reshape(ranks, b, w, 1)
        per_rank_a = acts[l].reshape(ranks, b, 1, w)
        grads[:, lo:lo + w * w] = (per_rank_dz * per_rank_a).sum(axis=1).reshape(ranks, -1)
        grads[:, lo + w * w:lo + model.unit_size] = dz.reshape(ranks, b, w).sum(axis=1)
        if l > 0:
            dz = (dz @ layers[l][0]) * (1.0 - acts[l] ** 2)
    return losses, grads


@dataclass(frozen=True)
class AdamState:
    m: np.ndarray
    v: np.ndarray
    step: int


def adam_init(size: int) -> AdamState:
    return AdamState(np.zeros(size), np.zeros(size), 0)


def adam_update(params: np.ndarray, grad: np.ndarray, state: AdamState):
    """One ``torch.optim.Adam`` step on (a shard of) the parameters: (new params, new state)."""
    step = state.step + 1
    m = state.m + (grad - state.m) * (1 - BETA1)
    v = state.v * BETA2 + grad * grad * (1 - BETA2)
    step_size = LR / (1 - BETA1 ** step)
    denom = np.sqrt(v) / np.sqrt(1 - BETA2 ** step) + EPS
    return params - step_size * m / denom, AdamState(m, v, step)
