"""Expert parallelism: the dispatch all-to-all, the experts, the combine all-to-all, and what
the exchange costs.

With ``ep`` ranks, token t lives on rank t // (T/ep) and expert e on rank e // (E/ep)
(Megatron-LM's ``--expert-model-parallel-size``; ``MoEAlltoAllTokenDispatcher``). A forward
pass of one MoE layer:

1. each rank permutes its kept assignments by expert (token order within an expert) and sends
   rank j the rows for j's experts — the split sizes first (an all-to-all of counts, so that
   every rank can size its receive buffer), then the token vectors (``all_to_all_single`` with
   uneven splits); ``dispatch[i][j]`` counts the rows rank i sends rank j;
2. rank j runs each of its experts on the rows it received (from every rank, in rank order);
3. the combine all-to-all sends every result back along the reverse path;
4. the token's rank sums ``w_{t,e} · expert_e(x_t)`` over its kept experts. A dropped
   assignment contributes nothing (the residual connection around the layer carries x_t).

The same output is computed densely, every expert on every token masked by the kept gate
weights, and the largest difference is reported (float64; it should be ~1e-16).

Cost: rank i sends ``dispatch[i][j]`` rows of ``hidden`` elements (the model's width) to every
j ≠ i to dispatch, and ``dispatch[j][i]`` rows back to every j to combine (the transpose), scaled
from the T/ep tokens simulated here to ``cost_tokens``
tokens per rank. The α–β time is one step of app.sim.collectives.cost's model: every rank
pushes its messages one after another (α + bytes/β each, NVLink inside a node, InfiniBand
between nodes) and the all-to-all lasts as long as the busiest rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.collectives import cost
def silu(z: np.ndarray) -> np.ndarray:
    return z / (1.0 + np.exp(-z))


def expert_mlp(x: np.ndarray, w_in: np.ndarray, w_out: np.ndarray) -> np.ndarray:
    """One expert: hidden → 2·hidden (SiLU) → hidden, no biases."""
    return silu(x @ w_in) @ w_out


def dispatch_matrix(experts: np.ndarray, kept: np.ndarray, num_experts: int, ep: int
                    ) -> np.ndarray:
    """(ep, ep) kept assignments sent from token rank i to expert rank j."""
    tokens, top_k = experts.shape
    src = np.repeat(np.arange(tokens) // (tokens // ep), top_k)[kept.reshape(-1)]
    dst = (experts.reshape(-1) // (num_experts // ep))[kept.reshape(-1)]
    return np.bincount(src * ep + dst, minlength=ep * ep).reshape(ep, ep)


@dataclass(frozen=True)
class ExpertParallelRun:
    output: np.ndarray          # (T, hidden) the layer's output, computed the EP way
    dense: np.ndarray           # (T, hidden) the same, computed densely
    max_abs_error: float
    rank_rows: np.ndarray       # (ep,) rows each expert rank computes (its received rows)
    sent: tuple                 # per src rank, per dst rank: the (token, expert) rows in order


def run_expert_parallel(x, w_in, w_out, experts, weights, kept, ep) -> ExpertParallelRun:
    """Dispatch, compute, combine — rank by rank, with the real token vectors."""
    tokens, hidden = x.shape
    num_experts = w_in.shape[0]
    per_rank, experts_per_rank = tokens // ep, num_experts // ep
    # 1. each source rank permutes its kept assignments by (destination, expert, token)
    sent = []
    for src in range(ep):
        t, slot = np.nonzero(kept[src * per_rank:(src + 1) * per_rank])
        t = t + src * per_rank
        e = experts[t, slot]
        order = np.lexsort((t, e))                     # by expert, token order within it
        t, slot, e = t[order], slot[order], e[order]
        cut = np.searchsorted(e // experts_per_rank, np.arange(1, ep))  # e sorted → dst sorted
        sent.append(tuple(zip(np.split(t, cut), np.split(slot, cut), np.split(e, cut))))
    # 2. each expert rank receives from every rank in rank order and runs its experts
    results = [[None] * ep for _ in range(ep)]        # results[src][dst]: rows back to src
    rank_rows = np.zeros(ep, dtype=np.int64)
    for dst in range(ep):
        received = [x[sent[src][dst][0]] for src in range(ep)]      # (rows_i, hidden) each
        rows = np.concatenate(received) if received else np.zeros((0, hidden))
        row_expert = np.concatenate([sent[src][dst][2] for src in range(ep)])
        rank_rows[dst] = rows.shape[0]
        out = np.zeros_like(rows)
        for e in np.unique(row_expert):
            mine = row_expert == e
            out[mine] = expert_mlp(rows[mine], w_in[e], w_out[e])
        bounds = np.cumsum([0] + [r.shape[0] for r in received])
        for src in range(ep):
            results[src][dst] = out[bounds[src]:bounds[src + 1]]     # 3. combine: back to src
    # 4. each token's rank weights and sums what came back
    output = np.zeros_like(x)
    for src in range(ep):
        for dst in range(ep):
            t, slot, _ = sent[src][dst]
            np.add.at(output, t, weights[t, slot][:, None] * results[src][dst])
    dense = dense_moe(x, w_in, w_out, experts, weights, kept)
    return ExpertParallelRun(output, dense, float(np.abs(output - dense).max(initial=0.0)),
                             rank_rows, tuple(sent))


def dense_moe(x, w_in, w_out, experts, weights, kept) -> np.ndarray:
    """Σ_e gate[:, e] · expert_e(X) over every expert and token: the unsharded reference."""
    tokens = x.shape[0]
    gate = np.zeros((tokens, w_in.shape[0]))
    np.add.at(gate, (np.repeat(np.arange(tokens), experts.shape[1]), experts.reshape(-1)),
              np.where(kept, weights, 0.0).reshape(-1))
    num_experts, hidden, inner = w_in.shape
    # every expert on every token: one (T, hidden) × (hidden, E·inner) product, then per expert
    h = silu(x @ w_in.transpose(1, 0, 2).reshape(hidden, num_experts * inner))   # (T, E·inner)
    h = np.ascontiguousarray(h.reshape(tokens, num_experts, inner).transpose(1, 0, 2))
    all_out = np.matmul(h, w_out)                                             # (E, T, hidden)
    return np.einsum("te,eth->th", gate, all_out)


def imbalance(rank_rows: np.ndarray) -> float:
    """Busiest expert rank's rows over the mean (1: perfectly balanced)."""
    mean = rank_rows.mean()
    return float(rank_rows.max() / mean) if mean > 0 else 1.0


