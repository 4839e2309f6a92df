"""Dynamic loss scaling for FP16 training, and per-tensor scaling for FP8.

Loss scaling (Micikevicius et al. 2018, "Mixed Precision Training", §3.2): gradients of a
real network are small — many fall below FP16's smallest subnormal 2^-24 ≈ 6e-8 and flush to
zero. Multiplying the loss by S multiplies every gradient by S (the chain rule is linear), which
shifts the histogram right by log2 S binades; the optimizer divides by S again in FP32. Too
large an S overflows FP16 (65504) and the step's gradients are inf. The dynamic rule, as
``torch.amp.GradScaler`` implements it (``torch._amp_update_scale_``):

    found_inf  → skip the optimizer step, S ← S · backoff (0.5), clean-step counter ← 0
    otherwise  → apply the step, counter + 1; after growth_interval clean steps S ← S · 2

torch's defaults are S₀ = 2^16 and growth_interval = 2000; a smaller interval shows the
sawtooth in a few steps.

FP8 per-tensor scaling (Micikevicius et al. 2022, §4.3; NVIDIA Transformer Engine): FP8 has too
little range for one global scale, so every tensor gets its own: s = (fp8_max / amax) / 2^margin,
quantise q = fp8(x · s), keep s beside q and dequantise q / s. amax is the tensor's largest
magnitude (current scaling; Transformer Engine's delayed scaling uses the largest of recent
steps' amax instead).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.precision.number_formats import (FORMATS, fractions, fractions_per_row,
                                              overflow_threshold, round_to)

GROWTH_FACTOR, BACKOFF_FACTOR = 2.0, 0.5
FP32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class ScaleStep:
    step: int
    scale: float                 # S used for this step's backward
    max_scaled: float            # max |S·g| (float64, before rounding to FP16)
    found_inf: bool              # some S·g overflowed FP16: the step is skipped
    underflow: float             # share of gradients that flush to 0 in FP16 at this S
    subnormal: float             # share that land among FP16's subnormals (fewer bits)
    scale_after: float
    growth_tracker: int          # clean steps since the last change of S

    def to_dict(self) -> dict:
        return {"step": self.step, "scale": self.scale, "max_scaled": self.max_scaled,
                "found_inf": self.found_inf, "skipped": self.found_inf,
                "underflow_fraction": self.underflow, "subnormal_fraction": self.subnormal,
                "scale_after": self.scale_after, "growth_tracker": self.growth_tracker}


def update_scale(scale: float, growth_tracker: int, found_inf: bool,
                 growth_interval: int) -> tuple[float, int]:
    """GradScaler's rule (torch._amp_update_scale_): back off on inf, grow after
    ``growth_interval`` clean steps, and never grow past FP32's range."""
    if found_inf:
        return scale * BACKOFF_FACTOR, 0
    clean = growth_tracker + 1
    if clean == growth_interval:
        grown = scale * GROWTH_FACTOR
        return (grown if grown <= FP32_MAX else scale), 0
    return scale, clean


def dynamic_loss_scaling(gradients, init_scale: float,
                         growth_interval: int) -> tuple[ScaleStep, ...]:
    """Run the rule over one gradient tensor per step (rows of ``gradients``); each is scaled
    and rounded to FP16.

    S is a power of two, so |S·g| = S·|g| exactly and the largest |S·g| is S times the
    largest |g|; rounding is monotonic, so a step overflows exactly when its largest value
    rounds past FP16's largest. The rule itself only needs those, step after step; how many
    values flush to zero or turn subnormal is then counted for every step at once."""
    fp16 = FORMATS["fp16"]
    overflow = overflow_threshold(fp16)  # |x| from which FP16 rounds to inf
    grads = np.asarray(gradients, dtype=np.float64)
    largest = np.maximum(grads.max(axis=1), -grads.min(axis=1))   # max |g| per step
    scale, tracker = init_scale, 0
    rule = []
    for t, top in enumerate(largest.tolist(), start=1):
        max_scaled = top * scale                            # float64: exact up to rounding
        found_inf = not max_scaled < overflow  # round_to([max_scaled], fp16) is ±inf
        after, tracker = update_scale(scale, tracker, found_inf, growth_interval)
        rule.append((t, scale, max_scaled, found_inf, after, tracker))
        scale = after
    scales = np.array([r[1] for r in rule])
    shares = fractions_per_row(grads * scales[:, np.newaxis], fp16)
    return tuple(ScaleStep(t, s, m, inf, under, sub, after, tr)
                 for (t, s, m, inf, after, tr), (under, sub) in zip(rule, shares))


@dataclass(frozen=True)
class Fp8Result:
    format: str
    scaling: str                 # "none" | "per_tensor"
    scale: float
    amax: float
    underflow: float
    overflow: float
    rms_relative_error: float
    """√mean(((dequantised − x)/x)²) over the values that neither underflow nor overflow"""

    def to_dict(self) -> dict:
        return {"format": self.format, "scaling": self.scaling, "scale": self.scale,
                "amax": self.amax, "underflow_fraction": self.underflow,
                "overflow_fraction": self.overflow,
                "rms_relative_error": self.rms_relative_error}


def per_tensor_scale(amax: float, fmt_key: str, margin: int) -> float:
    """Transformer Engine's scale: (fp8_max / amax) / 2^margin."""
    return FORMATS[fmt_key].max / amax / 2.0 ** margin


def fp8_quantise(x: np.ndarray, fmt_key: str, scaling: str, margin: int) -> Fp8Result:
    fmt = FORMATS[fmt_key]
    amax = float(np.abs(x).max())
    scale = per_tensor_scale(amax, fmt_key, margin) if scaling == "per_tensor" else 1.0
    scaled = x * scale
    q = round_to(scaled, fmt)
    share = fractions(scaled, fmt, q)
    kept = np.isfinite(q) & (q != 0) & (x != 0)
    error = (q[kept] / scale - x[kept]) / x[kept]
    rms = float(np.sqrt(np.mean(error ** 2))) if kept.any() else 0.0
    return Fp8Result(fmt_key, scaling, scale, amax, share["underflow"], share["overflow"], rms)
