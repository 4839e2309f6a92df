"""The checkpointing scene as drawable geometry, laid out for its box (app/draw/box.py): a strip
with one cell per layer showing what it holds, and activation memory against time for the chosen
strategy, drawn over the other three for comparison.

Layered like every deck: frame 0 holds the axes, the comparison curves and the empty layers;
frame k redraws the layers its events changed and adds its piece of the memory curve, so
showing frames 0…k shows the run up to the end of frame k.

The layout (docs/legibility.md): the header and the title along the top, the legend's rows along
the bottom; the memory axis's ticks set the left column (the strip's "layers" label shares it);
the strip and the chart share the middle, the curves' key takes a column at the right as wide
as its texts, from the strip down (each curve's second line, its peak and time, left out where
the column is short). Layer numbers under the strip are spaced by their widths; tick counts
follow from the chart's size; the cursor's label takes a free place beside the cursor
(:class:`app.draw.layout.Spots`), or none.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from app.draw.box import Box
from app.draw.layout import LINE, Spots, heading, legend_rows, text_box
from app.draw.palette import CATEGORY, DASHES, SERIES
from app.draw.plot import Chart, Scale, line_chart, linear_ticks
from app.draw.shapes import Text
from app.draw.text import text_width
from app.humanize import human_bytes, human_time_us
from app.sim.checkpointing.simulate import CheckpointTrace, Timeline

MIN_WIDTH, MIN_HEIGHT = 600, 340
"""The smallest box the deck is laid out for: a narrower frame (a phone) scrolls it."""
STATE_FILLS = {"empty": "", "full": CATEGORY["activations"], "selective": "#e0a3ad",
               "checkpoint": CATEGORY["optimizer"], "dropped": "", "recomputed": CATEGORY["grads"],
               "done": "done"}
STATE_WORDS = {"full": "all activations", "selective": "all but attention scores",
               "checkpoint": "input only (checkpoint)", "recomputed": "recomputed",
               "done": "freed after backward"}
LEGEND = (("full", "all activations"), ("selective", "all but attention scores"),
          ("checkpoint", "input only"), ("recomputed", "recomputed"), ("done", "freed"))
THIS_RUN = " this run"


@dataclass(frozen=True)
class LayerCell:
    layer: int       # 0-based
    x: float
    w: float
    fill: str        # colour, "" (nothing held) or "done"
    word: str        # what it holds, for its hover text

    @property
    def title(self) -> str:
        return f"layer {self.layer + 1}: {self.word}"


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    cells: tuple[LayerCell, ...]
    boxes: tuple[tuple[float, float], ...]     # (x, width) around runs of changed layers
    path: str
    cursor_x: float
    cursor_y: float
    cursor: Text | None
    """the cursor's label ("1.2 GiB at 3 ms"), where a place beside it is free"""
    unit: str = ""
    """what the step is, for the player's position text (backward, layer 7 of 12)"""


@dataclass(frozen=True)
class Curve:
    label: str
    path: str
    colour: str
    dash: str
    chosen: bool
    legend: str
    key: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """its key's line: x1, x2, y"""
    texts: tuple[Text, ...] = ()
    """its key's label (the chosen one's ends in " this run") and, where there is room, its
    peak and time"""


@dataclass(frozen=True)
class CheckpointDeck:
    width: int
    height: int
    box: Box
    title: str
    titles: tuple[Text, ...]
    header: Text
    strip: tuple[float, float, float, float]
    """left, right, top, height"""
    strip_label: Text
    layer_labels: tuple[Text, ...]
    chart: tuple[float, float, float, float]
    chart_title: Text | None
    """none where the box is short for its type"""
    gridlines: tuple[float, ...]
    ticks: tuple[Text, ...]
    curves: tuple[Curve, ...]
    colour: str
    frames: tuple[FrameView, ...]
    legend: tuple[tuple[float, float, str], ...]
    """each item's swatch: x, y and its fill"""
    legend_texts: tuple[Text, ...]
    swatch: float


def ms(t: float) -> str:
    """Milliseconds in the unit that reads best, up to minutes."""
    if t == 0:
        return "0"
    return human_time_us(t * 1000) if t < 600_000 else f"{t / 60_000:.3g} min"


