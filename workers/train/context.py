"""Context parallelism: ring attention with the online-softmax merge, zigzag for causal masks
(Liu et al. 2023, "Ring Attention"; Megatron-LM's context parallelism and its load balancing).

Each of the cp ranks holds seq/cp tokens of every sequence — chunks r and 2·cp − 1 − r of 2·cp
(zigzag, app.sim.context_parallel.layout.tokens_table), so that under a causal mask every rank
has the same number of unmasked scores. Its queries stay; the K/V blocks go round the ring.

Forward, cp steps: at step s rank r attends its queries to the block that started on rank
r − s, while the next block is already in flight (``comm.exchange``); each block gives a partial
output O_b and its log-sum-exp L_b per query and head, and partials merge exactly
(FlashAttention's rule): L = logaddexp(L_a, L_b), O = e^{L_a − L}·O_a + e^{L_b − L}·O_b.
Blocks wholly above the causal diagonal are skipped. One block's partial, the merge and the skip
are workers/attention_blocks.py, shared with /context-parallel's worker.

Backward, the same ring again: with the final L and D = rowsum(dO ∘ O) each block's
probabilities are recomputed, P = exp(S − L), and give dV = Pᵀ·dO, dS = P ∘ (dO·Vᵀ − D),
dQ += dS·K/√d, dK = dSᵀ·Q/√d. A block's dK, dV accumulate as it travels with it, and go home
after the last step (cp − 1 hops with the block, one more to its owner).

The same :class:`FlashAttention` on one block (cp = 1) is the attention core of selective
recomputation: it keeps Q, K, V, O and L, never the seq × seq probabilities, and recomputes them
in backward (Korthikanti et al. 2022, §5: the attention core is what selective recomputation
recomputes). Without recomputation and with cp = 1 the core is plain autograd (:func:`plain`),
which keeps the probabilities.

Grouped-query attention: query head j reads key/value head j // (heads / kv_heads).
"""

from __future__ import annotations

import math

import torch

from workers.attention_blocks import merge, partial, probabilities, scores, skip
from workers.train import comm


def _block_backward(q, k, v, dout, lse, delta, q_pos, k_pos, group: int):
    """dQ, dK, dV of one block given the merged L (nq, h) and D (nq, h)."""
    p = probabilities(scores(q, k, q_pos, k_pos, group), lse.T)  # (h, nq, nk)
    v_rep = v.repeat_interleave(group, dim=1)
    dv_rep = torch.einsum("hqk,qhd->khd", p, dout)
    dp = torch.einsum("qhd,khd->hqk", dout, v_rep)
    ds = p * (dp - delta.T[..., None]) / math.sqrt(q.shape[-1])
    dq = torch.einsum("hqk,khd->qhd", ds, k.repeat_interleave(group, dim=1))
    dk_rep = torch.einsum("hqk,qhd->khd", ds, q)
    nk, kv_heads, d = k.shape
    return (dq, dk_rep.reshape(nk, kv_heads, group, d).sum(2),
            dv_rep.reshape(nk, kv_heads, group, d).sum(2))


class RingAttention(torch.autograd.Function):
    """Causal attention of this rank's queries over the whole sequence, K/V round the cp ring.

    q (n, h, d), k and v (n, h_kv, d) at positions ``table[cp_rank]``; ``table`` (cp, n) holds
    every rank's positions. With a cp group of one this is FlashAttention on one block."""

    @staticmethod
    def forward(ctx, q, k, v, table, groups):
        cp = groups["cp"]
        group = q.shape[1] // k.shape[1]
        me = cp.index(groups.rank) if cp.size > 1 else 0
        q_pos = table[me]
        out = torch.zeros_like(q)
        lse = torch.full(q.shape[:2], -math.inf, dtype=q.dtype)
        kv = torch.stack([k, v])
        for s in range(cp.size):
            wait = (comm.exchange(kv, groups.cp_next_rank, groups.cp_prev_rank, cp, "ring")
                    if s < cp.size - 1 else None)
            k_pos = table[(me - s) % cp.size]
            if not skip(q_pos, k_pos):
                out_b, lse_b = partial(q, kv[0], kv[1], q_pos, k_pos, group)
                out, lse = merge(out, lse, out_b, lse_b)
            if wait is not None:
                kv = wait()
        ctx.save_for_backward(q, k, v, out, lse, table)
        ctx.groups = groups
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse, table = ctx.saved_tensors
        groups = ctx.groups
        cp = groups["cp"]
        group = q.shape[1] // k.shape[1]
        me = cp.index(groups.rank) if cp.size > 1 else 0
        q_pos = table[me]
        delta = (dout * out).sum(-1)                                 # (n, h)
        dq = torch.zeros_like(q)
        travel = torch.stack([k, v, torch.zeros_like(k), torch.zeros_like(v)])  # K V dK dV
        for s in range(cp.size):
            k_pos = table[(me - s) % cp.size]
            if not skip(q_pos, k_pos):
                dq_b, dk_b, dv_b = _block_backward(q, travel[0], travel[1], dout, lse, delta,
                                                   q_pos, k_pos, group)
                dq = dq + dq_b
                travel = torch.stack([travel[0], travel[1], travel[2] + dk_b, travel[3] + dv_b])
            if cp.size > 1:       # on with the block, or (after the last step) home with dK, dV
                last = s == cp.size - 1
                moving = travel[2:] if last else travel
                received = comm.exchange(moving, groups.cp_next_rank, groups.cp_prev_rank, cp,
                                         "ring")()
                travel = received if not last else torch.cat([travel[:2], received])
        return dq, travel[2], travel[3], None, None


def attention(q, k, v, table, groups, flash: bool) -> torch.Tensor:
    """The attention core: the ring (cp > 1, or ``flash`` for selective recomputation), else
    plain autograd."""
    if groups["cp"].size > 1 or flash:
        return RingAttention.apply(q, k, v, table, groups)
    return plain(q, k, v, table[0])


def plain(q, k, v, positions) -> torch.Tensor:
    """softmax(QKᵀ/√d + causal mask)·V with autograd keeping the probabilities."""
    group = q.shape[1] // k.shape[1]
    probs = torch.softmax(scores(q, k, positions, positions, group), dim=-1)
    return torch.einsum("hqk,khd->qhd", probs, v.repeat_interleave(group, dim=1))
