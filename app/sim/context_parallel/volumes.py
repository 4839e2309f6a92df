"""What each rank sends in one forward pass of one attention layer, in elements (DESIGN.md).

n = seq/cp tokens per rank, H query heads, H_kv key/value heads, d dimensions per head:

    ring, all_gather   2·(cp−1)·n·H_kv·d
        Ring Attention passes its K and V block on cp − 1 times; a ring all-gather forwards
        cp − 1 blocks of K and of V. The same bytes — what differs is when they move (during the
        compute, or all before it) and what a rank must hold (one block, or the whole sequence).
    ulysses            (cp−1)/cp · n·d·(2H + 2H_kv)
        four all-to-alls (Q, K, V before attention, the output after): of its n tokens × H heads
        of Q a rank keeps its own H/cp heads and sends the rest; likewise K, V (H_kv) and O (H).
        Jacobs et al. 2023 §3.3: per link 4Nh/P — constant when N and P grow together.
    hybrid (u = ulysses, R = cp/u rings steps)
                       (u−1)/u · n·d·(2H + 2H_kv)  +  2·(R−1)·n·H_kv·d
        the all-to-alls inside a group of u ranks move the Ulysses share with u for cp; the ring
        of R groups then passes blocks of u·n tokens × H_kv/u heads, 2·n·H_kv·d elements (K
        and V) per step, R − 1 times. u = 1 is ring, u = cp is Ulysses.

Every term is an integer: n is, and u divides H and H_kv. tests/sim/test_context_parallel.py
checks each formula against the sum of the transfers the simulation actually makes.
"""

from __future__ import annotations


def elements_sent(method: str, cp: int, seq: int, heads: int, kv_heads: int, head_dim: int,
                  ulysses: int = 1) -> int:
    n, d = seq // cp, head_dim
    if method in ("ring", "all_gather"):
        return 2 * (cp - 1) * n * kv_heads * d
    u = {"ulysses": cp, "hybrid": ulysses}.get(method)
    if u is None:
        raise ValueError(f"method must be ring, all_gather, ulysses or hybrid, got {method!r}")
    ring = cp // u
    a2a = (u - 1) * n * d * (2 * heads + 2 * kv_heads) // u
    return a2a + 2 * (ring - 1) * n * kv_heads * d
