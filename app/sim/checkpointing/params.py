"""The parameters of the checkpointing scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from app.params import (
    Control,
    Dp,
    Ffn,
    GradAccum,
    Heads,
    Hidden,
    Invalid,
    KvHeads,
    Layers,
    MicroBatch,
    ModelPreset,
    Recompute,
    SceneParams,
    Seq,
    Tp,
    Vocab,
)
from app.sim.checkpointing.simulate import model_of

RecomputeLayers = Annotated[int, Field(ge=1, le=512, description="layers per checkpointed "
                                                                 "segment (k)")]
Tflops = Annotated[float, Field(ge=1, le=10000, description="achieved TFLOP/s per GPU")]
SIZES = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq")


class CheckpointParams(SceneParams):
    # model shape; the sizes below override it
    preset: Annotated[ModelPreset, Control("Model", kind="choice", widget="select")] = "gpt2"
    # L (default: the preset's)
    layers: Annotated[Layers | None, Control("Layers L", kind="number")] = None
    # h
    hidden: Annotated[Hidden | None, Control("Hidden h", kind="number")] = None
    # a
    heads: Annotated[Heads | None, Control("Heads a", kind="number")] = None
    # grouped-query attention (default: the preset's)
    kv_heads: Annotated[KvHeads | None, Control("KV heads", kind="number")] = None
    # MLP width (default: 4h, or the preset's ratio)
    ffn: Annotated[Ffn | None, Control("MLP width", kind="number")] = None
    # V
    vocab: Annotated[Vocab | None, Control("Vocabulary V", kind="number")] = None
    # s (default: the preset's context)
    seq: Annotated[Seq | None, Control("Sequence s", kind="number")] = None
    # b: sequences per micro-batch
    micro_batch: Annotated[MicroBatch, Control(
        "Micro-batch b", help="Sequences per forward/backward pass.", bounds=(1, 64))] = 4
    # tensor-parallel size t
    tp: Annotated[Tp, Control("Tensor parallel t", kind="choice", widget="select",
                           options=(1, 2, 4, 8, 16, 32, 64))] = 1
    # split LayerNorm/dropout activations over t too
    sequence_parallel: Annotated[bool, Control("Sequence parallelism", kind="choice", options={False: "off", True: "on"})] = False
    # none, selective, or full
    recompute: Annotated[Recompute, Control(
        "Recompute", kind="choice",
        help="Selective recomputes the attention scores only (Korthikanti et al. 2022); full "
             "recomputes whole layers from checkpoints.")] = "full"
    # k: full recompute checkpoints every k-th layer (the slider: up to 48 or the model's layers)
    recompute_layers: Annotated[RecomputeLayers, Control(
        "Checkpoint every k layers",
        help="k = 1: every layer's input (full recompute); k > 1: one checkpoint per k "
             "layers (Megatron's uniform method).",
        bounds=(1, 48))] = 1
    # micro-batches per optimizer step
    grad_accum: Annotated[GradAccum, Control(
        "Accumulation steps", help="Micro-batches per optimizer step.", bounds=(1, 64))] = 8
    # data-parallel replicas
    dp: Annotated[Dp, Control("Data-parallel replicas", kind="choice", widget="select",
                           options=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))] = 8
    # per GPU (≈ 40% of an H100's 989 dense BF16)
    achieved_tflops: Annotated[Tflops, Control(
        "Achieved TFLOP/s per GPU",
        help="An H100 does 989 dense BF16 TFLOP/s at best; 40% of that is good.",
        bounds=(10, 2000), step=10)] = 400.0

    @field_validator(*SIZES, mode="before")
    @classmethod
    def _blank_is_preset(cls, value):
        return None if value == "" else value

    @model_validator(mode="after")
    def _consistent(self) -> CheckpointParams:
        m = model_of(self)
        if m.kv_heads > m.heads:
            raise Invalid("kv_heads", f"kv_heads ({m.kv_heads}) must be at most heads "
                                      f"({m.heads})")
        if m.heads % m.kv_heads:
            raise Invalid("kv_heads", f"kv_heads ({m.kv_heads}) must divide heads ({m.heads})")
        if m.hidden % m.heads:
            raise Invalid("hidden", f"hidden ({m.hidden}) must be divisible by heads "
                                    f"({m.heads})")
        if m.heads % self.tp:
            raise Invalid("tp", f"tp ({self.tp}) must divide heads ({m.heads})")
        if m.kv_heads % self.tp:
            raise Invalid("tp", f"tp ({self.tp}) must divide kv_heads ({m.kv_heads}): each "
                                f"GPU holds whole key/value heads")
        if self.recompute == "full" and self.recompute_layers > m.layers:
            raise Invalid("recompute_layers", f"recompute_layers ({self.recompute_layers}) "
                                              f"must be at most layers ({m.layers})")
        return self
