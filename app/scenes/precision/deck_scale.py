"""The precision scene's deck, dynamic loss scaling, laid out for its box (app/draw/box.py,
docs/legibility.md): the step's header and the deck's title along the top, the step's verdict
under them, the scaled gradients' histogram against FP16's zones, the loss scale S at each
step below it, the legend's rows along the bottom.

Layered like every deck: frame 0 holds the axes, the FP16 zones and the unscaled gradients
(faint); frame k holds step k's scaled histogram (shown while it is the current frame) and
adds its point to the loss-scale timeline, which therefore grows as the player steps.

Both plots share one left edge, as wide as the widest of the timeline's tick labels and the
histogram's "|S·g|"; their ticks are as many as their labels leave room for (app/draw/axes.py):
every 1, 2, 4, 8 … binades along |S·g|, every 1, 2, 4 … steps and binades of S along the
timeline. A zone's name is drawn where it fits its zone; the shift's note where it fits beside
the verdict; step 0's note wrapped into the timeline where it fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.draw.axes import Linear, every_candidates, inset, spaced
from app.draw.box import Box
from app.draw.layout import LINE, heading, legend_rows
from app.draw.text import fits, text_width, wrap
from app.draw.widen import least_box
from app.scenes.precision.deck import (ZONE_COLOURS, ZONE_WORDS, Axis, Bar, Tick, _bars,
                                       pow2, zone_of)
from app.sim.precision.simulate import PrecisionTrace

MIN_WIDTH, MIN_HEIGHT = 600, 320
"""The smallest box the deck is laid out for: a narrower frame (a phone) scrolls it."""
BINADES = (1, 2, 4, 8, 10, 16, 20, 32, 40, 64)


@dataclass(frozen=True)
class Zone:
    x: float
    w: float
    fill: str
    label: str         # "" where the name does not fit the zone


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
    preview: tuple[float, float, float, tuple[tuple[float, float, str], ...]] | None = None
    """step 0: (x of step 1, y of S₀, right end, the note's lines (x, baseline, text)) —
    where the line of S will start"""


@dataclass(frozen=True)
class ScaleDeck:
    width: int
    height: int
    box: Box
    """the box asked for (its bucket is the deck's ``data-box``); width × height is what it
    was laid out in (wider on a phone: :data:`MIN_WIDTH`)"""
    title: str
    title_lines: tuple[tuple[float, float, str], ...]
    header: tuple[float, float, float]          # x, baseline, size of each frame's header
    verdict_at: tuple[float, float, float]      # x, baseline, size of each frame's verdict
    shift_x: float                              # the shift's note ends here ("" where none)
    zones: tuple[Zone, ...]
    zone_top: float
    zone_label_y: float
    ghost: tuple[Bar, ...]
    ticks: tuple[Tick, ...]
    tick_y: float
    hist_left: float
    hist_right: float
    hist_base: float
    value_label: tuple[float, float]            # where "|S·g|" ends (right-aligned)
    timeline: tuple[float, float, float, float]
    timeline_title: tuple[float, float, str]
    y_ticks: tuple[tuple[float, str], ...]
    x_ticks: tuple[tuple[float, str], ...]
    frames: tuple[ScaleFrame, ...]
    legend: tuple[tuple[float, float, str, float, float, str], ...]
    """(swatch x, y, colour or "none", text x, baseline, words) of each legend item"""
    swatch: float
    text: float
    small: float
    mark: float                                 # a point's radius


def headers(trace: PrecisionTrace) -> list[str]:
    n = len(trace.scale_steps)
    return ["Before the first training step"] + [
        f"Training step {k} of {n} · S = {pow2(math.log2(s.scale))}"
        for k, s in enumerate(trace.scale_steps, start=1)]


def verdict_of(s, short: int = 0) -> str:
    """The step's verdict, in full (``short`` 0) or shortened (1, 2) for a narrow box."""
    after = pow2(math.log2(s.scale_after))
    if s.found_inf:
        return (f"✗ max |S·g| = {s.max_scaled:.3g} > 65504: skip the step, S → {after}",
                f"✗ {s.max_scaled:.3g} > 65504: skip, S → {after}",
                f"✗ overflow: S → {after}")[short]
    return (f"✓ max |S·g| = {s.max_scaled:.3g} fits in FP16: step applied",
            f"✓ {s.max_scaled:.3g} fits: applied", "✓ fits: applied")[short]


def shift_of(s) -> str:
    return f"× S shifts every gradient {math.log2(s.scale):g} binades right"


LEGEND = [(ZONE_COLOURS[z], ZONE_WORDS[z] + " in FP16")
          for z in ("underflow", "subnormal", "normal", "overflow")] + [
    ("none", "dashed: g before scaling")]
SHORT_LEGEND = [(ZONE_COLOURS[z], words) for z, words in (
    ("underflow", "flushed to 0"), ("subnormal", "subnormal"), ("normal", "normal"),
    ("overflow", "overflow → inf"))] + [("none", "g before scaling")]
"""The legend's words where the whole ones take more than a row (the title says FP16)."""


def scale_deck(trace: PrecisionTrace, box: Box, upto: int | None = None) -> ScaleDeck:
    """The deck laid out for ``box`` (see the module's docstring)."""
    p = trace.params
    last = len(trace.frames) - 1 if upto is None else upto
    all_headers = headers(trace)
    title = (f"dynamic loss scaling · FP16 · S₀ = {pow2(p.init_scale_log2)} · growth every "
             f"{p.growth_interval} clean steps")

    def need(a: Box) -> float:     # the bands, and both plots at least 2.2 labels high
        top, legend = heading(a, all_headers, title).top, _legend(a)[1]
        return (top + a.text * 1.3 + a.small * (2 * 1.45 + 5.1) + a.pad * 0.9
                + a.height - legend.top)

    area = least_box(box, MIN_WIDTH, MIN_HEIGHT, all_headers, need)
    width, height = area.width, area.height
    pad, text, small = area.pad, area.text, area.small
    top = heading(area, all_headers, title)
    entries, legend = _legend(area)
    steps = trace.scale_steps
    n = len(steps)
    # the verdict's line, the shift's note at its right where both fit
    verdict_y = top.top + text * 0.8
    shifts = max((text_width(shift_of(s), small) for s in steps), default=0.0)
    plots_top = verdict_y + text * 0.5
    plots_bottom = legend.top - pad * 0.4
    # the timeline's S: log2 S against the step; its tick labels size the common left edge
    scales = [math.log2(s.scale) for s in steps]
    s_lo, s_hi = math.floor(min(scales)) - 1, math.ceil(max(scales)) + 1
    tick_row, gap = small * 1.45, pad * 0.5
    # the timeline's title where both plots keep room; no timeline where even then they do
    # not (the caption still says S)
    timeline = True
    for title_row in (small * 1.5, 0.0):
        room = plots_bottom - plots_top - 2 * tick_row - title_row - gap
        if room * 0.44 >= small * 2.2:
            break
    else:
        timeline = False
    hist_h = room * 0.56 if timeline else plots_bottom - plots_top - tick_row
    base = plots_top + hist_h
    t_top = base + tick_row + gap + title_row
    t_bottom = plots_bottom - tick_row
    ty = Linear(s_lo, s_hi, t_bottom, t_top)
    y_ticks = (spaced(every_candidates(s_lo, s_hi, BINADES), ty, pow2, small, vertical=True)
               if timeline else ())
    left = pad + max(inset([t for _, t in y_ticks], small),
                     text_width("|S·g|", small) + small * 0.5)
    right = width - pad
    # the verdicts as long as they all fit the line, the shift's note beside them where it does
    short = next((level for level in (0, 1, 2) if left + max(
        (text_width(verdict_of(s, level), text, bold=True) for s in steps), default=0.0)
        <= right), 2)
    widest = max((text_width(verdict_of(s, short), text, bold=True) for s in steps), default=0.0)
    shift_shown = left + widest + pad + shifts <= right
    low, high = trace.hist_range
    axis = Axis(low, high, left, right)
    ticks = tuple(Tick(x, label) for x, label in
                  spaced(every_candidates(low, high, BINADES), axis, pow2, small))
    peak = max(max(h.counts) for h in (trace.grad_histogram, *trace.scaled_histograms))
    bar_room = hist_h - small * 1.7            # under the zones' names
    zones = []
    for name, lo, hi in (("underflow", low, -24), ("subnormal", -24, -14),
                         ("normal", -14, 16), ("overflow", 16, high)):
        if hi > lo:
            x0, x1 = axis(lo), axis(hi)
            words = ZONE_WORDS[name]
            label = (words if fits(words, small, x1 - x0 - small * 0.6)
                     and hist_h >= small * 3.2 else "")
            zones.append(Zone(x0, round(x1 - x0, 1), ZONE_COLOURS[name], label))
    ghost = _bars(trace.grad_histogram, axis, base, bar_room, peak, lambda e: "none")

    def tx(step: int) -> float:
        return round(left + (step - 0.5) / n * (right - left), 1)

    x_ticks = spaced(every_candidates(1, n, keep=(1,)), tx, str, small) if timeline else ()
    timeline_title = next(t for t in ("loss scale S at each step (✗: overflow, step skipped)",
                                      "loss scale S at each step", "loss scale S", "")
                          if not title_row or not t or fits(t, small, right - left, bold=True))
    if not title_row or not timeline:
        timeline_title = ""
    mark = round(max(3.5, small * 0.4), 1)
    s0 = p.init_scale_log2
    frames = [ScaleFrame(0, all_headers[0], (), "", False, 0.0, None, "",
                         "before training step 1",
                         _preview(tx(1), ty(s0), right, t_top, t_bottom, small, mark, p)
                         if timeline else None)]
    for k in range(1, last + 1):
        s = steps[k - 1]
        bars = _bars(trace.scaled_histograms[k - 1], axis, base, bar_room, peak,
                     lambda e: ZONE_COLOURS[zone_of(e)])
        previous = (tx(k - 1), ty(math.log2(steps[k - 2].scale))) if k > 1 else None
        y = ty(math.log2(s.scale))
        point = Point(tx(k), y, s.found_inf,
                      f"M{previous[0]},{previous[1]} L{tx(k)},{y}" if previous else "",
                      f"step {k}: S = {pow2(math.log2(s.scale))}"
                      + (" — overflow, skipped" if s.found_inf else "")) if timeline else None
        scale = pow2(math.log2(s.scale))
        frames.append(ScaleFrame(k, all_headers[k], bars, verdict_of(s, short), s.found_inf,
                                 axis(math.log2(s.max_scaled)), point,
                                 shift_of(s) if shift_shown else "",
                                 f"training step {k} of {n}: S = {scale}"
                                 + (", overflow: skipped" if s.found_inf else "")))
    items = tuple((sx, sy, colour, round(sx + legend.text_dx, 1), round(sy + legend.text_dy, 1),
                   words) for (colour, words), (sx, sy) in zip(entries, legend.at))
    return ScaleDeck(
        width, height, box, title, top.title, (top.header_x, top.header_y, area.head),
        (round(left, 1), round(verdict_y, 1), text), round(right, 1), tuple(zones),
        round(plots_top, 1), round(plots_top + small * 1.1, 1), ghost, ticks,
        round(base + small * 1.15, 1), left, right, round(base, 1),
        (round(left - small * 0.5, 1), round(base - small * 0.2, 1)),
        (round(left, 1), round(t_top, 1), round(right, 1), round(t_bottom, 1)),
        (round(left, 1), round(t_top - small * 0.55, 1), timeline_title),
        y_ticks, x_ticks, tuple(frames), items, legend.swatch, text, small, mark)


def _legend(area: Box):
    """The legend's entries and rows: the whole words where they take one row, else short."""
    legend = legend_rows(area, [words for _, words in LEGEND])
    if legend.top >= legend_rows(area, ["one row"]).top:
        return LEGEND, legend
    return SHORT_LEGEND, legend_rows(area, [words for _, words in SHORT_LEGEND])


def _preview(x: float, y: float, right: float, top: float, bottom: float, small: float,
             mark: float, p) -> tuple:
    """Step 0's line of S₀ and its note, wrapped into the timeline: below the line where the
    lines fit there, else above it, else as many as fit (none: the caption says it)."""
    words = (f"S starts at {pow2(p.init_scale_log2)}: an overflow (✗) halves it and skips the "
             f"step; {p.growth_interval} clean steps in a row double it")
    note_x = x + mark * 2 + small * 0.4
    lines = wrap(words, small, right - note_x)
    if not lines or not all(fits(line, small, right - note_x) for line in lines):
        return (x, y, right, ())
    step = small * LINE
    below = bottom - (y + mark * 2 + small * 0.3)
    above = y - mark * 2 - small * 0.3 - top
    if below >= len(lines) * step or below >= above:
        count = min(len(lines), int(below // step))
        first = y + mark * 2 + small * 0.3 + small * 0.8
    else:
        count = min(len(lines), int(above // step))
        first = y - mark * 2 - small * 0.3 - (count - 1) * step - small * 0.2
    placed = tuple((round(note_x, 1), round(first + j * step, 1), line)
                   for j, line in enumerate(lines[:count]))
    return (x, y, right, placed if count == len(lines) else ())
