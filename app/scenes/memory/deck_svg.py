"""The memory deck as SVG markup (geometry from :mod:`app.scenes.memory.deck`): a stacked bar against
the GPU's capacity and a treemap of the ledger, one layer per category.

``current`` is the frame shown first. Layers 0…current are part of the drawing; the layers
after it follow the ``<svg>`` in an inert ``<template class="deck-later">`` that the player moves
into the deck when it steps there (static/js/player.js), so a slider move lays out only what is
on screen. A box's labels are ``<tspan>``s of one ``<text>`` (a browser lays out a text element
at a cost that dwarfs its spans'), kept inside the box's group so that hovering them shows the
box's formula. ``standalone`` is a file of its own: the style sheet inlined, concrete colours,
every layer (the later ones hidden), the overlays of the current layer alone, the caption
underneath.
"""

from __future__ import annotations

from markupsafe import Markup

from app.draw.deck import frame_start, step_header, write_deck
from app.draw.svg import esc
from app.scenes.memory.deck import Deck, Layer, Text, Tile

DEFS = ('<pattern id="memory-hatch" patternUnits="userSpaceOnUse" width="9" height="9" '
        'patternTransform="rotate(45)"><rect width="3.5" height="9" fill="#ffffff" '
        'fill-opacity="0.45"/></pattern>')


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    # the bar's axis and the GPU's capacity
    left, right = deck.bar_left, deck.bar_right
    under = [texts(deck.title), '<g class="axis-group">']
    under += [f'<line class="grid" x1="{left - 6}" x2="{right}" y1="{y}" y2="{y}"/>'
              for y in deck.gridlines]
    under.append(texts(deck.ticks))
    under.append(f'<line class="axis" x1="{left}" x2="{right}" y1="{deck.bar_bottom}" '
                 f'y2="{deck.bar_bottom}"/>')
    under.append(texts(deck.capacity))
    under.append("</g>")
    # the capacity over the bar, so that a bar taller than the GPU still shows where it ends
    cap = f'x1="{left - 4}" x2="{right + 4}" y1="{deck.capacity_y}" y2="{deck.capacity_y}"'
    over = [f'<line class="limit-halo" {cap}/><line class="limit" {cap}/>']
    if deck.hatch_legend:
        t = deck.hatch_legend
        swatch = _swatch(deck, t)
        over.append(f'<rect {swatch} class="hatch-swatch" fill="#999999"/>'
                    f'<rect {swatch} fill="url(#memory-hatch)"/>' + texts((t,)))
    return write_deck(deck.width, deck.height, deck.label, deck.layers, current,
                      lambda layer: _layer(deck, layer, current, standalone),
                      standalone=standalone, caption=caption, style=style, defs=DEFS,
                      cls="deck memory-deck", under=under, over=over, every_frame=True,
                      box=deck.box)


def texts(labels) -> str:
    """Labels as ``<tspan>``s of as few ``<text>`` elements as share a class, colour and
    anchor (consecutive labels only, so that the drawing order stays)."""
    out, run = [], []
    for t in labels:
        if run and (t.cls, t.fill, t.anchor) != (run[0].cls, run[0].fill, run[0].anchor):
            out.append(_text(run))
            run = []
        run.append(t)
    if run:
        out.append(_text(run))
    return "".join(out)


def _text(run: list[Text]) -> str:
    first = run[0]
    attrs = f'class="{first.cls}"'
    if first.anchor != "start":
        attrs += f' text-anchor="{first.anchor}"'
    if first.fill:                    # over the class's theme colour
        attrs += f' style="fill: {first.fill}"'
    same_size = all(t.size == first.size for t in run)
    if same_size:
        attrs += f' font-size="{first.size}"'
    spans = []
    for t in run:
        size = "" if same_size else f' font-size="{t.size}"'
        weight = f' font-weight="{t.weight}"' if t.weight != 400 else ""
        spans.append(f'<tspan x="{t.x}" y="{t.y}"{size}{weight}>{esc(t.text)}</tspan>')
    return f"<text {attrs}>{''.join(spans)}</text>"


def _swatch(deck: Deck, t: Text) -> str:
    """The geometry of the legend swatch before text ``t`` (app/draw/layout.py legend_rows)."""
    side = deck.swatch
    return (f'x="{round(t.x - side - t.size * 0.45, 1)}" '
            f'y="{round(t.y - side * 0.5 - t.size * 0.36, 1)}" width="{side}" height="{side}" '
            f'rx="3"')


def _box(b: Tile, cls: str = "box") -> str:
    hatch = (f'<rect x="{b.x}" y="{b.y}" width="{b.w}" height="{b.h}" fill="url(#memory-hatch)" '
             f'pointer-events="none"/>' if b.hatched else "")
    return (f'<g class="{cls}" data-tip="{esc(b.title)}"><rect class="fill" x="{b.x}" '
            f'y="{b.y}" width="{b.w}" height="{b.h}" fill="{b.fill}"/>{hatch}'
            f'{texts(b.labels)}</g>')


def _layer(deck: Deck, layer: Layer, current: int, standalone: bool) -> list[str]:
    # a file's later layers are hidden
    out = [frame_start(layer.index, current, layer.unit, hidden=layer.index > current)]
    if layer.bar:
        out.append(_box(layer.bar, "box bar"))
    out += [_box(b) for b in layer.tiles]
    x, y, colour = layer.swatch
    out.append(f'<rect x="{x}" y="{y}" width="{deck.swatch}" height="{deck.swatch}" rx="3" '
               f'fill="{colour}"/>')
    out.append(texts((*layer.legend, *layer.notes)))
    if not standalone or layer.index == current:
        out.append('<g class="only-current">')
        for x, y, w, h in ([layer.outline] if layer.outline else []) + (
                [(layer.bar.x, layer.bar.y, layer.bar.w, layer.bar.h)] if layer.bar else []):
            out.append(f'<rect class="group-outline" x="{x}" y="{y}" width="{w}" height="{h}" '
                       f'pointer-events="none"/>')
        h = deck.header
        out.append(step_header(layer.header, x=h.x, y=h.y, size=h.size) + "</g>")
    out.append("</g>")
    return out
