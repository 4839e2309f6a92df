"""Chapter 8, memory tricks: ``/checkpointing`` (activation checkpointing and gradient
accumulation) and its embed, JSON, SVG and real run."""

from __future__ import annotations

from dataclasses import replace

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.checkpointing import deck as view
from app.scenes.checkpointing import deck_svg as checkpointing_svg
from app.scenes.checkpointing.check import CHECK, scaled_or_why
from app.sim.checkpointing.params import CheckpointParams
from app.sim.checkpointing.simulate import simulate
from app.catalog.models import PRESETS
from app.templating import deck_style


@memoised(DECKS)
def deck_of(p: CheckpointParams, box: Box) -> view.CheckpointDeck:
    """The deck's geometry for ``box``, every frame (cached: a pure function of params and
    box)."""
    return view.build_deck(traced(simulate, p), box)


@memoised(DECKS)
def deck_svg(p: CheckpointParams, frame: int, box: Box) -> Markup:
    """The page's deck for ``box``, showing ``frame`` first; later frames wait in a template."""
    return checkpointing_svg.render(deck_of(p, box), frame)


def page_view(p: CheckpointParams, trace, frame: int, box: Box = PAGE) -> dict:
    # the real run's copy, or why there is none (the panel says it, the button is off)
    small, why = scaled_or_why(p)
    return {"deck_svg": deck_svg(p, frame, box), "deck_title": deck_of(p, box).title,
            "iteration_chart": view.iteration_chart(trace), "model": trace.model,
            "presets": PRESETS, "scaled": small,
            "torchrun": torchrun_line(CHECK, p) if small else f"# no real run: {why[1]}",
            "scaled_model": small.shape() if small else None}


def form_view() -> dict:
    return {}


def export_view(p, trace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    return {"deck_svg": checkpointing_svg.render(
        view.build_deck(trace, drawing, upto=frame), frame, standalone=True,
        caption=caption_lines(trace.frames[frame].caption, box.width),
        style=deck_style(standalone=True))}
