"""The data-parallel scene as drawable geometry: one step's timeline that grows frame by frame.

Frame k holds the pieces of every bar that lie between the previous frame's time and its own
(so frames 0…k show the timeline up to t_k), the bars' labels once they are complete, a cursor
at t_k (``only-current``), and a strip that says where things stand at t_k: DDP's buckets
(waiting, filling, queued, all-reducing, reduced), or the parameters FSDP holds gathered.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from app.sim.data_parallel.simulate import DataParallelTrace
from app.catalog.models import PRESETS
from app.draw.shapes import Label
from app.draw.lanes import KIND_COLOURS, Bar, lane_chart
from app.draw.palette import text_on
from app.humanize import human_bytes, human_time_us
from app.draw.plot import line_chart

WIDTH, HEIGHT = 1280, 720
LEFT, RIGHT = 180, 1250
LANE_TOP = 96
STRIP_STATES = {"waiting": "", "filling": KIND_COLOURS["backward"][0], "queued": "#f5d08a",
                "reducing": KIND_COLOURS["all_reduce"][0], "reduced": "#2e3440"}


@dataclass(frozen=True)
class Piece:
    x: float
    y: float
    w: float
    h: float
    fill: str
    cls: str = ""


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    pieces: tuple[Piece, ...]
    texts: tuple[Label, ...]
    cursor: float
    cursor_label: str
    notes: tuple[Label, ...]
    unit: str = ""
    """what the step is, for the player's position text: a time (t = 12.3 ms of 26 ms)"""


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    title: str
    lane_names: tuple[Label, ...]
    axis_y: float
    ticks: tuple[tuple[float, str], ...]
    strip_title: str
    strip_y: float
    strip_h: float
    frames: tuple[FrameView, ...]
    legend: tuple[tuple[float, str, str], ...]
    lanes_bottom: float
    strip_legend: tuple[tuple[float, float, str, str], ...]
    utilisation: tuple[Label, ...]
    strip_outline: bool = False


LAYOUT = {  # mode: (row height of a lane, strip top, strip height)
    "ddp": (92.0, 400.0, 100.0),
    "fsdp": (92.0, 400.0, 120.0),
    "dp": (40.0, 0.0, 0.0),
}


def build_deck(trace: DataParallelTrace, upto: int | None = None) -> Deck:
    p, t = trace.params, trace.timeline
    lanes = (tuple(f"GPU {g}" for g in range(min(p.dp, 8))) + ("links",) if p.mode == "dp"
             else ("compute", "comm"))
    row_h, strip_y, strip_h = LAYOUT[p.mode]
    right = RIGHT - 110 if p.mode == "dp" else RIGHT          # DataParallel: room for "44 % busy"
    chart = lane_chart(t.spans, lanes, width=right + 20, left=LEFT, row_h=row_h, top=LANE_TOP,
                       label_min=60)
    names = {"compute": "GPU compute", "comm": "NCCL stream", "links": "copies / NCCL"}
    lane_names = tuple(Label(LEFT - 12, y, names.get(name, name), size=16, anchor="end")
                       for y, name in chart.lanes)
    scale = (chart.right - chart.left) / (t.step_us or 1.0)
    x_of = lambda us: chart.left + us * scale  # noqa: E731
    last = len(trace.moments) - 1 if upto is None else upto
    clock = BucketClock(trace) if p.mode == "ddp" else None
    frames = []
    for k in range(last + 1):
        lo = trace.moments[k - 1].t_us if k else 0.0
        hi = trace.moments[k].t_us
        pieces, texts = _bar_pieces(chart.bars, x_of(lo), x_of(hi))
        if k == 0:   # what is about to happen: every span to come, dashed ("empty": not yet)
            pieces = tuple(Piece(round(b.x, 2), b.y, round(max(b.w, 0.6), 2), b.h, "", "empty")
                           for b in chart.bars)
        if p.mode == "ddp":
            strip, strip_texts = _bucket_strip(trace, clock, lo, hi, k == 0, strip_y, strip_h)
        elif p.mode == "fsdp":
            strip, strip_texts = _gathered_strip(trace, lo, hi, strip_y, strip_h, x_of)
        else:
            strip, strip_texts = (), ()
        end = human_time_us(trace.moments[-1].t_us)
        # the header says the time alone: "event k of N" was a second count beside the
        # player's step, and ran into the title
        frames.append(FrameView(
            k, "Before the step · t = 0" if k == 0 else f"t = {human_time_us(hi)} of {end}",
            pieces + strip, texts + strip_texts,
            round(x_of(hi), 1), human_time_us(hi), _notes(trace, clock, hi),
            "t = 0, before the step" if k == 0 else f"t = {human_time_us(hi)} of {end}"))
    legend_items = []
    for kind in dict.fromkeys(s.kind for s in t.spans if s.end_us > s.start_us):
        colour, text = KIND_COLOURS.get(kind, ("#777777", kind))
        if text not in [i[2] for i in legend_items]:
            legend_items.append((0.0, colour, text))
    x, legend = 22.0, []
    for _, colour, text in legend_items:
        legend.append((x, colour, text))
        x += 52 + len(text) * 9.2     # 16-unit text: at 8.6 a character the swatches touched
    title = deck_title(p, trace)
    strip_title = {"ddp": "DDP's buckets, in the order backward fills them (width = bytes)",
                   "fsdp": f"parameters held gathered beyond this rank's shard (peak "
                           f"{t.peak_gathered_elements / 1e6:.1f} M)",
                   "dp": ""}[p.mode]
    return Deck(WIDTH, HEIGHT, title, lane_names, chart.axis_y, chart.ticks, strip_title,
                strip_y, strip_h, tuple(frames), tuple(legend), chart.axis_y,
                _strip_legend(p.mode, strip_y + strip_h + 30), _utilisation(trace, chart),
                strip_outline=p.mode == "ddp")


