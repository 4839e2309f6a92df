"""Transformer model presets and their parameter counts.

Each preset is a shape (layers, hidden, heads, kv_heads, ffn, vocab, seq) and an architecture
family: GPT (learned positions, biases, LayerNorm, GeLU MLP of 4h, tied embeddings) or Llama
(rotary positions, no biases, RMSNorm, SwiGLU MLP, grouped-query attention, untied embeddings).
Sources: GPT-2 (Radford et al. 2019), GPT-3 (Brown et al. 2020, Table 2.1), Llama 3 (Meta 2024,
Table 3). The counts come out at 124 M, 175 B, 8.0 B, 70.6 B and 405.9 B.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import prod


@dataclass(frozen=True)
class ParamTensor:
    """One parameter tensor, shaped as torch.nn.Linear stores it (out, in), with where Megatron
    puts it: ``tp_dim`` is the dimension tensor parallelism splits (0: column-parallel and
    vocab-parallel, 1: row-parallel, None: replicated on every TP rank) and ``place`` is
    "first" (embeddings, on the first pipeline stage), "layer" (once per transformer layer) or
    "last" (final norm and untied output head, on the last stage)."""

    name: str
    shape: tuple[int, ...]
    tp_dim: int | None
    place: str

    @property
    def numel(self) -> int:
        return prod(self.shape)


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

    def tensors(self) -> tuple[ParamTensor, ...]:
        """Every parameter tensor of the model, one transformer layer's worth listed once (its
        sizes add up to :meth:`param_count` with the layer ones counted ``layers`` times)."""
        h, f, v = self.hidden, self.ffn, self.vocab
        kv_dim = h * self.kv_heads // self.heads
        if self.family == "gpt":
            qkv = h + 2 * kv_dim
            return (
                ParamTensor("wte.weight", (v, h), 0, "first"),      # tied with the output head
                ParamTensor("wpe.weight", (self.seq, h), None, "first"),
                ParamTensor("ln_1.weight", (h,), None, "layer"),
                ParamTensor("ln_1.bias", (h,), None, "layer"),
                ParamTensor("attn.qkv.weight", (qkv, h), 0, "layer"),
                ParamTensor("attn.qkv.bias", (qkv,), 0, "layer"),
                ParamTensor("attn.proj.weight", (h, h), 1, "layer"),
                ParamTensor("attn.proj.bias", (h,), None, "layer"),
                ParamTensor("ln_2.weight", (h,), None, "layer"),
                ParamTensor("ln_2.bias", (h,), None, "layer"),
                ParamTensor("mlp.fc.weight", (f, h), 0, "layer"),
                ParamTensor("mlp.fc.bias", (f,), 0, "layer"),
                ParamTensor("mlp.proj.weight", (h, f), 1, "layer"),
                ParamTensor("mlp.proj.bias", (h,), None, "layer"),
                ParamTensor("ln_f.weight", (h,), None, "last"),
                ParamTensor("ln_f.bias", (h,), None, "last"),
            )
        return (
            ParamTensor("tok_embeddings.weight", (v, h), 0, "first"),
            ParamTensor("attention_norm.weight", (h,), None, "layer"),
            ParamTensor("attention.wq.weight", (h, h), 0, "layer"),
            ParamTensor("attention.wk.weight", (kv_dim, h), 0, "layer"),
            ParamTensor("attention.wv.weight", (kv_dim, h), 0, "layer"),
            ParamTensor("attention.wo.weight", (h, h), 1, "layer"),
            ParamTensor("ffn_norm.weight", (h,), None, "layer"),
            ParamTensor("feed_forward.w1.weight", (f, h), 0, "layer"),   # gate
            ParamTensor("feed_forward.w3.weight", (f, h), 0, "layer"),   # up
            ParamTensor("feed_forward.w2.weight", (h, f), 1, "layer"),   # down
            ParamTensor("norm.weight", (h,), None, "last"),
            ParamTensor("output.weight", (v, h), 0, "last"),
        )

    def parameters(self) -> tuple[tuple[str, int], ...]:
        """(name, elements) of every parameter tensor in ``model.parameters()`` order — the
        first-stage tensors, each layer's (prefixed ``h.{i}.``), then the last ones; DDP's
        buckets follow this order. They add up to :meth:`param_count`."""
        tensors = self.tensors()
        first = [(t.name, t.numel) for t in tensors if t.place == "first"]
        layer = [(t.name, t.numel) for t in tensors if t.place == "layer"]
        last = [(t.name, t.numel) for t in tensors if t.place == "last"]
        return tuple(first + [(f"h.{i}.{name}", n) for i in range(self.layers)
                              for name, n in layer] + last)


PRESETS: dict[str, ModelShape] = {m.name: m for m in (
    ModelShape("gpt2", "gpt", 12, 768, 12, 12, 3072, 50257, 1024),
    ModelShape("gpt3-175b", "gpt", 96, 12288, 96, 96, 49152, 50257, 2048),
    ModelShape("llama3-8b", "llama", 32, 4096, 32, 8, 14336, 128256, 8192),
    ModelShape("llama3-70b", "llama", 80, 8192, 64, 8, 28672, 128256, 8192),
    ModelShape("llama3-405b", "llama", 126, 16384, 128, 8, 53248, 128256, 8192),
)}


PRESET_TEXTS = {"gpt2": "GPT-2 124M", "gpt3-175b": "GPT-3 175B", "llama3-8b": "Llama-3 8B",
                "llama3-70b": "Llama-3 70B", "llama3-405b": "Llama-3 405B"}
"""A preset's option text on the pages."""


@lru_cache(maxsize=512)
def resolve(preset: str, *, layers: int | None = None, hidden: int | None = None,
            heads: int | None = None, kv_heads: int | None = None, ffn: int | None = None,
            vocab: int | None = None, seq: int | None = None) -> ModelShape:
    """A preset with explicit sizes overriding its own (DESIGN.md: "explicit values override
    the preset's") — the one meaning of an empty shape field in every scene. Sizes that follow
    from others follow them unless given: a GPT's MLP is 4h; a Llama's keeps its ratio to h
    (rounded to a multiple of 256, as Llama's reference code rounds it); a multi-head model
    keeps kv_heads = heads, a grouped-query one its own kv_heads while they still divide the
    heads (else every head gets its own key/value head: never a grouping that cannot be)."""
    base = PRESETS[preset]
    h = hidden or base.hidden
    a = heads or base.heads
    if ffn is None:
        ffn = 4 * h if base.family == "gpt" else max(256, round(base.ffn * h / base.hidden
                                                                / 256) * 256)
    if kv_heads is None:
        kv_heads = base.kv_heads if base.kv_heads != base.heads and a % base.kv_heads == 0 \
            else a
    return ModelShape(base.name, base.family, layers or base.layers, h, a, kv_heads, ffn,
                      vocab or base.vocab, seq or base.seq)