def _byte_ticks(hi: float, count: int) -> list[tuple[float, str]]:
    """Round numbers of the unit that suits ``hi`` (0, 2, 4 GiB rather than 1.86 GiB)."""
    unit, name = next(((size, name) for name, size in (("TiB", 2**40), ("GiB", 2**30),
                                                        ("MiB", 2**20), ("KiB", 2**10))
                       if hi >= size), (1, "B"))
    return [(v * unit, f"{v:g} {name}") for v in linear_ticks(0, hi / unit, count)
            if v * unit <= hi]


def _path(points, sx: Scale, sy: Scale) -> str:
    return " ".join(f"{'M' if k == 0 else 'L'}{sx(t):.1f},{sy(m):.1f}"
                    for k, (t, m) in enumerate(points))


def _points(t: Timeline, events=None) -> list[tuple[float, float]]:
    out = []
    for e in (t.events if events is None else events):
        out.extend(e.points)
    return out


def _steps(trace: CheckpointTrace) -> list[tuple[str, str, list]]:
    """Every frame's (header, unit, events)."""
    n, chosen = trace.model.layers, trace.chosen
    out = [("Before the forward pass", "before the forward pass", [])]
    for k in range(1, len(trace.frames)):
        i, j = trace.frame_events[k]
        evs = chosen.events[i:j]
        layers = sorted({e.layer + 1 for e in evs if e.layer >= 0})
        where = ("" if not layers else f"layer {layers[0]} of {n}" if len(layers) == 1
                 else f"layers {min(layers)}–{max(layers)} of {n}")
        phase = trace.frames[k].phase
        out.append((phase.capitalize() + (f" · {where}" if where else ""),
                    phase.lower() + (f", {where}" if where else ""), evs))
    return out


def _curves(trace: CheckpointTrace) -> list[Curve]:
    """The chosen strategy first (drawn frame by frame), then the others once each."""
    chosen = trace.chosen
    curves = [Curve(chosen.label, "", SERIES[0], "", True,
                    f"peak {human_bytes(chosen.peak)}, {ms(chosen.time_ms)}")]
    seen = {(chosen.recompute, chosen.k)}
    for s in trace.strategies:
        if (s.recompute, s.k) in seen:
            continue
        seen.add((s.recompute, s.k))
        # the other strategies in the muted ink ("" here), told apart by dash and label: in
        # colour they took the layer states' hues (selective green beside "input only" teal,
        # every 3 layers purple beside "all but attention scores" pink; principle 15)
        curves.append(Curve(s.label, "", "", DASHES[len(curves)], False,
                            f"peak {human_bytes(s.peak)}, {ms(s.time_ms)}"))
    return curves


def _key(curves: list[Curve], area: Box, x: float, top: float, bottom: float) -> list[Curve]:
    """The curves' key in a column from ``x``: a line and the label, the peak and time under
    it where every curve's fits."""
    small = area.small
    line = small * 2.4
    step = small * LINE
    two = len(curves) * (2 * step + small * 0.5) <= bottom - top
    out, y = [], top
    for c in curves:
        label = c.label + (THIS_RUN if c.chosen else "")
        texts = [Text(round(x + line + small * 0.5, 1), round(y + small * 0.95, 1), label, small,
                      "ink", weight=700 if c.chosen else 0)]
        if two:
            texts.append(Text(texts[0].x, round(y + step + small * 0.95, 1), c.legend, small,
                              "muted"))
        mid = round(y + small * 0.6, 1)
        out.append(replace(c, key=(round(x, 1), round(x + line, 1), mid), texts=tuple(texts)))
        y += (2 * step if two else step) + small * 0.5
    return out


