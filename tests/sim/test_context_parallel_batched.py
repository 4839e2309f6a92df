"""The batched ring (attention.merge_steps) against the plain one merge per step it replaced
(issue 12 item 3): the same numbers bit for bit — outputs, running max and sum, corrections —
over a table of shapes (grouped-query heads, hybrid groups, blocks of one key, blocks too large
for the stacked products); and the lazy per-step containers (Transfers, HeldBlocks) read like
the tuples they replaced."""

from __future__ import annotations

import numpy as np
import pytest

from app.sim.context_parallel.attention import Running, merge, merge_steps, visible
from app.sim.context_parallel.methods import HeldBlocks, Transfers
from app.sim.trace import Transfer


def step_by_step(q, k, v, origins, pos, causal, group):
    """One merge per step on the blocks rolled into place: the loop merge_steps batches."""
    ranks, nq, hq, d = q.shape
    state = Running.empty(ranks, hq, nq, d)
    out = []
    for s in range(origins.shape[0]):
        kb, vb = k[origins[s]], v[origins[s]]
        mask = visible(pos, pos[origins[s]], causal)
        new, correction = merge(state, q, kb, vb, mask, group)
        out.append((state.m, new.m, correction, new.l))
        state = new
    return state, out


CASES = [  # ranks, ring steps' stride u, block tokens, query heads, kv heads, d, causal
    (4, 1, 4, 4, 2, 4, True),
    (5, 1, 6, 2, 2, 3, False),
    (3, 1, 1, 1, 1, 1, True),
    (8, 2, 8, 2, 1, 5, True),        # hybrid: 4 groups of 2, blocks of a group's tokens
    (64, 1, 4, 16, 16, 16, True),    # the heaviest ring
    (4, 1, 256, 2, 2, 16, True),     # products too large to stack: one batch of steps each
    (6, 3, 2, 4, 4, 2, False),
]


@pytest.mark.parametrize("ranks,u,n,hq,hk,d,causal", CASES)
def test_merge_steps_equals_one_merge_per_step_bit_for_bit(ranks, u, n, hq, hk, d, causal):
    rng = np.random.default_rng(ranks * 100 + n)
    q = np.round(rng.standard_normal((ranks, n, hq, d)), 2)
    k = np.round(rng.standard_normal((ranks, n, hk, d)), 2)
    v = np.round(rng.standard_normal((ranks, n, hk, d)), 2)
    pos = rng.permutation(ranks * n).reshape(ranks, n)
    rank = np.arange(ranks)
    origins = (rank[None, :] - u * np.arange(ranks // u)[:, None]) % ranks
    want, per_step = step_by_step(q, k, v, origins, pos, causal, hq // hk)
    got = merge_steps(Running.empty(ranks, hq, n, d), q, k, v, origins,
                      lambda s0, s1: visible(pos, pos[origins[s0:s1]], causal), hq // hk)
    for a, b in ((got.state.m, want.m), (got.state.l, want.l), (got.state.o, want.o)):
        assert np.array_equal(a, b)
    for s, (m0, m1, correction, l1) in enumerate(per_step):
        assert np.array_equal(got.m_before[s], m0)
        assert np.array_equal(got.m_after[s], m1)
        assert np.array_equal(got.correction[s], correction)
        assert np.array_equal(got.l_after[s], l1)


def test_merge_steps_takes_blocks_that_are_not_a_permutation():
    """A step where two ranks read one block (not a ring) takes the unstacked path."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((3, 2, 2, 2)) for _ in range(3))
    pos = np.arange(6).reshape(3, 2)
    origins = np.array([[0, 0, 1], [2, 1, 1]])
    want, _ = step_by_step(q, k, v, origins, pos, True, 1)
    got = merge_steps(Running.empty(3, 2, 2, 2), q, k, v, origins,
                      lambda s0, s1: visible(pos, pos[origins[s0:s1]], True), 1)
    assert np.array_equal(got.state.o, want.o) and np.array_equal(got.state.l, want.l)


def test_transfers_read_like_a_tuple_of_transfers():
    labels = [f"block {b}" for b in range(4)]
    t = Transfers(np.arange(4), (np.arange(4) + 1) % 4, 12, labels, np.array([3, 0, 1, 2]))
    want = tuple(Transfer(r, (r + 1) % 4, 12, label=labels[(r - 1) % 4]) for r in range(4))
    assert tuple(t) == want and len(t) == 4 and t[2] == want[2] and t[1:3] == want[1:3]
    assert bool(t) and not bool(Transfers(np.arange(0), np.arange(0), 1, [], np.arange(0)))


def test_held_blocks_read_like_tuples_of_ranks():
    held = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1]], dtype=bool)
    blocks = HeldBlocks(held)
    assert list(blocks) == [(0, 2), (), (0, 1, 2)]
    assert [blocks[r] for r in range(3)] == list(blocks) and len(blocks) == 3
