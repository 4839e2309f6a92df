"""The parameters of the tensor parallel scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from app.param_groups import GpuTflopsField, MicroBatchField, NetworkGroup, PresetField, SeqField
from app.params import (
    Control,
    Ffn,
    Heads,
    Hidden,
    Invalid,
    Seed,
    Tokens,
    Tp,
    Vocab,
    multiples_near,
    suggest,
)

Block = Literal["column", "row", "mlp", "attention", "embedding"]

MAX_TP = 16
"""The deck draws one lane per rank; beyond 16 they would be too thin to read."""
MAX_MATRIX = 16384
"""Most numbers in any one matrix of the worked example: every accepted request stays under
half a second (the largest, 16 ranks each with a 128 × 128 partial sum, answers ~8 MB of JSON
in about 0.25 s)."""


class TensorParallelParams(NetworkGroup):
    """The worked example's block and sizes — ``hidden``, ``ffn``, ``heads`` and ``vocab`` are
    its own, as DESIGN.md's /api/tensor-parallel contract names them — and the real model at
    scale (preset, seq, micro_batch of the model shape group, the GPU's throughput, the network
    group)."""

    # which Megatron-LM block runs on the ranks
    block: Annotated[Block, Control(
        "Block", kind="choice",
        options={"column": "Column-parallel", "row": "Row-parallel", "mlp": "MLP",
                 "attention": "Attention", "embedding": "Embedding + loss"},
        help="Column: W split by columns. Row: by rows, outputs are partial sums. MLP: column "
             "then row. Attention: heads split. Embedding: the vocabulary split.")] = "column"
    # tensor-parallel size: ranks sharing the block
    tp: Annotated[Tp, Control(
        "Ranks (tp)", help="GPUs sharing the block: the tensor-parallel size.", bounds=(1, 8))] = 2
    # rows of the activations (one short sequence)
    tokens: Annotated[Tokens, Control(
        "Tokens",
        help="Rows of the activations. With sequence parallelism each rank holds tokens/tp"
             " of them.",
        bounds=(1, 16))] = 4
    # h: the model's width
    hidden: Annotated[Hidden, Control(
        "Hidden size h", help="Attention: a multiple of the heads.", bounds=(2, 32))] = 8
    # f: the MLP's inner size (4h in GPT)
    ffn: Annotated[Ffn, Control(
        "MLP inner size f", help="Cut into tp blocks (GPT uses 4h).", bounds=(1, 64))] = 16
    # a: attention heads (attention block)
    heads: Annotated[Heads, Control(
        "Heads a", help="Each rank computes a/tp whole heads.", bounds=(1, 16))] = 4
    # V: vocabulary (embedding block)
    vocab: Annotated[Vocab, Control(
        "Vocabulary V", help="Each rank owns V/tp rows of the embedding.", bounds=(1, 64))] = 16
    # split LayerNorm/dropout regions along the sequence
    sequence_parallel: Annotated[bool, Control(
        "Sequence parallelism", kind="choice", options={False: "off", True: "on"},
        help="Split LayerNorm, dropout and the residual along the sequence: all-reduce becomes "
             "all-gather + reduce-scatter.")] = False
    # seed of the matrices
    seed: Annotated[Seed, Control(
        "Seed",
        help="The matrices are drawn from this seed: small integers for the linear blocks "
             "(exact sums), one-decimal numbers for the others.",
        kind="number")] = 0
    # the real model of the at-scale panels
    preset: PresetField = "gpt3-175b"
    # s, sequence length at scale (GPT-3's)
    seq: SeqField = 2048
    # b at scale
    micro_batch: MicroBatchField = 1
    # sustained bf16 matmul rate (PTD-P: 163 on A100)
    gpu_tflops: GpuTflopsField = 160.0

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
                raise Invalid(name, f"tp ({t}) must divide {name} ({value}): {what[name]}"
                                    f"{suggest(self, name, multiples_near(value, t))}")
        if self.block == "attention" and self.hidden % self.heads:
            raise Invalid("hidden", f"heads ({self.heads}) must divide hidden ({self.hidden}): "
                                    f"each head gets hidden/heads dimensions"
                                    f"{suggest(self, 'hidden', multiples_near(self.hidden, self.heads))}")
        if self.sequence_parallel and self.tokens % t:
            raise Invalid("tokens", f"with sequence_parallel, tp ({t}) must divide tokens "
                                    f"({self.tokens}): each rank holds tokens/tp of them"
                                    f"{suggest(self, 'tokens', multiples_near(self.tokens, t))}")
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
