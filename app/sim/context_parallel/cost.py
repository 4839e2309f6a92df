"""How long one attention layer takes on cp ranks, and when Ring Attention hides its transfers.

Compute. A rank's work in a step is its unmasked (query, key) pairs times 4·d FLOPs per query
head (QKᵀ and the product with V, 2 FLOPs a multiply-add each), counted exactly on the
layout at scale — contiguous blocks or zigzag chunks of the real context. A step lasts as long
as its slowest rank: with a causal mask and contiguous blocks the last rank computes a full
block in every step while rank 0 idles, with zigzag every rank computes half a block.

Communication, with the α–β model of chapter 2 (app/sim/collectives/cost.py: a message costs
α + bytes/β on the link it takes, NVLink inside a node, InfiniBand between nodes):

    ring        cp − 1 steps of one K/V block (2·c·H_kv·d 16-bit numbers) to the next rank,
                sent while the rank computes: a step costs max(compute, α + bytes/β)
    all_gather  one ring all-gather of K and V (cp − 1 steps), then the attention
    ulysses     four all-to-alls of the rank's Q, K, V and output, none hidden; every rank
                sends its u − 1 shares at once, each on its own link (the peers in its node
                on NVLink, the others on InfiniBand: per message, as /moe costs its dispatch)
    hybrid      the all-to-alls inside groups of ulysses consecutive ranks, and a ring over
                the cp/ulysses groups, ranks ulysses apart (often across nodes)

The overlap condition (Liu et al. 2023, §3.1): a step computes 4·c²·H·d FLOPs on a block of c
tokens and sends 2·c·H_kv·d·2 bytes, so with peak F and link bandwidth B the transfer hides
when 4c²Hd/F ≥ 4c·H_kv·d/B, i.e.

    c ≥ (H_kv / H) · F / B          (= F/B for multi-head attention, the paper's form)

twice that when a causal zigzag step computes half a block; with the latency α the crossover
is the root of A·c² = α + B'·c. Hybrid steps carry ulysses × the compute (u·c tokens of queries
against u·c keys, on H/u heads) for the same bytes, so their crossover is u times smaller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from app.sim.collectives.cost import Links, pairwise_time_us, ring_time_us
from app.sim.context_parallel.layout import chunk_bounds, chunk_count, rank_chunks
from app.sim.context_parallel.memory import a2a_degree, feasible
from app.sim.flops import attention_core_flops, layer_forward_flops
from app.catalog.gpus import GPUS
from app.catalog.models import ModelShape

ACT_BYTES = 2
CP_SWEEP: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
METHODS = ("ring", "all_gather", "ulysses", "hybrid")


def peak_tflops(gpu: str, override: float | None = None) -> float:
    return float(override) if override is not None else GPUS[gpu].peak_tflops


# --- exact unmasked pairs on the layout at scale ----------------------------------------------

def _below(x: np.ndarray, k_lo: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Σ over queries i < x of #{keys j in [k_lo, k_lo + width) : j ≤ i}."""
    t = np.clip(x - k_lo, 0, width)               # queries past k_lo, up to the block's width
    inside = t * (t + 1) // 2                      # 1 + 2 + … + t
    return inside + np.maximum(x - k_lo - width, 0) * width


def pairs(q_lo, q_hi, k_lo, k_hi, causal: bool) -> np.ndarray:
    """Unmasked (query, key) pairs of query range [q_lo, q_hi) and key range [k_lo, k_hi)."""
    q_lo, q_hi, k_lo, k_hi = (np.asarray(x, dtype=np.int64) for x in (q_lo, q_hi, k_lo, k_hi))
    if not causal:
        return (q_hi - q_lo) * (k_hi - k_lo)
    width = k_hi - k_lo
    return _below(q_hi, k_lo, width) - _below(q_lo, k_lo, width)


