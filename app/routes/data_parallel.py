"""Chapter 4, data parallelism: ``/data-parallel`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Literal

from markupsafe import Markup
from pydantic import model_validator

from app.params import (AlphaUs, BucketMb, Dp, Dtype, GpuTflops, GpusPerNode, InterNodeGBs,
                        IntraNodeGBs, Invalid, MicroBatch, MlpLayers, MlpWidth, ModelPreset,
                        SceneParams, Seed, TrainSteps)
from app.scene import Scene, trace_of
from app.sim.data_parallel import simulate
from app.sim.dp_training import too_much
from app.sim.models import PRESETS
from app.sim.tiny_mlp import TinyMLP
from app.templating import deck_style
from app.verify.data_parallel import CHECK
from app.views import data_parallel as view
from app.views import data_parallel_svg

FIRST_SCRIPT = (Path(__file__).resolve().parents[2] / "workers" / "first_ddp.py").read_text()
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


@lru_cache(maxsize=64)
def deck_svg(p: DataParallelParams, frame: int) -> Markup:
    """The page's deck, showing ``frame`` first (cached: a deck is a pure function of params)."""
    deck = view.build_deck(trace_of(SCENE, p))
    return data_parallel_svg.render(deck, frame)


def page_view(p: DataParallelParams, trace, frame: int) -> dict:
    return {"deck_svg": deck_svg(p, frame), "deck_title": view.deck_title(p, trace),
            **view.panels(trace), "torchrun": torchrun_command(p),
            "first_script": FIRST_SCRIPT, "launch": launch_commands(trace.torchrun()),
            "model_params": PRESETS[p.preset].param_count()}


def form_view() -> dict:
    return {"presets": [(name, f"{name} ({m.param_count() / 1e9:.3g} B)")
                        for name, m in PRESETS.items()]}


def export_view(p: DataParallelParams, trace, frame: int) -> dict:
    caption = tuple(textwrap.wrap(trace.frames[frame].caption, 128)[:3])
    return {"deck_svg": data_parallel_svg.render(view.build_deck(trace, upto=frame), frame,
                                                 standalone=True, caption=caption,
                                                 style=deck_style(standalone=True))}


def launch_commands(info: dict) -> list[str]:
    """The torchrun line each node runs for the first DDP script."""
    if info["nodes"] == 1:
        return [f"torchrun --standalone --nproc-per-node {info['nproc_per_node']} "
                f"workers/first_ddp.py"]
    shown = [0, 1, info["nodes"] - 1] if info["nodes"] > 3 else range(info["nodes"])
    return [f"# node {n}: torchrun --nnodes {info['nodes']} --nproc-per-node "
            f"{info['nproc_per_node']} --node-rank {n} --master-addr $HEAD --master-port 29500 "
            f"workers/first_ddp.py" for n in sorted(set(shown))]


def torchrun_command(p: DataParallelParams) -> str:
    return (f"torchrun --standalone --nproc-per-node {p.dp} workers/zero.py "
            f"{' '.join(CHECK.args(p))} --out report.json")


SCENE = Scene(
    slug="data-parallel",
    title="Data parallelism: DP, DDP and FSDP",
    chapter=4,
    summary="Three generations on one model: DataParallel's GPU 0 bottleneck, DDP's bucketed "
            "all-reduce hiding behind backward, FSDP's per-layer gathers with prefetch; the "
            "first DDP script and what torchrun's RANK, LOCAL_RANK and WORLD_SIZE mean.",
    params=DataParallelParams,
    simulate=simulate,
    template="scenes/data_parallel.html",
    view=page_view,
    form=form_view,
    svg_template="scenes/data_parallel.svg",
    export=export_view,
    verify=CHECK,
    key_slider="bucket_mb",
    preview="frame=8",
)


