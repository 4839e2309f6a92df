"""Floating-point operations of a transformer's forward and backward passes.

A matrix product of (m × k) and (k × n) costs 2mkn FLOPs. Per layer and micro-batch
(b sequences of s tokens, hidden h, MLP width f, query heads a, key/value heads a_kv):

    QKV projections     2bsh(h + 2h·a_kv/a)
    attention scores    2bs²h    (QKᵀ)        these two are what selective recompute redoes
    attention over V    2bs²h
    output projection   2bsh²
    MLP                 2bshf × 2  (GeLU: up, down)  or × 3 (SwiGLU: gate, up, down)

With a_kv = a and f = 4h this is 24bsh² + 4bs²h = 24bsh²(1 + s/(6h)); the logits add 2bshV.
The backward pass costs twice the forward (a gradient for the input and one for the weights).
Summed over a batch of B sequences and L layers, forward + backward:

    72·B·s·L·h²·(1 + s/(6h) + V/(12hL))                        (Korthikanti et al. 2022, §6)
    96·B·s·L·h²·(1 + s/(6h) + V/(16hL))  with full recompute    (Narayanan et al. 2021, eq. 3)

— full recompute adds one forward of every layer, never of the logits.
"""

from __future__ import annotations

from app.catalog.models import ModelShape


def attention_core_flops(model: ModelShape, seq: int, micro_batch: int) -> float:
    """QKᵀ and the product with V: what selective recompute runs again."""
    return 4.0 * micro_batch * seq * seq * model.hidden


def layer_forward_flops(model: ModelShape, seq: int, micro_batch: int) -> float:
    b, s, h, f = micro_batch, seq, model.hidden, model.ffn
    kv_share = model.kv_heads / model.heads
    projections = 2.0 * b * s * h * (h + 2 * h * kv_share) + 2.0 * b * s * h * h
    mlp = 2.0 * b * s * h * f * (3 if model.gated_mlp else 2)
    return projections + attention_core_flops(model, seq, micro_batch) + mlp


def logits_forward_flops(model: ModelShape, seq: int, micro_batch: int) -> float:
    return 2.0 * micro_batch * seq * model.hidden * model.vocab


def iteration_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int,
                    recompute: bool = False) -> float:
    """The closed forms above, for GPT-style layers (as the papers print them)."""
    s, l, h, v = seq, layers, hidden, vocab
    if recompute:
        return 96.0 * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * h * l))
    return 72.0 * batch * s * l * h * h * (1 + s / (6 * h) + v / (12 * h * l))
