"""The parameters of the zero scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from pydantic import model_validator

from app.params import (
    AlphaUs,
    CpuMemGBs,
    Dp,
    GpusPerNode,
    GpuTflops,
    InterNodeGBs,
    IntraNodeGBs,
    Invalid,
    MicroBatch,
    MlpLayers,
    MlpWidth,
    NvmeGBs,
    Offload,
    ParamCount,
    PcieGBs,
    SceneParams,
    Seed,
    Seq,
    TrainSteps,
    ZeroStage,
)
from app.sim.data_parallel.training import too_much
from app.sim.tiny_mlp import TinyMLP


class ZeroParams(SceneParams):
    stage: ZeroStage = 2                      # 0 DDP, 1 shard optimizer states, 2 + gradients, 3 + parameters
    dp: Dp = 4                                # data-parallel ranks N_d
    steps: TrainSteps = 3                     # training steps of the tiny model (the last is drawn)
    seed: Seed = 0                            # seed of its initial parameters and data
    mlp_layers: MlpLayers = 2                 # the tiny MLP: layers (one ZeRO-3 / FSDP unit each)
    mlp_width: MlpWidth = 2                   # the tiny MLP: width (width² + width parameters a layer)
    micro_batch: MicroBatch = 2               # samples per rank and step (sequences, for the real model)
    param_count: ParamCount = 7_500_000_000   # Ψ of the real model (ZeRO paper's 7.5 B example)
    seq: Seq = 2048                           # tokens per sequence of the real model
    offload: Offload = "none"                 # none, cpu (ZeRO-Offload) or nvme (ZeRO-Infinity)
    gpu_tflops: GpuTflops = 150.0             # achieved per GPU (A100: ~50 % of 312)
    pcie_gbs: PcieGBs = 25.0                  # host ↔ GPU (PCIe 4.0 x16 ≈ 25 GB/s in practice)
    nvme_gbs: NvmeGBs = 3.5                   # NVMe ↔ host per GPU (one PCIe 4.0 drive)
    cpu_mem_gbs: CpuMemGBs = 50.0             # host memory bandwidth one GPU's process gets
    alpha_us: AlphaUs = 5.0                   # α: latency of one message
    intra_node_gbs: IntraNodeGBs = 300.0      # NVLink inside a node
    inter_node_gbs: InterNodeGBs = 50.0       # InfiniBand between nodes (400 Gb/s)
    gpus_per_node: GpusPerNode = 8            # ranks per node

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
