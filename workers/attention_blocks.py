"""Blockwise attention, the arithmetic every context-parallel worker shares: one block of keys'
partial output with its log-sum-exp, the exact merge of two partials, and the causal skip —
used by /context-parallel's worker (workers/context_parallel.py: ring, all-gather, Ulysses,
hybrid) and by the training framework's ring attention (workers/train/context.py).

For queries Q (nq, h, d) and one block of keys and values K, V (nk, h_kv, d):

    S = Q·Kᵀ/√d, −∞ where a key comes after its query (causal)        (h, nq, nk)
    L = log Σ_k exp S              per query and head; −∞ for a query that sees no key
    O = exp(S − L)·V               the block's softmax-weighted values (0 where L = −∞)

Two partials of the same queries over disjoint keys merge exactly (FlashAttention's rule,
Dao et al. 2022, §3.1; Transformer Engine and Megatron-LM's context parallelism combine ring
steps this way): L = logaddexp(L_a, L_b), O = e^{L_a − L}·O_a + e^{L_b − L}·O_b. The merge of
every block equals softmax(S)·V over all keys, which the workers' tests hold to torch's
scaled_dot_product_attention.

Grouped-query attention: query head j reads key/value head j // group (group = h / h_kv).
"""

from __future__ import annotations

import math

import torch


def scores(q, k, q_pos, k_pos, group: int, causal: bool = True) -> torch.Tensor:
    """(h, nq, nk) scaled scores Q·Kᵀ/√d, −∞ above the causal diagonal when ``causal``
    (``q_pos``, ``k_pos``: the tokens' positions in the sequence)."""
    k = k.repeat_interleave(group, dim=1)                # query head j reads kv head j // group
    out = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        out = out.masked_fill(k_pos[None, None, :] > q_pos[None, :, None], -math.inf)
    return out


def probabilities(s: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """exp(S − L) for scores S (h, nq, nk) and log-sum-exps L (h, nq); 0 on a row that sees
    no key (L = −∞)."""
    seen = torch.isfinite(lse)
    return torch.where(seen[..., None], torch.exp(s - lse.where(seen, 0.0)[..., None]), 0.0)


def partial(q, k, v, q_pos, k_pos, group: int, causal: bool = True):
    """One block's partial output (nq, h, d) and log-sum-exp (nq, h); a query that sees no key
    of the block gets L = −∞ and output 0."""
    s = scores(q, k, q_pos, k_pos, group, causal)
    lse = torch.logsumexp(s, dim=-1)                     # (h, nq)
    out = torch.einsum("hqk,khd->qhd", probabilities(s, lse), v.repeat_interleave(group, dim=1))
    return out, lse.T


def merge(out, lse, out_b, lse_b):
    """Two partial attentions of the same queries over disjoint keys as one (output, L)."""
    new = torch.logaddexp(lse, lse_b)
    seen = torch.isfinite(new)
    safe = new.where(seen, 0.0)
    w_a = torch.where(seen, torch.exp(lse - safe), 0.0)[..., None]
    w_b = torch.where(seen, torch.exp(lse_b - safe), 0.0)[..., None]
    return out * w_a + out_b * w_b, new


def skip(q_pos, k_pos, causal: bool = True) -> bool:
    """A block wholly above the causal diagonal: every key after every query (Megatron-LM
    skips its ring step)."""
    return causal and bool(k_pos.min() > q_pos.max())