@dataclass(frozen=True)
class A2ACost:
    bytes_sent: np.ndarray      # (ep,) bytes each rank sends to the others in one all-to-all
    time_us: float              # with the given nodes
    nvlink_us: float            # every rank in one node
    infiniband_us: float        # every rank on its own node


def all_to_all_cost(matrix: np.ndarray, row_bytes: float, links: cost.Links) -> A2ACost:
    """α–β time of one all-to-all moving ``matrix[i][j]`` rows of ``row_bytes`` from i to j
    (:func:`app.sim.collectives.cost.pairwise_time_us`: per message, per link)."""
    payload = matrix * row_bytes
    np.fill_diagonal(payload, 0)
    nvlink = cost.Links(links.alpha_us, links.intra_node_gbs, links.inter_node_gbs,
                        max(1, matrix.shape[0]))
    ib = cost.Links(links.alpha_us, links.intra_node_gbs, links.inter_node_gbs, 1)
    return A2ACost(payload.sum(axis=1), *(cost.pairwise_time_us(payload, l)
                                          for l in (links, nvlink, ib)))


@dataclass(frozen=True)
class LayerA2A:
    """Both all-to-alls of one MoE layer's forward. The combine sends every expert output back
    along the reverse path, so its matrix is the dispatch's transpose: rank i sends
    ``dispatch[j][i]`` rows to j — its column, not its row — and the combine lasts as long as
    the largest off-diagonal column (Megatron-LM's ``MoEAlltoAllTokenDispatcher``: the
    combine's input and output splits are the dispatch's swapped)."""

    dispatch: A2ACost
    combine: A2ACost

    @property
    def bytes_per_rank(self) -> np.ndarray:
        """What each rank sends per layer: its off-diagonal row sum plus its column sum."""
        return self.dispatch.bytes_sent + self.combine.bytes_sent

    @property
    def time_us(self) -> float:
        return self.dispatch.time_us + self.combine.time_us

    @property
    def nvlink_us(self) -> float:
        return self.dispatch.nvlink_us + self.combine.nvlink_us

    @property
    def infiniband_us(self) -> float:
        return self.dispatch.infiniband_us + self.combine.infiniband_us


def layer_cost(matrix: np.ndarray, row_bytes: float, links: cost.Links) -> LayerA2A:
    """Dispatch (``matrix``) and combine (its transpose) of one layer."""
    return LayerA2A(all_to_all_cost(matrix, row_bytes, links),
                    all_to_all_cost(np.ascontiguousarray(matrix.T), row_bytes, links))
