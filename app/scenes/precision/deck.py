"""The precision scene as drawable geometry: the typed value's bits in every format and the
gradient histogram against every format's range (the page's figures), and what the
loss-scaling deck (app/scenes/precision/deck_scale.py) shares with them: binades as pixels,
histogram bars, FP16's zones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple
from functools import lru_cache

from app.sim.precision.number_formats import FORMATS, KEYS
from app.sim.precision.simulate import Histogram, PrecisionTrace
from app.draw.palette import ramp

WIDTH = 1280
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
FIELD_COLOURS = {"sign": "#CC79A7", "exponent": "#56B4E9", "mantissa": "#E69F00"}
ZONE_COLOURS = {"underflow": "#8a939e", "subnormal": "#E69F00", "normal": "#0072B2",
                "overflow": "#D55E00"}
ZONE_WORDS = {"underflow": "flushed to 0", "subnormal": "subnormal: fewer bits",
              "normal": "normal", "overflow": "overflow → inf"}


@lru_cache(maxsize=1024)
def pow2(k: float) -> str:
    """2^k as a slide would print it: 2¹⁶, 2⁻²⁴."""
    return "2" + str(int(k)).translate(SUPERSCRIPT) if float(k).is_integer() else f"2^{k:g}"


@lru_cache(maxsize=64)
def tint(colour: str, t: float = 0.72) -> str:
    return ramp((colour, "#ffffff"), t)


def exact(x: float) -> str:
    """A rounded value in full: it is a short binary fraction, so 17 digits are exact enough."""
    return f"{x:.17g}" if x else "0"


# --- 1. bit layouts ------------------------------------------------------------------------

@dataclass(frozen=True)
class Bit:
    x: float
    text: str
    fill: str


@dataclass(frozen=True)
class FormatRow:
    key: str
    y: float
    label: str
    layout: str
    bits: tuple[Bit, ...]
    decode: str
    value: str
    error: str
    problem: str
    focus: bool


@dataclass(frozen=True)
class BitsFigure:
    width: int
    height: int
    title: str
    rows: tuple[FormatRow, ...]
    bit_w: float
    legend: tuple[tuple[float, str, str], ...]


BIT_LEFT, BIT_W, ROW_H, ROWS_TOP = 210.0, 21.0, 66.0, 78.0


def bits_figure(trace: PrecisionTrace) -> BitsFigure:
    p = trace.params
    rows = []
    for i, key in enumerate(KEYS):
        f, enc = FORMATS[key], trace.encoding(key)
        y = ROWS_TOP + i * ROW_H
        layout = f"1 + {f.exponent_bits} + {f.mantissa_bits} bits"
        if enc.kind == "overflow":
            rows.append(FormatRow(key, y, f.label, layout, (), "", "", "",
                                  f"out of range: |{p.value:g}| > {f.max:.6g}, the largest "
                                  f"{f.label} — it would become "
                                  f"{'inf' if f.has_inf else 'NaN'}", key == p.format))
            continue
        bits, x = [], BIT_LEFT
        for name, field in (("sign", enc.sign), ("exponent", enc.exponent),
                            ("mantissa", enc.mantissa)):
            for b in field:
                bits.append(Bit(round(x, 1), b, tint(FIELD_COLOURS[name])))
                x += BIT_W
            x += 5  # a gap between fields
        rows.append(FormatRow(key, y, f.label, layout, tuple(bits), _decode(enc, f),
                              f"= {exact(enc.rounded)}", _error(enc), "", key == p.format))
    legend = ((BIT_LEFT, FIELD_COLOURS["sign"], "sign"),
              (BIT_LEFT + 80, FIELD_COLOURS["exponent"], "exponent (biased)"),
              (BIT_LEFT + 270, FIELD_COLOURS["mantissa"], "mantissa (fraction bits)"))
    return BitsFigure(WIDTH, int(ROWS_TOP + len(KEYS) * ROW_H + 8),
                      f"{p.value:.10g} in six formats", tuple(rows), BIT_W, legend)


def _decode(enc, f) -> str:
    sign = "−" if enc.sign == "1" else "+"
    if enc.kind == "zero":
        return f"{sign}0: every exponent and fraction bit is 0"
    fraction = int(enc.mantissa, 2) / 2 ** f.mantissa_bits
    if enc.kind == "subnormal":
        return (f"{sign} 2^(1 − {f.bias}) × 0.{enc.mantissa} (binary) = {sign}"
                f"{pow2(1 - f.bias)} × {fraction:.6g}   subnormal")
    return (f"{sign} 2^({enc.exponent_value} − {f.bias}) × 1.{enc.mantissa}₂ = "
            f"{sign}{pow2(enc.exponent_value - f.bias)} × {1 + fraction:.10g}")


def _error(enc) -> str:
    if enc.error == 0:
        return "exact"
    if enc.kind == "zero":
        return "underflows to 0: below half the smallest subnormal"
    return f"error {enc.error:+.3g} ({enc.relative_error:.2g} relative)"


# --- 2. gradients against every format's range -----------------------------------------------

class Bar(NamedTuple):
    """One histogram bar: the values in binade [2^e, 2^(e+1)) (a tuple: a deck has a
    thousand of them)."""

    x: float
    y: float
    w: float
    h: float
    fill: str
    e: int
    count: int

    @property
    def title(self) -> str:
        return f"{binade_label(self.e)}: {values(self.count)}"


@dataclass(frozen=True)
class Band:
    y: float
    label: str
    sub_x: float
    sub_w: float
    norm_x: float
    norm_w: float
    clipped_right: bool
    note: str
    colour: str


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class RangeFigure:
    width: int
    height: int
    title: str
    left: float
    right: float
    base: float
    bars: tuple[Bar, ...]
    bands: tuple[Band, ...]
    ticks: tuple[Tick, ...]


class Axis:
    """log2 |x| → pixels."""

    def __init__(self, low: int, high: int, left: float, right: float):
        self.low, self.high, self.left, self.right = low, high, left, right
        self.binades = [self(e) for e in range(low, high + 1)]
        """the pixel of every whole binade, low to high (what histogram bars start at)"""

    def __call__(self, log2: float) -> float:
        log2 = min(max(log2, self.low), self.high)
        return round(self.left + (log2 - self.low) / (self.high - self.low)
                     * (self.right - self.left), 1)

    def ticks(self, y_label: bool = True) -> tuple[Tick, ...]:
        span = self.high - self.low
        every = next(s for s in (4, 8, 10, 16, 20, 32, 40) if span / s <= 12)
        first = math.ceil(self.low / every) * every
        return tuple(Tick(self(k), pow2(k)) for k in range(first, self.high + 1, every))


def _bars(h: Histogram, axis: Axis, base: float, height: float, peak: int,
          colour_of) -> tuple[Bar, ...]:
    out = []
    w = round(axis(1) - axis(0) - 1, 1)
    for k, count in enumerate(h.counts):
        if not count:
            continue
        e = h.low + k
        bar_h = max(2.0, height * count / peak)
        x = axis.binades[e - axis.low] if axis.low <= e <= axis.high else axis(e)
        out.append(Bar(x, round(base - bar_h, 1), w, round(bar_h, 1), colour_of(e), e, count))
    return tuple(out)


def values(count: int) -> str:
    """"1 value", "3 values": a bar's count in its hover text."""
    return f"{count} value" if count == 1 else f"{count} values"


