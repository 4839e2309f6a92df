"""The four methods on ``cp`` simulated ranks, with the real numbers moving between them.

Every rank's data is one slice of a stacked array whose first axis is the rank: the ring hands
each rank its predecessor's K/V block by rolling that axis, an all-to-all transposes the
(sender, receiver) axes of a reshaped array — what each rank holds next step is literally what
another rank held this step, and every move is listed as a :class:`Transfer`.

Ring, Ulysses and hybrid are one algorithm over ``u`` = the all-to-all degree (1, cp, ulysses):

    1. each rank holds seq/cp tokens of Q, K, V (all heads)                       (cp, n, H, d)
    2. u > 1: all-to-all inside each group of u consecutive ranks, sequence → heads: a rank
       keeps heads/u heads and receives them for the tokens of the whole group  (cp, u·n, H/u, d)
    3. ring over the cp/u groups (ranks u apart): in step s a rank computes its queries against
       the K/V block that started at the rank s places back, merging with the online softmax,
       while it passes that block on; blocks entirely above the causal diagonal are skipped
    4. O = o / l; u > 1: all-to-all back, heads → sequence                        (cp, n, H, d)

The all-gather method (Llama 3) first gathers every K/V block on every rank — a ring
all-gather, cp − 1 steps — and then attends once against the whole sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.sim.context_parallel.attention import Running, merge, merge_steps, visible
from app.sim.context_parallel.layout import a2a_groups
from app.sim.trace import Transfer

SHOWN_ROWS = 3
"""Query rows whose running max and sum a frame shows (of the rank's first query head)."""
ALL_ROWS_UP_TO = 8
"""Beyond this many ranks a frame shows one row per rank: the deck summarises so many ranks,
and 3 rows × 64 ranks × 66 ring steps made the largest answer 5.4 MB (DESIGN: < 5 MB)."""


class Transfers(Sequence):
    """A step's transfers as arrays, each read as a :class:`Transfer` (a ring step at cp 64 has
    64, a trace 4,000: kept as three arrays, they are cheap to build and to size for the trace
    cache). Rank ``src[i]`` sends ``elements`` numbers to ``dst[i]``, labelled
    ``labels[label_of[i]]``."""

    def __init__(self, src: np.ndarray, dst: np.ndarray, elements: int, labels: list[str],
                 label_of: np.ndarray):
        self.src, self.dst, self.elements = src, dst, elements
        self.labels, self.label_of = labels, label_of

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self)[i]
        return Transfer(int(self.src[i]), int(self.dst[i]), self.elements,
                        label=self.labels[self.label_of[i]])

    def __iter__(self):
        labels, n = self.labels, self.elements
        for src, dst, b in zip(self.src.tolist(), self.dst.tolist(), self.label_of.tolist()):
            yield Transfer(src, dst, n, label=labels[b])


class HeldBlocks(Sequence):
    """Per rank, the ranks whose K/V blocks it holds, from a (cp, cp) bool matrix (the
    all-gather's 63 steps × 64 ranks × up to 64 blocks as tuples were 130,000 numbers)."""

    def __init__(self, held: np.ndarray):
        self.held = held

    def __len__(self) -> int:
        return len(self.held)

    def __getitem__(self, r):
        if isinstance(r, slice):
            return tuple(self)[r]
        return tuple(np.flatnonzero(self.held[r]).tolist())

    def __iter__(self):
        rows, cols = np.nonzero(self.held)                 # row-major: rank by rank
        bounds = np.searchsorted(rows, np.arange(len(self.held) + 1)).tolist()
        cols = cols.tolist()
        return (tuple(cols[bounds[r]:bounds[r + 1]]) for r in range(len(self.held)))


@dataclass(frozen=True)
class Rows:
    """The online softmax of a few query rows of each rank's first local query head, before and
    after one merge: arrays of shape (cp, rows)."""

    tokens: np.ndarray
    m_before: np.ndarray
    m_after: np.ndarray
    l_before: np.ndarray
    l_after: np.ndarray
    correction: np.ndarray        # e^{m_before − m_after}: what the old sum is multiplied by


