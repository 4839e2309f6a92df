"""Chapter 8, mixed precision: ``/precision`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal

from markupsafe import Markup
from pydantic import Field, model_validator

from app.params import Invalid, SceneParams, Seed, Steps
from app.scene import Scene, trace_of
from app.sim.number_formats import FORMATS, KEYS, overflows
from app.sim.precision import simulate
from app.templating import deck_style, export_context
from app.verify.precision import CHECK
from app.views import precision as view
from app.views import precision_svg

FP32_MAX = 3.4028234663852886e38
Value = Annotated[float, Field(ge=-FP32_MAX, le=FP32_MAX, description="a number to encode")]
FormatKey = Literal["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]
GradCenter = Annotated[float, Field(ge=-12, le=2, description="log10 of the median |gradient|")]
GradSpread = Annotated[float, Field(ge=0.1, le=3, description="spread of log10 |gradient|")]
ScaleLog2 = Annotated[int, Field(ge=0, le=40, description="log2 of the initial loss scale")]
GrowthInterval = Annotated[int, Field(ge=1, le=100, description="clean steps before S doubles")]
Margin = Annotated[int, Field(ge=0, le=8, description="FP8 scaling margin, in powers of 2")]


class PrecisionParams(SceneParams):
    value: Value = 0.1                        # the number typed in: rounded in every format
    format: FormatKey = "bf16"                # the format in focus (highlighted; must hold value)
    grad_center: GradCenter = -4.5            # gradients: log10 |g| ~ N(center, spread²)
    grad_spread: GradSpread = 1.2             # decades (one standard deviation)
    steps: Steps = 24                         # loss-scaling steps to animate
    init_scale_log2: ScaleLog2 = 16           # S₀ = 2^16, torch.amp.GradScaler's default
    growth_interval: GrowthInterval = 4       # clean steps before S doubles (torch: 2000)
    seed: Seed = 0                            # seed of the gradients
    fp8_margin: Margin = 0                    # FP8 scale = (max / amax) / 2^margin

    @model_validator(mode="after")
    def _consistent(self) -> PrecisionParams:
        fmt = FORMATS[self.format]
        if overflows(self.value, fmt):
            wider = ", ".join(f.label for f in FORMATS.values()
                              if not overflows(self.value, f))
            raise Invalid("value", f"value ({self.value:g}) is too large for {fmt.label}: its "
                                   f"largest finite value is {fmt.max:.6g}, so it would round "
                                   f"to {'infinity' if fmt.has_inf else 'NaN'} — use |value| "
                                   f"≤ {fmt.max:.6g}, or a format that holds it ({wider})")
        return self


FORMAT_CHOICES = [(k, FORMATS[k].label) for k in KEYS]


@lru_cache(maxsize=64)
def deck_of(p: PrecisionParams) -> view.ScaleDeck:
    """The loss-scaling deck's geometry, every frame (cached: a pure function of params)."""
    return view.scale_deck(trace_of(SCENE, p))


@lru_cache(maxsize=64)
def figures(p: PrecisionParams, frame: int) -> tuple[Markup, Markup, Markup]:
    """The page's drawings: the bits, the loss-scaling deck showing ``frame`` first, and the
    gradients against every format's range."""
    trace = trace_of(SCENE, p)
    return (precision_svg.bits_svg(view.bits_figure(trace)),
            precision_svg.scale_svg(deck_of(p), frame),
            precision_svg.range_svg(view.range_figure(trace)))


def page_view(p: PrecisionParams, trace, frame: int) -> dict:
    bits, deck, ranges = figures(p, frame)
    return {"bits_svg": bits, "deck_svg": deck, "ranges_svg": ranges,
            "deck_title": deck_of(p).title, "formats": [FORMATS[k] for k in KEYS],
            "focus": FORMATS[p.format], "fp8_labels": {k: f.label for k, f in FORMATS.items()},
            "skipped": sum(s.found_inf for s in trace.scale_steps),
            "torchrun": torchrun_command(p), "verify_world": CHECK.world(p)}


def form_view() -> dict:
    return {"format_choices": FORMAT_CHOICES}


def export_view(p, trace, frame: int) -> dict:
    context = export_context(deck_of(p), trace, frame)
    return {"deck_svg": precision_svg.scale_svg(context["deck"], frame, standalone=True,
                                                caption=tuple(context["caption"]),
                                                style=deck_style(standalone=True))}


def torchrun_command(p: PrecisionParams) -> str:
    args = " ".join(CHECK.args(p))
    return (f"torchrun --standalone --nproc-per-node {CHECK.world(p)} workers/precision.py "
            f"{args} --out report.json")


SCENE = Scene(
    slug="precision",
    title="Mixed precision",
    chapter=8,
    summary="FP32, TF32, FP16, BF16 and FP8 bit by bit: what a number rounds to, which "
            "gradients underflow, dynamic loss scaling step by step (skip and halve on "
            "overflow), and FP8's per-tensor scales.",
    params=PrecisionParams,
    simulate=simulate,
    template="scenes/precision.html",
    view=page_view,
    form=form_view,
    svg_template="scenes/precision.svg",
    export=export_view,
    verify=CHECK,
    key_slider="grad_center",
    preview="frame=9",
)
