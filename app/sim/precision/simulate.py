"""Mixed precision: a typed value in every training format, seeded gradients against each
format's limits, dynamic loss scaling step by step, and FP8 with per-tensor scaling.

The formats and their exact rounding are :mod:`app.sim.precision.number_formats`; the scaling rules are
:mod:`app.sim.precision.loss_scaling`. Gradients are drawn log-normally, as measured gradient histograms
look (Micikevicius et al. 2018, Fig. 3: most of a network's gradients lie far below 1, many
below FP16's 2^-24): log10 |g| ~ Normal(grad_center, grad_spread²) with random signs, and each
step's centre wanders a little (± 0.15 decades) as real gradient norms do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from app.sim.precision.loss_scaling import Fp8Result, ScaleStep, dynamic_loss_scaling, fp8_quantise
from app.sim.precision.number_formats import FORMATS, KEYS, Encoded, encode, fractions
from app.sim.trace import Frame

if TYPE_CHECKING:
    from app.sim.precision.params import PrecisionParams

SAMPLES = 4096
"""Gradient values per step (a small layer's worth)."""
HIST_LOW, HIST_HIGH = -150, 130
"""log2 range the histograms may span (beyond FP32's subnormals and range)."""


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


def binades(values: np.ndarray) -> np.ndarray:
    """⌊log2 |x|⌋ of every value, exactly (frexp's exponent: x = m·2^e with ½ ≤ |m| < 1)."""
    return np.frexp(values)[1] - 1


def histogram(values: np.ndarray, low: int, high: int) -> Histogram:
    return histograms(values[np.newaxis], low, high)[0]


def histograms(rows: np.ndarray, low: int, high: int,
               shifts: np.ndarray | None = None) -> tuple[Histogram, ...]:
    """One histogram per row of ``rows`` (steps, samples), counted in one pass; with
    ``shifts`` (one integer per row), of the rows multiplied by 2^shift — exactly the
    binades shifted, as multiplying by a power of two moves every value by whole binades.

    A normal float64's binade is its biased exponent field (bits 52–62) minus 1023, read
    straight off its bits; zeros are left out, and subnormal float64s (below 2^-1022, which
    no gradient here comes near) go through frexp."""
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    steps, bins = len(rows), high - low
    offsets = -1023 - low + (np.zeros(steps, dtype=np.int64) if shifts is None
                             else np.asarray(shifts, dtype=np.int64))
    index = rows.view(np.int64) >> 52
    index &= 0x7FF
    nonzero = None
    if not index.all():                          # zeros, or float64 subnormals
        nonzero = rows != 0
        if (nonzero & (index == 0)).any():
            index = binades(rows) + 1023
    index += offsets[:, np.newaxis]
    np.clip(index, 0, bins - 1, out=index)
    index += bins * np.arange(steps)[:, np.newaxis]
    index = index.ravel() if nonzero is None else index[nonzero]
    counts = np.bincount(index, minlength=bins * steps).reshape(steps, bins)
    return tuple(Histogram(low, tuple(row)) for row in counts.tolist())


@dataclass(frozen=True)
class PrecisionTrace:
    params: PrecisionParams
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
    wander, z, signs = _draws(steps, seed)
    g = z * spread                 # (center + spread·z) + wander, in one buffer
    g += center
    g += wander
    np.power(10.0, g, out=g)
    g *= signs
    return g


@lru_cache(maxsize=8)
def _draws(steps: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The random numbers behind the gradients, kept per seed so that moving the centre or
    the spread draws nothing again: each step's wander, standard normals z (N(c, s²) is
    c + s·z, as numpy's own normal computes it) and signs — the stream of
    ``rng.normal(0, 0.15, (steps, 1))``, ``rng.normal(c, s, (steps, SAMPLES))`` and
    ``rng.choice((-1.0, 1.0), (steps, SAMPLES))``, bit for bit."""
    rng = np.random.default_rng(seed)
    wander = rng.normal(0.0, 0.15, size=(steps, 1))
    z = rng.standard_normal(size=(steps, SAMPLES))
    signs = np.array((-1.0, 1.0))[rng.integers(0, 2, size=(steps, SAMPLES))]
    for a in (wander, z, signs):
        a.flags.writeable = False
    return wander, z, signs


def encodings_of(value: float) -> tuple[Encoded, ...]:
    """``value`` encoded in every format (immutable, so kept: the gradients' sliders move
    without changing the number typed in); −0.0 apart from 0.0, which compares equal."""
    return _encodings(value, math.copysign(1.0, value))


@lru_cache(maxsize=64)
def _encodings(value: float, sign: float) -> tuple[Encoded, ...]:
    return tuple(encode(value, FORMATS[k]) for k in KEYS)


def simulate(p: PrecisionParams) -> PrecisionTrace:
    encodings = encodings_of(p.value)
    grads = make_gradients(p.steps, p.grad_center, p.grad_spread, p.seed)
    grads.flags.writeable = False
    first = grads[0]
    steps = dynamic_loss_scaling(grads, 2.0 ** p.init_scale_log2, p.growth_interval)
    # S is a power of two: S·g has g's binade shifted by log2 S, and its extremes are S times
    # g's, exactly
    shifts = np.array([math.log2(s.scale) for s in steps]).astype(int)
    magnitude = np.abs(grads)
    smallest, largest = magnitude.min(axis=1), magnitude.max(axis=1)
    if not smallest.all():  # a zero gradient: the smallest non-zero one instead
        smallest = np.where(grads != 0, magnitude, np.inf).min(axis=1)
    scales = np.array([s.scale for s in steps])
    low, high = _hist_range(min(smallest[0], (smallest * scales).min()),
                            max(largest[0], (largest * scales).max()))
    fp8 = tuple(fp8_quantise(first, key, scaling, p.fp8_margin)
                for key in ("fp8_e4m3", "fp8_e5m2") for scaling in ("none", "per_tensor"))
    shares = {k: fractions(first, FORMATS[k]) for k in KEYS}
    return PrecisionTrace(
        p, encodings, grads, histogram(first, low, high), shares, steps,
        histograms(grads, low, high, shifts), (low, high), fp8,
        _frames(p, steps, shares["fp16"]))


def _hist_range(smallest: float, largest: float) -> tuple[int, int]:
    """Binades to draw: from the smallest to the largest non-zero |value| (2^-25 … 2^16,
    FP16's whole range, at least), with a margin of 2."""
    low = max(HIST_LOW, min(-26, math.floor(np.log2(smallest)) - 2))
    high = min(HIST_HIGH, max(18, math.ceil(np.log2(largest)) + 2))
    return low, high


def _log2(x: float) -> str:
    k = math.log2(x)
    return f"2^{k:g}" if k.is_integer() else f"{x:.3g}"


def _frames(p: PrecisionParams, steps: tuple[ScaleStep, ...],
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
            text = (f"Training step {s.step}: S = {_log2(s.scale)}, the largest |S·g| is "
                    f"{s.max_scaled:.3g} > 65504, FP16's largest value: the gradients hold inf. "
                    f"GradScaler skips this optimizer step and halves S to {_log2(s.scale_after)}.")
        else:
            grew = s.scale_after > s.scale
            text = (f"Training step {s.step}: S = {_log2(s.scale)}, largest |S·g| = {s.max_scaled:.3g} "
                    f"fits; {100 * s.underflow:.2g}% of gradients flush to 0 and "
                    f"{100 * s.subnormal:.2g}% are subnormal. The step is applied"
                    + (f"; that was {p.growth_interval} clean steps in a row, so S doubles to "
                       f"{_log2(s.scale_after)}." if grew else
                       f" ({s.growth_tracker} of {p.growth_interval} clean steps before S "
                       f"doubles)."))
        frames.append(Frame(s.step, text, (), "overflow: skip, halve" if s.found_inf
                            else "applied"))
    return tuple(frames)

