"""Chapter 6, tensor and sequence parallelism: ``/tensor-parallel`` and its embed, JSON, SVG and
real run."""

from __future__ import annotations

import textwrap
from functools import lru_cache
from typing import Literal

from markupsafe import Markup
from pydantic import model_validator

from app.params import (AlphaUs, Ffn, GpuTflops, GpusPerNode, Heads, Hidden, InterNodeGBs,
                        IntraNodeGBs, Invalid, MicroBatch, ModelPreset, SceneParams, Seed, Seq,
                        Tokens, Tp, Vocab, nearby_multiples)
from app.scene import Scene, trace_of
from app.sim.models import PRESETS
from app.sim.tensor_parallel import BLOCK_TITLES, simulate
from app.templating import LIGHT_COLOURS, PAGE_COLOURS, deck_style, render
from app.verify.tensor_parallel import CHECK
from app.views import tensor_parallel as view
from app.views import tp_panels, tp_svg

Block = Literal["column", "row", "mlp", "attention", "embedding"]

MAX_TP = 16
"""The deck draws one lane per rank; beyond 16 they would be too thin to read."""
MAX_MATRIX = 16384
"""Most numbers in any one matrix of the worked example: every accepted request stays under
half a second (the largest, 16 ranks each with a 128 × 128 partial sum, answers ~8 MB of JSON
in about 0.25 s)."""


class TensorParallelParams(SceneParams):
    block: Block = "column"                 # which Megatron-LM block runs on the ranks
    tp: Tp = 2                              # tensor-parallel size: ranks sharing the block
    tokens: Tokens = 4                      # rows of the activations (one short sequence)
    hidden: Hidden = 8                      # h: the model's width
    ffn: Ffn = 16                           # f: the MLP's inner size (4h in GPT)
    heads: Heads = 4                        # a: attention heads (attention block)
    vocab: Vocab = 16                       # V: vocabulary (embedding block)
    sequence_parallel: bool = False         # split LayerNorm/dropout regions along the sequence
    seed: Seed = 0                          # seed of the matrices
    preset: ModelPreset = "gpt3-175b"          # the real model of the at-scale panels
    seq: Seq = 2048                         # s, sequence length at scale (GPT-3's)
    micro_batch: MicroBatch = 1             # b at scale
    alpha_us: AlphaUs = 5.0                 # α: latency of one message
    intra_node_gbs: IntraNodeGBs = 300.0    # NVLink inside a node (A100 ≈ 300 GB/s)
    inter_node_gbs: InterNodeGBs = 50.0     # InfiniBand between nodes (400 Gb/s ≈ 50 GB/s)
    gpus_per_node: GpusPerNode = 8          # GPUs one NVLink domain holds
    gpu_tflops: GpuTflops = 160.0           # sustained bf16 matmul rate (PTD-P: 163 on A100)

    @model_validator(mode="after")
    def _consistent(self) -> TensorParallelParams:
        t = self.tp
        if t > MAX_TP:
            raise Invalid("tp", f"tp ({t}) is more ranks than this scene draws: use tp ≤ "
                                f"{MAX_TP} (one lane per rank)")
        uses = {"column": ("ffn",), "row": ("ffn",), "mlp": ("ffn",),
                "attention": ("heads",), "embedding": ("vocab",)}[self.block]
        what = {"ffn": "the MLP's inner size is cut into tp blocks",
                "heads": "each rank computes whole heads",
                "vocab": "each rank owns vocab/tp tokens of the vocabulary"}
        for name in uses:
            value = getattr(self, name)
            if value % t:
                raise Invalid(name, f"tp ({t}) must divide {name} ({value}): {what[name]} — "
                                    f"try {name} {nearby_multiples(value, t)}")
        if self.block == "attention" and self.hidden % self.heads:
            raise Invalid("hidden", f"heads ({self.heads}) must divide hidden ({self.hidden}): "
                                    f"each head gets hidden/heads dimensions — try hidden "
                                    f"{nearby_multiples(self.hidden, self.heads)}")
        if self.sequence_parallel and self.tokens % t:
            raise Invalid("tokens", f"with sequence_parallel, tp ({t}) must divide tokens "
                                    f"({self.tokens}): each rank holds tokens/tp of them — try "
                                    f"tokens {nearby_multiples(self.tokens, t)}")
        n, h, f, v = self.tokens, self.hidden, self.ffn, self.vocab
        sizes = {"column": (("tokens", n * h), ("ffn", h * f), ("ffn", n * f)),
                 "row": (("tokens", n * f), ("ffn", h * f)),
                 "mlp": (("tokens", n * h), ("ffn", h * f), ("ffn", n * f)),
                 "attention": (("tokens", n * h), ("hidden", 3 * h * h),
                               ("tokens", self.heads * n * n)),
                 "embedding": (("tokens", n * v), ("vocab", v * h), ("tokens", n * h))}
        for name, count in sizes[self.block]:
            if count > MAX_MATRIX:
                raise Invalid(name, f"{name} ({getattr(self, name)}) makes a matrix of "
                                    f"{count:,} numbers, more than this scene computes number "
                                    f"by number (at most {MAX_MATRIX:,}) — lower {name}")
        return self


