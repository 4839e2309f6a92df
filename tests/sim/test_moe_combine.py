"""The combine all-to-all is the dispatch's transpose (Megatron-LM's MoEAlltoAllTokenDispatcher
sends every expert output back along the reverse path): a rank's bytes per layer are its
off-diagonal row sum (dispatch) plus its off-diagonal column sum (combine), and the combine
lasts as long as its busiest sender, i.e. the largest column. Checked against plain numpy on
the dispatch matrix the JSON itself reports, with the α–β model written out per message
(α + bytes/β on NVLink inside a node, InfiniBand between nodes)."""

from __future__ import annotations

import numpy as np
import pytest

from app.sim.collectives.cost import BYTES_PER_ELEMENT
from app.sim.moe.params import MoeParams
from app.sim.moe.simulate import simulate


def per_message_us(payload: np.ndarray, alpha_us: float, gbs_of) -> float:
    """max over senders of Σ over its messages (α + bytes / β): one sender's row."""
    ep = payload.shape[0]
    busy = [sum(alpha_us + payload[i, j] / (gbs_of(i, j) * 1e3)
                for j in range(ep) if j != i and payload[i, j] > 0) for i in range(ep)]
    return max(busy)


CASES = [dict(tokens=64, experts=8, top_k=2, ep=4, skew=3.0, gpus_per_node=2),
         dict(tokens=96, experts=12, top_k=3, ep=3, skew=2.0, gpus_per_node=1),
         dict(tokens=128, experts=16, top_k=2, ep=8, skew=4.0, gpus_per_node=4)]


@pytest.mark.parametrize("kw", CASES)
def test_combine_is_the_transpose(kw):
    p = MoeParams(**kw)
    d = simulate(p).to_dict()
    matrix = np.array(d["dispatch"], dtype=float)
    assert not np.array_equal(matrix, matrix.T), "a skewed router sends unevenly"
    row_bytes = p.hidden * BYTES_PER_ELEMENT[p.dtype] * p.cost_tokens / (p.tokens // p.ep)
    payload = matrix * row_bytes
    np.fill_diagonal(payload, 0)
    want_bytes = payload.sum(axis=1) + payload.sum(axis=0)      # row + column, off-diagonal
    assert d["cost"]["bytes_per_rank_per_layer"] == pytest.approx(want_bytes.tolist())

    def gbs(per_node):
        return lambda i, j: (p.intra_node_gbs if i // per_node == j // per_node
                             else p.inter_node_gbs)

    for key, per_node in (("time_us", p.gpus_per_node), ("nvlink_us", 10**6),
                          ("infiniband_us", 1)):
        dispatch = per_message_us(payload, p.alpha_us, gbs(per_node))
        combine = per_message_us(payload.T, p.alpha_us, gbs(per_node))   # the largest column
        assert d["cost"][key] == pytest.approx(dispatch + combine), key


def test_combine_caption_names_its_own_bytes():
    p = MoeParams(**CASES[0])
    trace = simulate(p)
    d = trace.to_dict()
    matrix = np.array(d["dispatch"], dtype=float)
    np.fill_diagonal(matrix, 0)
    caption = next(f["caption"] for f in d["frames"] if f["phase"] == "combine")
    assert "the same" not in caption
    if matrix.sum(axis=0).max() != matrix.sum(axis=1).max():
        # the busiest sender of the combine is the largest column, not the dispatch's row
        from app.sim.moe.captions import human_bytes
        row_bytes = p.hidden * 2 * p.cost_tokens / (p.tokens // p.ep)
        assert human_bytes(matrix.sum(axis=0).max() * row_bytes) in caption