def deck_title(p, trace: DataParallelTrace) -> str:
    n = len(trace.timeline.buckets)
    return {"dp": f"DataParallel · {p.dp} GPUs · {p.preset}",
            "ddp": f"DDP · {p.dp} ranks · {p.preset} · {n} buckets ≤ {p.bucket_mb:g} MiB"
                   f"{' (first ≤ 1 MiB)' if p.bucket_cap_mb is None else ''}",
            "fsdp": f"FSDP · {p.dp} ranks · prefetch {'on' if p.prefetch else 'off'} · "
                    f"{p.preset}"}[p.mode]


def _strip_legend(mode: str, y: float) -> tuple[tuple[float, float, str, str], ...]:
    if mode == "dp":
        return ()
    items = ([("", "waiting for gradients"), (STRIP_STATES["filling"], "filling (gradients ready)"),
              (STRIP_STATES["queued"], "full, queued"), (STRIP_STATES["reducing"], "all-reducing"),
              ("class:reduced", "reduced")] if mode == "ddp" else
             [(ROOT_GATHERED, "embeddings and head: gathered for the whole step"),
              (LAYER_GATHERED, "layers: gathered around their forward and backward")])
    out, x = [], float(LEFT)
    for colour, text in items:
        out.append((x, y, colour, text))
        x += 52 + len(text) * 9.2     # 16-unit text: at 8.6 a character the swatches touched + 12
    return tuple(out)


def _utilisation(trace, chart) -> tuple[Label, ...]:
    """DataParallel: each drawn GPU's busy share of the whole step, at the end of its lane."""
    p, t = trace.params, trace.timeline
    if p.mode != "dp":
        return ()
    out = []
    for y, name in chart.lanes:
        if name.startswith("GPU"):
            busy = sum(s.duration_us for s in t.spans if s.lane == name)
            out.append(Label(chart.right + 14, y + 5, f"{busy / t.step_us:.0%} busy", size=15))
    return tuple(out)


def _bar_pieces(bars: tuple[Bar, ...], x0: float, x1: float):
    """The parts of the bars between x0 and x1, and the labels of bars that end there."""
    pieces, texts = [], []
    for b in bars:
        a, z = max(b.x, x0), min(b.x + b.w, x1)
        if z > a:
            pieces.append(Piece(round(a, 2), b.y, round(max(z - a, 0.6), 2), b.h, b.fill))
        if b.label and x0 < b.x + b.w <= x1 + 0.01:
            texts.append(Label(round(b.x + 5, 1), round(b.y + b.h / 2 + 5, 1), b.label,
                               colour=b.ink, anchor="start", size=13))
    return tuple(pieces), tuple(texts)


EVENT_TOLERANCE_US = 1e-3
"""Times closer than a nanosecond are the same event."""


class BucketClock:
    """Where each DDP bucket stands at a given time: waiting for its first gradient, filling,
    full and queued behind other all-reduces, being all-reduced, or done."""

    def __init__(self, trace: DataParallelTrace):
        t = trace.timeline
        sizes = [n for _, n in PRESETS[trace.params.preset].parameters()]
        spans = {s.name: s for s in t.spans if s.name.startswith("bucket ")}
        self.plan = {}
        for b in t.buckets:   # (all-reduce span, ready times sorted, bytes ready after each)
            ready = sorted((t.ready_us[i], sizes[i]) for i in b.tensors)
            total = sum(n for _, n in ready) or 1
            self.plan[b.index] = (spans[f"bucket {b.index}"], [r for r, _ in ready],
                                  np.cumsum([n for _, n in ready]) / total)

    def state(self, bucket, t_us: float) -> tuple[str, float]:
        span, times, filled = self.plan[bucket.index]
        # a frame's time is its event's, rounded to the nanosecond (the timeline's moments): a
        # span that ends at that event ends then, though its float end lies a few ulps later
        # (bucket 6 was still drawn all-reducing at the event its caption says it finished)
        t_us += EVENT_TOLERANCE_US
        if span.end_us <= t_us:
            return "reduced", 1.0
        if span.start_us <= t_us:
            return "reducing", 1.0
        k = bisect.bisect_right(times, t_us)
        if k == len(times):
            return "queued", 1.0
        return ("filling", float(filled[k - 1])) if k else ("waiting", 0.0)


