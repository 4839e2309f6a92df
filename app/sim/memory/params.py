"""The parameters of the memory scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from pydantic import field_validator, model_validator

from app.params import (
    GPU_TEXTS,
    Control,
    divisors_near,
    suggest,
    Dp,
    Ffn,
    GpuModel,
    Heads,
    Hidden,
    Invalid,
    KvHeads,
    Layers,
    MicroBatch,
    ModelPreset,
    Optimizer,
    ParamCount,
    Pp,
    Precision,
    Recompute,
    SceneParams,
    Seq,
    Tp,
    Vocab,
    ZeroStage,
)
from app.sim.memory.ledger import MemoryConfig
from app.catalog.models import PRESETS, ModelShape

SHAPE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq")


class MemoryParams(SceneParams):
    # a published model; the shape fields override it
    preset: Annotated[ModelPreset, Control(
        "Model", kind="choice", widget="select",
        options={"gpt2": "GPT-2 124M", "gpt3-175b": "GPT-3 175B", "llama3-8b": "Llama-3 8B",
                 "llama3-70b": "Llama-3 70B", "llama3-405b": "Llama-3 405B"},
        help="GPT: LayerNorm, GeLU, dropout, tied embeddings. Llama 3: RMSNorm, SwiGLU, "
             "grouped-query attention, untied embeddings, no dropout.")] = "llama3-8b"
    # transformer layers L (empty: the preset's)
    layers: Annotated[Layers | None, Control("Layers L", kind="number")] = None
    # hidden size h (empty: the preset's)
    hidden: Annotated[Hidden | None, Control("Hidden h", kind="number")] = None
    # attention heads a (empty: the preset's)
    heads: Annotated[Heads | None, Control("Attention heads a", kind="number")] = None
    # key/value heads (empty: the preset's; GPT: = heads)
    kv_heads: Annotated[KvHeads | None, Control(
        "Key/value heads", help="Fewer than a: grouped-query attention.", kind="number")] = None
    # MLP inner size (empty: hidden × the preset's ratio)
    ffn: Annotated[Ffn | None, Control("MLP size", kind="number")] = None
    # vocabulary V (empty: the preset's)
    vocab: Annotated[Vocab | None, Control("Vocabulary V", kind="number")] = None
    # sequence length s (empty: the preset's)
    seq: Annotated[Seq | None, Control("Sequence s", kind="number")] = None
    # Ψ for the model states (empty: from the shape)
    param_count: Annotated[ParamCount | None, Control(
        "Parameters Ψ",
        help="Overrides the count from the shape for the model states (e.g. 7500000000 "
             "for the ZeRO paper's 7.5B).",
        kind="number")] = None
    # sequences per micro-batch b
    micro_batch: Annotated[MicroBatch, Control(
        "Micro-batch b", help="Sequences per forward pass; activations grow with it.",
        bounds=(1, 64))] = 1
    # data-parallel size N_d
    dp: Annotated[Dp, Control("Data parallel N_d", kind="choice", widget="select",
                           options=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))] = 8
    # tensor-parallel size t
    tp: Annotated[Tp, Control("Tensor parallel t", kind="choice", widget="select",
                           options=(1, 2, 4, 8, 16, 32, 64),
                           help="Must divide the heads, key/value heads and MLP size.")] = 1
    # pipeline stages p
    pp: Annotated[Pp, Control(
        "Pipeline stages p", help="Must divide the layers.", kind="number")] = 1
    # ZeRO stage: 1 optimizer, 2 + gradients, 3 + params
    zero: Annotated[ZeroStage, Control(
        "ZeRO stage", kind="choice", options=(0, 1, 2, 3),
        help="1 shards optimizer states over N_d, 2 also gradients, 3 also parameters.")] = 2
    # split norms and dropouts along s over the TP group
    sequence_parallel: Annotated[bool, Control(
        "Sequence parallelism", kind="flag",
        help="Splits norms and dropouts along s over the t GPUs.")] = False
    # activation recomputation (Korthikanti 2022)
    recompute: Annotated[Recompute, Control("Recompute", kind="choice")] = "selective"
    # what the optimizer keeps per parameter
    optimizer: Annotated[Optimizer, Control(
        "Optimizer", kind="choice", widget="select",
        options={"sgd": "SGD", "momentum": "SGD with momentum", "adam": "Adam", "adamw": "AdamW",
                 "adafactor": "Adafactor", "adam8bit": "8-bit Adam"})] = "adamw"
    # mixed: 16-bit params/grads/activations, fp32 master
    precision: Annotated[Precision, Control("Precision", kind="choice",
                                         options={"mixed": "mixed (bf16 + fp32 master)", "fp32": "fp32"})] = "mixed"
    # the GPU to fit on
    gpu: Annotated[GpuModel, Control("GPU", kind="choice", widget="select", options=GPU_TEXTS)] = "h100-80"

    @field_validator(*SHAPE_FIELDS, "param_count", mode="before")
    @classmethod
    def _blank_is_preset(cls, value):
        return None if isinstance(value, str) and value.strip() == "" else value

    def shape(self) -> ModelShape:
        """The preset with the explicit fields laid over it (see :func:`resolve`)."""
        return resolve(self.preset, tuple(getattr(self, f) for f in SHAPE_FIELDS))

    def config(self) -> MemoryConfig:
        return MemoryConfig(self.shape(), self.micro_batch, self.dp, self.tp, self.pp, self.zero,
                            self.sequence_parallel, self.recompute, self.optimizer,
                            self.precision, self.gpu, self.param_count)

    @model_validator(mode="after")
    def _consistent(self) -> MemoryParams:
        m = self.shape()
        if m.kv_heads > m.heads:
            raise Invalid("kv_heads", f"kv_heads ({m.kv_heads}) must not exceed heads "
                                      f"({m.heads})")
        if m.heads % m.kv_heads:
            raise Invalid("kv_heads", f"kv_heads ({m.kv_heads}) must divide heads ({m.heads}): "
                                      f"each key/value head serves a whole group of query heads")
        if m.hidden % m.heads:
            raise Invalid("heads", f"heads ({m.heads}) must divide hidden ({m.hidden})"
                                   f"{suggest(self, 'heads', divisors_near(m.hidden, m.heads))}")
        for name, value in (("heads", m.heads), ("kv_heads", m.kv_heads), ("ffn", m.ffn)):
            if value % self.tp:
                raise Invalid("tp", f"tp ({self.tp}) must divide {name} ({value})"
                                    f"{suggest(self, 'tp', divisors_near(value, self.tp))}")
        if m.layers % self.pp:
            raise Invalid("pp", f"pp ({self.pp}) must divide layers ({m.layers})"
                                f"{suggest(self, 'pp', divisors_near(m.layers, self.pp))}")
        if self.sequence_parallel and m.seq % self.tp:
            raise Invalid("seq", f"seq ({m.seq}) must be divisible by tp ({self.tp}) with "
                                 f"sequence parallelism")
        return self


@lru_cache(maxsize=256)
def resolve(preset: str, values: tuple[int | None, ...]) -> ModelShape:
    """A preset's shape with explicit values laid over it. A field left empty takes the
    preset's value, except that ffn follows hidden by the preset's ratio (GPT 4h; Llama rounded
    to a multiple of 128) and kv_heads keeps the preset's grouping when it still divides heads
    (GPT: kv_heads = heads)."""
    base = PRESETS[preset]
    layers, hidden, heads, kv_heads, ffn, vocab, seq = values
    hidden = hidden or base.hidden
    heads = heads or base.heads
    if ffn is None:
        ffn = (4 * hidden if base.family == "gpt"
               else max(128, round(base.ffn / base.hidden * hidden / 128) * 128))
    if kv_heads is None:
        kv_heads = base.kv_heads if base.family == "llama" and heads % base.kv_heads == 0 \
            else heads
    return ModelShape(base.name, base.family, layers or base.layers, hidden, heads, kv_heads,
                      ffn, vocab or base.vocab, seq or base.seq)