@dataclass(frozen=True)
class Step:
    """One frame's worth of what happened, for every rank."""

    phase: str
    """start | all_to_all | ring | all_gather | attend (one local attention: all_gather, and
    Ulysses, whose ring has one member) | all_to_all_back | result"""
    transfers: tuple[Transfer, ...]
    held: tuple[tuple[int, ...], ...]
    """per rank: the ranks whose tokens' K/V it holds at this step (after the step's receives
    for all_to_all and all_gather, before them for ring steps: the block it computes on)"""
    kv_block: tuple[int | None, ...]
    """per rank: the rank where the K/V block it computes on started its way round the ring
    (None: no compute this step, or — all_gather — the whole gathered sequence)"""
    unmasked: tuple[int, ...]
    """per rank: scores computed this step, summed over the rank's query heads"""
    rows: Rows | None = None


@dataclass(frozen=True)
class Run:
    steps: tuple[Step, ...]
    output: np.ndarray            # (seq, H, d) in token order
    q_tokens: np.ndarray          # (cp, nq): positions of each rank's queries when it attends
    q_heads: np.ndarray           # (cp, hq): its query heads then
    kv_heads: np.ndarray          # (cp, hk): its key/value heads then
    lse: np.ndarray               # (seq, H): m + log l of every query, FlashAttention's statistic


def _rows(nq: int, cp: int) -> np.ndarray:
    shown = SHOWN_ROWS if cp <= ALL_ROWS_UP_TO else 1
    return np.unique(np.linspace(0, nq - 1, min(shown, nq)).round().astype(int))


def _row_stats(before: Running, after: Running, correction, q_tokens, idx) -> Rows:
    return Rows(q_tokens[:, idx], before.m[:, 0, idx], after.m[:, 0, idx],
                before.l[:, 0, idx], after.l[:, 0, idx], correction[:, 0, idx])


