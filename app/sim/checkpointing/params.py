"""The parameters of the checkpointing scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from app.param_groups import GpuTflopsField, MicroBatchField, ModelShapeGroup, PresetField
from app.params import Control, Dp, GradAccum, Invalid, Recompute, Renamed, Tp

RENAMED = Renamed({"achieved_tflops": "gpu_tflops"})
"""The GPU's throughput was ``achieved_tflops`` here before the parameter groups; every other
scene calls it ``gpu_tflops``."""

RecomputeLayers = Annotated[int, Field(ge=1, le=512, description="layers per checkpointed "
                                                                 "segment (k)")]


class CheckpointParams(ModelShapeGroup):
    """The model shape group (preset, its sizes, seq, micro_batch), the recompute strategy, the
    batch and the GPU's throughput."""

    renamed: ClassVar[Renamed] = RENAMED

    # model shape; the sizes override it (GPT-2: small enough to see every layer)
    preset: PresetField = "gpt2"
    # b: sequences per micro-batch
    micro_batch: MicroBatchField = 4
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
    # achieved per GPU (≈ 40% of an H100's 989 dense BF16)
    gpu_tflops: GpuTflopsField = 400.0

    @model_validator(mode="after")
    def _consistent(self) -> CheckpointParams:
        m = self.shape()
        if m.heads % self.tp:
            raise Invalid("tp", f"tp ({self.tp}) must divide heads ({m.heads})")
        if m.kv_heads % self.tp:
            raise Invalid("tp", f"tp ({self.tp}) must divide kv_heads ({m.kv_heads}): each "
                                f"GPU holds whole key/value heads")
        if self.recompute == "full" and self.recompute_layers > m.layers:
            raise Invalid("recompute_layers", f"recompute_layers ({self.recompute_layers}) "
                                              f"must be at most layers ({m.layers})")
        return self