@lru_cache(maxsize=512)
def step_pairs(context: int, cp: int, u: int, balance: str, causal: bool) -> np.ndarray:
    """Pairs per query head that each rank computes in each ring step, shape (cp/u, cp): rank
    (g, i) holds the queries of its group's chunks and meets group (g − s)'s chunks in step s."""
    bounds = chunk_bounds(context, chunk_count(cp, balance))
    own = np.array([rank_chunks(r, cp, balance) for r in range(cp)])      # (cp, k)
    ring = cp // u
    group_chunks = own.reshape(ring, u * own.shape[1])                     # (ring, u·k)
    g = np.arange(cp) // u
    q = group_chunks[g][None, :, :, None]                                  # (1, cp, u·k, 1)
    kv = group_chunks[(g[None, :] - np.arange(ring)[:, None]) % ring][:, :, None, :]
    out = pairs(bounds[q], bounds[q + 1], bounds[kv], bounds[kv + 1], causal)  # (ring, cp, ·, ·)
    out = out.sum(axis=(2, 3))
    out.flags.writeable = False
    return out


def gather_pairs(context: int, cp: int, balance: str, causal: bool) -> np.ndarray:
    """Pairs per query head of each rank's queries against the whole gathered sequence, (1, cp)."""
    bounds = chunk_bounds(context, chunk_count(cp, balance))
    own = np.array([rank_chunks(r, cp, balance) for r in range(cp)])
    return pairs(bounds[own], bounds[own + 1], 0, context, causal).sum(axis=1)[None, :]


# --- time of one layer ------------------------------------------------------------------------

@dataclass(frozen=True)
class LayerTime:
    method: str
    cp: int
    compute_us: float        # the attention's compute, the slowest rank of each step summed
    comm_us: float           # every message, one after another
    total_us: float          # with the ring's transfers hidden where the compute covers them
    exposed_us: float        # total − compute: communication nobody hid
    rest_us: float           # the rest of the layer (projections, MLP), split cp ways
    steps: int               # ring steps (1: no ring)
    step_comm_us: float      # one ring step's transfer (0: no ring)


@dataclass(frozen=True)
class Scale:
    """What the cost functions read, gathered once."""

    model: ModelShape
    context: int
    micro_batch: int
    balance: str
    causal: bool
    tflops: float
    alpha_us: float
    intra_node_gbs: float
    inter_node_gbs: float
    gpus_per_node: int

    @property
    def head_dim(self) -> int:
        return self.model.hidden // self.model.heads

    def links(self, placement: str) -> Links:
        """nvlink: every rank in one NVLink domain; infiniband: one GPU per node; placed:
        ranks filling nodes of gpus_per_node in order."""
        per_node = {"nvlink": max(CP_SWEEP), "infiniband": 1,
                    "placed": self.gpus_per_node}[placement]
        return Links(self.alpha_us, self.intra_node_gbs, self.inter_node_gbs, per_node)

    def us(self, flops: float) -> float:
        return flops / (self.tflops * 1e6)          # 1 TFLOP/s = 10⁶ FLOP per µs