def seq_to_heads(x: np.ndarray, u: int) -> np.ndarray:
    """All-to-all inside groups of u consecutive ranks: rank (g, i) receives head slice i of
    every member's tokens, in member order. (cp, n, H, d) → (cp, u·n, H/u, d)."""
    cp, n, h, d = x.shape
    y = x.reshape(cp // u, u, n, u, h // u, d)          # (group, src, n, dst, H/u, d)
    return y.transpose(0, 3, 1, 2, 4, 5).reshape(cp, u * n, h // u, d)   # (group, dst, src·n, …)


def heads_to_seq(y: np.ndarray, u: int) -> np.ndarray:
    """The inverse all-to-all: rank (g, j) gets back its own tokens with every head slice.
    (cp, u·n, H/u, d) → (cp, n, H, d)."""
    cp, un, hu, d = y.shape
    n = un // u
    x = y.reshape(cp // u, u, u, n, hu, d)              # (group, head owner i, token owner j, n, …)
    return x.transpose(0, 2, 3, 1, 4, 5).reshape(cp, n, u * hu, d)


def _a2a_transfers(cp: int, u: int, elements: int, label: str) -> tuple[Transfer, ...]:
    return tuple(Transfer(src, dst, elements, label=label.format(src=src, dst=dst))
                 for group in a2a_groups(cp, u) for src in group for dst in group if src != dst)


def run_sharded(q: np.ndarray, k: np.ndarray, v: np.ndarray, tokens: np.ndarray, u: int,
                causal: bool) -> Run:
    """Ring (u = 1), Ulysses (u = cp) or hybrid: phases 1–4 of the module docstring."""
    cp, n = tokens.shape
    seq, heads, d = q.shape
    kv_heads = k.shape[1]
    group = heads // kv_heads
    ring = cp // u
    rank = np.arange(cp)
    steps: list[Step] = []

    # 1. each rank's own block                                           (cp, n, H, d)
    q_local, k_local, v_local = q[tokens], k[tokens], v[tokens]
    steps.append(Step("start", (), tuple((r,) for r in range(cp)), (None,) * cp, (0,) * cp))

    # 2. sequence → heads inside each all-to-all group
    members = np.asarray(a2a_groups(cp, u))[rank // u]                  # (cp, u) ranks of my group
    q_tokens = tokens[members].reshape(cp, u * n)                       # (cp, u·n) group's tokens
    if u > 1:
        q_blk, k_blk, v_blk = (seq_to_heads(x, u) for x in (q_local, k_local, v_local))
        sent = n * (heads // u) * d + 2 * n * (kv_heads // u) * d       # Q + K + V, one receiver
        steps.append(Step("all_to_all", _a2a_transfers(cp, u, sent, "Q, K, V of rank {src}'s "
                                                       "tokens, rank {dst}'s heads"),
                          tuple(tuple(int(m) for m in row) for row in members), (None,) * cp,
                          (0,) * cp))
    else:
        q_blk, k_blk, v_blk = q_local, k_local, v_local
    slot = rank % u
    q_heads = slot[:, None] * (heads // u) + np.arange(heads // u)       # (cp, H/u)
    kv_heads_of = slot[:, None] * (kv_heads // u) + np.arange(kv_heads // u)

    # 3. the ring: compute on the block held, pass it to the rank u places on. Rank (g, i)
    # receives what (g − 1, i) held, so in step s rank r holds the block that started at rank
    # r − s·u: the steps' blocks are indexed from where they started (no copy is rolled), and
    # merge_steps batches the steps' products with the same numbers as one merge per step
    origins = (rank[None, :] - u * np.arange(ring)[:, None]) % cp       # (ring, cp)
    kv_pos = q_tokens[origins]                                          # (ring, cp, u·n)
    mask_of = (lambda s0, s1: visible(q_tokens, kv_pos[s0:s1], True)) if causal else (
        lambda s0, s1: np.ones((s1 - s0, cp, u * n, u * n), dtype=bool))
    merged = merge_steps(Running.empty(cp, heads // u, u * n, d), q_blk, k_blk, v_blk, origins,
                         mask_of, group)
    state = merged.state
    idx = _rows(u * n, cp)
    shown_tokens = q_tokens[:, idx]
    unmasked = (visible(q_tokens, kv_pos, causal).sum(axis=(-2, -1)) * (heads // u)
                if causal else np.full((ring, cp), (u * n) ** 2 * (heads // u)))
    block = 2 * u * n * (kv_heads // u) * d                             # K and V
    labels = [f"K, V block of rank {o}" for o in range(cp)]
    dst = (rank + u) % cp
    held_by = [tuple(row) for row in members.tolist()]
    l_before = np.concatenate([np.zeros((1, cp, heads // u, u * n)), merged.l_after[:-1]])
    for s in range(ring):
        origin = origins[s].tolist()
        transfers: Sequence[Transfer] = ()
        if s < ring - 1:
            transfers = Transfers(rank, dst, block, labels, origins[s])
        rows = Rows(shown_tokens, merged.m_before[s][:, 0, idx], merged.m_after[s][:, 0, idx],
                    l_before[s][:, 0, idx], merged.l_after[s][:, 0, idx],
                    merged.correction[s][:, 0, idx])
        steps.append(Step("ring" if ring > 1 else "attend", transfers,
                          tuple(held_by[o] for o in origin), tuple(origin),
                          tuple(unmasked[s].tolist()), rows))

    # 4. normalise; heads → sequence
    out = state.output()                                                # (cp, u·n, H/u, d)
    lse_blk = (state.m + np.log(state.l)).transpose(0, 2, 1)[..., None]  # (cp, u·n, H/u, 1)
    if u > 1:
        out = heads_to_seq(out, u)                                      # (cp, n, H, d)
        # the logsumexp stays where it was computed (only O travels back); it is put in token
        # order here for the page alone, and is not a transfer
        lse_local = heads_to_seq(lse_blk, u)[..., 0]                    # (cp, n, H)
        sent = n * (heads // u) * d
        steps.append(Step("all_to_all_back",
                          _a2a_transfers(cp, u, sent, "O of rank {dst}'s tokens, rank {src}'s "
                                                      "heads"),
                          tuple((r,) for r in range(cp)), (None,) * cp, (0,) * cp))
    else:
        lse_local = lse_blk[..., 0]
    output = np.empty((seq, heads, d))
    output[tokens] = out
    lse = np.empty((seq, heads))
    lse[tokens] = lse_local
    steps.append(Step("result", (), tuple((r,) for r in range(cp)), (None,) * cp, (0,) * cp))
    return Run(tuple(steps), output, q_tokens, q_heads, kv_heads_of, lse)


def run_all_gather(q: np.ndarray, k: np.ndarray, v: np.ndarray, tokens: np.ndarray,
                   causal: bool) -> Run:
    """Ring all-gather of K and V (cp − 1 steps, each rank forwards the block it received last),
    then each rank's queries against the whole gathered sequence."""
    cp, n = tokens.shape
    seq, heads, d = q.shape
    kv_heads = k.shape[1]
    steps = [Step("start", (), tuple((r,) for r in range(cp)), (None,) * cp, (0,) * cp)]
    held = np.eye(cp, dtype=bool)                        # held[r, b]: rank r has block b
    block = 2 * n * kv_heads * d
    rank = np.arange(cp)
    labels = [f"K, V block of rank {b}" for b in range(cp)]
    for s in range(cp - 1):
        src, dst, b = rank, (rank + 1) % cp, (rank - s) % cp   # rank r forwards block r − s
        assert held[src, b].all(), s                     # a rank forwards only what it holds
        held[dst, b] = True
        steps.append(Step("all_gather", Transfers(src, dst, block, labels, b),
                          HeldBlocks(held.copy()), (None,) * cp, (0,) * cp))
    assert held.all()
    # the gathered buffer, blocks in rank order; every rank's copy holds the same numbers
    kv_pos = tokens.reshape(-1)                                          # (seq,)
    k_all = np.broadcast_to(k[kv_pos], (cp, seq, kv_heads, d))
    v_all = np.broadcast_to(v[kv_pos], (cp, seq, kv_heads, d))
    state = Running.empty(cp, heads, n, d)
    mask = visible(tokens, np.broadcast_to(kv_pos, (cp, seq)), causal)   # (cp, n, seq)
    new, correction = merge(state, q[tokens], k_all, v_all, mask, heads // kv_heads)
    idx = _rows(n, cp)
    rows = _row_stats(state, new, correction, tokens, idx)
    state = new
    everyone = tuple(range(cp))
    steps.append(Step("attend", (), (everyone,) * cp,
                      (None,) * cp, tuple(int(x) for x in mask.sum(axis=(1, 2)) * heads), rows))
    output = np.empty((seq, heads, d))
    output[tokens] = state.output()
    lse = np.empty((seq, heads))
    lse[tokens] = (state.m + np.log(state.l)).transpose(0, 2, 1)
    steps.append(Step("result", (), (everyone,) * cp, (None,) * cp,
                      (0,) * cp))
    return Run(tuple(steps), output, tokens, np.broadcast_to(np.arange(heads), (cp, heads)),
               np.broadcast_to(np.arange(kv_heads), (cp, kv_heads)), lse)


def run(method: str, q, k, v, tokens: np.ndarray, ulysses: int, causal: bool) -> Run:
    cp = tokens.shape[0]
    if method == "all_gather":
        return run_all_gather(q, k, v, tokens, causal)
    u = {"ring": 1, "ulysses": cp, "hybrid": ulysses}.get(method)
    if u is None:
        raise ValueError(f"method must be ring, all_gather, ulysses or hybrid, got {method!r}")
    return run_sharded(q, k, v, tokens, u, causal)
