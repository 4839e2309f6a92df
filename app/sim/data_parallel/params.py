"""The parameters of the data parallel scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from app.param_groups import GpuTflopsField, MicroBatchField, NetworkGroup, PresetField
from app.params import (
    DTYPE_TEXTS,
    BucketMb,
    Control,
    Dp,
    Dtype,
    Invalid,
    MlpLayers,
    MlpWidth,
    Seed,
    TrainSteps,
)
from app.sim.data_parallel.training import too_much
from app.sim.tiny_mlp import TinyMLP

Mode = Literal["dp", "ddp", "fsdp"]


class DataParallelParams(NetworkGroup):
    """The generation and its buckets, the real model timed (preset, micro_batch, the GPU's
    throughput, the network group) and the tiny MLP trained for real."""

    # dp (nn.DataParallel), ddp, or fsdp (ZeRO-3)
    mode: Annotated[Mode, Control("Generation", kind="choice",
                                options={"dp": "DP (DataParallel)", "ddp": "DDP", "fsdp": "FSDP"})] = "ddp"
    # data-parallel ranks (GPUs)
    dp: Annotated[Dp, Control(
        "GPUs (ranks)", help="DataParallel only drives the GPUs of one machine.",
        bounds=(1, 64))] = 4
    # DDP's bucket_cap_mb (its default: 25 MiB)
    bucket_mb: Annotated[BucketMb, Control(
        "Bucket size", help="DDP's bucket_cap_mb (default 25 MiB).", unit="MiB",
        kind="log2", bounds=(-2, 11), step=0.25)] = 25.0
    # pass bucket_cap_mb=25 to DDP: then the first bucket is 25 MiB too (off: at 25 MiB,
    # DDP(model) as is — bucket_cap_mb unset, a first bucket of 1 MiB, then 25 MiB)
    explicit_cap: Annotated[bool, Control(
        "At 25 MiB", kind="choice",
        options={False: "DDP(model): first bucket 1 MiB", True: "bucket_cap_mb=25"},
        help="DDP's default leaves bucket_cap_mb unset: a first bucket of 1 MiB, then 25 MiB. Any "
             "other size is passed as bucket_cap_mb, and then the first bucket is that size too.")] = False
    # FSDP: gather the next layer while this one computes
    prefetch: Annotated[bool, Control("Prefetch", kind="choice", options={True: "on", False: "off"},
                                     help="Gather the next layer while this one computes.")] = True
    # the real model whose step is timed
    preset: PresetField = "gpt2"
    # sequences per GPU per step (samples, for the tiny model)
    micro_batch: MicroBatchField = 4
    # parameters and gradients on the wire
    dtype: Annotated[Dtype, Control("Gradients", kind="choice", widget="select",
                                  options={k: DTYPE_TEXTS[k] for k in ("fp32", "bf16", "fp16")})] = "fp32"
    # achieved per GPU (A100: ~50 % of 312)
    gpu_tflops: GpuTflopsField = 150.0
    # training steps of the tiny model
    steps: Annotated[TrainSteps, Control("Training steps")] = 3
    # seed of its initial parameters and data
    seed: Annotated[Seed, Control("Seed", kind="number")] = 0
    # the tiny MLP: layers
    mlp_layers: Annotated[MlpLayers, Control("Layers")] = 2
    # the tiny MLP: width
    mlp_width: Annotated[MlpWidth, Control("Width")] = 2

    @property
    def bucket_cap_mb(self) -> float | None:
        """DDP's bucket_cap_mb: None where it is left unset (app.sim.data_parallel.buckets)."""
        from app.sim.data_parallel.buckets import cap_mb_of
        return cap_mb_of(self.bucket_mb, self.explicit_cap)

    @model_validator(mode="after")
    def _consistent(self) -> DataParallelParams:
        if self.mode == "dp" and self.dp > self.gpus_per_node:
            raise Invalid("dp", f"DataParallel drives the GPUs of one machine from one process: dp "
                                f"({self.dp}) must be at most gpus_per_node "
                                f"({self.gpus_per_node}); use ddp or fsdp across nodes")
        if self.dtype == "fp8":
            raise Invalid("dtype", "dtype must be fp32, bf16 or fp16 here: DDP and FSDP reduce "
                                   "gradients in the parameters' type, and no one trains fp8 "
                                   "parameters (got fp8)")
        problem = too_much(TinyMLP(self.mlp_layers, self.mlp_width), self.dp, self.micro_batch,
                           self.steps)
        if problem:
            raise Invalid(*problem)
        return self