def layer_time(sc: Scale, method: str, cp: int, ulysses: int, placement: str) -> LayerTime:
    m, b, d = sc.model, sc.micro_batch, sc.head_dim
    rest = sc.us((layer_forward_flops(m, sc.context, b)
                  - attention_core_flops(m, sc.context, b)) / cp)
    if cp == 1:
        work = float(pairs(0, sc.context, 0, sc.context, sc.causal))
        compute = sc.us(4 * d * m.heads * b * work)
        return LayerTime(method, 1, compute, 0.0, compute, 0.0, rest, 1, 0.0)
    links = sc.links(placement)
    c = sc.context / cp
    kv_bytes = c * m.kv_heads * d * ACT_BYTES * b                    # one rank's K (or V)
    if method == "all_gather":
        work = gather_pairs(sc.context, cp, sc.balance, sc.causal)
        compute = sc.us(4 * d * m.heads * b * float(work.max()))
        comm = ring_time_us("all_gather", cp, 2 * kv_bytes * cp, links)
        return LayerTime(method, cp, compute, comm, compute + comm, comm, rest, 1, 0.0)
    u = a2a_degree(method, cp, ulysses)
    ring = cp // u
    work = step_pairs(sc.context, cp, u, sc.balance, sc.causal)          # (ring, cp)
    step_compute = np.array([sc.us(4 * d * (m.heads // u) * b * float(w)) for w in work.max(1)])
    a2a = 0.0
    if u > 1:
        # each rank sends a 1/u share to every peer at once, each message on its own link
        # (in-node peers on NVLink): the group of ranks 0 … u−1 stands for every group
        q_bytes = c * m.heads * d * ACT_BYTES * b
        a2a = sum(pairwise_time_us(np.full((u, u), size / u), links)
                  for size in (q_bytes, kv_bytes, kv_bytes, q_bytes))
    step_comm = 0.0
    if ring > 1:
        slowest = min(links.gbs(r, (r + u) % cp) for r in range(cp))
        step_comm = links.alpha_us + 2 * kv_bytes / (slowest * 1e3)
    overlapped = float(np.maximum(step_compute[:-1], step_comm).sum() + step_compute[-1])
    compute = float(step_compute.sum())
    comm = a2a + (ring - 1) * step_comm
    total = a2a + overlapped
    return LayerTime(method, cp, compute, comm, total, total - compute, rest, ring, step_comm)


# --- the overlap condition --------------------------------------------------------------------

@dataclass(frozen=True)
class OverlapLink:
    link: str                    # nvlink | infiniband
    gbs: float
    flops_per_byte: float        # F / B
    crossover_tokens: float      # (H_kv/H)·F/B (÷ ulysses for hybrid): the block that hides, α = 0
    crossover_alpha_tokens: float  # the same with α
    crossover_causal_tokens: float  # with α, when each step computes half a block (zigzag)
    step_compute_us: float       # the chosen block's compute in one step
    step_comm_us: float          # its transfer
    hides: bool


@dataclass(frozen=True)
class Overlap:
    method: str
    applies: bool                # False: no ring (all_gather, ulysses): nothing to hide behind
    block_tokens: float          # c = context/cp, the block of one rank
    half_block: bool             # causal + zigzag: every step computes half a block
    links: tuple[OverlapLink, ...]


def overlap(sc: Scale, method: str, cp: int, ulysses: int) -> Overlap:
    m, b, d = sc.model, sc.micro_batch, sc.head_dim
    u = a2a_degree(method, cp, ulysses) if method != "all_gather" else 1
    applies = method in ("ring", "hybrid") and cp // u > 1
    c = sc.context / cp
    half = sc.causal and sc.balance == "zigzag"
    per_c2 = 4 * u * m.heads * d * b / (sc.tflops * 1e6)               # µs per c² (full block)
    out = []
    for link, gbs in (("nvlink", sc.intra_node_gbs), ("infiniband", sc.inter_node_gbs)):
        per_c = 2 * m.kv_heads * d * ACT_BYTES * b / (gbs * 1e3)        # µs per token of block
        crossover = per_c / per_c2                                      # = (H_kv/H)·F/B / u
        with_alpha = _root(per_c2, per_c, sc.alpha_us)
        causal = _root(per_c2 / 2, per_c, sc.alpha_us)
        step_compute = per_c2 * c * c * (0.5 if half else 1.0)
        step_comm = sc.alpha_us + per_c * c
        out.append(OverlapLink(link, gbs, sc.tflops * 1e12 / (gbs * 1e9), crossover,
                               with_alpha, causal, step_compute, step_comm,
                               applies and step_compute >= step_comm))
    return Overlap(method, applies, c, half, tuple(out))


def _root(a: float, b: float, alpha: float) -> float:
    """The positive root of a·c² = α + b·c."""
    return (b + math.sqrt(b * b + 4 * a * alpha)) / (2 * a)


# --- the sweep over cp ------------------------------------------------------------------------

def sweep(sc: Scale, ulysses: int, placement: str = "placed"
          ) -> tuple[tuple[int, str, LayerTime | None, str], ...]:
    """(cp, method, its layer time or None, why not) for every cp of CP_SWEEP and method."""
    rows = []
    for cp in CP_SWEEP:
        for method in METHODS:
            why = feasible(method, cp, ulysses, sc.model) or (
                f"ulysses ({ulysses}) is more than cp ({cp})"
                if method == "hybrid" and 1 < cp < ulysses else None)
            rows.append((cp, method, None if why else layer_time(sc, method, cp, ulysses,
                                                                 placement), why or ""))
    return tuple(rows)