def build_deck(trace: CheckpointTrace, box: Box, upto: int | None = None) -> CheckpointDeck:
    p, m = trace.params, trace.model
    area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
    width, height = area.width, area.height
    pad, text, small = area.pad, area.text, area.small
    n = m.layers
    steps = _steps(trace)
    last = len(trace.frames) - 1 if upto is None else upto
    sp = " + SP" if p.sequence_parallel else ""
    title = f"{m.name} · {n} layers · s = {m.seq} · b = {p.micro_batch} · t = {p.tp}{sp}"
    top = heading(area, [h for h, _, _ in steps], title)
    legend = legend_rows(area, [t for _, t in LEGEND])
    curves = _curves(trace)
    key_w = small * 2.4
    key_w += small * 0.5 + max(max(text_width(c.label + (THIS_RUN if c.chosen else ""), small,
                                              c.chosen), text_width(c.legend, small))
                               for c in curves)
    t_max = max(s.time_ms for s in trace.strategies)
    m_max = max(s.peak for s in trace.strategies) * 1.06
    # the strip: its label beside it, its layer numbers under it
    strip_top, strip_h = top.top, round(text * 1.7, 1)
    numbers_y = strip_top + strip_h + small * 1.1
    chart_top = numbers_y + small * 0.4 + small * LINE * 1.6
    chart_bottom = legend.top - pad * 0.5 - small * 1.6
    roomy = chart_bottom - chart_top >= small * 4.5
    if not roomy:   # large type in a short box: no layer numbers, no chart title (hover tells)
        chart_top = strip_top + strip_h + small * 0.8
    y_count = max(3, min(6, int((chart_bottom - chart_top) / (small * 2.4))))
    y_values = _byte_ticks(m_max, y_count)
    tick_w = max(text_width(t, small) for _, t in y_values)
    left = pad + max(tick_w + small * 0.6, text_width("layers", small, True) + small * 0.6)
    key_x = width - pad - key_w
    right = key_x - pad * 1.5
    sx, sy = Scale(0, t_max, left, right), Scale(0, m_max, chart_bottom, chart_top)
    while len(y_values) > 2 and (sy(y_values[0][0]) - sy(y_values[1][0])) < small * 1.3:
        y_values = y_values[::2]             # every other tick, until their labels part
    if len(y_values) == 2 and sy(y_values[0][0]) - sy(y_values[1][0]) < small * 1.3:
        y_values = y_values[1:]
    ticks = [Text(round(left - small * 0.6, 1), round(sy(v) + small * 0.35, 1), t, small,
                  "muted", "end") for v, t in y_values]
    widest = max(text_width(ms(v), small) for v in linear_ticks(0, t_max))
    x_count = max(2, min(8, int((right - left) / (widest * 2))))
    ticks += [Text(round(sx(v), 1), round(chart_bottom + small * 1.25, 1), ms(v), small, "muted",
                   "middle") for v in linear_ticks(0, t_max, x_count) if v <= t_max]
    gridlines = tuple(round(sy(v), 1) for v, _ in y_values)
    chosen = trace.chosen
    curves = [replace(c, path=_path(_points(s), sx, sy)) if not c.chosen else c
              for c, s in zip(curves, [chosen] + [next(s for s in trace.strategies
                                                       if s.label == c.label)
                                                  for c in curves[1:]])]
    curves = _key(curves, area, key_x, strip_top, chart_bottom + small * 1.6)
    # the layer strip
    cell_w = (right - left) / n
    inset = 1.0 if cell_w >= 4 else 0.0

    def cell(layer: int, state: str) -> LayerCell:
        return LayerCell(layer, round(left + layer * cell_w + inset, 2),
                         round(cell_w - 2 * inset, 2), STATE_FILLS[state],
                         STATE_WORDS.get(state, "nothing held"))

    def boxes(layers: list[int]) -> tuple[tuple[float, float], ...]:
        runs: list[list[int]] = []
        for layer in sorted(layers):
            if runs and layer == runs[-1][1] + 1:
                runs[-1][1] = layer
            else:
                runs.append([layer, layer])
        return tuple((round(left + a * cell_w, 1), round((b - a + 1) * cell_w, 1))
                     for a, b in runs)

    chart_title = Text(round(left, 1), round(chart_top - small * 0.7, 1),
                       "activation memory on one GPU", small, "ink", weight=700) if roomy else None
    fixed = Spots([text_box(t.x, t.y, t.text, t.size, t.anchor, t.weight >= 600)
                   for t in (*ticks, *([chart_title] if chart_title else []))])
    frames = [FrameView(0, steps[0][0], tuple(cell(i, "empty") for i in range(n)), (), "",
                        sx(0), sy(0), None, steps[0][1])]
    for k in range(1, last + 1):
        header, unit, evs = steps[k]
        changed = {e.layer: e.layer_state for e in evs if e.layer >= 0}
        e_last = evs[-1]
        cx, cy = sx(e_last.end_ms), sy(e_last.memory_after)
        frames.append(FrameView(
            k, header, tuple(cell(layer, state) for layer, state in sorted(changed.items())),
            boxes(list(changed)), _path(_points(chosen, evs), sx, sy), cx, cy,
            _cursor(fixed, f"{human_bytes(e_last.memory_after)} at {ms(e_last.end_ms)}", cx, cy,
                    (left, chart_top, right, chart_bottom), small), unit))
    every = next(s for s in (1, 2, 4, 5, 8, 10, 12, 16, 20, 24, 32, 48, 64, 96, 128, 256, 512)
                 if s * cell_w >= text_width(str(n), small) + small * 0.8 or s >= n)
    layer_labels = tuple(Text(round(left + (i + 0.5) * cell_w, 1), round(numbers_y, 1),
                              str(i + 1), small, "muted", "middle")
                         for i in range(n) if roomy and ((i + 1) % every == 0 or i == 0))
    if len(layer_labels) > 1 and layer_labels[1].x - layer_labels[0].x < \
            text_width(layer_labels[1].text, small) + small * 0.8:
        layer_labels = layer_labels[1:]       # "1" too near the first multiple of ``every``
    swatches = tuple((x, y, STATE_FILLS[state]) for (x, y), (state, _) in zip(legend.at, LEGEND))
    legend_texts = tuple(Text(round(x + legend.text_dx, 1), round(y + legend.text_dy, 1), t,
                              small, "muted") for (x, y), (_, t) in zip(legend.at, LEGEND))
    titles = tuple(Text(x, y, line, small, "muted title", "end") for x, y, line in top.title)
    return CheckpointDeck(
        width, height, box, title, titles,
        Text(top.header_x, top.header_y, "", area.head, weight=700),
        (round(left, 1), round(right, 1), round(strip_top, 1), strip_h),
        Text(pad, round(strip_top + strip_h / 2 + small * 0.35, 1), "layers", small, "ink",
             weight=700),
        layer_labels, (round(left, 1), round(chart_top, 1), round(right, 1),
                       round(chart_bottom, 1)),
        chart_title, gridlines, tuple(ticks), tuple(curves), SERIES[0], tuple(frames),
        swatches, legend_texts, legend.swatch)


