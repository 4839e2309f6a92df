"""The precision scene as drawable geometry: the typed value's bits in every format, the
gradient histogram against every format's range, and the loss-scaling deck.

The deck is layered like every deck: frame 0 holds the axes, the FP16 zones and the unscaled
gradients (faint); frame k holds step k's scaled histogram (shown while it is the current frame)
and adds its point to the loss-scale timeline, which therefore grows as the player steps.
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


# --- 3. the loss-scaling deck --------------------------------------------------------------

@dataclass(frozen=True)
class Zone:
    x: float
    w: float
    fill: str
    label: str


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    skipped: bool
    line: str
    title: str


@dataclass(frozen=True)
class ScaleFrame:
    index: int
    header: str
    bars: tuple[Bar, ...]
    verdict: str
    verdict_bad: bool
    max_x: float
    point: Point | None
    shift_label: str
    unit: str = ""
    """what the step is, for the player's position text (training step 3 of 24: S = 2¹⁶)"""
    preview: tuple[float, float, float, str] | None = None
    """step 0: (x of step 1, y of S₀, right end, what will happen) — where the line will start"""


@dataclass(frozen=True)
class ScaleDeck:
    width: int
    height: int
    title: str
    zones: tuple[Zone, ...]
    ghost: tuple[Bar, ...]
    ticks: tuple[Tick, ...]
    hist_left: float
    hist_right: float
    hist_base: float
    timeline: tuple[float, float, float, float]
    y_ticks: tuple[tuple[float, str], ...]
    x_ticks: tuple[tuple[float, str], ...]
    frames: tuple[ScaleFrame, ...]
    legend: tuple[tuple[float, str, str], ...]


def _zone_colour(e: int) -> str:
    return ZONE_COLOURS[zone_of(e)]


def zone_of(e: int) -> str:
    """FP16's zone of the binade [2^e, 2^(e+1))."""
    if e < -24:
        return "underflow"
    if e < -14:
        return "subnormal"
    if e < 16:
        return "normal"
    return "overflow"


def scale_deck(trace: PrecisionTrace, upto: int | None = None) -> ScaleDeck:
    p = trace.params
    last = len(trace.frames) - 1 if upto is None else upto
    low, high = trace.hist_range
    axis = Axis(low, high, 120.0, 1180.0)
    base, height = 380.0, 230.0
    peak = max(max(h.counts) for h in (trace.grad_histogram, *trace.scaled_histograms))
    zones = []
    for name, lo, hi in (("underflow", low, -24), ("subnormal", -24, -14),
                         ("normal", -14, 16), ("overflow", 16, high)):
        if hi > lo:
            zones.append(Zone(axis(lo), axis(hi) - axis(lo), ZONE_COLOURS[name],
                              ZONE_WORDS[name]))
    ghost = _bars(trace.grad_histogram, axis, base, height, peak, lambda e: "none")
    # the timeline: log2 S against the step
    scales = [math.log2(s.scale) for s in trace.scale_steps]
    s_lo, s_hi = math.floor(min(scales)) - 1, math.ceil(max(scales)) + 1
    t_left, t_right, t_top, t_bottom = 120.0, 1180.0, 470.0, 630.0
    n = len(trace.scale_steps)

    def tx(step: int) -> float:
        return round(t_left + (step - 0.5) / n * (t_right - t_left), 1)

    def ty(log2s: float) -> float:
        return round(t_bottom - (log2s - s_lo) / (s_hi - s_lo) * (t_bottom - t_top), 1)

    every = max(1, math.ceil((s_hi - s_lo) / 6))
    y_ticks = tuple((ty(k), pow2(k)) for k in range(s_lo, s_hi + 1, every))
    x_every = max(1, math.ceil(n / 16))
    x_ticks = tuple((tx(t), str(t)) for t in range(1, n + 1) if t % x_every == 0 or t == 1)
    s0 = p.init_scale_log2
    frames = [ScaleFrame(0, "Before the first training step", (), "", False, 0.0, None, "",
                         "before training step 1",
                         (tx(1), ty(s0), t_right,
                          f"S starts at {pow2(s0)}: an overflow (✗) halves it and skips the "
                          f"step; {p.growth_interval} clean steps in a row double it"))]
    for k in range(1, last + 1):
        s = trace.scale_steps[k - 1]
        h = trace.scaled_histograms[k - 1]
        bars = _bars(h, axis, base, height, peak, _zone_colour)
        previous = (tx(k - 1), ty(math.log2(trace.scale_steps[k - 2].scale))) if k > 1 else None
        point = Point(tx(k), ty(math.log2(s.scale)), s.found_inf,
                      f"M{previous[0]},{previous[1]} L{tx(k)},{ty(math.log2(s.scale))}"
                      if previous else "",
                      f"step {k}: S = {pow2(math.log2(s.scale))}"
                      + (" — overflow, skipped" if s.found_inf else ""))
        verdict = (f"✗ max |S·g| = {s.max_scaled:.3g} > 65504: skip the step, S → "
                   f"{pow2(math.log2(s.scale_after))}" if s.found_inf else
                   f"✓ max |S·g| = {s.max_scaled:.3g} fits in FP16: step applied")
        scale = pow2(math.log2(s.scale))
        frames.append(ScaleFrame(k, f"Training step {k} of {n} · S = {scale}", bars,
                                 verdict, s.found_inf, axis(math.log2(s.max_scaled)), point,
                                 f"× S shifts every gradient {math.log2(s.scale):g} binades "
                                 f"right", f"training step {k} of {n}: S = {scale}"
                                 + (", overflow: skipped" if s.found_inf else "")))
    # each entry as wide as its words (16-unit text, about 9 units a character): at a fixed
    # 236 apart, "subnormal: fewer bits in FP16" ran into the next swatch
    entries = [(ZONE_COLOURS[z], ZONE_WORDS[z] + " in FP16")
               for z in ("underflow", "subnormal", "normal", "overflow")]
    entries.append(("none", "dashed: g before scaling"))
    legend, x = [], 22.0
    for colour, words in entries:
        legend.append((round(x, 1), colour, words))
        x += 24 + 9 * len(words) + 22
    legend = tuple(legend)
    return ScaleDeck(WIDTH, 720, f"dynamic loss scaling · FP16 · S₀ = {pow2(p.init_scale_log2)}"
                     f" · growth every {p.growth_interval} clean steps",
                     tuple(zones), ghost, axis.ticks(), axis.left, axis.right, base,
                     (t_left, t_top, t_right, t_bottom), y_ticks, x_ticks, tuple(frames),
                     legend)
