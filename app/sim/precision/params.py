"""The parameters of the precision scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from app.params import Control, Invalid, SceneParams, Seed, Steps
from app.sim.precision.number_formats import FORMATS, overflows

FP32_MAX = 3.4028234663852886e38
Value = Annotated[float, Field(ge=-FP32_MAX, le=FP32_MAX, description="a number to encode")]
FormatKey = Literal["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]
GradCenter = Annotated[float, Field(ge=-12, le=2, description="log10 of the median |gradient|")]
GradSpread = Annotated[float, Field(ge=0.1, le=3, description="spread of log10 |gradient|")]
ScaleLog2 = Annotated[int, Field(ge=0, le=40, description="log2 of the initial loss scale")]
GrowthInterval = Annotated[int, Field(ge=1, le=100, description="clean steps before S doubles")]
Margin = Annotated[int, Field(ge=0, le=8, description="FP8 scaling margin, in powers of 2")]


class PrecisionParams(SceneParams):
    # the number typed in: rounded in every format
    value: Annotated[Value, Control(
        "A number", help="Rounded to nearest (ties to even) in every format by ml_dtypes.",
        kind="number", step="any")] = 0.1
    # the format in focus (highlighted; must hold value)
    format: Annotated[FormatKey, Control("Format in focus", kind="choice", widget="select",
                                    help="Highlighted; the number must fit in it.")] = "bf16"
    # gradients: log10 |g| ~ N(center, spread²)
    grad_center: Annotated[GradCenter, Control(
        "Median |g|: 10^", help="log10 of the median gradient magnitude.", step=0.1)] = -4.5
    # decades (one standard deviation)
    grad_spread: Annotated[GradSpread, Control(
        "Spread", help="One standard deviation of log10 |g|.", unit="decades", step=0.1)] = 1.2
    # loss-scaling steps to animate
    steps: Annotated[Steps, Control("Steps")] = 24
    # S₀ = 2^16, torch.amp.GradScaler's default
    init_scale_log2: Annotated[ScaleLog2, Control(
        "Initial scale: 2^", help="torch.amp.GradScaler starts at 2^16.")] = 16
    # clean steps before S doubles (torch: 2000)
    growth_interval: Annotated[GrowthInterval, Control(
        "Growth interval", help="Clean steps before the scale doubles (torch: 2000).")] = 4
    # seed of the gradients
    seed: Annotated[Seed, Control("Seed", kind="number")] = 0
    # FP8 scale = (max / amax) / 2^margin
    fp8_margin: Annotated[Margin, Control(
        "Margin: 2^", help="scale = (FP8 max / amax) / 2^margin (Transformer Engine).")] = 0

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
