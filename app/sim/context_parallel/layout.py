"""Which tokens a rank holds, and how the ranks of a context-parallel group are arranged.

Token ownership (DESIGN.md; Megatron-LM ``get_batch_on_this_cp_rank``):

    none     cp contiguous blocks of seq/cp tokens: rank r holds [r·seq/cp, (r+1)·seq/cp)
    zigzag   2·cp chunks of seq/(2·cp) tokens: rank r holds chunks r and 2·cp−1−r

With a causal mask the contiguous layout is lopsided — the last rank's queries see every key,
the first rank's only its own block — while zigzag pairs an early chunk with a late one, so
every rank has the same number of unmasked scores.

The ranks of the hybrid method (Megatron-LM's hierarchical a2a+p2p) form a mesh over two named
axes, ``np.arange(cp).reshape(ring, ulysses)``: an all-to-all group is a line along
``cp_a2a`` (consecutive ranks, inside one node when it fits), a ring a line along ``cp_ring``
(ranks ulysses apart). Ring attention is the case ulysses = 1, Ulysses the case ulysses = cp.
"""

from __future__ import annotations

import numpy as np

from app.sim.mesh import Mesh

BALANCES = ("none", "zigzag")


def chunk_count(cp: int, balance: str) -> int:
    return 2 * cp if balance == "zigzag" else cp


def rank_chunks(rank: int, cp: int, balance: str) -> tuple[int, ...]:
    """The chunks (of :func:`chunk_count`) that ``rank`` holds, in order."""
    if balance == "zigzag":
        return (rank, 2 * cp - 1 - rank)
    if balance == "none":
        return (rank,)
    raise ValueError(f"balance must be one of {BALANCES}, got {balance!r}")


def check(seq: int, cp: int, balance: str) -> None:
    parts = chunk_count(cp, balance)
    if seq % parts:
        raise ValueError(f"seq ({seq}) must be divisible by {'2·cp' if parts > cp else 'cp'} "
                         f"({parts}) for balance {balance}")


def tokens_table(seq: int, cp: int, balance: str) -> np.ndarray:
    """Positions each rank holds, shape (cp, seq/cp), in the order the rank stores them."""
    check(seq, cp, balance)
    size = seq // chunk_count(cp, balance)
    table = np.array([np.concatenate([np.arange(c * size, (c + 1) * size)
                                      for c in rank_chunks(r, cp, balance)])
                      for r in range(cp)])
    table.flags.writeable = False
    return table                                            # (cp, seq/cp)


def owner(seq: int, cp: int, balance: str) -> np.ndarray:
    """The rank holding each position, shape (seq,)."""
    out = np.empty(seq, dtype=int)
    for r, row in enumerate(tokens_table(seq, cp, balance)):
        out[row] = r
    return out


def chunk_bounds(length: int, parts: int) -> np.ndarray:
    """Integer boundaries of ``parts`` near-equal chunks of ``length`` tokens, shape (parts+1,)
    (exactly equal when ``parts`` divides ``length``) — the layout at scale, where a context of
    131,072 tokens need not divide by 2·cp."""
    return np.arange(parts + 1) * length // parts


def cp_mesh(cp: int, ulysses: int) -> Mesh:
    """The hybrid arrangement: ``cp_ring`` × ``cp_a2a`` (ulysses varies fastest)."""
    if ulysses < 1 or cp % ulysses:
        raise ValueError(f"ulysses ({ulysses}) must divide cp ({cp})")
    return Mesh(("cp_ring", "cp_a2a"), (cp // ulysses, ulysses))


def a2a_groups(cp: int, ulysses: int) -> list[tuple[int, ...]]:
    """The all-to-all groups: ``ulysses`` consecutive ranks each."""
    return cp_mesh(cp, ulysses).groups("cp_a2a")


def ring_groups(cp: int, ulysses: int) -> list[tuple[int, ...]]:
    """The rings: ranks ``ulysses`` apart, in ring order (rank r sends to r + ulysses)."""
    return cp_mesh(cp, ulysses).groups("cp_ring")