def _bucket_strip(trace, clock: BucketClock, lo, hi, first, y, h):
    t = trace.timeline
    total = sum(b.elements for b in t.buckets) or 1
    scale = (RIGHT - LEFT) / total
    pieces, texts, x = [], [], float(LEFT)
    for b in t.buckets:
        w = b.elements * scale
        now = clock.state(b, hi)
        before = None if first else clock.state(b, lo)
        if now != before:
            state, fraction = now
            if fraction < 1:                  # an outline for what is still to come
                pieces.append(Piece(round(x, 2), y, round(max(w, 0.6), 2), h, "",
                                    "freed" if w >= 6 else "blank"))
            if state != "waiting":
                pieces.append(Piece(round(x, 2), y, round(max(w * fraction, 0.6), 2), h,
                                    STRIP_STATES[state], "reduced" if state == "reduced" else ""))
            if w >= 44:
                ink = ("class:on-ink" if state == "reduced" else
                       text_on(STRIP_STATES[state]) if state != "waiting" and fraction == 1 else "")
                texts.append(Label(round(x + w / 2, 1), y + h / 2 + 5, f"{b.index}", colour=ink,
                                   size=14))
        x += w
    return tuple(pieces), tuple(texts)


ROOT_GATHERED, LAYER_GATHERED = "#9ed8c4", KIND_COLOURS["all_gather"][0]


def _gathered_strip(trace, lo, hi, y, h, x_of):
    """The parameters gathered between lo and hi: the root unit (embeddings and head, kept all
    step) light at the bottom, the layers gathered around their compute dark on top."""
    t = trace.timeline
    peak = t.peak_gathered_elements or 1
    root, layers = t.gathered[0], t.gathered[1:]
    cuts = sorted({lo, hi} | {e for a, b, _ in t.gathered for e in (a, b) if lo < e < hi})
    pieces = []
    for a, b in zip(cuts, cuts[1:]):
        mid = (a + b) / 2
        base = root[2] if root[0] <= mid < root[1] else 0
        live = sum(n for s, e, n in layers if s <= mid < e)
        x, w = round(x_of(a), 2), round(max(x_of(b) - x_of(a), 0.6), 2)
        for bottom, amount, colour in ((0, base, ROOT_GATHERED), (base, live, LAYER_GATHERED)):
            if amount:
                top = y + h - (bottom + amount) * h / peak
                pieces.append(Piece(x, round(top, 1), w, round(amount * h / peak, 1), colour))
    return tuple(pieces), ()


def _notes(trace, clock, t_us: float) -> tuple[Label, ...]:
    """What is going on at t_us, written under the strip."""
    p, t = trace.params, trace.timeline
    y = HEIGHT - 62
    if p.mode == "fsdp":
        live = sum(n for s, e, n in t.gathered if s <= t_us < e)
        text = (f"gathered now: {live / 1e6:.1f} M parameters (peak "
                f"{t.peak_gathered_elements / 1e6:.1f} M; this rank's shard: "
                f"{PRESETS[p.preset].param_count() / p.dp / 1e6:.1f} M)")
        return (Label(LEFT, y, text, anchor="start", size=17),)
    if p.mode == "ddp":
        states = [clock.state(b, t_us)[0] for b in t.buckets]
        queued = states.count("queued") + states.count("reducing")
        text = (f"buckets all-reduced: {states.count('reduced')} of {len(t.buckets)}"
                + (f" · in flight or queued: {queued}" if queued else ""))
        return (Label(LEFT, y, text, anchor="start", size=17),)
    busy = [s for s in t.spans if s.start_us < t_us <= s.end_us and s.end_us > s.start_us]
    idle = [g for g in range(min(p.dp, 8)) if not any(s.lane == f"GPU {g}" for s in busy)]
    text = (f"idle at this moment: GPU {', '.join(map(str, idle))}" if idle and busy else
            "every GPU is busy" if busy else "")
    return (Label(LEFT, y, text, anchor="start", size=17),)


# --- panels -----------------------------------------------------------------------------------

def panels(trace: DataParallelTrace) -> dict:
    p = trace.params
    ddp = trace.tiny["ddp"].final_params
    out = {"human_bytes": human_bytes,
           "differences": {m: float(abs(tr.final_params - ddp).max()) for m, tr in trace.tiny.items()}}
    if trace.sweep:
        sizes = [mb * 2 ** 20 for mb, _, _ in trace.sweep]
        out["sweep_chart"] = line_chart(
            [("step time", sizes, [step for _, step, _ in trace.sweep]),
             ("not hidden", sizes, [exposed for _, _, exposed in trace.sweep])],
            x_label="bucket size (bucket_cap_mb)", y_label="time", x_log=True, y_log=False,
            title=f"DDP step time against bucket size · {p.preset} on {p.dp} ranks",
            x_format=human_bytes, y_format=human_time_us, x_tick_base=4,
            markers=([(p.bucket_mb * 2 ** 20, "this run = DDP's default")]
                     if p.bucket_cap_mb is None
                     else [(p.bucket_mb * 2 ** 20, "this run"), (25 * 2 ** 20, "DDP's default")]),
            width=1100, height=380)
    return out
