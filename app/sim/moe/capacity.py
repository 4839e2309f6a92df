"""Expert capacity and token dropping, as Megatron-LM does it on each rank.

Megatron-LM (``megatron/core/transformer/moe/moe_utils.py``)::

    def get_capacity(num_tokens, num_experts, capacity_factor, min_capacity=None):
        capacity = math.ceil((num_tokens / num_experts) * capacity_factor)

called with ``num_tokens = tokens_on_this_rank · topk``: every rank routes its own T/ep tokens
and lets each expert take at most ``capacity`` of *that rank's* assignments (so
``get_capacity(4096, 64, 1.25) = 80``). A capacity factor of 0 here means dropless (Megatron:
``--moe-expert-capacity-factor`` unset).

Over capacity, ``--moe-token-drop-policy``:

* ``probs`` keeps the assignments with the highest gate weight (Megatron: ``torch.topk`` of the
  routing probabilities over the tokens, per expert). Equal weights — common with
  ``topk_softmax``, where a weight depends on a difference of two exact logits — keep the
  earlier token; weights are compared after rounding to 2⁻³⁶ so that numpy and torch, whose
  ``exp`` may differ in the last bit, order them alike.
* ``position`` keeps the earliest tokens (lowest token index) and drops the latest.

A dropped assignment contributes nothing from that expert: the token's other experts still
count, and the residual connection around the layer carries it on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

WEIGHT_GRID = 2.0 ** 36
"""Gate weights are compared on this grid when dropping by probability (see above)."""


def get_capacity(num_tokens: int, num_experts: int, capacity_factor: float) -> int:
    """Megatron-LM's get_capacity, the same float expression: ceil((n / E) · cf)."""
    return math.ceil((num_tokens / num_experts) * capacity_factor)


def rank_capacity(tokens: int, ep: int, top_k: int, experts: int,
                  capacity_factor: float) -> int | None:
    """What one expert takes from one rank's T/ep tokens; None when dropless (cf = 0)."""
    if capacity_factor == 0:
        return None
    return get_capacity(tokens // ep * top_k, experts, capacity_factor)


@dataclass(frozen=True)
class Drops:
    capacity: int | None
    kept: np.ndarray          # (T, k) bool: assignment (token, slot) survives
    load: np.ndarray          # (ep, E) assignments each rank sends each expert before dropping
    kept_load: np.ndarray     # (ep, E) … after dropping
    dropped: tuple[tuple[int, int], ...]   # (token, expert), by rank, expert, token

    @property
    def expert_tokens(self) -> np.ndarray:
        return self.kept_load.sum(axis=0)


def apply_capacity(experts: np.ndarray, weights: np.ndarray, num_experts: int, ep: int,
                   capacity: int | None, policy: str) -> Drops:
    """Apply ``capacity`` per (rank, expert) to the (T, k) choice ``experts`` with ``weights``."""
    tokens, top_k = experts.shape
    token = np.repeat(np.arange(tokens), top_k)                  # (T·k,) flattened assignments
    expert = experts.reshape(-1)
    rank = token // (tokens // ep)
    # 1. order each (rank, expert) group by what the policy keeps first
    if policy == "probs":
        key = -np.round(weights.reshape(-1) * WEIGHT_GRID)
        order = np.lexsort((token, key, expert, rank))           # the last key sorts first
    elif policy == "position":
        order = np.lexsort((token, expert, rank))
    else:
        raise ValueError(f"drop_policy must be probs or position, got {policy!r}")
    # 2. place of each assignment within its group; keep the first `capacity`
    group = rank[order] * num_experts + expert[order]
    starts = np.r_[0, np.flatnonzero(np.diff(group)) + 1]
    place = np.arange(order.size) - np.repeat(starts, np.diff(np.r_[starts, order.size]))
    kept_flat = np.ones(order.size, dtype=bool)
    if capacity is not None:
        kept_flat[order] = place < capacity
    # 3. loads per (rank, expert) before and after
    flat = rank * num_experts + expert
    before = np.bincount(flat, minlength=ep * num_experts).reshape(ep, num_experts)
    after = np.bincount(flat[kept_flat], minlength=ep * num_experts).reshape(ep, num_experts)
    out = ~kept_flat
    by = np.lexsort((token[out], expert[out], rank[out]))
    dropped = tuple((int(t), int(e)) for t, e in zip(token[out][by], expert[out][by]))
    return Drops(capacity, kept_flat.reshape(tokens, top_k), before, after, dropped)
