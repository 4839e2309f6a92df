"""The model as the planner sees it: a dense preset or shape (:mod:`app.catalog.models`) or an MoE
preset (:mod:`app.sim.moe.presets`), reduced to what memory and time need — per-layer matmul
parameters (what tensor parallelism splits), routed experts (what expert parallelism splits),
the embedding and output head, and the activation shape of chapter 1's ledger.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.memory.activations import LayerShape
from app.catalog.models import ModelShape
from app.sim.moe.presets import MoeModel


@dataclass(frozen=True)
class PlanModel:
    name: str
    family: str                  # gpt | llama | moe
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int                     # MLP inner size for activations (MoE: k routed + shared)
    vocab: int
    seq: int
    gated: bool
    layer_params: int            # one layer's dense parameters (attention, norms, dense MLP)
    expert_params: int           # one MoE layer's routed experts, all of them (0: dense)
    expert_ffn: int = 0
    experts: int = 1
    top_k: int = 1
    moe_layers: int = 0
    embedding_params: int = 0
    largest_tensor: int = 0      # elements of the largest parameter tensor (ZeRO-3 gather)
    layer_replicated: int = 0    # of layer_params, what TP keeps whole on every rank (norms)
    shape: ModelShape | None = None   # the dense shape, for chapter 1's ledger
    attention: str = "flash"     # flash | materialized (the scores through HBM, pre-2022)
    attention_params: int = 0    # one layer's attention projections (0: h·(h + 2·kv) + h²)
    qk_head_dim: int = 0         # per head, queries and keys (0: h / a); MLA: 128 + 64 RoPE
    v_head_dim: int = 0          # per head, values (0: h / a)
    latent_dim: int = 0          # MLA: the compressed q, kv and RoPE-key width a token keeps

    @property
    def moe(self) -> bool:
        return self.expert_params > 0

    @property
    def dense_params(self) -> int:
        """What tp·pp shard: every parameter but the routed experts."""
        return self.layers * self.layer_params + self.embedding_params

    @property
    def routed_params(self) -> int:
        return self.moe_layers * self.expert_params

    @property
    def total_params(self) -> int:
        return self.dense_params + self.routed_params

    @property
    def active_layer_params(self) -> int:
        """Matmul parameters one token meets in one layer (MoE: its top-k experts, averaged
        over the layers that have them)."""
        active = self.moe_layers * self.top_k * 3 * self.hidden * self.expert_ffn
        return self.layer_params + active / self.layers

    @property
    def kv_dim(self) -> int:
        return self.hidden * self.kv_heads // self.heads

    @property
    def head_dims(self) -> tuple[int, int]:
        """(query/key, value) width of one head."""
        d = self.hidden // self.heads
        return self.qk_head_dim or d, self.v_head_dim or d

    @property
    def projection_params(self) -> int:
        """One layer's attention projections (q, k, v, output; MLA's down and up too)."""
        return self.attention_params or (self.hidden * (self.hidden + 2 * self.kv_dim)
                                         + self.hidden * self.hidden)

    def layer_shape(self, seq: int, micro_batch: int = 1) -> LayerShape:
        return LayerShape(seq, micro_batch, self.hidden, self.heads, self.kv_heads, self.ffn,
                          gated_mlp=self.gated, dropout=self.family == "gpt", act_bytes=2)


    def zero3_unit(self, tp, ep=1):
        """Φ, what ZeRO-3 gathers at once on one GPU (:func:`app.sim.memory.ledger.zero3_unit`):
        one layer's parameters (÷ tp where TP splits them; an MoE layer's routed experts also ÷
        ep), or the largest single tensor where that is larger."""
        split = self.layer_params - self.layer_replicated
        experts = self.expert_params / ep if self.moe else 0.0
        return np.maximum((split + experts) / tp + self.layer_replicated,
                          self.largest_tensor / tp)


def from_shape(m: ModelShape) -> PlanModel:
    tensors = m.tensors()
    largest = max(t.numel for t in tensors)
    replicated = sum(t.numel for t in tensors if t.place == "layer" and t.tp_dim is None)
    return PlanModel(m.name, m.family, m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.vocab,
                     m.seq, m.gated_mlp, m.layer_params(), 0,
                     embedding_params=m.embedding_params(), largest_tensor=largest,
                     layer_replicated=replicated, shape=m)


MOE_HEADS = {"mixtral-8x7b": (32, 8), "deepseek-v3": (128, 128), "qwen1.5-moe-a2.7b": (16, 16)}
"""Attention heads (query, key-value) of the MoE presets (their HF configs)."""
MLA_DIMS = {"deepseek-v3": (128 + 64, 128, 1536 + 512 + 64)}
"""DeepSeek-V3's multi-head latent attention (DeepSeek-AI 2024 §2.1.1, HF config): per head
queries and keys of 128 + 64 (RoPE), values of 128; a token keeps its compressed query (1,536),
key-value (512) and the shared RoPE key (64) — what the up-projections are recomputed from."""


def from_moe(key: str, m: MoeModel, seq: int) -> PlanModel:
    heads, kv = MOE_HEADS[key]
    h = m.hidden
    dense_mlp = m.dense_layers * 3 * h * m.dense_ffn
    per_layer_rest = (m.attention_params + 2 * h + (m.moe_layers * (m.router_params
                      + m.shared_params) + dense_mlp) / m.layers)
    active_ffn = m.top_k * m.expert_ffn + m.shared_experts * m.shared_ffn
    qk, v, latent = MLA_DIMS.get(key, (0, 0, 0))
    return PlanModel(m.name, "moe", m.layers, h, heads, kv, active_ffn, m.vocab, seq, True,
                     round(per_layer_rest), m.experts * m.expert_params, m.expert_ffn,
                     m.experts, m.top_k, m.moe_layers, m.embedding_params + h,
                     largest_tensor=m.vocab * h, attention_params=m.attention_params,
                     qk_head_dim=qk, v_head_dim=v, latent_dim=latent)