def _cursor(fixed: Spots, label: str, cx: float, cy: float, chart, small: float) -> Text | None:
    """The cursor's label beside its dot — above right, above left, below right, below left —
    inside the chart and clear of the ticks; None where no place is free."""
    left, top, right, bottom = chart
    w = text_width(label, small)
    gap = small * 0.8
    for x, y, anchor in ((cx + gap, cy - gap, "start"), (cx - gap, cy - gap, "end"),
                         (cx + gap, cy + gap + small * 0.8, "start"),
                         (cx - gap, cy + gap + small * 0.8, "end")):
        x0 = x if anchor == "start" else x - w
        if x0 < left or x0 + w > right or y - small < top or y > bottom - small * 0.3:
            continue
        if fixed.free(text_box(x, y, label, small, anchor)):
            return Text(round(x, 1), round(y, 1), label, small, "ink halo-bg", anchor)
    return None


def iteration_chart(trace: CheckpointTrace) -> Chart:
    """Activations plus the gradient buffer across the first micro-batches of an iteration."""
    shown = min(trace.params.grad_accum, 4)
    t_mb = trace.chosen.time_ms
    events = trace.chosen.events
    every = max(1, len(events) // 300)  # at most ~300 events' points per micro-batch
    kept = [e for n, e in enumerate(events) if n % every == 0 or e.peak == trace.chosen.peak
            or n == len(events) - 1]
    xs, acts, total = [], [], []
    for mb in range(shown):
        for e in kept:
            for t, mem in e.points:
                xs.append(mb * t_mb + t)
                acts.append(mem)
                total.append(mem + trace.grad_buffer_bytes)
    markers = [(mb * t_mb, f"#{mb + 1}") for mb in range(1, shown)]
    top = max(total)
    unit, name = next(((size, n) for n, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20))
                       if top >= size), (1, "B"))
    acts, total = [a / unit for a in acts], [t / unit for t in total]
    more = (f" (first {shown} of {trace.params.grad_accum})"
            if trace.params.grad_accum > shown else "")
    return line_chart(
        [("total", xs, total), ("activations", xs, acts),
         ("gradients", [xs[0], xs[-1]], [trace.grad_buffer_bytes / unit] * 2)],
        x_label="time (ms)", y_label=f"memory per GPU ({name})",
        title=f"One optimizer step = {trace.params.grad_accum} micro-batches{more}",
        y_format=lambda v: f"{v:g}", markers=markers, width=760, height=340)
