"""The checkpointing scene as drawable geometry: a strip with one cell per layer showing what
it holds, and activation memory against time for the chosen strategy, drawn over the other
three for comparison.

Layered like every deck: frame 0 holds the axes, the comparison curves and the empty layers;
frame k redraws the layers its events changed and adds its piece of the memory curve, so
showing frames 0…k shows the run up to the end of frame k.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.checkpointing.simulate import CheckpointTrace, Timeline
from app.draw.palette import CATEGORY, DASHES, SERIES
from app.humanize import human_bytes, human_time_us
from app.draw.plot import Chart, Scale, line_chart, linear_ticks

WIDTH, HEIGHT = 1280, 720
STRIP_LEFT, STRIP_RIGHT, STRIP_TOP, STRIP_H = 150.0, 1250.0, 84.0, 38.0
CHART = (150.0, 196.0, 980.0, 626.0)       # left, top, right, bottom
STATE_FILLS = {"empty": "", "full": CATEGORY["activations"], "selective": "#e0a3ad",
               "checkpoint": CATEGORY["optimizer"], "dropped": "", "recomputed": CATEGORY["grads"],
               "done": "done"}
STATE_WORDS = {"full": "all activations", "selective": "all but attention scores",
               "checkpoint": "input only (checkpoint)", "recomputed": "recomputed",
               "done": "freed after backward"}


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
    cursor_label: str
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


@dataclass(frozen=True)
class CheckpointDeck:
    width: int
    height: int
    title: str
    chart: tuple[float, float, float, float]
    x_ticks: tuple[tuple[float, str], ...]
    y_ticks: tuple[tuple[float, str], ...]
    curves: tuple[Curve, ...]
    colour: str
    layer_labels: tuple[tuple[float, str], ...]
    frames: tuple[FrameView, ...]
    legend: tuple[tuple[float, str, str], ...]


def _ticks(lo: float, hi: float, fmt, scale: Scale) -> tuple[tuple[float, str], ...]:
    return tuple((round(scale(v), 1), fmt(v)) for v in linear_ticks(lo, hi) if lo <= v <= hi)


def ms(t: float) -> str:
    """Milliseconds in the unit that reads best, up to minutes."""
    if t == 0:
        return "0"
    return human_time_us(t * 1000) if t < 600_000 else f"{t / 60_000:.3g} min"


def _byte_ticks(hi: float, scale: Scale) -> tuple[tuple[float, str], ...]:
    """Round numbers of the unit that suits ``hi`` (0, 2, 4 GiB rather than 1.86 GiB)."""
    unit, name = next(((size, name) for name, size in (("TiB", 2**40), ("GiB", 2**30),
                                                        ("MiB", 2**20), ("KiB", 2**10))
                       if hi >= size), (1, "B"))
    return tuple((round(scale(v * unit), 1), f"{v:g} {name}")
                 for v in linear_ticks(0, hi / unit) if v * unit <= hi)


def _path(points, sx: Scale, sy: Scale) -> str:
    return " ".join(f"{'M' if k == 0 else 'L'}{sx(t):.1f},{sy(m):.1f}"
                    for k, (t, m) in enumerate(points))


def _points(t: Timeline, events=None) -> list[tuple[float, float]]:
    out = []
    for e in (t.events if events is None else events):
        out.extend(e.points)
    return out


def build_deck(trace: CheckpointTrace, upto: int | None = None) -> CheckpointDeck:
    p, m = trace.params, trace.model
    last = len(trace.frames) - 1 if upto is None else upto
    left, top, right, bottom = CHART
    t_max = max(s.time_ms for s in trace.strategies)
    m_max = max(s.peak for s in trace.strategies) * 1.06
    sx, sy = Scale(0, t_max, left, right), Scale(0, m_max, bottom, top)
    chosen_index = next(i for i, s in enumerate(trace.strategies)
                        if (s.recompute, s.k) == (trace.chosen.recompute, trace.chosen.k))
    curves = []
    for i, s in enumerate(trace.strategies):
        if i == chosen_index or (s.recompute, s.k) in [(c.recompute, c.k) for c in
                                                        trace.strategies[:i]]:
            continue
        # the other strategies in the muted ink ("" here), told apart by dash and label: in
        # colour they took the layer states' hues (selective green beside "input only" teal,
        # every 3 layers purple beside "all but attention scores" pink; principle 15)
        j = len(curves) + 1
        curves.append(Curve(s.label, _path(_points(s), sx, sy), "", DASHES[j],
                            False, f"peak {human_bytes(s.peak)}, {ms(s.time_ms)}"))
    chosen = trace.chosen
    colour = SERIES[0]
    curves.insert(0, Curve(chosen.label, "", colour, "", True,
                           f"peak {human_bytes(chosen.peak)}, {ms(chosen.time_ms)}"))
    # the layer strip
    n = m.layers
    cell_w = (STRIP_RIGHT - STRIP_LEFT) / n
    pad = 1.0 if cell_w >= 4 else 0.0

    def cell(layer: int, state: str) -> LayerCell:
        return LayerCell(layer, round(STRIP_LEFT + layer * cell_w + pad, 2),
                         round(cell_w - 2 * pad, 2), STATE_FILLS[state],
                         STATE_WORDS.get(state, "nothing held"))

    def boxes(layers: list[int]) -> tuple[tuple[float, float], ...]:
        runs: list[list[int]] = []
        for layer in sorted(layers):
            if runs and layer == runs[-1][1] + 1:
                runs[-1][1] = layer
            else:
                runs.append([layer, layer])
        return tuple((round(STRIP_LEFT + a * cell_w, 1), round((b - a + 1) * cell_w, 1))
                     for a, b in runs)

    frames = [FrameView(0, "Before the forward pass",
                        tuple(cell(i, "empty") for i in range(n)), (), "", sx(0), sy(0),
                        "", "before the forward pass")]
    for k in range(1, last + 1):
        i, j = trace.frame_events[k]
        evs = chosen.events[i:j]
        changed = {}
        for e in evs:
            if e.layer >= 0:
                changed[e.layer] = e.layer_state
        pts = _points(chosen, evs)
        e_last = evs[-1]
        layers = sorted({e.layer + 1 for e in evs if e.layer >= 0})
        where = ("" if not layers else f"layer {layers[0]} of {n}" if len(layers) == 1
                 else f"layers {min(layers)}–{max(layers)} of {n}")
        phase = trace.frames[k].phase
        frames.append(FrameView(
            k, phase.capitalize() + (f" · {where}" if where else ""),
            tuple(cell(layer, state) for layer, state in sorted(changed.items())),
            boxes(list(changed)), _path(pts, sx, sy), sx(e_last.end_ms), sy(e_last.memory_after),
            f"{human_bytes(e_last.memory_after)} at {ms(e_last.end_ms)}",
            phase.lower() + (f", {where}" if where else "")))
    every = next(s for s in (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128) if n / s <= 24)
    layer_labels = tuple((round(STRIP_LEFT + (i + 0.5) * cell_w, 1), str(i + 1))
                         for i in range(n) if (i + 1) % every == 0 or i == 0)
    legend_items = [("full", "all activations"), ("selective", "all but attention scores"),
                    ("checkpoint", "input only"), ("recomputed", "recomputed"),
                    ("done", "freed")]
    legend = tuple((22 + 236 * q, STATE_FILLS[s], text) for q, (s, text) in
                   enumerate(legend_items))
    sp = " + SP" if p.sequence_parallel else ""
    return CheckpointDeck(
        WIDTH, HEIGHT, f"{m.name} · {n} layers · s = {m.seq} · b = {p.micro_batch} · "
                       f"t = {p.tp}{sp}",
        CHART, _ticks(0, t_max, ms, sx), _byte_ticks(m_max, sy),
        tuple(curves), colour, layer_labels, tuple(frames),
        legend)


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
