"""Chapter 5, ZeRO: ``/zero`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

import textwrap
from functools import lru_cache

from markupsafe import Markup
from pydantic import model_validator

from app.params import (AlphaUs, CpuMemGBs, Dp, GpuTflops, GpusPerNode, InterNodeGBs,
                        IntraNodeGBs, Invalid, MicroBatch, MlpLayers, MlpWidth, NvmeGBs, Offload,
                        ParamCount, PcieGBs, SceneParams, Seed, Seq, TrainSteps, ZeroStage)
from app.scene import Scene, trace_of
from app.sim.dp_training import too_much
from app.sim.tiny_mlp import TinyMLP
from app.sim.zero import simulate
from app.templating import deck_style
from app.verify.zero import CHECK
from app.views import zero as view
from app.views import zero_svg
from app.views.zero_panels import PARAM_COUNTS, panels

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


@lru_cache(maxsize=64)
def deck_svg(p: ZeroParams, frame: int) -> Markup:
    """The page's deck, showing ``frame`` first (cached: a deck is a pure function of params)."""
    return zero_svg.render(view.build_deck(trace_of(SCENE, p)), frame)


def page_view(p: ZeroParams, trace, frame: int) -> dict:
    return {"deck_svg": deck_svg(p, frame), "deck_title": view.deck_title(p, trace),
            **panels(trace), "torchrun": torchrun_command(p)}


def form_view() -> dict:
    return {"param_counts": PARAM_COUNTS}


def export_view(p: ZeroParams, trace, frame: int) -> dict:
    caption = tuple(textwrap.wrap(trace.frames[frame].caption, 128)[:3])
    return {"deck_svg": zero_svg.render(view.build_deck(trace, upto=frame), frame,
                                        standalone=True, caption=caption,
                                        style=deck_style(standalone=True))}


def torchrun_command(p: ZeroParams) -> str:
    args = " ".join(CHECK.args(p))
    return (f"torchrun --standalone --nproc-per-node {p.dp} workers/zero.py {args} "
            f"--out report.json")


SCENE = Scene(
    slug="zero",
    title="ZeRO: sharding optimizer states, gradients and parameters",
    chapter=5,
    summary="ZeRO-1/2/3 on a tiny model trained for real: who holds which shard through one "
            "step, memory per GPU (ZeRO Table 1), 2Ψ vs 3Ψ of communication, ZeRO-Offload and "
            "ZeRO-Infinity with the link that bounds the step.",
    params=ZeroParams,
    simulate=simulate,
    template="scenes/zero.html",
    view=page_view,
    form=form_view,
    svg_template="scenes/zero.svg",
    export=export_view,
    verify=CHECK,
    key_slider="dp",
    preview="frame=5",
)
