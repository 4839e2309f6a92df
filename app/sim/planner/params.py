"""The parameters of ``/planner`` (chapter 11): a model, a cluster, a batch, optional pins."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Literal

from pydantic import Field, model_validator

from app.catalog.models import PRESETS
from app.param_groups import (GpuField, GpusPerNodeField, InfinibandField, NvlinkField, SeqField,
                              ShapeSizes, shape_problem)
from app.params import AlphaUs, Control, Invalid, MicroBatch, Pp, Recompute, Tp, ZeroStage
from app.sim.moe.presets import PRESETS as MOE_PRESETS
from app.sim.planner.cost import Cluster
from app.sim.planner.hardware import GPU_SPECS
from app.sim.planner.model import PlanModel, from_moe, from_shape
from app.sim.planner.search import Pins

PlannerPreset = Literal[tuple(PRESETS) + tuple(MOE_PRESETS)]
Gpus = Annotated[int, Field(ge=1, le=16384, description="GPUs in the cluster (the world)")]
GlobalBatch = Annotated[int, Field(ge=1, le=65536, description="sequences per training step")]
Cp = Annotated[int, Field(ge=1, le=64, description="context-parallel size")]
Ep = Annotated[int, Field(ge=1, le=256, description="expert-parallel size")]


class PlannerParams(ShapeSizes):
    """The model shape group's sizes (ShapeSizes; no micro_batch: here it is a pin of the
    search) over a dense or MoE preset, the GPU, the network group's links (with a latency per link), the batch
    and the optional pins."""

    # a dense or MoE preset; shape fields override dense ones (its own field: the other scenes'
    # presets are the dense ones of app.catalog.models)
    preset: Annotated[PlannerPreset, Control(
        "Model", kind="choice", widget="select",
        help="A dense preset (its sizes below override it) or an MoE one.")] = "llama3-70b"
    # tokens per sequence
    seq: SeqField = 8192
    # the world
    gpus: Annotated[Gpus, Control("GPUs", kind="number")] = 512
    # GPU type: memory and dense BF16 peak
    gpu: GpuField = "h100-80"
    # one NVLink domain
    gpus_per_node: GpusPerNodeField = 8
    # sequences per step
    global_batch: Annotated[GlobalBatch, Control("Global batch (sequences)", kind="number")] = 1024
    # NVLink per GPU, one direction (H100 450 GB/s; the H800's is 200, A100's 300)
    intra_node_gbs: NvlinkField = 450.0
    # InfiniBand per GPU (400 Gb/s ≈ 50 GB/s)
    inter_node_gbs: InfinibandField = 50.0
    intra_alpha_us: AlphaUs = 5.0          # NVLink latency per message
    inter_alpha_us: AlphaUs = 10.0         # InfiniBand latency per message
    # optional pins: restrict the search
    tp: Annotated[Tp | None, Control("tp", kind="number",
        help="Pin tensor parallelism (empty: search).")] = None
    pp: Annotated[Pp | None, Control("pp", kind="number",
        help="Pin pipeline stages (empty: search).")] = None
    dp: Annotated[int | None, Field(ge=1, le=16384, description="data-parallel size"),
                  Control("dp", kind="number", help="Pin data parallelism (empty: search).")] = None
    cp: Annotated[Cp | None, Control("cp", kind="number",
        help="Pin context parallelism (empty: search).")] = None
    ep: Annotated[Ep | None, Control("ep", kind="number",
        help="Pin expert parallelism (empty: search).")] = None
    zero: Annotated[ZeroStage | None, Control("zero", kind="number",
        help="Pin the ZeRO stage (empty: search).")] = None
    micro_batch: Annotated[MicroBatch | None, Control("micro_batch", kind="number",
                                                      help="Pin the micro-batch (empty: search).")] = None
    recompute: Annotated[Recompute | None, Control(
        "recompute", kind="choice", widget="select",
        options={None: "any", "none": "none", "selective": "selective", "full": "full"})] = None
    # pin the pipeline schedule (DualPipe: DeepSeek-V3's, two chunks a rank, both directions)
    schedule: Annotated[Literal["1f1b", "interleaved_1f1b", "dualpipe"] | None, Control(
        "schedule", kind="choice", widget="select",
        options={None: "any", "1f1b": "1F1B", "interleaved_1f1b": "interleaved 1F1B",
                 "dualpipe": "DualPipe"},
        help="DualPipe is searched for MoE models, or when pinned here.")] = None
    chunks: Annotated[int | None, Field(ge=1, le=8, description="model chunks per rank v")] = None
    # how attention runs: flash (FlashAttention, 2022 on) or materialized (scores through HBM,
    # as Megatron-LM ran it in 2021, PTD-P's runs)
    attention: Annotated[Literal["flash", "materialized"], Control(
        "Attention", kind="choice", widget="select",
        options={"flash": "FlashAttention", "materialized": "scores through HBM (2021)"})] = "flash"
    # gradient reduction overlapped with backward (DDP, FSDP, Megatron-LM since 2023) or after it
    grad_overlap: Annotated[bool, Control(
        "Gradient reduction", kind="choice", widget="select",
        options={True: "overlapped with backward", False: "after the backward (2021)"})] = True
    # element type of the matmuls: bf16, or fp8 as DeepSeek-V3 (FP8 peak, attention stays bf16)
    gemm_dtype: Annotated[Literal["bf16", "fp8"], Control(
        "Matmuls", kind="choice", widget="select",
        options={"bf16": "BF16", "fp8": "FP8 (H100, H800, H200, MI300X)"})] = "bf16"
    # MoE: each token to at most this many nodes (DeepSeek-V3's node-limited routing: 4)
    node_limit: Annotated[int | None, Field(ge=1, le=2048,
                                            description="nodes a token may be routed to"),
                          Control("Nodes a token may reach (MoE)", kind="number",
                                  help="DeepSeek-V3 routes to at most 4. Empty: any.")] = None

    @model_validator(mode="after")
    def _consistent(self) -> PlannerParams:
        if self.preset in MOE_PRESETS:
            for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
                if getattr(self, name) is not None:
                    raise Invalid(name, f"{name} overrides apply to dense presets only "
                                        f"({self.preset} is an MoE preset)")
        elif self.heads is not None or self.kv_heads is not None or self.hidden is not None:
            problem = shape_problem(self, self.shape())
            if problem is not None:
                raise problem
        if self.ep not in (None, 1) and self.preset not in MOE_PRESETS:
            raise Invalid("ep", f"ep ({self.ep}) needs an MoE preset: {self.preset} is dense")
        if self.node_limit is not None and self.preset not in MOE_PRESETS:
            raise Invalid("node_limit", f"node_limit ({self.node_limit}) routes MoE tokens: "
                                        f"{self.preset} is dense")
        if self.gemm_dtype == "fp8" and not GPU_SPECS[self.gpu].fp8_tflops:
            raise Invalid("gemm_dtype", f"gemm_dtype fp8 needs FP8 tensor cores: the "
                                        f"{GPU_SPECS[self.gpu].name} has none (H100, H800, H200 "
                                        f"and MI300X do)")
        return self

    def plan_model(self) -> PlanModel:
        if self.preset in MOE_PRESETS:
            model = from_moe(self.preset, MOE_PRESETS[self.preset], self.seq)
        else:
            model = from_shape(self.shape())
        return replace(model, attention=self.attention)

    def cluster(self) -> Cluster:
        gpu = GPU_SPECS[self.gpu]
        return Cluster(gpu, self.gpus, self.gpus_per_node, self.intra_node_gbs,
                       self.inter_node_gbs, self.intra_alpha_us, self.inter_alpha_us,
                       grad_overlap=self.grad_overlap, gemm_dtype=self.gemm_dtype,
                       node_limit=self.node_limit)

    def pins(self) -> Pins:
        return Pins(self.tp, self.pp, self.dp, self.cp, self.ep, self.zero, self.micro_batch,
                    self.recompute, self.schedule, self.chunks)
