"""The wall: attention's O(s²) against the memory of one GPU, for a real model.

Per transformer layer and micro-batch of b sequences of s tokens (a query heads, hidden h):

    score matrix         2·a·b·s²      QKᵀ of every head in 16 bits — what standard attention
                                       materialises (and keeps, as the softmax, for backward)
    FlashAttention       4·a·b·s       instead keeps one logsumexp per query per head (fp32),
                                       recomputing the scores block by block in backward
                                       (Dao et al. 2022)
    attention FLOPs      4·b·s²·h      QKᵀ and the product with V, forward; a causal mask halves
                                       what a kernel that skips masked blocks computes
    activations          Korthikanti et al. 2022, Table 2: sbh(34 + 5as/h) for GPT-3, from
                                       app.sim.memory.activations (GQA and SwiGLU generalised); with
                                       FlashAttention the 5as/h terms go and the logsumexp comes

so the scores grow with s² while everything else grows with s. The wall is where a GPU stops
holding them: one layer's score matrix (``scores_limit``), every layer's activations with
standard attention (``activations_limit``) and with FlashAttention (``flash_limit``) — the
activations alone, with nothing else on the GPU: the model states (the memory ledger's) only
bring the wall nearer. Past it the sequence itself must be split: context parallelism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from app.sim.memory import activations
from app.sim.flops import attention_core_flops, layer_forward_flops
from app.catalog.gpus import GPUS
from app.catalog.models import ModelShape
from app.sim.tensor_parallel.scale import layer_shape

CONTEXTS: tuple[int, ...] = tuple(2 ** k for k in range(10, 21))   # 1,024 … 1,048,576 tokens
SCORE_BYTES = 2          # 16-bit scores
LSE_BYTES = 4            # FlashAttention's softmax_lse is fp32


@dataclass(frozen=True)
class Coefficients:
    """One layer's activation bytes as linear + quadratic in s (one micro-batch of b)."""

    per_token: float         # bytes per token: every term of Table 2 but the scores'
    per_token_squared: float  # bytes per s²: softmax output, dropout mask and output (5as²b)
    lse_per_token: float     # FlashAttention's logsumexp, 4·a·b

    def standard(self, s: float) -> float:
        return self.per_token * s + self.per_token_squared * s * s

    def flash(self, s: float) -> float:
        return (self.per_token + self.lse_per_token) * s


@lru_cache(maxsize=64)
def coefficients(model: ModelShape, micro_batch: int) -> Coefficients:
    one = layer_shape(model, 1, micro_batch)
    linear = activations.per_layer_bytes(one, recompute="selective")  # selective drops the s² terms
    quadratic = activations.per_layer_bytes(one, recompute="none") - linear
    return Coefficients(linear, quadratic, LSE_BYTES * model.heads * micro_batch)


@dataclass(frozen=True)
class WallPoint:
    context: int
    score_bytes: float            # one layer
    flash_stats_bytes: float      # one layer
    attention_flops: float        # one layer's forward (halved if causal)
    other_flops: float            # the rest of the layer's forward: projections and MLP
    activations_bytes: float      # one layer, standard attention (Table 2, no recompute)
    activations_flash_bytes: float  # one layer, FlashAttention
    model_activations_bytes: float  # every layer, standard attention
    model_flash_bytes: float      # every layer, FlashAttention


@dataclass(frozen=True)
class Wall:
    model: ModelShape
    micro_batch: int
    causal: bool
    gpu: str
    capacity_bytes: float
    points: tuple[WallPoint, ...]
    at_context: WallPoint
    scores_limit: int             # longest s whose one-layer score matrix fits on the GPU
    activations_limit: int        # longest s whose activations (all layers) fit, standard
    flash_limit: int              # the same with FlashAttention
    attention_dominates_from: int  # s from which attention FLOPs exceed the rest of the layer


def point(model: ModelShape, s: int, b: int, causal: bool, coeff: Coefficients) -> WallPoint:
    a = model.heads
    core = attention_core_flops(model, s, b)
    return WallPoint(s, SCORE_BYTES * a * b * s * s, LSE_BYTES * a * b * s,
                     core / 2 if causal else core, layer_forward_flops(model, s, b) - core,
                     coeff.standard(s), coeff.flash(s), model.layers * coeff.standard(s),
                     model.layers * coeff.flash(s))


def _largest(fits, guess: float) -> int:
    """The largest integer s ≥ 0 with fits(s), starting from a closed-form guess (rounding)."""
    s = max(0, int(guess))
    while s > 0 and not fits(s):
        s -= 1
    while fits(s + 1):
        s += 1
    return s


def wall(model: ModelShape, micro_batch: int, causal: bool, gpu: str, context: int) -> Wall:
    b, a, L = micro_batch, model.heads, model.layers
    cap = float(GPUS[gpu].capacity)
    coeff = coefficients(model, b)
    lin, sq = coeff.per_token, coeff.per_token_squared
    scores = _largest(lambda s: SCORE_BYTES * a * b * s * s <= cap,
                      math.sqrt(cap / (SCORE_BYTES * a * b)))
    if sq > 0:      # L·(lin·s + sq·s²) = cap
        guess = (-lin + math.sqrt(lin * lin + 4 * sq * cap / L)) / (2 * sq)
    else:
        guess = cap / (L * lin)
    standard = _largest(lambda s: L * coeff.standard(s) <= cap, guess)
    flash = _largest(lambda s: L * coeff.flash(s) <= cap, cap / (L * (lin + coeff.lse_per_token)))
    # 4·b·s²·h·(½ if causal) = (rest of the layer per token)·s
    rest_per_token = layer_forward_flops(model, 1, b) - attention_core_flops(model, 1, b)
    per_s2 = attention_core_flops(model, 1, b) * (0.5 if causal else 1.0)
    dominates = math.ceil(rest_per_token / per_s2)
    points = tuple(point(model, s, b, causal, coeff) for s in CONTEXTS)
    return Wall(model, b, causal, gpu, cap, points, point(model, context, b, causal, coeff),
                scores, standard, flash, dominates)
