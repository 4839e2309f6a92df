"""Transformer model presets and their parameter counts.

Each preset is a shape (layers, hidden, heads, kv_heads, ffn, vocab, seq) and an architecture
family: GPT (learned positions, biases, LayerNorm, GeLU MLP of 4h, tied embeddings) or Llama
(rotary positions, no biases, RMSNorm, SwiGLU MLP, grouped-query attention, untied embeddings).
Sources: GPT-2 (Radford et al. 2019), GPT-3 (Brown et al. 2020, Table 2.1), Llama 3 (Meta 2024,
Table 3). The counts come out at 124 M, 175 B, 8.0 B, 70.6 B and 405.9 B.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    name: str
    family: str          # "gpt" | "llama"
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int

    @property
    def gated_mlp(self) -> bool:
        return self.family == "llama"

    @property
    def tied_embeddings(self) -> bool:
        return self.family == "gpt"

    def layer_params(self) -> int:
        """Parameters of one transformer layer."""
        h, f = self.hidden, self.ffn
        kv_dim = h * self.kv_heads // self.heads
        if self.family == "gpt":
            attention = h * (h + 2 * kv_dim) + (h + 2 * kv_dim) + h * h + h  # QKV, out, biases
            mlp = 2 * h * f + f + h
            norms = 2 * 2 * h                                   # two LayerNorms (γ, β)
        else:
            attention = h * (h + 2 * kv_dim) + h * h
            mlp = 3 * h * f                                     # gate, up, down
            norms = 2 * h                                       # two RMSNorms (γ)
        return attention + mlp + norms

    def embedding_params(self) -> int:
        """Token embedding, positions (GPT), final norm and output head if untied."""
        h = self.hidden
        if self.family == "gpt":
            return self.vocab * h + self.seq * h + 2 * h
        return 2 * self.vocab * h + h

    def param_count(self) -> int:
        return self.layers * self.layer_params() + self.embedding_params()

    def tensors(self) -> tuple[tuple[str, int], ...]:
        """(name, elements) of every parameter tensor in ``model.parameters()`` order, named
        as in Hugging Face's GPT-2 and Llama; they add up to :meth:`param_count`."""
        h, f, v = self.hidden, self.ffn, self.vocab
        kv_dim = h * self.kv_heads // self.heads
        if self.family == "gpt":
            layer = (("ln_1.weight", h), ("ln_1.bias", h),
                     ("attn.c_attn.weight", h * (h + 2 * kv_dim)), ("attn.c_attn.bias", h + 2 * kv_dim),
                     ("attn.c_proj.weight", h * h), ("attn.c_proj.bias", h),
                     ("ln_2.weight", h), ("ln_2.bias", h),
                     ("mlp.c_fc.weight", h * f), ("mlp.c_fc.bias", f),
                     ("mlp.c_proj.weight", f * h), ("mlp.c_proj.bias", h))
            first = (("wte.weight", v * h), ("wpe.weight", self.seq * h))
            last = (("ln_f.weight", h), ("ln_f.bias", h))      # the head is tied to wte
        else:
            layer = (("input_layernorm.weight", h), ("self_attn.q_proj.weight", h * h),
                     ("self_attn.k_proj.weight", h * kv_dim), ("self_attn.v_proj.weight", h * kv_dim),
                     ("self_attn.o_proj.weight", h * h), ("post_attention_layernorm.weight", h),
                     ("mlp.gate_proj.weight", h * f), ("mlp.up_proj.weight", h * f),
                     ("mlp.down_proj.weight", f * h))
            first = (("embed_tokens.weight", v * h),)
            last = (("norm.weight", h), ("lm_head.weight", v * h))
        layers = tuple((f"h.{i}.{name}", n) for i in range(self.layers) for name, n in layer)
        return first + layers + last


PRESETS: dict[str, ModelShape] = {m.name: m for m in (
    ModelShape("gpt2", "gpt", 12, 768, 12, 12, 3072, 50257, 1024),
    ModelShape("gpt3-175b", "gpt", 96, 12288, 96, 96, 49152, 50257, 2048),
    ModelShape("llama3-8b", "llama", 32, 4096, 32, 8, 14336, 128256, 8192),
    ModelShape("llama3-70b", "llama", 80, 8192, 64, 8, 28672, 128256, 8192),
    ModelShape("llama3-405b", "llama", 126, 16384, 128, 8, 53248, 128256, 8192),
)}


def ptdp_param_count(layers: int, hidden: int, vocab: int, seq: int) -> float:
    """Narayanan et al. 2021 (PTD-P), §5.1: P = 12lh²(1 + 13/(12h) + (V + s)/(12lh))."""
    l, h = layers, hidden
    return 12 * l * h * h * (1 + 13 / (12 * h) + (vocab + seq) / (12 * l * h))
