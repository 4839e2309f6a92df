"""DeepSpeed-Ulysses' all-to-alls across nodes: every rank sends a 1/u share of its Q, K, V
and output to each of its u − 1 peers at once (NCCL's all-to-all, a send and a receive per
peer), each message on its own link — the peers in its node on NVLink, the others on
InfiniBand — and an all-to-all lasts as long as its busiest rank (as /moe costs its
dispatch). Written out per message with plain arithmetic, against the layer time the scene
reports."""

from __future__ import annotations

import pytest

from app.sim.context_parallel import cost
from app.catalog.models import PRESETS


def by_hand(model, cp, seq, b, alpha, nvlink, ib, per_node) -> float:
    """Σ over the four all-to-alls of max over ranks of Σ over its peers (α + share / β)."""
    d = model.hidden // model.heads
    c = seq / cp
    q_bytes = c * model.heads * d * 2 * b
    kv_bytes = c * model.kv_heads * d * 2 * b
    total = 0.0
    for size in (q_bytes, kv_bytes, kv_bytes, q_bytes):
        busiest = 0.0
        for r in range(cp):
            busy = sum(alpha + (size / cp) / ((nvlink if r // per_node == j // per_node else ib)
                                              * 1e3)
                       for j in range(cp) if j != r)
            busiest = max(busiest, busy)
        total += busiest
    return total


@pytest.mark.parametrize("preset,cp,per_node", [("llama3-8b", 8, 4), ("llama3-8b", 8, 2),
                                                ("llama3-70b", 8, 8), ("llama3-70b", 8, 1),
                                                ("gpt3-175b", 16, 8), ("gpt3-175b", 32, 8)])
def test_ulysses_charges_each_message_by_its_link(preset, cp, per_node):
    model = PRESETS[preset]
    seq, b, alpha, nvlink, ib = 65536, 1, 5.0, 450.0, 50.0
    sc = cost.Scale(model, seq, b, "none", True, 989.0, alpha, nvlink, ib, per_node)
    lt = cost.layer_time(sc, "ulysses", cp, cp, "placed")
    want = by_hand(model, cp, seq, b, alpha, nvlink, ib, per_node)
    assert lt.comm_us == pytest.approx(want, rel=1e-9)
    # inside one node it is all NVLink, one GPU a node all InfiniBand
    inside = cost.layer_time(sc, "ulysses", cp, cp, "nvlink").comm_us
    apart = cost.layer_time(sc, "ulysses", cp, cp, "infiniband").comm_us
    assert inside <= lt.comm_us <= apart
    if 1 < per_node < cp:
        assert inside < lt.comm_us < apart
