"""Chapter 5, ZeRO: ``/zero`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

import textwrap

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.zero import deck as view
from app.scenes.zero import deck_svg as zero_svg
from app.scenes.zero.check import CHECK
from app.scenes.zero.panels import PARAM_COUNTS, panels
from app.sim.zero.params import ZeroParams
from app.sim.zero.simulate import simulate
from app.templating import deck_style


@memoised(DECKS)
def deck_svg(p: ZeroParams, frame: int) -> Markup:
    """The page's deck, showing ``frame`` first (cached: a deck is a pure function of params)."""
    return zero_svg.render(view.build_deck(traced(simulate, p)), frame)


def page_view(p: ZeroParams, trace, frame: int) -> dict:
    return {"deck_svg": deck_svg(p, frame), "deck_title": view.deck_title(p, trace),
            **panels(trace), "torchrun": torchrun_line(CHECK, p)}


def form_view() -> dict:
    return {"param_counts": PARAM_COUNTS}


def export_view(p: ZeroParams, trace, frame: int) -> dict:
    caption = tuple(textwrap.wrap(trace.frames[frame].caption, 128)[:3])
    return {"deck_svg": zero_svg.render(view.build_deck(trace, upto=frame), frame,
                                        standalone=True, caption=caption,
                                        style=deck_style(standalone=True))}
