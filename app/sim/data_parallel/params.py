"""The parameters of the data parallel scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from app.params import (
    AlphaUs,
    BucketMb,
    Dp,
    Dtype,
    GpusPerNode,
    GpuTflops,
    InterNodeGBs,
    IntraNodeGBs,
    Invalid,
    MicroBatch,
    MlpLayers,
    MlpWidth,
    ModelPreset,
    SceneParams,
    Seed,
    TrainSteps,
)
from app.sim.data_parallel.training import too_much
from app.sim.tiny_mlp import TinyMLP

Mode = Literal["dp", "ddp", "fsdp"]


class DataParallelParams(SceneParams):
    mode: Mode = "ddp"                        # dp (nn.DataParallel), ddp, or fsdp (ZeRO-3)
    dp: Dp = 4                                # data-parallel ranks (GPUs)
    bucket_mb: BucketMb = 25.0                # DDP's bucket_cap_mb (its default: 25 MiB)
    prefetch: bool = True                     # FSDP: gather the next layer while this one computes
    preset: ModelPreset = "gpt2"                 # the real model whose step is timed
    micro_batch: MicroBatch = 4               # sequences per GPU per step (samples, for the tiny model)
    dtype: Dtype = "fp32"                     # parameters and gradients on the wire
    gpu_tflops: GpuTflops = 150.0             # achieved per GPU (A100: ~50 % of 312)
    alpha_us: AlphaUs = 5.0                   # α: latency of one message
    intra_node_gbs: IntraNodeGBs = 300.0      # NVLink inside a node
    inter_node_gbs: InterNodeGBs = 50.0       # InfiniBand between nodes (400 Gb/s)
    gpus_per_node: GpusPerNode = 8            # ranks per node (torchrun's --nproc-per-node)
    steps: TrainSteps = 3                     # training steps of the tiny model
    seed: Seed = 0                            # seed of its initial parameters and data
    mlp_layers: MlpLayers = 2                 # the tiny MLP: layers
    mlp_width: MlpWidth = 2                   # the tiny MLP: width

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
