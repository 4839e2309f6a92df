"""The tiny GPT of ``/train`` as data: every parameter tensor, its full shape, how the layout cuts
it, and its seeded initial values — one description for the cost model, the memory panel, the
training framework (workers/train/) and the independent reference in the tests.

A Llama-style block stack (Touvron et al. 2023): RMSNorm, grouped-query attention without
biases, a SwiGLU MLP (Shazeer 2020) — or, with ``experts`` > 1, a mixture of SwiGLU experts
behind a top-k softmax router (Shazeer et al. 2017; Fedus et al. 2022) —, a final RMSNorm and
an untied output head. Matrices are stored as (in, out), so a layer computes ``x @ W``.

How Megatron-LM cuts each tensor (Shoeybi et al. 2019; Narayanan et al. 2021):

    embed        (V, h)         rows split over tp (vocab-parallel embedding)
    wq, wk, wv   (h, heads·d)   columns split over tp: rank t holds heads/tp query heads and
                                kv_heads/tp key/value heads (column-parallel)
    wo           (heads·d, h)   rows split over tp (row-parallel)
    w1, w3, w2   (h, f) (f, h)  SwiGLU gate and up column-, down row-parallel
    router       (h, E)         replicated on every rank of a stage
    experts.w*   (E, …)         experts split over ep (dim 0), each expert cut over tp as the
                                dense MLP is (Megatron's expert tensor parallelism = tp)
    norms        (h,)           replicated
    head         (h, V)         columns split over tp (vocab-parallel output)

Layer l lives on pipeline stage l // (layers/pp); the embedding on the first stage, the final
norm and the head on the last.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import prod, sqrt

import numpy as np

BUCKET_ELEMENTS = 4096
"""A gradient bucket's size cap, in elements (workers/train/data.py buckets by it; the cost model
reduces the same buckets): small, so that the tiny model has several buckets to overlap."""


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    """the full, unsharded shape"""
    tp_dim: int | None
    """the dimension tensor parallelism splits; None: replicated over tp"""
    ep_dim: int | None
    """experts' dimension, split over ep; None: a dense tensor"""
    layer: int | None
    """its transformer layer; None: embedding (first stage) or final norm / head (last)"""
    place: str
    """"first", "layer" or "last" """
    std: float
    """initial values: N(0, std²); 0 means ones (a norm's gain)"""

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def expert(self) -> bool:
        return self.ep_dim is not None

    @property
    def norm(self) -> bool:
        """An RMSNorm gain: applied token by token, so under sequence parallelism each tp rank
        holds only its tokens' share of the gradient (Megatron sums these over tp)."""
        return self.name.endswith("norm")

    def stage(self, layers: int, pp: int) -> int:
        if self.place == "first":
            return 0
        if self.place == "last":
            return pp - 1
        return self.layer // (layers // pp)

    def local_shape(self, tp: int, ep: int) -> tuple[int, ...]:
        shape = list(self.shape)
        if self.tp_dim is not None:
            shape[self.tp_dim] //= tp
        if self.ep_dim is not None:
            shape[self.ep_dim] //= ep
        return tuple(shape)

    def shard(self, full: np.ndarray, tp_rank: int, tp: int, ep_rank: int = 0,
              ep: int = 1) -> np.ndarray:
        """What rank (tp_rank, ep_rank) holds of ``full``: contiguous blocks along the cut
        dimensions."""
        index = [slice(None)] * full.ndim
        for dim, rank, size in ((self.tp_dim, tp_rank, tp), (self.ep_dim, ep_rank, ep)):
            if dim is not None:
                part = full.shape[dim] // size
                index[dim] = slice(rank * part, (rank + 1) * part)
        return full[tuple(index)]


@dataclass(frozen=True)
class Shape:
    """The tiny model's sizes (the fields of app.sim.train.params.TrainParams)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int
    experts: int = 1
    top_k: int = 1

    @classmethod
    def of(cls, p) -> Shape:
        return cls(p.layers, p.hidden, p.heads, p.kv_heads, p.ffn, p.vocab, p.seq, p.experts,
                   min(p.top_k, p.experts))

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def moe(self) -> bool:
        return self.experts > 1


@lru_cache(maxsize=64)
def tensors(s: Shape) -> tuple[Tensor, ...]:
    """Every parameter tensor, in the order a model's ``parameters()`` would list them."""
    h, d, f, V, E = s.hidden, s.head_dim, s.ffn, s.vocab, s.experts
    out = [Tensor("embed", (V, h), 0, None, None, "first", 1.0)]
    residual = 1 / sqrt(2 * s.layers)           # GPT-2's scaling of the residual projections
    for l in range(s.layers):
        def t(name, shape, tp_dim, std, ep_dim=None):
            out.append(Tensor(f"layers.{l}.{name}", shape, tp_dim, ep_dim, l, "layer", std))
        t("attn_norm", (h,), None, 0.0)
        t("wq", (h, s.heads * d), 1, 1 / sqrt(h))
        t("wk", (h, s.kv_heads * d), 1, 1 / sqrt(h))
        t("wv", (h, s.kv_heads * d), 1, 1 / sqrt(h))
        t("wo", (s.heads * d, h), 0, residual / sqrt(s.heads * d))
        t("mlp_norm", (h,), None, 0.0)
        if s.moe:
            t("router", (h, E), None, 1 / sqrt(h))
            t("experts.w1", (E, h, f), 2, 1 / sqrt(h), ep_dim=0)
            t("experts.w3", (E, h, f), 2, 1 / sqrt(h), ep_dim=0)
            t("experts.w2", (E, f, h), 1, residual / sqrt(f), ep_dim=0)
        else:
            t("w1", (h, f), 1, 1 / sqrt(h))
            t("w3", (h, f), 1, 1 / sqrt(h))
            t("w2", (f, h), 0, residual / sqrt(f))
    out.append(Tensor("final_norm", (h,), None, None, None, "last", 0.0))
    out.append(Tensor("head", (h, V), 1, None, None, "last", 1 / sqrt(h)))
    return tuple(out)


def param_count(s: Shape) -> int:
    return sum(t.numel for t in tensors(s))


def initial(t: Tensor, index: int, seed: int) -> np.ndarray:
    """The full initial value of tensor number ``index`` of the model, float64: its own
    generator ``default_rng([seed, index])``, so a value never depends on the layout."""
    if t.std == 0.0:
        return np.ones(t.shape)
    return np.random.default_rng([seed, index]).standard_normal(t.shape) * t.std


def initial_state(s: Shape, seed: int) -> dict[str, np.ndarray]:
    """Every tensor's full initial value, by name."""
    return {t.name: initial(t, i, seed) for i, t in enumerate(tensors(s))}


def buckets(s: Shape, stage_tensors: list[Tensor], tp: int, ep: int) -> list[list[Tensor]]:
    """A stage's gradient buckets as the framework makes them: its tensors in reverse order (the
    order backward produces their gradients), dense and expert apart, cut at BUCKET_ELEMENTS."""
    out = []
    for expert in (False, True):
        current, size = [], 0
        for t in reversed([t for t in stage_tensors if t.expert == expert]):
            n = prod(t.local_shape(tp, ep))
            if current and size + n > BUCKET_ELEMENTS:
                out.append(current)
                current, size = [], 0
            current.append(t)
            size += n
        if current:
            out.append(current)
    return out
