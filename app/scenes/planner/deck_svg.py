"""The planner's deck as SVG markup (geometry from :mod:`app.scenes.planner.deck`): the scatter,
then the Pareto front and the best mix, then the best mix's budget, each a layer that stays
drawn once reached; a layer's header (and the note of what step 3 will show) only while it is
the step on screen. ``standalone`` is a file of its own (the style inlined, the caption under)."""

from __future__ import annotations

from markupsafe import Markup

from app.draw import shapes
from app.draw.deck import frame_start, step_header, write_deck
from app.scenes.planner.deck import UNITS, Deck, Layer


def render(deck: Deck, current: int, *, standalone: bool = False, caption=(),
           style: str = "") -> Markup:
    under = [shapes.label(t) for t in deck.titles]
    over = [*deck.legend_marks, *(shapes.label(t) for t in deck.legend)]
    return write_deck(deck.width, deck.height, deck.label, deck.layers, current,
                      lambda layer: _layer(deck, layer, current), standalone=standalone,
                      caption=caption, style=style, under=under, over=over, box=deck.box)


def _layer(deck: Deck, layer: Layer, current: int) -> list[str]:
    out = [frame_start(layer.index, current, UNITS[layer.index])]
    out += layer.marks
    out += [shapes.label(t) for t in layer.texts]
    h = deck.header
    out.append('<g class="only-current">' + step_header(layer.header, x=h.x, y=h.y, size=h.size)
               + "".join(shapes.label(t) for t in layer.current) + "</g>")
    out.append("</g>")
    return out
