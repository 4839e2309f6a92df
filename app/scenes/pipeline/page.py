"""Chapter 7, pipeline parallelism: ``/pipeline`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np
from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.humanize import sig4
from app.draw.plot import line_chart
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.pipeline import deck as view
from app.scenes.pipeline import deck_svg as pipeline_svg
from app.scenes.pipeline.check import CHECK, TORCH_CLASS
from app.sim.pipeline.captions import MAX_FRAMES
from app.sim.pipeline.orders import SCHEDULE_KINDS
from app.sim.pipeline.params import PipelineParams
from app.sim.pipeline.passes import Times, with_sends
from app.sim.pipeline.schedules import decode, format_order
from app.sim.pipeline.simulate import PipelineTrace, bubble_curves, simulate
from app.templating import LIGHT_COLOURS, PAGE_COLOURS, deck_style, render

CHUNKS_FOR = {k: kind.chunks for k, kind in SCHEDULE_KINDS.items() if kind.chunks}


@memoised(DECKS)
def deck_of(p: PipelineParams, box: Box) -> view.Deck:
    return view.build_deck(traced(simulate, p), box)


@memoised(DECKS)
def deck_svg(p: PipelineParams, frame: int, box: Box) -> Markup:
    """The page's deck for ``box``, showing ``frame`` first (cached: decks are pure functions
    of their params and box)."""
    return pipeline_svg.render(deck_of(p, box), frame)


def page_view(p: PipelineParams, trace: PipelineTrace, frame: int, box: Box = PAGE) -> dict:
    kind = SCHEDULE_KINDS[p.schedule]
    return {"deck_svg": deck_svg(p, frame, box), "deck_title": deck_of(p, box).title,
            "kind": kind,
            "bubble_chart": bubble_chart(p, trace), "memory_chart": memory_chart(trace),
            "orders": orders_preview(trace), "sends": sends_preview(trace),
            "torch_class": TORCH_CLASS.get(p.schedule),
            "torchrun": torchrun_line(CHECK, p), "max_frames": MAX_FRAMES,
            "interleaved_memory": interleaved_memory(p, trace)}


def form_view() -> dict:
    return {"kinds": SCHEDULE_KINDS, "chunks_for": CHUNKS_FOR, "style": pipeline_style(False)}


def export_view(p: PipelineParams, trace: PipelineTrace, frame: int,
                box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    return {"deck_svg": pipeline_svg.render(
        view.build_deck(trace, drawing, upto=frame), frame, standalone=True,
        caption=caption_lines(trace.frames[frame].caption, box.width),
        style=deck_style(standalone=True) + pipeline_style(True))}


@lru_cache(maxsize=2)
def pipeline_style(standalone: bool) -> Markup:
    """The deck's CSS: theme variables on pages, plain light colours in exported files."""
    return Markup(render("_partials/pipeline_style.css",
                         c=LIGHT_COLOURS if standalone else PAGE_COLOURS))


def bubble_chart(p: PipelineParams, trace: PipelineTrace):
    chunks = p.chunks if p.schedule == "interleaved_1f1b" else 2
    curves = bubble_curves(p.stages, chunks, Times(p.t_f, p.t_b, p.t_w, p.t_comm))
    data = []
    for c in curves:
        if c.microbatches:
            name = SCHEDULE_KINDS[c.schedule].title
            if c.schedule == "interleaved_1f1b":
                name = f"interleaved v={c.chunks}"
            data.append((name, c.microbatches, [100 * b for b in c.bubble]))
    return line_chart(data, x_label="micro-batches m", y_label="bubble (% of rank-time)",
                      title=f"Bubble against m on {p.stages} rank{'s' if p.stages > 1 else ''}",
                      x_log=True, x_tick_base=2, x_format=lambda v: f"{v:g}",
                      y_format=lambda v: f"{v:g}%",
                      markers=[(p.microbatches, f"m = {p.microbatches}: "
                                                f"{100 * trace.bubble_fraction:.1f}%")])


MEMORY_STEPS = 400
"""A rank's held-activation curve with more steps than this is drawn as the most held per
slice of time (so peaks survive)."""


def memory_chart(trace: PipelineTrace):
    ranks = trace.params.stages
    data = []
    for r in sorted({0, ranks // 2, ranks - 1}):
        times, held = trace.memory.times[r], trace.memory.held[r]
        if times.size > MEMORY_STEPS:
            edges = np.linspace(0, trace.makespan, MEMORY_STEPS // 2 + 1)
            first = np.maximum(np.searchsorted(times, edges[:-1], side="right") - 1, 0)
            times, held = edges[:-1], np.maximum.reduceat(held, first)
        xs, ys = [0.0], [0.0]
        for t, h in zip(times[1:].tolist(), held[1:].tolist()):
            xs += [t, t]
            ys += [ys[-1], h]
        xs.append(trace.makespan)
        ys.append(ys[-1])
        data.append((f"rank {r}", xs, ys))
    return line_chart(data, x_label="time", y_label="micro-batch-chunks held",
                      title="Activations held over time", x_format=sig4)


def interleaved_memory(p: PipelineParams, trace: PipelineTrace) -> str:
    """Korthikanti et al.'s factor for the first stage under interleaving, next to the peak."""
    if p.schedule != "interleaved_1f1b":
        return ""
    factor = 1 + (p.stages - 1) / (p.stages * p.chunks)
    return (f"Rank 0 peaks at {trace.memory.peak[0]} chunks = "
            f"{sig4(trace.memory.peak[0] / p.chunks)} micro-batches of its layers; 1F1B's rank 0 "
            f"holds p = {p.stages}. Korthikanti et al. (2022) give the ratio as "
            f"1 + (p − 1)/(p·v) = {sig4(factor)} (when m is large enough for the full warm-up).")


def orders_preview(trace: PipelineTrace, ranks: int = 8, width: int = 40) -> list[tuple[int, str]]:
    """The first actions of the first ranks, as torch prints them."""
    out, m = [], trace.params.microbatches
    for r, ids in enumerate(trace.schedule.ids[:ranks]):
        text = format_order([decode(a, m) for a in ids[:width].tolist()])
        out.append((r, text + (f" … ({len(ids):,} actions)" if len(ids) > width else "")))
    return out


def sends_preview(trace: PipelineTrace, ranks: int = 4, width: int = 40) -> list[tuple[int, str]]:
    """The first ranks' orders with their sends and receives (torch's ``_add_send_recv``)."""
    out = []
    for r in range(min(ranks, trace.params.stages)):
        tokens = with_sends(trace.schedule, trace.flat, trace.links, r, limit=width + 1)
        out.append((r, " ".join(tokens[:width]) + (" …" if len(tokens) > width else "")))
    return out
