"""Chapter 8, mixed precision: ``/precision`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

from dataclasses import replace

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.precision import deck as view
from app.scenes.precision import deck_svg as precision_svg
from app.scenes.precision.check import CHECK
from app.scenes.precision.deck_scale import ScaleDeck, scale_deck
from app.sim.precision.number_formats import FORMATS, KEYS
from app.sim.precision.params import PrecisionParams
from app.sim.precision.simulate import simulate
from app.templating import deck_style

FORMAT_CHOICES = [(k, FORMATS[k].label) for k in KEYS]


@memoised(DECKS)
def deck_of(p: PrecisionParams, box: Box) -> ScaleDeck:
    """The loss-scaling deck's geometry for ``box``, every frame (cached: a pure function of
    its params and box)."""
    return scale_deck(traced(simulate, p), box)


@memoised(DECKS)
def figures(p: PrecisionParams, frame: int, box: Box) -> tuple[Markup, Markup, Markup]:
    """The page's drawings: the bits, the loss-scaling deck for ``box`` showing ``frame``
    first, and the gradients against every format's range."""
    trace = traced(simulate, p)
    return (precision_svg.bits_svg(view.bits_figure(trace)),
            precision_svg.scale_svg(deck_of(p, box), frame),
            precision_svg.range_svg(view.range_figure(trace)))


def page_view(p: PrecisionParams, trace, frame: int, box: Box = PAGE) -> dict:
    bits, deck, ranges = figures(p, frame, box)
    return {"bits_svg": bits, "deck_svg": deck, "ranges_svg": ranges,
            "deck_title": deck_of(p, box).title, "formats": [FORMATS[k] for k in KEYS],
            "focus": FORMATS[p.format], "fp8_labels": {k: f.label for k, f in FORMATS.items()},
            "skipped": sum(s.found_inf for s in trace.scale_steps),
            "torchrun": torchrun_line(CHECK, p), "verify_world": CHECK.world(p)}


def form_view() -> dict:
    return {"format_choices": FORMAT_CHOICES}


def export_view(p, trace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    return {"deck_svg": precision_svg.scale_svg(scale_deck(trace, drawing, upto=frame), frame,
                                                standalone=True,
                                                caption=caption_lines(trace.frames[frame].caption,
                                                                      box.width),
                                                style=deck_style(standalone=True))}
