"""The strip under the data-parallel timeline, and the line under it that says where things
stand at a frame's time: DDP's buckets (waiting, filling, queued, all-reducing, reduced) laid
out by bytes, or the parameters FSDP holds gathered, against time. Geometry only, at the sizes
of the deck's box (:mod:`app.scenes.data_parallel.deck` lays the deck out)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from app.catalog.models import PRESETS
from app.draw.lanes import KIND_COLOURS
from app.draw.palette import text_on
from app.draw.shapes import Label
from app.draw.text import fits
from app.sim.data_parallel.simulate import DataParallelTrace

STRIP_STATES = {"waiting": "", "filling": KIND_COLOURS["backward"][0], "queued": "#f5d08a",
                "reducing": KIND_COLOURS["all_reduce"][0], "reduced": "#2e3440"}
ROOT_GATHERED, LAYER_GATHERED = "#9ed8c4", KIND_COLOURS["all_gather"][0]
EVENT_TOLERANCE_US = 1e-3
"""Times closer than a nanosecond are the same event."""


@dataclass(frozen=True)
class Piece:
    x: float
    y: float
    w: float
    h: float
    fill: str
    cls: str = ""


@dataclass(frozen=True)
class Strip:
    """Where the strip lies: x from ``left`` to ``right``, y from ``top``, ``height`` tall;
    its bucket numbers at ``text`` where they fit, else at ``small``."""

    left: float
    right: float
    top: float
    height: float
    small: float
    text: float
    outline: bool = False
    """drawn round its whole length (DDP's buckets: what is still to come shows as empty)"""


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


def bucket_strip(trace, clock: BucketClock, lo: float, hi: float, first: bool, s: Strip):
    """The buckets whose state changed between ``lo`` and ``hi``, each as wide as its bytes
    (its number inside it where the number fits at the small size)."""
    t = trace.timeline
    total = sum(b.elements for b in t.buckets) or 1
    scale = (s.right - s.left) / total
    pieces, texts, x = [], [], s.left
    for b in t.buckets:
        w = b.elements * scale
        now = clock.state(b, hi)
        before = None if first else clock.state(b, lo)
        if now != before:
            state, fraction = now
            if fraction < 1:                  # an outline for what is still to come
                pieces.append(Piece(round(x, 2), s.top, round(max(w, 0.6), 2), s.height, "",
                                    "freed" if w >= 6 else "blank"))
            if state != "waiting":
                pieces.append(Piece(round(x, 2), s.top, round(max(w * fraction, 0.6), 2),
                                    s.height, STRIP_STATES[state],
                                    "reduced" if state == "reduced" else ""))
            # bold where drawn on ink (.on-ink), so measured bold
            size = next((z for z in (s.text, s.small)
                         if fits(str(b.index), z, w - z * 0.6, bold=True)), 0.0)
            if size and s.height >= size * 1.3:
                ink = ("class:on-ink" if state == "reduced" else
                       text_on(STRIP_STATES[state]) if state != "waiting" and fraction == 1
                       else "")
                texts.append(Label(round(x + w / 2, 1), round(s.top + s.height / 2, 1),
                                   str(b.index), colour=ink, size=size))
        x += w
    return tuple(pieces), tuple(texts)


def gathered_strip(trace, lo: float, hi: float, s: Strip, x_of):
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
        live = sum(n for s0, e, n in layers if s0 <= mid < e)
        x, w = round(x_of(a), 2), round(max(x_of(b) - x_of(a), 0.6), 2)
        for bottom, amount, colour in ((0, base, ROOT_GATHERED), (base, live, LAYER_GATHERED)):
            if amount:
                top = s.top + s.height - (bottom + amount) * s.height / peak
                pieces.append(Piece(x, round(top, 1), w, round(amount * s.height / peak, 1),
                                    colour))
    return tuple(pieces), ()


def strip_legend(mode: str) -> list[tuple[str, str]]:
    """(paint, text) of the strip's legend items: a colour, "" an outline still to come, or
    ``class:name``."""
    if mode == "ddp":
        return [("", "waiting for gradients"), (STRIP_STATES["queued"], "full, queued"),
                ("class:reduced", "reduced")]
    if mode == "fsdp":
        return [(ROOT_GATHERED, "embeddings and head: gathered all step"),
                (LAYER_GATHERED, "layers: gathered around their compute")]
    return []


def note_texts(trace, clock, t_us: float) -> tuple[str, ...]:
    """What is going on at ``t_us``, longest first: the deck shows the first that fits."""
    p, t = trace.params, trace.timeline
    if p.mode == "fsdp":
        live = sum(n for s, e, n in t.gathered if s <= t_us < e)
        peak = t.peak_gathered_elements / 1e6
        shard = PRESETS[p.preset].param_count() / p.dp / 1e6
        return (f"gathered now: {live / 1e6:.1f} M parameters (peak {peak:.1f} M; this rank's "
                f"shard: {shard:.1f} M)",
                f"gathered now: {live / 1e6:.1f} M (peak {peak:.1f} M, shard {shard:.1f} M)",
                f"gathered: {live / 1e6:.1f} M of {peak:.1f} M")
    if p.mode == "ddp":
        states = [clock.state(b, t_us)[0] for b in t.buckets]
        queued = states.count("queued") + states.count("reducing")
        done = f"{states.count('reduced')} of {len(t.buckets)}"
        return (f"buckets all-reduced: {done}" + (f" · in flight or queued: {queued}"
                                                   if queued else ""),
                f"reduced: {done}" + (f" · queued: {queued}" if queued else ""))
    busy = [s for s in t.spans if s.start_us < t_us <= s.end_us and s.end_us > s.start_us]
    idle = [g for g in range(min(p.dp, 8)) if not any(s.lane == f"GPU {g}" for s in busy)]
    if not busy:
        return ("",)
    if not idle:
        return ("every GPU is busy",)
    return (f"idle at this moment: GPU {', '.join(map(str, idle))}",
            f"idle: GPU {', '.join(map(str, idle))}", f"{len(idle)} GPUs idle")
