"""MoE model presets with their shapes from the papers and released configs, and their total
and active (per token) parameter counts.

* Mixtral 8×7B (Jiang et al. 2024, "Mixtral of Experts"; HF ``mistralai/Mixtral-8x7B-v0.1``
  config): 32 layers, hidden 4096, 32 query / 8 key-value heads of 128, SwiGLU experts of
  14336, 8 experts top-2, vocab 32000, untied embeddings. Published: 46.7B parameters, 12.9B
  active per token.
* DeepSeek-V3 (DeepSeek-AI 2024, technical report §2 and §4.2; HF ``deepseek-ai/DeepSeek-V3``
  config): 61 layers, hidden 7168, the first 3 dense (FFN 18432), the other 58 MoE with 256
  routed experts of 2048 + 1 shared expert, top-8; multi-head latent attention with 128 heads,
  q rank 1536, kv rank 512, 128 + 64 (RoPE) query/key head dims, value head 128; vocab 129280.
  Published: 671B parameters, 37B active (the multi-token-prediction module, 14B more, is not
  counted, as in the report).
* Qwen1.5-MoE-A2.7B (Qwen team 2024; HF ``Qwen/Qwen1.5-MoE-A2.7B`` config), a fine-grained MoE
  with a shared expert: 24 layers, hidden 2048, 16 heads, 60 experts of 1408 top-4, one shared
  expert of 5632 with a sigmoid gate, vocab 151936. Published: 14.3B parameters, 2.7B active.

Counts include embeddings and the output layer, norms and router weights; experts are SwiGLU
(three hidden × ffn matrices).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MoeModel:
    name: str
    layers: int
    hidden: int
    vocab: int
    attention_params: int      # one layer's attention (projections and their norms)
    experts: int               # routed experts per MoE layer
    top_k: int
    expert_ffn: int            # inner size of one routed expert
    shared_experts: int = 0
    shared_ffn: int = 0        # inner size of one shared expert
    shared_gate: bool = False  # a hidden → 1 gate on the shared expert (Qwen)
    dense_layers: int = 0      # leading layers with a dense MLP instead of experts
    dense_ffn: int = 0
    tied_embeddings: bool = False
    published_total: float = 0.0
    published_active: float = 0.0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers

    @property
    def expert_params(self) -> int:
        """One routed expert (SwiGLU: gate, up, down)."""
        return 3 * self.hidden * self.expert_ffn

    @property
    def router_params(self) -> int:
        return self.hidden * self.experts

    @property
    def shared_params(self) -> int:
        """The shared experts of one MoE layer, their gate included."""
        return (self.shared_experts * 3 * self.hidden * self.shared_ffn
                + (self.hidden if self.shared_gate else 0))

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def routed_expert_total(self) -> int:
        """Every routed expert of every MoE layer: what expert parallelism shards."""
        return self.moe_layers * self.experts * self.expert_params

    @property
    def dense_total(self) -> int:
        """Everything but the routed experts: attention, norms, routers, shared experts, dense
        MLPs, embeddings — what tensor and pipeline parallelism shard."""
        norms = self.layers * 2 * self.hidden + self.hidden
        dense_mlp = self.dense_layers * 3 * self.hidden * self.dense_ffn
        moe_rest = self.moe_layers * (self.router_params + self.shared_params)
        return (self.layers * self.attention_params + norms + dense_mlp + moe_rest
                + self.embedding_params)

    @property
    def total_params(self) -> int:
        return self.dense_total + self.routed_expert_total

    @property
    def active_params(self) -> int:
        """Parameters one token's forward pass uses: top_k routed experts per MoE layer."""
        return self.dense_total + self.moe_layers * self.top_k * self.expert_params


def gqa_attention(hidden: int, heads: int, kv_heads: int, head_dim: int, qkv_bias: bool = False
                  ) -> int:
    """q, k, v and output projections of grouped-query attention."""
    q, kv = heads * head_dim, kv_heads * head_dim
    bias = q + 2 * kv if qkv_bias else 0
    return hidden * q + 2 * hidden * kv + q * hidden + bias


def mla_attention(hidden: int, heads: int, q_rank: int, kv_rank: int, nope_dim: int,
                  rope_dim: int, v_dim: int) -> int:
    """DeepSeek's multi-head latent attention: low-rank q and kv projections with their norms,
    a shared RoPE key, the output projection."""
    q = hidden * q_rank + q_rank + q_rank * heads * (nope_dim + rope_dim)
    kv = hidden * (kv_rank + rope_dim) + kv_rank + kv_rank * heads * (nope_dim + v_dim)
    return q + kv + heads * v_dim * hidden


PRESETS: dict[str, MoeModel] = {
    "mixtral-8x7b": MoeModel(
        "Mixtral 8×7B", layers=32, hidden=4096, vocab=32000,
        attention_params=gqa_attention(4096, 32, 8, 128), experts=8, top_k=2,
        expert_ffn=14336, published_total=46.7e9, published_active=12.9e9),
    "deepseek-v3": MoeModel(
        "DeepSeek-V3", layers=61, hidden=7168, vocab=129280,
        attention_params=mla_attention(7168, 128, 1536, 512, 128, 64, 128), experts=256,
        top_k=8, expert_ffn=2048, shared_experts=1, shared_ffn=2048, dense_layers=3,
        dense_ffn=18432, published_total=671e9, published_active=37e9),
    "qwen1.5-moe-a2.7b": MoeModel(
        "Qwen1.5-MoE-A2.7B", layers=24, hidden=2048, vocab=151936,
        attention_params=gqa_attention(2048, 16, 16, 128, qkv_bias=True), experts=60,
        top_k=4, expert_ffn=1408, shared_experts=1, shared_ffn=5632, shared_gate=True,
        published_total=14.3e9, published_active=2.7e9),
}
