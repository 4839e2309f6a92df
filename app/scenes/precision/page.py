"""Chapter 8, mixed precision: ``/precision`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.precision import deck as view
from app.scenes.precision import deck_svg as precision_svg
from app.scenes.precision.check import CHECK
from app.sim.precision.number_formats import FORMATS, KEYS
from app.sim.precision.params import PrecisionParams
from app.sim.precision.simulate import simulate
from app.templating import deck_style, export_context

FORMAT_CHOICES = [(k, FORMATS[k].label) for k in KEYS]


@memoised(DECKS)
def deck_of(p: PrecisionParams) -> view.ScaleDeck:
    """The loss-scaling deck's geometry, every frame (cached: a pure function of params)."""
    return view.scale_deck(traced(simulate, p))


@memoised(DECKS)
def figures(p: PrecisionParams, frame: int) -> tuple[Markup, Markup, Markup]:
    """The page's drawings: the bits, the loss-scaling deck showing ``frame`` first, and the
    gradients against every format's range."""
    trace = traced(simulate, p)
    return (precision_svg.bits_svg(view.bits_figure(trace)),
            precision_svg.scale_svg(deck_of(p), frame),
            precision_svg.range_svg(view.range_figure(trace)))


def page_view(p: PrecisionParams, trace, frame: int) -> dict:
    bits, deck, ranges = figures(p, frame)
    return {"bits_svg": bits, "deck_svg": deck, "ranges_svg": ranges,
            "deck_title": deck_of(p).title, "formats": [FORMATS[k] for k in KEYS],
            "focus": FORMATS[p.format], "fp8_labels": {k: f.label for k, f in FORMATS.items()},
            "skipped": sum(s.found_inf for s in trace.scale_steps),
            "torchrun": torchrun_line(CHECK, p), "verify_world": CHECK.world(p)}


def form_view() -> dict:
    return {"format_choices": FORMAT_CHOICES}


def export_view(p, trace, frame: int) -> dict:
    context = export_context(deck_of(p), trace, frame)
    return {"deck_svg": precision_svg.scale_svg(context["deck"], frame, standalone=True,
                                                caption=tuple(context["caption"]),
                                                style=deck_style(standalone=True))}
