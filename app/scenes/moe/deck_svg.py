"""The MoE deck as SVG markup (geometry from :mod:`app.scenes.moe.deck`).

``current`` is the frame shown first: it carries class "current" (its arrows and header
show). The frames after it wait in an inert ``<template class="deck-later">`` that
static/js/player.js moves into the deck when the player reaches them. ``standalone`` is a file
of its own: the style sheet inlined, concrete colours, frames up to ``current`` only and the
caption underneath. Under the frames: the title; over them: the legend. The frames are written
by :func:`app.draw.deck.write_deck`, the shapes by :mod:`app.draw.shapes`.

Labels in a row (the logits, the experts' and tokens' names) are ``<tspan>``s of as few
``<text>`` elements as share a style (:func:`app.draw.shapes.texts`): the default stage holds
33 text elements instead of 173 and its markup is 12 % smaller (a tree parsed ahead, a swap, a
style pass each cost less); Chromium's and resvg's pixels are the same.
"""

from __future__ import annotations

from itertools import groupby

from markupsafe import Markup

from app.draw import shapes
from app.draw.deck import frame_start, step_header, write_deck
from app.draw.shapes import Path, Rect, Text, coord
from app.scenes.moe.deck import MoeDeck
from app.scenes.moe.deck_parts import Batch, FrameView

DEFS = ('<pattern id="drop-hatch" patternUnits="userSpaceOnUse" width="7" height="7" '
        'patternTransform="rotate(45)"><rect width="7" height="7" fill="#ffffff"/>'
        '<rect width="3" height="7" fill="#D55E00"/></pattern>'
        '<pattern id="pad-hatch" patternUnits="userSpaceOnUse" width="8" height="8" '
        'patternTransform="rotate(-45)"><rect width="8" height="8" fill="none"/>'
        '<rect width="1.5" height="8" fill="#8a939e"/></pattern>')


def render(deck: MoeDeck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    under = [shapes.text(t) for t in deck.title_lines]
    over = [_item(item, standalone) if not isinstance(item, Text) else shapes.text(item)
            for item in deck.legend]
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(deck, f, current, standalone),
                      standalone=standalone, caption=caption, style=style, defs=DEFS,
                      under=under, over=over, box=deck.box,
                      group=f'font-size="{shapes.FONT_SIZE}"')


def _frame(deck: MoeDeck, f: FrameView, current: int, standalone: bool) -> list[str]:
    out = [frame_start(f.index, current, f.unit, step=True)]
    shown = not standalone or f.index == current
    # the arrows under the frame's own drawing: no line runs through a slot's number
    if shown and f.arrows:
        out.append('<g class="only-current arrows">')
        out += [shapes.arrow(a, number=False) for a in f.arrows]
        out += [shapes.text(t) for t in f.arrow_labels]      # over every line, halo and all
        out.append("</g>")
    # labels in a row are written together (shapes.texts)
    for labels, items in groupby(f.items, key=lambda item: isinstance(item, Text)):
        out += [shapes.texts(items)] if labels else [_item(item, standalone) for item in items]
    if shown:
        h = deck.header
        out.append(step_header(f.header, x=h.x, y=h.y, size=h.size, only_current=True))
    out.append("</g>")
    return out


def _item(item, standalone: bool) -> str:
    if isinstance(item, Batch):
        moved = (f' data-dx="{coord(item.dx)}" data-dy="{coord(item.dy)}"'
                 if (item.dx or item.dy) else "")
        return (f'<g font-size="{shapes.FONT_SIZE}"{moved}>'
                + "".join(f'<path fill="{fill}" d="{d}"/>' for fill, d in item.paths if d)
                + shapes.texts(item.texts) + "</g>")
    if isinstance(item, Rect):
        return shapes.rect(item, tips=not standalone)
    if isinstance(item, Path):
        return shapes.line(item)
    raise TypeError(item)
