"""Chapter 5, ZeRO: ``/zero`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

from dataclasses import replace

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
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
def deck_svg(p: ZeroParams, frame: int, box: Box) -> Markup:
    """The page's deck for ``box``, showing ``frame`` first (cached: a deck is a pure function
    of its params and box)."""
    return zero_svg.render(view.build_deck(traced(simulate, p), box), frame)


def page_view(p: ZeroParams, trace, frame: int, box: Box = PAGE) -> dict:
    return {"deck_svg": deck_svg(p, frame, box), "deck_title": view.deck_title(p, trace),
            **panels(trace), "torchrun": torchrun_line(CHECK, p)}


def form_view() -> dict:
    return {"param_counts": PARAM_COUNTS}


def export_view(p: ZeroParams, trace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    caption = caption_lines(trace.frames[frame].caption, box.width)
    return {"deck_svg": zero_svg.render(view.build_deck(trace, drawing, upto=frame), frame,
                                        standalone=True, caption=caption,
                                        style=deck_style(standalone=True))}
