"""Mixed precision: a typed value in every training format, seeded gradients against each
format's limits, dynamic loss scaling step by step, and FP8 with per-tensor scaling.

The formats and their exact rounding are :mod:`app.sim.number_formats`; the scaling rules are
:mod:`app.sim.loss_scaling`. Gradients are drawn log-normally, as measured gradient histograms
look (Micikevicius et al. 2018, Fig. 3: most of a network's gradients lie far below 1, many
below FP16's 2^-24): log10 |g| ~ Normal(grad_center, grad_spread²) with random signs, and each
step's centre wanders a little (± 0.15 decades) as real gradient norms do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.sim.loss_scaling import Fp8Result, ScaleStep, dynamic_loss_scaling, fp8_quantise
from app.sim.number_formats import FORMATS, KEYS, Encoded, encode, fractions
from app.sim.trace import Frame

SAMPLES = 4096
"""Gradient values per step (a small layer's worth)."""
HIST_LOW, HIST_HIGH = -150, 130
"""log2 range the histograms may span (beyond FP32's subnormals and range)."""


class PrecisionQuery(Protocol):
    value: float
    format: str
    grad_center: float
    grad_spread: float
    steps: int
    init_scale_log2: int
    growth_interval: int
    seed: int
    fp8_margin: int


@dataclass(frozen=True)
class Histogram:
    """Counts of |values| per binade: bin k holds 2^(low+k) ≤ |x| < 2^(low+k+1)."""

    low: int
    counts: tuple[int, ...]

    @property
    def high(self) -> int:
        return self.low + len(self.counts)

    def to_dict(self) -> dict:
        return {"log2_low": self.low, "log2_high": self.high, "counts": list(self.counts)}


def histogram(values: np.ndarray, low: int, high: int) -> Histogram:
    magnitude = np.abs(values[values != 0])
    exponents = np.floor(np.log2(magnitude)).astype(int)
    counts = np.bincount(np.clip(exponents, low, high - 1) - low, minlength=high - low)
    return Histogram(low, tuple(int(c) for c in counts))


@dataclass(frozen=True)
class PrecisionTrace:
    params: PrecisionQuery
    encodings: tuple[Encoded, ...]           # the typed value in every format, KEYS order
    gradients: np.ndarray                    # (steps, SAMPLES) float64: the unscaled gradients
    grad_histogram: Histogram                # step 1's unscaled gradients
    grad_fractions: dict[str, dict[str, float]]
    scale_steps: tuple[ScaleStep, ...]
    scaled_histograms: tuple[Histogram, ...]   # S·g of each step
    hist_range: tuple[int, int]
    fp8: tuple[Fp8Result, ...]
    frames: tuple[Frame, ...]

    def encoding(self, key: str) -> Encoded:
        return self.encodings[KEYS.index(key)]

    def to_dict(self) -> dict:
        p = self.params
        formats = []
        for key, enc in zip(KEYS, self.encodings):
            f = FORMATS[key]
            formats.append({
                "key": key, "label": f.label, "sign_bits": 1,
                "exponent_bits": f.exponent_bits, "mantissa_bits": f.mantissa_bits,
                "bias": f.bias, "max": f.max, "min_normal": f.min_normal,
                "min_subnormal": f.min_subnormal, "eps": f.eps,
                "decimal_digits": f.decimal_digits, "bytes": f.storage_bytes,
                "has_inf": f.has_inf, **enc.to_dict()})
        return {
            "value": p.value, "format": p.format, "formats": formats,
            "gradients": {"center_log10": p.grad_center, "spread_decades": p.grad_spread,
                          "count": SAMPLES, "histogram": self.grad_histogram.to_dict(),
                          "per_format": {k: v for k, v in self.grad_fractions.items()}},
            "loss_scaling": {"init_scale": 2.0 ** p.init_scale_log2,
                             "growth_interval": p.growth_interval,
                             "growth_factor": 2.0, "backoff_factor": 0.5,
                             "steps": [s.to_dict() for s in self.scale_steps],
                             "skipped_steps": sum(s.found_inf for s in self.scale_steps)},
            "fp8": [r.to_dict() for r in self.fp8],
            "frames": [{"step": f.step, "phase": f.phase, "caption": f.caption}
                       for f in self.frames],
        }


def make_gradients(steps: int, center: float, spread: float, seed: int) -> np.ndarray:
    """(steps, SAMPLES) gradients: log10 |g| ~ N(center + wander, spread²), random signs."""
    rng = np.random.default_rng(seed)
    wander = rng.normal(0.0, 0.15, size=(steps, 1))
    exponents = rng.normal(center, spread, size=(steps, SAMPLES)) + wander
    signs = rng.choice((-1.0, 1.0), size=(steps, SAMPLES))
    return signs * 10.0 ** exponents


def simulate(p: PrecisionQuery) -> PrecisionTrace:
    encodings = tuple(encode(p.value, FORMATS[k]) for k in KEYS)
    grads = make_gradients(p.steps, p.grad_center, p.grad_spread, p.seed)
    grads.flags.writeable = False
    first = grads[0]
    steps = dynamic_loss_scaling(list(grads), 2.0 ** p.init_scale_log2, p.growth_interval)
    scaled = [g * s.scale for g, s in zip(grads, steps)]
    low, high = _hist_range([first, *scaled])
    fp8 = tuple(fp8_quantise(first, key, scaling, p.fp8_margin)
                for key in ("fp8_e4m3", "fp8_e5m2") for scaling in ("none", "per_tensor"))
    return PrecisionTrace(
        p, encodings, grads, histogram(first, low, high),
        {k: fractions(first, FORMATS[k]) for k in KEYS}, steps,
        tuple(histogram(x, low, high) for x in scaled), (low, high), fp8,
        _frames(p, steps, fractions(first, FORMATS["fp16"])))


def _hist_range(arrays: list[np.ndarray]) -> tuple[int, int]:
    """Binades to draw: every value, FP16's whole range (2^-25 … 2^16), a margin of 2."""
    lows = [np.log2(np.abs(a[a != 0]).min()) for a in arrays]
    highs = [np.log2(np.abs(a).max()) for a in arrays]
    low = max(HIST_LOW, min(-26, math.floor(min(lows)) - 2))
    high = min(HIST_HIGH, max(18, math.ceil(max(highs)) + 2))
    return low, high


def _log2(x: float) -> str:
    k = math.log2(x)
    return f"2^{k:g}" if k.is_integer() else f"{x:.3g}"


def _frames(p: PrecisionQuery, steps: tuple[ScaleStep, ...],
            unscaled: dict[str, float]) -> tuple[Frame, ...]:
    frames = [Frame(0, f"FP16 training starts with the loss scale S = "
                       f"{_log2(2.0 ** p.init_scale_log2)} (torch.amp.GradScaler's default is "
                       f"2^16). Each step the backward pass produces S·g in FP16 and the "
                       f"optimizer divides by S in FP32. Unscaled, "
                       f"{100 * unscaled['underflow']:.2g}% of these gradients would flush to 0 "
                       f"in FP16 and {100 * unscaled['subnormal']:.2g}% would be subnormal.",
                    (), "start")]
    for s in steps:
        if s.found_inf:
            text = (f"Step {s.step}: S = {_log2(s.scale)}, the largest |S·g| is "
                    f"{s.max_scaled:.3g} > 65504, FP16's largest value: the gradients hold inf. "
                    f"GradScaler skips this optimizer step and halves S to {_log2(s.scale_after)}.")
        else:
            grew = s.scale_after > s.scale
            text = (f"Step {s.step}: S = {_log2(s.scale)}, largest |S·g| = {s.max_scaled:.3g} "
                    f"fits; {100 * s.underflow:.2g}% of gradients flush to 0 and "
                    f"{100 * s.subnormal:.2g}% are subnormal. The step is applied"
                    + (f"; that was {p.growth_interval} clean steps in a row, so S doubles to "
                       f"{_log2(s.scale_after)}." if grew else
                       f" ({s.growth_tracker} of {p.growth_interval} clean steps before S "
                       f"doubles)."))
        frames.append(Frame(s.step, text, (), "overflow: skip, halve" if s.found_inf
                            else "applied"))
    return tuple(frames)

