"""The numpy pieces the tensor-parallel blocks are made of: seeded inputs, LayerNorm, GeLU,
dropout, causal attention, and the three collectives on a list of per-rank arrays.

Every function is written out by hand, forward and backward, so the simulation moves real
numbers through exactly the operations the page draws. The formulas are the standard ones
(LayerNorm: Ba et al. 2016; GeLU with the tanh approximation that Megatron-LM's fused bias-GeLU
uses: Hendrycks & Gimpel 2016, eq. 2; scaled dot-product attention: Vaswani et al. 2017, eq. 1)
and the tests check each against torch's own implementation.

Collectives follow torch.distributed semantics on a list indexed by rank: ``all_reduce`` sums
the list (in rank order) and gives every rank the sum, ``all_gather`` concatenates the ranks'
pieces along an axis, ``reduce_scatter`` sums and hands rank r the r-th piece along an axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LN_EPS = 1e-5
DROPOUT_P = 0.1
"""GPT-3's dropout probability; kept elements are scaled by 1/(1 − p)."""
GELU_C = np.sqrt(2 / np.pi)


def integers(rng: np.random.Generator, shape, low: int = -3, high: int = 3) -> np.ndarray:
    """Small integers in [low, high]: products and sums stay exact and readable in a cell."""
    return rng.integers(low, high + 1, size=shape).astype(np.float64)


def tenths(rng: np.random.Generator, shape) -> np.ndarray:
    """One-decimal numbers in [−1, 1], for blocks with LayerNorm, GeLU and softmax (which make
    every number fractional anyway; one decimal keeps the inputs readable)."""
    return rng.integers(-10, 11, size=shape) / 10.0


# --- LayerNorm ------------------------------------------------------------------------------

@dataclass(frozen=True)
class NormCache:
    x_hat: np.ndarray   # (rows, h) normalised input
    inv_std: np.ndarray  # (rows, 1)
    gamma: np.ndarray   # (h,)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, NormCache]:
    """y = γ ⊙ (x − μ)/√(σ² + ε) + β over the last axis (each token on its own)."""
    mean = x.mean(axis=-1, keepdims=True)
    inv_std = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + LN_EPS)
    x_hat = (x - mean) * inv_std
    return x_hat * gamma + beta, NormCache(x_hat, inv_std, gamma)


def layer_norm_backward(dy: np.ndarray, cache: NormCache):
    """(dx, dγ, dβ). dx = (1/σ)(g − mean(g) − x̂·mean(g ⊙ x̂)) with g = dy ⊙ γ; dγ and dβ sum
    over the rows this rank holds (all tokens, or its sequence shard)."""
    g = dy * cache.gamma
    dx = cache.inv_std * (g - g.mean(axis=-1, keepdims=True)
                          - cache.x_hat * (g * cache.x_hat).mean(axis=-1, keepdims=True))
    return dx, (dy * cache.x_hat).sum(axis=0), dy.sum(axis=0)


# --- GeLU, dropout --------------------------------------------------------------------------

def gelu(x: np.ndarray) -> np.ndarray:
    """GeLU, tanh approximation: ½x(1 + tanh(√(2/π)(x + 0.044715x³)))."""
    return 0.5 * x * (1 + np.tanh(GELU_C * (x + 0.044715 * x ** 3)))


def gelu_grad(x: np.ndarray) -> np.ndarray:
    u = GELU_C * (x + 0.044715 * x ** 3)
    th = np.tanh(u)
    return 0.5 * (1 + th) + 0.5 * x * (1 - th ** 2) * GELU_C * (1 + 3 * 0.044715 * x ** 2)


def dropout_scale(rng: np.random.Generator, shape) -> np.ndarray:
    """The dropout mask as the factor each element is multiplied by: 0 where dropped, 1/(1 − p)
    where kept. Drawn once from the seed, so every rank (and the real run) applies the same
    mask to the same token — with sequence parallelism each rank uses its own rows of it."""
    return (rng.random(shape) >= DROPOUT_P) / (1 - DROPOUT_P)


# --- attention ------------------------------------------------------------------------------

def attention_heads(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Causal scaled dot-product attention for a stack of heads.

    q, k, v: (heads, n, d). Returns (probabilities (heads, n, n), context (heads, n, d)).
    Token i attends to tokens 0…i (GPT's causal mask)."""
    d = q.shape[-1]
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d)            # (heads, n, n)
    n = scores.shape[-1]
    scores = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    p = e / e.sum(axis=-1, keepdims=True)
    return p, p @ v


def attention_heads_backward(dc: np.ndarray, q, k, v, p):
    """(dq, dk, dv) from the gradient of the context dc (heads, n, d)."""
    d = q.shape[-1]
    dp = dc @ v.transpose(0, 2, 1)                             # (heads, n, n)
    dv = p.transpose(0, 2, 1) @ dc
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) / np.sqrt(d)  # softmax backward
    return ds @ k, ds.transpose(0, 2, 1) @ q, dv


def split_heads(qkv: np.ndarray, heads: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, heads·3d) with Megatron's per-head layout [q₀ k₀ v₀ | q₁ k₁ v₁ | …] → q, k, v each
    (heads, n, d). The layout keeps each head's columns together, so cutting the QKV weight
    into column blocks gives every rank whole heads."""
    n = qkv.shape[0]
    per_head = qkv.reshape(n, heads, 3, -1)                    # (n, heads, 3, d)
    q, k, v = (per_head[:, :, i, :].transpose(1, 0, 2) for i in range(3))
    return q, k, v


def merge_heads(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The inverse of :func:`split_heads`: (heads, n, d) ×3 → (n, heads·3d)."""
    stacked = np.stack([q, k, v], axis=2)                      # (heads, n, 3, d)
    return stacked.transpose(1, 0, 2, 3).reshape(q.shape[1], -1)


def concat_heads(c: np.ndarray) -> np.ndarray:
    """(heads, n, d) → (n, heads·d), heads side by side."""
    return c.transpose(1, 0, 2).reshape(c.shape[1], -1)


def unconcat_heads(c: np.ndarray, heads: int) -> np.ndarray:
    return c.reshape(c.shape[0], heads, -1).transpose(1, 0, 2)


# --- collectives on per-rank lists ----------------------------------------------------------

def split(x: np.ndarray, parts: int, axis: int) -> list[np.ndarray]:
    """Rank r's piece: the r-th of ``parts`` equal blocks along ``axis``."""
    return [np.ascontiguousarray(p) for p in np.split(x, parts, axis=axis)]


def all_reduce(pieces: list[np.ndarray], op: str = "sum") -> np.ndarray:
    """The element-wise sum (or max) of every rank's array, added in rank order."""
    out = pieces[0].copy()
    for piece in pieces[1:]:
        out = out + piece if op == "sum" else np.maximum(out, piece)
    return out


def all_gather(pieces: list[np.ndarray], axis: int) -> np.ndarray:
    return np.concatenate(pieces, axis=axis)


def reduce_scatter(pieces: list[np.ndarray], axis: int) -> list[np.ndarray]:
    return split(all_reduce(pieces), len(pieces), axis)