@lru_cache(maxsize=512)
def binade_label(e: int) -> str:
    return f"{pow2(e)} ≤ |x| < {pow2(e + 1)}"


def range_figure(trace: PrecisionTrace) -> RangeFigure:
    low, high = trace.hist_range
    axis = Axis(low, high, 130.0, 1010.0)
    h = trace.grad_histogram
    base = 170.0
    bars = _bars(h, axis, base, 120.0, max(h.counts), lambda e: "#0072B2")
    bands = []
    for i, key in enumerate(KEYS):
        f = FORMATS[key]
        share = trace.grad_fractions[key]
        sub_lo, norm_lo = math.log2(f.min_subnormal), math.log2(f.min_normal)
        top = math.log2(f.max)
        note = (f"{100 * share['underflow']:.2g}% → 0 · {100 * share['subnormal']:.2g}% "
                f"subnormal" if share["underflow"] or share["subnormal"] else "all normal")
        bands.append(Band(222 + i * 30, f.label, axis(sub_lo), axis(norm_lo) - axis(sub_lo),
                          axis(norm_lo), axis(top) - axis(norm_lo), top > high, note,
                          ZONE_COLOURS["normal"]))
    return RangeFigure(WIDTH, 222 + len(KEYS) * 30 + 44,
                       f"{sum(h.counts)} gradients, |g| ~ 10^N({trace.params.grad_center:g}, "
                       f"{trace.params.grad_spread:g}²), against each format's range",
                       axis.left, axis.right, base, bars, tuple(bands), axis.ticks())


# --- 3. FP16's zones (the loss-scaling deck: app/scenes/precision/deck_scale.py) ---------

def zone_of(e: int) -> str:
    """FP16's zone of the binade [2^e, 2^(e+1))."""
    if e < -24:
        return "underflow"
    if e < -14:
        return "subnormal"
    if e < 16:
        return "normal"
    return "overflow"
