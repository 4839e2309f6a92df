"""Chapter 6, tensor and sequence parallelism: ``/tensor-parallel`` and its embed, JSON, SVG and
real run."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.tensor_parallel import deck as view
from app.scenes.tensor_parallel import deck_svg as tp_svg
from app.scenes.tensor_parallel import panels as tp_panels
from app.scenes.tensor_parallel.check import CHECK
from app.sim.tensor_parallel.params import TensorParallelParams
from app.sim.tensor_parallel.simulate import BLOCK_TITLES, simulate
from app.templating import LIGHT_COLOURS, PAGE_COLOURS, deck_style, render


@lru_cache(maxsize=4)
def tp_style(standalone: bool) -> Markup:
    colours = LIGHT_COLOURS if standalone else PAGE_COLOURS
    return Markup(deck_style(standalone) + render("_partials/tp_style.css", c=colours))


@memoised(DECKS)
def deck_of(p: TensorParallelParams, box: Box):
    return view.build_deck(traced(simulate, p), box)


@memoised(DECKS)
def deck_markup(p: TensorParallelParams, frame: int, box: Box) -> Markup:
    """The page's deck for ``box`` as SVG markup, frame ``frame`` first; cached, so dragging a
    slider back to a value already seen costs nothing."""
    return tp_svg.render(deck_of(p, box), frame)


def page_view(p: TensorParallelParams, trace, frame: int, box: Box = PAGE) -> dict:
    return {"deck_title": deck_of(p, box).title, "deck_svg": deck_markup(p, frame, box),
            "block_title": BLOCK_TITLES[p.block],
            "torchrun": torchrun_line(CHECK, p), **tp_panels.panels(p, trace)}


def form_view() -> dict:
    return {"style": tp_style(False)}


def export_view(p: TensorParallelParams, trace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    return {"deck_svg": tp_svg.render(
        view.build_deck(trace, drawing, only=frame), frame, standalone=True,
        style=tp_style(True), caption=caption_lines(trace.frames[frame].caption, box.width))}
