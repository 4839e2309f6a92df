"""Chapter 8, memory tricks: ``/checkpointing`` (activation checkpointing and gradient
accumulation) and its embed, JSON, SVG and real run."""

from __future__ import annotations

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.checkpointing import deck as view
from app.scenes.checkpointing import deck_svg as checkpointing_svg
from app.scenes.checkpointing.check import CHECK, scaled_or_why
from app.sim.checkpointing.params import CheckpointParams
from app.sim.checkpointing.simulate import simulate
from app.catalog.models import PRESETS
from app.templating import deck_style, export_context


@memoised(DECKS)
def deck_of(p: CheckpointParams) -> view.CheckpointDeck:
    """The deck's geometry, every frame (cached: a pure function of params)."""
    return view.build_deck(traced(simulate, p))


@memoised(DECKS)
def deck_svg(p: CheckpointParams, frame: int) -> Markup:
    """The page's deck, showing ``frame`` first; later frames wait in a template."""
    return checkpointing_svg.render(deck_of(p), frame)


def page_view(p: CheckpointParams, trace, frame: int) -> dict:
    # the real run's copy, or why there is none (the panel says it, the button is off)
    small, why = scaled_or_why(p)
    return {"deck_svg": deck_svg(p, frame), "deck_title": deck_of(p).title,
            "iteration_chart": view.iteration_chart(trace), "model": trace.model,
            "presets": PRESETS, "scaled": small,
            "torchrun": torchrun_line(CHECK, p) if small else f"# no real run: {why[1]}",
            "scaled_model": small.shape() if small else None}


def form_view() -> dict:
    return {}


def export_view(p, trace, frame: int) -> dict:
    context = export_context(deck_of(p), trace, frame)
    return {"deck_svg": checkpointing_svg.render(context["deck"], frame, standalone=True,
                                                 caption=tuple(context["caption"]),
                                                 style=deck_style(standalone=True))}
