"""Attention two ways: plainly, on the whole sequence, and block by block with the online
softmax that lets a rank see the keys a block at a time.

Plain attention (the reference every method is compared with), for query head h reading key /
value head h // (heads / kv_heads) — grouped-query attention:

    O_h = softmax(Q_h K_gᵀ / √d + M) V_g,    M_ij = −∞ where j > i (causal), else 0

The online softmax (Milakov & Gimelshein 2018; FlashAttention; Ring Attention, Liu et al. 2023
§3) keeps for every query row a running maximum m, a running sum l and an unnormalised output
o. Merging a block of keys K_b, V_b with scores S = Q K_bᵀ / √d (masked entries −∞):

    m' = max(m, rowmax S)
    l' = l · e^{m − m'} + Σ_j e^{S_j − m'}
    o' = o · e^{m − m'} + e^{S − m'} V_b

and after the last block O = o / l. The factor e^{m − m'} rescales what was summed against the
old maximum to the new one, so the blocks can come in any order and the result is exactly the
softmax over all of them. A block whose every score is masked leaves (m, l, o) as they were.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """softmax(QKᵀ/√d + mask)·V on the whole sequence, one head at a time, float64.

    q: (seq, heads, d); k, v: (seq, kv_heads, d) → (seq, heads, d). Written plainly, without
    anything the sharded methods use, so that it can check them."""
    seq, heads, d = q.shape
    group = heads // k.shape[1]
    out = np.empty_like(q, dtype=np.float64)
    # two (seq, seq) work arrays for every head (at seq 256 each is over the 256 kB the
    # server maps afresh: app.caches.fix_mmap_threshold), and the mask's indices once
    scores, weights = np.empty((seq, seq)), np.empty((seq, seq))
    above = np.triu_indices(seq, 1) if causal else None
    for h in range(heads):
        g = h // group
        # einsum's own loops, not BLAS threads (see BLAS_SINGLE_THREAD_MNK)
        np.einsum("id,jd->ij", q[:, h, :], k[:, g, :], out=scores)
        scores /= math.sqrt(d)                                                 # (seq, seq)
        if causal:
            scores[above] = -np.inf
        np.subtract(scores, scores.max(axis=1, keepdims=True), out=weights)
        np.exp(weights, out=weights)
        weights /= weights.sum(axis=1, keepdims=True)
        out[:, h, :] = np.einsum("ij,jd->id", weights, v[:, g, :])
    return out


def visible(q_pos: np.ndarray, k_pos: np.ndarray, causal: bool) -> np.ndarray:
    """Which (query, key) pairs count: (..., nq, nk) bool from positions (..., nq), (..., nk)."""
    if not causal:
        return np.ones(q_pos.shape + k_pos.shape[-1:], dtype=bool)
    return k_pos[..., None, :] <= q_pos[..., :, None]


BLAS_SINGLE_THREAD_MNK = 4 * 65536
"""OpenBLAS multiplies m×k by k×n on one thread up to m·n·k = 4·65536 and wakes its thread
pool above that; on a busy two-core server those threads spin against the other requests and
a 256-token block takes ten times longer. Larger products therefore go through einsum's own
loops (one thread), smaller ones through matmul (BLAS, fast for small stacked matrices)."""


def bmm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b over stacked matrices (..., m, k) × (..., k, n), without BLAS threads."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if m * k * n > BLAS_SINGLE_THREAD_MNK:
        return np.einsum("...ij,...jk->...ik", a, b)
    return a @ b


@dataclass(frozen=True)
class Running:
    """The online softmax of a stack of ranks: m, l (ranks, heads, nq); o (ranks, heads, nq, d)."""

    m: np.ndarray
    l: np.ndarray  # noqa: E741 (the papers' name for the running sum)
    o: np.ndarray

    @classmethod
    def empty(cls, ranks: int, heads: int, nq: int, d: int) -> Running:
        return cls(np.full((ranks, heads, nq), -np.inf), np.zeros((ranks, heads, nq)),
                   np.zeros((ranks, heads, nq, d)))

    def output(self) -> np.ndarray:
        """O = o / l, back to (ranks, nq, heads, d)."""
        return (self.o / self.l[..., None]).transpose(0, 2, 1, 3)


def merge(state: Running, q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray,
          group: int) -> tuple[Running, np.ndarray]:
    """Merge one block of keys into every rank's running softmax.

    q: (ranks, nq, hq, d); k, v: (ranks, nk, hk, d) (or broadcast views); mask: (ranks, nq, nk);
    local query head j reads local kv head j // ``group``. Returns the new state and the
    correction factors e^{m − m'} (ranks, hq, nq)."""
    d = q.shape[-1]
    if group > 1:                        # each kv head serves `group` consecutive query heads
        kv_of = np.arange(q.shape[2]) // group
        k, v = k[:, :, kv_of, :], v[:, :, kv_of, :]                     # (ranks, nk, hq, d)
    kx = k.transpose(0, 2, 3, 1)                                        # (ranks, hq, d, nk)
    vx = v.transpose(0, 2, 1, 3)                                        # (ranks, hq, nk, d)
    scores = bmm(q.transpose(0, 2, 1, 3), kx) / math.sqrt(d)            # (ranks, hq, nq, nk)
    scores = np.where(mask[:, None, :, :], scores, -np.inf)
    m_new = np.maximum(state.m, scores.max(axis=-1, initial=-np.inf))   # (ranks, hq, nq)
    # a row that has seen no key yet keeps m = −∞; shift it by 0 so that nothing is ∞ − ∞
    shift = np.where(np.isfinite(m_new), m_new, 0.0)
    correction = np.exp(state.m - shift)                                # e^{m − m'}; 0 if m = −∞
    p = np.exp(scores - shift[..., None])                               # masked → e^{−∞} = 0
    l_new = state.l * correction + p.sum(axis=-1)
    o_new = state.o * correction[..., None] + bmm(p, vx)                # (ranks, hq, nq, d)
    return Running(m_new, l_new, o_new), correction


@dataclass(frozen=True)
class Merged:
    """:func:`merge_steps`' answer: the state after the last block, and per step (a leading
    axis of ``steps``) the running max before and after, the correction factors and the running
    sum after, each (steps, ranks, hq, nq)."""

    state: Running
    m_before: np.ndarray
    m_after: np.ndarray
    correction: np.ndarray
    l_after: np.ndarray


STEP_BATCH_ELEMENTS = 1 << 16
""":func:`merge_steps` batches as many steps as keep its work arrays near this many numbers
each (512 kB): in the server, which maps every array over 256 kB afresh
(app.caches.fix_mmap_threshold), larger batches were slower, not faster — at cp 64 a ring
step is a batch of its own, its products still one per (rank, head) and (block, head)."""


def merge_steps(state: Running, q: np.ndarray, k: np.ndarray, v: np.ndarray, origins: np.ndarray,
                masks, group: int) -> Merged:
    """:func:`merge` applied for steps s = 0, 1, …: in step s rank r merges the block that rank
    ``origins[s, r]`` started with — ``k[origins[s, r]]``, ``v[…]`` — under ``masks(s0, s1)``
    (the masks of steps s0…s1−1, (s1−s0, ranks, nq, nk)). The same numbers as calling
    :func:`merge` step after step: the same products, each per (rank, head) matrix, the same
    element-wise operations on each element, and the running sums and outputs added in step
    order; the steps' products and exponentials are batched (a few steps at a time)."""
    steps, ranks = origins.shape
    hq, nq, d = q.shape[2], q.shape[1], q.shape[-1]
    nk = k.shape[1]
    per_step = ranks * hq * max(nq * nk, nk * d, nq * d)
    batch = max(1, min(steps, STEP_BATCH_ELEMENTS // per_step))
    stacked = (nq * d * nk <= BLAS_SINGLE_THREAD_MNK and nq * nk * d <= BLAS_SINGLE_THREAD_MNK
               and _is_permutation(origins))
    if stacked:       # the stacked products stay on one BLAS thread, as each step's would
        batch = max(1, min(batch, BLAS_SINGLE_THREAD_MNK // (nq * d * nk)))
    qx = q.transpose(0, 2, 1, 3)                                        # (ranks, hq, nq, d)
    kv_of = np.arange(hq) // group if group > 1 else None
    if kv_of is not None:
        k, v = k[:, :, kv_of, :], v[:, :, kv_of, :]                     # (ranks, nk, hq, d)
    m, l, o = state.m, state.l, state.o.copy()      # o is updated in place (ours alone)
    m_before, m_after, corrections, l_after = [], [], [], []
    buffers: dict[int, tuple] = {}
    pv_step = np.empty((ranks, hq, nq, d))
    for s0 in range(0, steps, batch):
        s1 = min(steps, s0 + batch)
        b = s1 - s0
        here = origins[s0:s1]                                           # (b, ranks)
        mask = np.broadcast_to(masks(s0, s1), (b, ranks, nq, nk))
        if stacked:
            # the work arrays of a batch, allocated once: the server maps every array over
            # 256 kB afresh (app.caches.fix_mmap_threshold), and faulting in 2 MB temporaries
            # every batch made this three times slower
            if b not in buffers:
                buffers[b] = (np.empty((ranks, b, nk, hq, d)), np.empty((ranks, hq, nq, b * nk)),
                              np.empty((ranks, hq, b, nq, nk)), np.empty((ranks, hq, b * nq, d)))
            kbuf, sbuf, pcat, pvbuf = buffers[b]
            # rank r's keys of the batch's steps side by side: one product per (rank, head)
            # gives every step's scores (each score the same dot product over d)
            np.take(k, here.T, axis=0, out=kbuf, mode="clip")
            kcat = kbuf.transpose(0, 3, 4, 1, 2).reshape(ranks, hq, d, b * nk)
            np.matmul(qx, kcat, out=sbuf)
            scores = sbuf.reshape(ranks, hq, nq, b, nk).transpose(3, 0, 1, 2, 4)
            np.divide(scores, math.sqrt(d), out=scores)
            np.copyto(scores, -np.inf, where=~mask[:, :, None, :, :])
        else:
            kb = k[here]                                                # (b, ranks, nk, hq, d)
            scores = bmm(qx, kb.transpose(0, 1, 3, 4, 2)) / math.sqrt(d)  # (b, ranks, hq, nq, nk)
            scores = np.where(mask[:, :, None, :, :], scores, -np.inf)
        top = _row_max(scores)                                          # (b, ranks, hq, nq)
        # the running max: m' = max(m, rowmax S), step after step (exact in any grouping)
        after = np.maximum.accumulate(np.concatenate([m[None], top]), axis=0)
        before, after = after[:-1], after[1:]
        shift = np.where(np.isfinite(after), after, 0.0)
        correction = np.exp(before - shift)
        if stacked:
            p = scores                                                  # in place: e^{S − m′}
            np.subtract(scores, shift[..., None], out=p)
            np.exp(p, out=p)
        else:
            p = np.exp(scores - shift[..., None])
        sums = p.sum(axis=-1)
        if stacked:
            # the rows that meet block o in the batch's steps, one under the other: one
            # product per (block, head) gives every step's p·V (each row the same dot products)
            user = np.argsort(here, axis=1)                             # user[i, o]: its rank
            for i in range(b):
                pcat[:, :, i] = p[i][user[i]]
            np.matmul(pcat.reshape(ranks, hq, b * nq, nk), v.transpose(0, 2, 1, 3), out=pvbuf)
            pv_by_block = pvbuf.reshape(ranks, hq, b, nq, d)
        else:
            pv = bmm(p, v[here].transpose(0, 1, 3, 2, 4))               # (b, ranks, hq, nq, d)
        for i in range(b):
            l = l * correction[i] + sums[i]  # noqa: E741
            if stacked:
                np.take(pv_by_block[:, :, i], here[i], axis=0, out=pv_step, mode="clip")
                step_pv = pv_step
            else:
                step_pv = pv[i]
            np.multiply(o, correction[i][..., None], out=o)
            np.add(o, step_pv, out=o)
            l_after.append(l)
        m = after[-1]
        m_before.append(before)
        m_after.append(after)
        corrections.append(correction)
    return Merged(Running(m, l, o), np.concatenate(m_before), np.concatenate(m_after),
                  np.concatenate(corrections), np.stack(l_after))


def _row_max(scores: np.ndarray) -> np.ndarray:
    """``scores.max(axis=-1, initial=−∞)``; over a short last axis (a ring block of a few keys)
    as element-wise maxima of its columns, which numpy does far faster (a maximum is exact in
    any order, so the numbers are the same)."""
    if scores.shape[-1] > 8 or scores.shape[-1] == 0:
        return scores.max(axis=-1, initial=-np.inf)
    top = scores[..., 0].copy()
    for j in range(1, scores.shape[-1]):
        np.maximum(top, scores[..., j], out=top)
    return top


def _is_permutation(origins: np.ndarray) -> bool:
    """Each step's blocks are a permutation of the ranks (each block meets one rank a step)."""
    return bool((np.sort(origins, axis=1) == np.arange(origins.shape[1])).all())
