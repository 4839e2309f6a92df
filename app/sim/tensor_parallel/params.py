"""The parameters of the tensor parallel scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from app.params import (
    AlphaUs,
    Ffn,
    GpusPerNode,
    GpuTflops,
    Heads,
    Hidden,
    InterNodeGBs,
    IntraNodeGBs,
    Invalid,
    MicroBatch,
    ModelPreset,
    SceneParams,
    Seed,
    Seq,
    Tokens,
    Tp,
    Vocab,
    nearby_multiples,
)

Block = Literal["column", "row", "mlp", "attention", "embedding"]

MAX_TP = 16
"""The deck draws one lane per rank; beyond 16 they would be too thin to read."""
MAX_MATRIX = 16384
"""Most numbers in any one matrix of the worked example: every accepted request stays under
half a second (the largest, 16 ranks each with a 128 × 128 partial sum, answers ~8 MB of JSON
in about 0.25 s)."""


class TensorParallelParams(SceneParams):
    block: Block = "column"                 # which Megatron-LM block runs on the ranks
    tp: Tp = 2                              # tensor-parallel size: ranks sharing the block
    tokens: Tokens = 4                      # rows of the activations (one short sequence)
    hidden: Hidden = 8                      # h: the model's width
    ffn: Ffn = 16                           # f: the MLP's inner size (4h in GPT)
    heads: Heads = 4                        # a: attention heads (attention block)
    vocab: Vocab = 16                       # V: vocabulary (embedding block)
    sequence_parallel: bool = False         # split LayerNorm/dropout regions along the sequence
    seed: Seed = 0                          # seed of the matrices
    preset: ModelPreset = "gpt3-175b"          # the real model of the at-scale panels
    seq: Seq = 2048                         # s, sequence length at scale (GPT-3's)
    micro_batch: MicroBatch = 1             # b at scale
    alpha_us: AlphaUs = 5.0                 # α: latency of one message
    intra_node_gbs: IntraNodeGBs = 300.0    # NVLink inside a node (A100 ≈ 300 GB/s)
    inter_node_gbs: InterNodeGBs = 50.0     # InfiniBand between nodes (400 Gb/s ≈ 50 GB/s)
    gpus_per_node: GpusPerNode = 8          # GPUs one NVLink domain holds
    gpu_tflops: GpuTflops = 160.0           # sustained bf16 matmul rate (PTD-P: 163 on A100)

    @model_validator(mode="after")
    def _consistent(self) -> TensorParallelParams:
        t = self.tp
        if t > MAX_TP:
            raise Invalid("tp", f"tp ({t}) is more ranks than this scene draws: use tp ≤ "
                                f"{MAX_TP} (one lane per rank)")
        uses = {"column": ("ffn",), "row": ("ffn",), "mlp": ("ffn",),
                "attention": ("heads",), "embedding": ("vocab",)}[self.block]
        what = {"ffn": "the MLP's inner size is cut into tp blocks",
                "heads": "each rank computes whole heads",
                "vocab": "each rank owns vocab/tp tokens of the vocabulary"}
        for name in uses:
            value = getattr(self, name)
            if value % t:
                raise Invalid(name, f"tp ({t}) must divide {name} ({value}): {what[name]} — "
                                    f"try {name} {nearby_multiples(value, t)}")
        if self.block == "attention" and self.hidden % self.heads:
            raise Invalid("hidden", f"heads ({self.heads}) must divide hidden ({self.hidden}): "
                                    f"each head gets hidden/heads dimensions — try hidden "
                                    f"{nearby_multiples(self.hidden, self.heads)}")
        if self.sequence_parallel and self.tokens % t:
            raise Invalid("tokens", f"with sequence_parallel, tp ({t}) must divide tokens "
                                    f"({self.tokens}): each rank holds tokens/tp of them — try "
                                    f"tokens {nearby_multiples(self.tokens, t)}")
        n, h, f, v = self.tokens, self.hidden, self.ffn, self.vocab
        sizes = {"column": (("tokens", n * h), ("ffn", h * f), ("ffn", n * f)),
                 "row": (("tokens", n * f), ("ffn", h * f)),
                 "mlp": (("tokens", n * h), ("ffn", h * f), ("ffn", n * f)),
                 "attention": (("tokens", n * h), ("hidden", 3 * h * h),
                               ("tokens", self.heads * n * n)),
                 "embedding": (("tokens", n * v), ("vocab", v * h), ("tokens", n * h))}
        for name, count in sizes[self.block]:
            if count > MAX_MATRIX:
                raise Invalid(name, f"{name} ({getattr(self, name)}) makes a matrix of "
                                    f"{count:,} numbers, more than this scene computes number "
                                    f"by number (at most {MAX_MATRIX:,}) — lower {name}")
        return self
