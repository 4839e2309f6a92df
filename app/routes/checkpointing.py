"""Chapter 8, memory tricks: ``/checkpointing`` (activation checkpointing and gradient
accumulation) and its embed, JSON, SVG and real run."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from markupsafe import Markup
from pydantic import Field, field_validator, model_validator

from app.params import (Dp, Ffn, GradAccum, Heads, Hidden, Invalid, KvHeads, Layers,
                        MicroBatch, ModelPreset, Recompute, SceneParams, Seq, Tp, Vocab)
from app.scene import Scene, trace_of
from app.sim.checkpointing import model_of, simulate
from app.sim.models import PRESETS
from app.templating import deck_style, export_context
from app.verify.checkpointing import CHECK, scaled_params
from app.views import checkpointing as view
from app.views import checkpointing_svg

RecomputeLayers = Annotated[int, Field(ge=1, le=512, description="layers per checkpointed "
                                                                 "segment (k)")]
Tflops = Annotated[float, Field(ge=1, le=10000, description="achieved TFLOP/s per GPU")]
SIZES = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq")


class CheckpointParams(SceneParams):
    preset: ModelPreset = "gpt2"                 # model shape; the sizes below override it
    layers: Layers | None = None              # L (default: the preset's)
    hidden: Hidden | None = None              # h
    heads: Heads | None = None                # a
    kv_heads: KvHeads | None = None           # grouped-query attention (default: the preset's)
    ffn: Ffn | None = None                    # MLP width (default: 4h, or the preset's ratio)
    vocab: Vocab | None = None                # V
    seq: Seq | None = None                    # s (default: the preset's context)
    micro_batch: MicroBatch = 4               # b: sequences per micro-batch
    tp: Tp = 1                                # tensor-parallel size t
    sequence_parallel: bool = False           # split LayerNorm/dropout activations over t too
    recompute: Recompute = "full"             # none, selective, or full
    recompute_layers: RecomputeLayers = 1     # k: full recompute checkpoints every k-th layer
    grad_accum: GradAccum = 8                 # micro-batches per optimizer step
    dp: Dp = 8                                # data-parallel replicas
    achieved_tflops: Tflops = 400.0           # per GPU (≈ 40% of an H100's 989 dense BF16)

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


@lru_cache(maxsize=64)
def deck_of(p: CheckpointParams) -> view.CheckpointDeck:
    """The deck's geometry, every frame (cached: a pure function of params)."""
    return view.build_deck(trace_of(SCENE, p))


@lru_cache(maxsize=64)
def deck_svg(p: CheckpointParams, frame: int) -> Markup:
    """The page's deck, showing ``frame`` first; later frames wait in a template."""
    return checkpointing_svg.render(deck_of(p), frame)


def page_view(p: CheckpointParams, trace, frame: int) -> dict:
    small = scaled_params(p)
    return {"deck_svg": deck_svg(p, frame), "deck_title": deck_of(p).title,
            "iteration_chart": view.iteration_chart(trace), "model": trace.model,
            "presets": PRESETS, "torchrun": torchrun_command(p), "scaled": small,
            "scaled_model": model_of(small)}


def torchrun_command(p: CheckpointParams) -> str:
    return (f"torchrun --standalone --nproc-per-node {CHECK.world(p)} workers/checkpointing.py "
            f"{' '.join(CHECK.args(p))} --out report.json")


def form_view() -> dict:
    return {"preset_choices": [(name, f"{name} ({m.param_count() / 1e9:.3g} B)")
                               for name, m in PRESETS.items()], "presets": PRESETS}


def export_view(p, trace, frame: int) -> dict:
    context = export_context(deck_of(p), trace, frame)
    return {"deck_svg": checkpointing_svg.render(context["deck"], frame, standalone=True,
                                                 caption=tuple(context["caption"]),
                                                 style=deck_style(standalone=True))}


SCENE = Scene(
    slug="checkpointing",
    title="Activation checkpointing and gradient accumulation",
    chapter=8,
    summary="Activation memory through forward and backward with no, selective, full or "
            "every-k-layers recompute, what the recompute costs in FLOPs and time, and "
            "micro-batch × accumulation × dp = global batch.",
    params=CheckpointParams,
    simulate=simulate,
    template="scenes/checkpointing.html",
    view=page_view,
    form=form_view,
    svg_template="scenes/checkpointing.svg",
    export=export_view,
    verify=CHECK,
    key_slider="micro_batch",
    preview="frame=20",
)