@lru_cache(maxsize=4)
def tp_style(standalone: bool) -> Markup:
    colours = LIGHT_COLOURS if standalone else PAGE_COLOURS
    return Markup(deck_style(standalone) + render("_partials/tp_style.css", c=colours))


@lru_cache(maxsize=32)
def deck_of(p: TensorParallelParams):
    return view.build_deck(trace_of(SCENE, p))


@lru_cache(maxsize=64)
def deck_markup(p: TensorParallelParams, frame: int) -> Markup:
    """The page's deck as SVG markup, frame ``frame`` first; cached, so dragging a slider back
    to a value already seen costs nothing."""
    return tp_svg.render(deck_of(p), frame)


def page_view(p: TensorParallelParams, trace, frame: int) -> dict:
    return {"deck": deck_of(p), "deck_svg": deck_markup(p, frame),
            "block_title": BLOCK_TITLES[p.block],
            "torchrun": torchrun_command(p), **tp_panels.panels(p, trace)}


def form_view() -> dict:
    return {"style": tp_style(False), "presets": [(name, f"{name} (h {m.hidden}, {m.heads} heads)")
                        for name, m in PRESETS.items()],
            "seqs": [(s, f"{s:,}") for s in (512, 1024, 2048, 4096, 8192, 16384, 32768)]}


def export_view(p: TensorParallelParams, trace, frame: int) -> dict:
    return {"deck_svg": tp_svg.render(
        view.build_deck(trace, only=frame), frame, standalone=True, style=tp_style(True),
        caption=tuple(textwrap.wrap(trace.frames[frame].caption, 128)[:3]))}


def torchrun_command(p: TensorParallelParams) -> str:
    sp = " --sequence-parallel" if p.sequence_parallel else ""
    return (f"torchrun --standalone --nproc-per-node {p.tp} workers/tensor_parallel.py "
            f"--block {p.block} --tokens {p.tokens} --hidden {p.hidden} --ffn {p.ffn} "
            f"--heads {p.heads} --vocab {p.vocab} --seed {p.seed}{sp} --out report.json")


SCENE = Scene(
    slug="tensor-parallel",
    title="Tensor and sequence parallelism",
    chapter=6,
    summary="Megatron-LM's column- and row-parallel layers, MLP, attention heads and "
            "vocab-parallel cross-entropy on real matrices, forward and backward, with every "
            "all-reduce, all-gather and reduce-scatter; sequence parallelism's memory saving "
            "(Korthikanti Table 2) and why TP stays inside an NVLink node.",
    params=TensorParallelParams,
    simulate=simulate,
    template="scenes/tensor_parallel.html",
    view=page_view,
    form=form_view,
    svg_template="scenes/tensor_parallel.svg",
    export=export_view,
    verify=CHECK,
    key_slider="tp",
    preview="block=mlp&tp=2&frame=4",
)
