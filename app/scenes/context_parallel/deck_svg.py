"""The context-parallel deck as SVG markup (geometry from :mod:`app.scenes.context_parallel.deck`).

``current`` is the frame shown first: it carries class "current" (its outlines, arrows and
header show). The frames after it wait in an inert ``<template class="deck-later">`` that
static/js/player.js moves into the deck when the player reaches them. ``standalone`` is a file
of its own: the style sheet inlined, concrete colours, frames up to ``current`` only and the
caption underneath. Under the frames: the title and the matrix's fixtures; over them the
legend. The frames are written by :func:`app.draw.deck.write_deck`, the shapes by
:mod:`app.draw.shapes`.
"""

from __future__ import annotations

from markupsafe import Markup

from app.draw import shapes
from app.draw.deck import frame_start, step_header, write_deck
from app.draw.shapes import Path, Rect, Text
from app.scenes.context_parallel.deck import CpDeck, FrameView

DEFS = ('<pattern id="pad-hatch" patternUnits="userSpaceOnUse" width="8" height="8" '
        'patternTransform="rotate(-45)"><rect width="8" height="8" fill="none"/>'
        '<rect width="1.5" height="8" fill="#8a939e"/></pattern>')


def render(deck: CpDeck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    under = [shapes.text(t) for t in deck.title_lines] + [_item(i, standalone) for i in deck.base]
    over = [_item(item, standalone) for item in deck.legend]
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(deck, f, current, standalone),
                      standalone=standalone, caption=caption, style=style, defs=DEFS,
                      under=under, over=over, box=deck.box)


def _frame(deck: CpDeck, f: FrameView, current: int, standalone: bool) -> list[str]:
    out = [frame_start(f.index, current, f.unit, step=True)]
    out += [_item(item, standalone) for item in f.items]
    if not standalone or f.index == current:
        out.append('<g class="only-current">')
        out += [_item(item, standalone) for item in f.current]
        out += [shapes.arrow(a, number=False) for a in f.arrows]
        out += [shapes.text(t) for t in f.arrow_labels]
        h = deck.header
        out.append(step_header(f.header, x=h.x, y=h.y, size=h.size))
        out.append("</g>")
    out.append("</g>")
    return out


def _item(item, standalone: bool) -> str:
    if isinstance(item, Text):
        return shapes.text(item)
    if isinstance(item, Rect):
        return shapes.rect(item, tips=not standalone)
    if isinstance(item, Path):
        return shapes.area(item)
    raise TypeError(item)
