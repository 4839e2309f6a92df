"""The parameters of the zero scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Annotated

from pydantic import model_validator

from app.param_groups import GpuTflopsField, MicroBatchField, NetworkGroup, SeqField
from app.params import (
    Control,
    CpuMemGBs,
    Dp,
    Invalid,
    MlpLayers,
    MlpWidth,
    NvmeGBs,
    Offload,
    ParamCount,
    PcieGBs,
    Seed,
    TrainSteps,
    ZeroStage,
)
from app.sim.data_parallel.training import too_much
from app.sim.tiny_mlp import TinyMLP


class ZeroParams(NetworkGroup):
    """The stage and its ranks, the tiny MLP trained for real, the real model timed (Ψ, seq,
    micro_batch, the GPU's throughput), offload and the network group."""

    # 0 DDP, 1 shard optimizer states, 2 + gradients, 3 + parameters
    stage: Annotated[ZeroStage, Control(
        "ZeRO stage", kind="choice",
        options={0: "0 · DDP", 1: "1 · P_os", 2: "2 · P_os+g", 3: "3 · P_os+g+p"},
        help="Stage 1 shards the optimizer states, 2 also the gradients, 3 also the parameters.")] = 2
    # data-parallel ranks N_d
    dp: Annotated[Dp, Control(
        "Data-parallel ranks", help="N_d. The API accepts up to 1024.", bounds=(1, 64))] = 4
    # training steps of the tiny model (the last is drawn)
    steps: Annotated[TrainSteps, Control(
        "Training steps",
        help="The tiny model trains this many steps; the last one is drawn.")] = 3
    # seed of its initial parameters and data
    seed: Annotated[Seed, Control("Seed", help="Initial parameters and data.", kind="number")] = 0
    # the tiny MLP: layers (one ZeRO-3 / FSDP unit each)
    mlp_layers: Annotated[MlpLayers, Control("Layers", help="One ZeRO-3 / FSDP unit each.")] = 2
    # the tiny MLP: width (width² + width parameters a layer)
    mlp_width: Annotated[MlpWidth, Control(
        "Width", help="width² + width parameters per layer.")] = 2
    # samples per rank and step (sequences, for the real model)
    micro_batch: MicroBatchField = 2
    # Ψ of the real model (ZeRO paper's 7.5 B example)
    param_count: Annotated[ParamCount, Control("Parameters Ψ", kind="choice", widget="select")] = 7_500_000_000
    # tokens per sequence of the real model
    seq: SeqField = 2048
    # none, cpu (ZeRO-Offload) or nvme (ZeRO-Infinity)
    offload: Annotated[Offload, Control(
        "Offload", kind="choice",
        options={"none": "none", "cpu": "CPU (ZeRO-Offload)", "nvme": "NVMe (ZeRO-Infinity)"},
        help="DeepSpeed offloads to the CPU from stage 1, to NVMe at stage 3 only.")] = "none"
    # achieved per GPU (A100: ~50 % of 312)
    gpu_tflops: GpuTflopsField = 150.0
    # host ↔ GPU (PCIe 4.0 x16 ≈ 25 GB/s in practice)
    pcie_gbs: Annotated[PcieGBs, Control(
        "PCIe", help="Host ↔ GPU, per GPU.", unit="GB/s", bounds=(1, 64))] = 25.0
    # NVMe ↔ host per GPU (one PCIe 4.0 drive)
    nvme_gbs: Annotated[NvmeGBs, Control(
        "NVMe", help="Drive ↔ host, per GPU.", unit="GB/s", bounds=(0.5, 50), step=0.5)] = 3.5
    # host memory bandwidth one GPU's process gets
    cpu_mem_gbs: Annotated[CpuMemGBs, Control(
        "Host memory", help="What one GPU's CPU Adam gets.", unit="GB/s", bounds=(5, 400),
        step=5)] = 50.0

    @model_validator(mode="after")
    def _consistent(self) -> ZeroParams:
        if self.offload == "cpu" and self.stage == 0:
            raise Invalid("offload", "offload cpu (ZeRO-Offload) needs stage 1, 2 or 3: DeepSpeed "
                                     "offloads the optimizer states ZeRO partitions (stage is 0)")
        if self.offload == "nvme" and self.stage != 3:
            raise Invalid("offload", f"offload nvme (ZeRO-Infinity) needs stage 3, as in "
                                     f"DeepSpeed (stage is {self.stage}); use offload cpu")
        problem = too_much(TinyMLP(self.mlp_layers, self.mlp_width), self.dp, self.micro_batch,
                           self.steps)
        if problem:
            raise Invalid(*problem)
        return self
